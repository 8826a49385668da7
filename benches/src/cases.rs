//! The catalogue of workloads: every (workload, library) pair the suite
//! measures, built the same way for the criterion benches
//! (`benches/peers.rs`), the allocation runner (`examples/allocs.rs`) and
//! the instruction counter (`examples/caseloop.rs case GROUP/NAME N`).
//!
//! Groups (criterion group names):
//!
//! * `closed`, `closed_work` — closed path, one thread, without and with
//!   ~45 ns of [`work`](crate::work) per call; `bare`/`bare_async` are the
//!   same calls without a breaker.
//! * `threads` — `closed_work` on one and two threads sharing one breaker
//!   (the criterion groups `threads1`, `threads2`).
//! * `rejected` — the breaker is open.
//! * `mix` — 20 % failures, tripping and recovering all the time.
//! * `tower` — one tower call through a circuit breaker layer around a
//!   no-op service.
//! * `pipeline` — breaker + retry + bulkhead + timeout on the success path.
//! * `registry` — lookup of an existing key among 20 000 keyed breakers,
//!   alone and followed by a closed-path call.
//!
//! The per-library configuration of each workload is documented next to
//! its constructor and in `benches/README.md`.

/// seatbelt's breaker layer as the closed, rejected, tower and keyed
/// workloads configure it: 50 % failures, 20 calls minimum, 10 s sampling,
/// `$open` of break, tripline's classification of the reply. A macro
/// because the builder's type names the context's input type.
macro_rules! seatbelt_breaker {
    ($ctx:expr, $open:expr) => {
        seatbelt::breaker::Breaker::layer("bench", $ctx)
            .recovery_with($crate::cases::closed::classify)
            .rejected_input_error(|_, _| $crate::BenchError)
            .failure_threshold(0.5)
            .min_throughput(20)
            .sampling_duration(std::time::Duration::from_secs(10))
            .break_duration($open)
    };
}

mod closed;
mod footprint;
mod keyed;
mod layers;
mod mix;
mod rejected;

use std::sync::Arc;

use crate::{Bench, looped, looped_in_runtime};

pub use footprint::{Footprint, footprints, keyed_footprints};
pub use mix::mix_transitions;

/// Makes one [`Bench`] per thread; the instances share one breaker.
pub type Factory = Arc<dyn Fn() -> Box<dyn Bench> + Send + Sync>;

/// One (workload, library) pair.
#[derive(Clone, Copy, Debug)]
pub struct Case {
    /// Workload: the criterion group name.
    pub group: &'static str,
    /// Library and variant: the criterion function name.
    pub name: &'static str,
    /// Whether each call is followed by ~45 ns of [`work`](crate::work).
    pub work: bool,
    make: fn(bool) -> Factory,
}

impl Case {
    /// `group/name`, criterion's id.
    pub fn id(&self) -> String {
        format!("{}/{}", self.group, self.name)
    }

    /// Builds the breaker (or layer) and returns the per-thread factory.
    pub fn build(&self) -> Factory {
        (self.make)(self.work)
    }
}

const fn case(group: &'static str, name: &'static str, make: fn(bool) -> Factory) -> Case {
    Case {
        group,
        name,
        work: false,
        make,
    }
}

const fn with_work(mut c: Case, group: &'static str) -> Case {
    c.group = group;
    c.work = true;
    c
}

/// Every single-thread case, in table order.
pub fn all() -> Vec<Case> {
    let closed = closed::cases();
    let mut v: Vec<Case> = closed.clone();
    v.extend(closed.iter().map(|&c| with_work(c, "closed_work")));
    v.extend(rejected::cases());
    v.extend(mix::cases());
    v.extend(layers::tower_cases());
    v.extend(layers::pipeline_cases());
    v.extend(keyed::cases());
    v
}

/// The cases run on one and on two threads sharing one breaker (with work).
pub fn threaded() -> Vec<Case> {
    let mut v: Vec<Case> = closed::cases()
        .into_iter()
        .filter(|c| c.name != "bare_async" && c.name != "tripline_async")
        .map(|c| with_work(c, "threads"))
        .collect();
    v.extend(
        layers::tower_cases()
            .into_iter()
            .filter(|c| c.name != "bare")
            .map(|mut c| {
                c.name = match c.name {
                    "tripline" => "tripline_layer",
                    "tripline_static" => "tripline_static_layer",
                    "tower_resilience" => "tower_resilience",
                    "seatbelt" => "seatbelt_tower",
                    other => other,
                };
                with_work(c, "threads")
            }),
    );
    v
}

/// Looks a case up by `group/name` (single-thread cases).
pub fn find(id: &str) -> Option<Case> {
    all().into_iter().find(|c| c.id() == id)
}

/// A factory over a shared breaker: each thread clones `state` (a handle on
/// one breaker) and calls `g` on it in a timed loop, adding ~45 ns of work
/// per call when `work` is set.
pub(crate) fn shared<S, G>(state: S, work: bool, g: G) -> Factory
where
    S: Clone + Send + Sync + 'static,
    G: Fn(&mut S) -> u64 + Copy + Send + Sync + 'static,
{
    Arc::new(move || {
        let mut s = state.clone();
        if work {
            looped(move || g(&mut s).wrapping_add(crate::work()))
        } else {
            looped(move || g(&mut s))
        }
    })
}

/// Like [`shared`], with the loop inside the tokio runtime's context, for
/// services that are `Send` but not `Sync` (tower services): each thread
/// clones the prototype under a lock.
pub(crate) fn shared_rt<S, G>(state: S, work: bool, g: G) -> Factory
where
    S: Clone + Send + 'static,
    G: Fn(&mut S) -> u64 + Copy + Send + Sync + 'static,
{
    let proto = std::sync::Mutex::new(state);
    Arc::new(move || {
        let mut s = proto.lock().unwrap_or_else(|e| e.into_inner()).clone();
        if work {
            looped_in_runtime(move || g(&mut s).wrapping_add(crate::work()))
        } else {
            looped_in_runtime(move || g(&mut s))
        }
    })
}

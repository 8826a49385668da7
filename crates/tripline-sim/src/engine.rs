//! The event loop: real breakers, virtual time.
//!
//! # Algorithm
//!
//! Every replica calls at the same instants: call `k` starts at
//! `t_k = k / rate` (rounded to the nanosecond). A [`Plan`], computed once
//! per scenario, turns the faults into ranges of call indices and the
//! attribution rule into a sorted list of segments, so the loop never
//! compares times against faults.
//!
//! For each `k` in order: first every pending completion with
//! `end ≤ t_k` is processed in `(end, sequence)` order — the shared
//! [`ManualClock`](tripline::ManualClock) is set to `end` and the held
//! permit records the outcome with the call's latency as `elapsed`; then
//! the clock is set to `t_k` and each replica, in index order, asks its own
//! breaker for a permit. Any due lazy transition (Open → HalfOpen) happens
//! inside that `try_acquire`, in the library, exactly as in production. A
//! rejected call is not sent. An admitted call's outcome is drawn from the
//! faults active at `t_k`; it completes at `t_k + latency` (or at the
//! timeout, failed). A zero-latency call records at once, before the next
//! replica's call; a slower one is queued holding its permit, so slow calls
//! overlap and a probe stays in flight while others are rejected.
//!
//! After the last start, the queue is drained, so every admitted call
//! records its outcome (transitions may follow `duration`).
//!
//! # Cost
//!
//! Completions mostly end in start order (equal latencies), so the queue is
//! a FIFO ring backed by a binary heap only for the calls that overtake
//! (a slow call followed by fast ones): O(1) per call in the common case,
//! O(log n) otherwise. Probabilistic faults draw from a counter-based
//! generator keyed by `(seed, fault, k, replica)`, so every configuration
//! of a sweep sees the same fault realisation whatever it rejects.

mod queue;
mod run;

use std::time::Duration;

pub use run::{Counts, Trace, TransitionRecord, run};

use crate::call_times::CallTimes;
use crate::scenario::{FaultKind, FaultWindow, Scenario};

/// A fault reduced to the call indices it hits.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Episode {
    /// First call index hit.
    pub(crate) from: u64,
    /// First call index no longer hit.
    pub(crate) to: u64,
    pub(crate) fault: usize,
}

/// What a fault does, in the loop's units.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Effect {
    pub(crate) error: bool,
    /// Latency of the calls it hits, in nanoseconds, if it sets one.
    pub(crate) latency: Option<u64>,
    /// Probability of hitting a call, scaled to `u64::MAX` (`None`: always).
    pub(crate) threshold: Option<u64>,
}

/// A scenario compiled for the loop; shared by every breaker and every
/// sweep configuration run on it.
///
/// ```
/// use tripline_sim::{Plan, Scenario};
///
/// let scenario = Scenario::from_toml("doc.toml", r#"
///     duration = "10s"
///     [traffic]
///     rate = 2.0
///     [[fault]]
///     name = "down"
///     start = "4s"
///     [[breaker]]
///     name = "b"
///     window = { kind = "count", size = 4 }
///     minimum_calls = 4
/// "#).unwrap();
/// let plan = Plan::new(&scenario);
/// assert_eq!(plan.calls_per_replica(), 20);
/// assert_eq!(plan.slot_at(3_999_999_999), 0, "before the fault");
/// assert_eq!(plan.slot_at(4_000_000_000), 1, "the fault's own slot");
/// ```
#[derive(Clone, Debug)]
pub struct Plan {
    pub(crate) times: CallTimes,
    /// Calls per replica.
    pub(crate) calls: u64,
    /// Fault episodes ordered by first call.
    pub(crate) episodes: Vec<Episode>,
    pub(crate) effects: Vec<Effect>,
    /// `(start in ns, first call index, slot)` by start: from that point on,
    /// calls and transitions are attributed to `slot` (fault index + 1; slot
    /// 0 is the time before any fault).
    pub(crate) segments: Vec<(u64, u64, usize)>,
    /// One-second buckets covering `[0, duration)`.
    pub(crate) seconds: usize,
    pub(crate) base_latency: u64,
    pub(crate) timeout: Option<u64>,
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

impl Plan {
    /// Compiles `scenario`'s traffic and faults.
    pub fn new(scenario: &Scenario) -> Plan {
        let times = CallTimes::new(scenario.traffic.rate);
        let mut episodes = Vec::new();
        let mut effects = Vec::with_capacity(scenario.faults.len());
        let mut segments = Vec::with_capacity(scenario.faults.len());
        for (i, f) in scenario.faults.iter().enumerate() {
            match &f.window {
                FaultWindow::Interval { start, end } => episodes.push(Episode {
                    from: times.first_at_or_after(*start),
                    to: times.first_at_or_after(*end),
                    fault: i,
                }),
                FaultWindow::Instants(at) => episodes.extend(at.iter().map(|t| {
                    let k = times.first_at_or_after(*t);
                    Episode {
                        from: k,
                        to: k + 1,
                        fault: i,
                    }
                })),
            }
            let start = f.window.start();
            segments.push((nanos(start), times.first_at_or_after(start), i + 1));
            effects.push(Effect {
                error: f.kind == FaultKind::Error,
                latency: f.latency.map(nanos),
                threshold: (f.rate < 1.0).then_some((f.rate * u64::MAX as f64) as u64),
            });
        }
        episodes.sort_by_key(|e| (e.from, e.fault));
        // Stable: faults starting together are attributed to the later one in the file.
        segments.sort_by_key(|s| s.0);
        Plan {
            times,
            calls: times.count_before(scenario.duration),
            episodes,
            effects,
            segments,
            seconds: nanos(scenario.duration).div_ceil(1_000_000_000) as usize,
            base_latency: nanos(scenario.traffic.latency),
            timeout: scenario.traffic.timeout.map(nanos),
        }
    }

    /// Calls per replica.
    pub fn calls_per_replica(&self) -> u64 {
        self.calls
    }

    /// The attribution slot of an instant `t` (ns): the latest fault started
    /// at or before it, as fault index + 1, or 0 before any fault.
    pub fn slot_at(&self, t: u64) -> usize {
        let n = self.segments.partition_point(|s| s.0 <= t);
        if n == 0 { 0 } else { self.segments[n - 1].2 }
    }
}

/// A uniform draw for `(seed, fault, call, replica)`: SplitMix64 finalisers
/// chained over the key, so a draw depends on nothing but its key.
#[inline]
pub(crate) fn draw(seed: u64, fault: usize, k: u64, replica: u32) -> u64 {
    let mut s = mix(seed ^ tripline::rng::GAMMA ^ fault as u64);
    s = mix(s ^ k);
    mix(s ^ u64::from(replica).rotate_left(32))
}

/// One SplitMix64 step from `z`.
#[inline]
fn mix(z: u64) -> u64 {
    tripline::rng::mix(z.wrapping_add(tripline::rng::GAMMA))
}

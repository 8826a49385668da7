//! Load balancers, and the selection that combines them with health and
//! per-endpoint breaker admission.
//!
//! # Selection
//!
//! One selection yields an endpoint *and* its breaker's permit, in two
//! phases:
//!
//! 1. **Preferred candidates**, per balancer:
//!    * [`RoundRobin`](Balancer::RoundRobin): the next position of a shared
//!      counter (weights are ignored);
//!    * [`WeightedRandom`](Balancer::WeightedRandom): up to three weighted
//!      draws (binary search in the cumulative weights, O(log n));
//!    * [`WeightedRoundRobin`](Balancer::WeightedRoundRobin): the next
//!      position of the shared counter in the set's schedule, worked out
//!      once when the set is built (smooth weighted round robin over the
//!      weights scaled to at most `MAX_SCHEDULE` turns): O(1), no lock;
//!    * [`LeastOutstanding`](Balancer::LeastOutstanding): the endpoint with
//!      the fewest requests in flight per unit of weight. Up to
//!      `EXACT_LEAST` (32) endpoints, by a scan from a rotating start (ties
//!      go round-robin) that stops at the first idle endpoint; beyond that,
//!      the least loaded of `LEAST_SAMPLES` (8) random endpoints — Envoy's
//!      `choice_count` approach — because an exact scan of a thousand busy
//!      endpoints costs microseconds per call, and the best of 8 is within a
//!      whisker of the best of all (Mitzenmacher's power of d choices);
//!    * [`PowerOfTwoChoices`](Balancer::PowerOfTwoChoices): two distinct
//!      random endpoints, the less loaded per unit of weight (Mitzenmacher:
//!      nearly the balance of least-outstanding at O(1)); two rounds.
//! 2. **Ring scan**: if no preferred candidate was taken, every position
//!    once, from the last candidate on, takes the first endpoint that fits.
//!
//! An endpoint *fits* when it was not already tried by this logical call
//! (failover, forking), when it is routable — not ejected nor marked
//! unhealthy — unless the cluster is in panic mode, and when its breaker
//! grants a permit. Asking the breaker (rather than reading its state) is
//! what lets an open breaker whose wait is over take its half-open probe.
//! Selection never returns an endpoint that does not fit; it returns
//! nothing when none does. No lock, no allocation.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use super::endpoint::Endpoint;
use super::set::EndpointSet;
use crate::breaker::Permit;

/// How a cluster spreads calls over its endpoints.
///
/// ```
/// use tripline::cluster::Balancer;
/// assert_eq!(Balancer::default(), Balancer::RoundRobin);
/// assert_eq!(Balancer::PowerOfTwoChoices.as_str(), "power_of_two_choices");
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
pub enum Balancer {
    /// Each endpoint in turn; even spread, no state per endpoint.
    #[default]
    RoundRobin,
    /// Random in proportion to the weights: mixed hardware, canaries.
    WeightedRandom,
    /// The fewest requests in flight (per unit of weight): adapts to slow
    /// endpoints. Exact up to 32 endpoints (a scan that stops at the first
    /// idle one); beyond, the least loaded of 8 random endpoints, so a call
    /// costs the same with a thousand endpoints as with ten.
    LeastOutstanding,
    /// The less loaded of two random endpoints: adapts like
    /// least-outstanding at constant cost, for any size.
    PowerOfTwoChoices,
    /// Each endpoint in turn, as often as its weight says, spread out
    /// (nginx's smooth weighted round robin, Dubbo's `roundrobin`): with
    /// weights 5, 1, 1 the turn goes a a b a c a a, not a a a a a b c.
    WeightedRoundRobin,
}

impl Balancer {
    /// The snake_case name used in config and metrics labels.
    pub const fn as_str(self) -> &'static str {
        match self {
            Balancer::RoundRobin => "round_robin",
            Balancer::WeightedRandom => "weighted_random",
            Balancer::LeastOutstanding => "least_outstanding",
            Balancer::PowerOfTwoChoices => "power_of_two_choices",
            Balancer::WeightedRoundRobin => "weighted_round_robin",
        }
    }
}

/// Largest cluster least-outstanding scans exactly.
pub(crate) const EXACT_LEAST: usize = 32;

/// Random endpoints least-outstanding compares in a larger cluster.
pub(crate) const LEAST_SAMPLES: usize = 8;

/// Most endpoints one logical call may use (failover attempts, forks).
pub(crate) const MAX_TRIED: usize = 32;

/// Nothing tried yet: for single-attempt calls, without initialising an array.
pub(crate) static NONE_TRIED: Tried = Tried::new();

/// The endpoints a logical call has already used, by position in its
/// endpoint set: a fixed array, so no allocation.
#[derive(Clone, Debug)]
pub(crate) struct Tried {
    idx: [u32; MAX_TRIED],
    len: usize,
}

impl Tried {
    #[inline]
    pub(crate) const fn new() -> Self {
        Tried {
            idx: [0; MAX_TRIED],
            len: 0,
        }
    }

    #[inline]
    pub(crate) fn contains(&self, i: usize) -> bool {
        self.idx[..self.len].iter().any(|&t| t as usize == i)
    }

    /// Remembers `i`; `false` when full.
    #[inline]
    pub(crate) fn push(&mut self, i: usize) -> bool {
        if self.len == MAX_TRIED {
            return false;
        }
        self.idx[self.len] = i as u32;
        self.len += 1;
        true
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }
}

/// The balancer's shared counters: the round-robin position and the
/// random generator (splitmix64 on an atomic: lock-free, seedable).
pub(crate) struct BalanceState {
    next: AtomicUsize,
    rng: AtomicU64,
}

impl BalanceState {
    pub(crate) fn new(seed: u64) -> Self {
        BalanceState {
            next: AtomicUsize::new(0),
            rng: AtomicU64::new(seed),
        }
    }

    #[inline]
    fn random(&self) -> u64 {
        crate::rng::splitmix64_shared(&self.rng)
    }

    #[inline]
    fn turn(&self) -> usize {
        self.next.fetch_add(1, Ordering::Relaxed)
    }
}

/// Whether endpoint `i` may be chosen (before asking its breaker).
#[inline(always)]
fn fits(set: &EndpointSet, i: usize, panic: bool, tried: &Tried) -> bool {
    (panic || set.endpoints[i].is_routable()) && !tried.contains(i)
}

/// The borrowed admission of the call path: the breaker's permit.
#[inline(always)]
pub(crate) fn borrowed(e: &Endpoint) -> Option<Permit<'_>> {
    e.inner.breaker.try_acquire().ok()
}

/// Load per unit of weight, compared without division: `a` is lighter
/// than `b` when `out_a × w_b < out_b × w_a`.
#[inline(always)]
fn lighter(set: &EndpointSet, a: usize, b: usize) -> bool {
    let (ea, eb) = (&set.endpoints[a], &set.endpoints[b]);
    u64::from(ea.outstanding()) * u64::from(eb.weight())
        < u64::from(eb.outstanding()) * u64::from(ea.weight())
}

/// The lightest of the endpoints offered so far, by outstanding requests
/// per unit of weight (compared as [`lighter`] does, without division).
/// Each endpoint's load is read once, when it is offered: the sampled and
/// the exact least-outstanding scans compare the same readings they keep.
#[derive(Clone, Copy)]
struct Lightest(Option<(usize, u64, u64)>);

impl Lightest {
    /// Nothing offered yet.
    const NONE: Lightest = Lightest(None);

    /// Offers endpoint `i`: `Some(outstanding)` when it is now the
    /// lightest (a tie keeps the one offered first), `None` otherwise.
    #[inline(always)]
    fn offer(&mut self, set: &EndpointSet, i: usize) -> Option<u64> {
        let e = &set.endpoints[i];
        let (out, w) = (u64::from(e.outstanding()), u64::from(e.weight()));
        if self.0.is_none_or(|(_, bo, bw)| out * bw < bo * w) {
            self.0 = Some((i, out, w));
            return Some(out);
        }
        None
    }

    /// The lightest endpoint's position, if any was offered.
    #[inline(always)]
    fn index(self) -> Option<usize> {
        self.0.map(|(i, _, _)| i)
    }
}

/// Chooses an endpoint of `set` that fits and takes its breaker permit;
/// see the module docs.
#[inline]
pub(crate) fn select<'s, P>(
    kind: Balancer,
    state: &BalanceState,
    set: &'s EndpointSet,
    panic: bool,
    tried: &Tried,
    admit: impl Fn(&'s Endpoint) -> Option<P>,
) -> Option<(usize, P)> {
    let n = set.len();
    if n == 0 {
        return None;
    }
    let start = match kind {
        Balancer::RoundRobin => state.turn() % n,
        Balancer::WeightedRoundRobin => set.scheduled(state.turn()),
        Balancer::WeightedRandom => {
            let mut last = 0;
            for _ in 0..3 {
                let i = set.weighted_index(state.random());
                if fits(set, i, panic, tried)
                    && let Some(p) = admit(&set.endpoints[i])
                {
                    return Some((i, p));
                }
                last = i;
            }
            last
        }
        Balancer::PowerOfTwoChoices => {
            let mut last = 0;
            for _ in 0..2 {
                let r = state.random();
                let a = (r % n as u64) as usize;
                let b = if n > 1 {
                    (a + 1 + ((r >> 32) % (n as u64 - 1)) as usize) % n
                } else {
                    a
                };
                let (fa, fb) = (fits(set, a, panic, tried), fits(set, b, panic, tried));
                let (first, second) = match (fa, fb) {
                    (true, true) if lighter(set, b, a) => (Some(b), Some(a)),
                    (true, true) => (Some(a), Some(b)),
                    (true, false) => (Some(a), None),
                    (false, true) => (Some(b), None),
                    (false, false) => (None, None),
                };
                for i in [first, second].into_iter().flatten() {
                    if let Some(p) = admit(&set.endpoints[i]) {
                        return Some((i, p));
                    }
                }
                last = b;
            }
            last
        }
        Balancer::LeastOutstanding if n > EXACT_LEAST => {
            let mut lightest = Lightest::NONE;
            for _ in 0..LEAST_SAMPLES {
                let i = (state.random() % n as u64) as usize;
                if fits(set, i, panic, tried) {
                    lightest.offer(set, i);
                }
            }
            match lightest.index() {
                Some(i) => match admit(&set.endpoints[i]) {
                    Some(p) => return Some((i, p)),
                    None => i,
                },
                None => state.turn() % n,
            }
        }
        Balancer::LeastOutstanding => {
            let from = state.turn() % n;
            let mut lightest = Lightest::NONE;
            for k in 0..n {
                let i = if from + k >= n {
                    from + k - n
                } else {
                    from + k
                };
                if fits(set, i, panic, tried) && lightest.offer(set, i) == Some(0) {
                    break; // nothing is lighter than idle
                }
            }
            let best = lightest.index()?;
            if let Some(p) = admit(&set.endpoints[best]) {
                return Some((best, p));
            }
            best
        }
    };
    ring_scan(set, start, panic, tried, admit)
}

/// Every position once from `start`: the first endpoint that fits.
#[inline]
fn ring_scan<'s, P>(
    set: &'s EndpointSet,
    start: usize,
    panic: bool,
    tried: &Tried,
    admit: impl Fn(&'s Endpoint) -> Option<P>,
) -> Option<(usize, P)> {
    let n = set.len();
    for k in 0..n {
        let i = if start + k >= n {
            start + k - n
        } else {
            start + k
        };
        if fits(set, i, panic, tried)
            && let Some(p) = admit(&set.endpoints[i])
        {
            return Some((i, p));
        }
    }
    None
}

//! The wait before a retry: exponential with full jitter, as Envoy's
//! (`base` 25 ms, `max` 250 ms by default), unless the failed answer says
//! how long to wait in `Retry-After`.
//!
//! Retries that fire at once hit an endpoint (or its neighbours) while the
//! cause of the failure is still there, and every client retries in step.
//! Full jitter (uniform in [0, cap]) spreads them widest; the cap doubles
//! per retry up to `max`. A `Retry-After` from the upstream wins, as in
//! Envoy's rate-limited back-off: the endpoint is parked until then (see
//! the attempt's parking), and a retry that goes to another endpoint still
//! waits, since an overloaded service asks every client to hold off. Either wait is cut to the time the
//! request has left, so a back-off never outlives the deadline.

use std::cell::Cell;
use std::hash::{BuildHasher, RandomState};
use std::time::Duration;

use http::{HeaderMap, header};
use tokio::time::Instant;
use tripline::breaker::Jitter;
use tripline::retry::RetryDecision;
use tripline::timeout::TokioClock;

use super::attempt::{MAX_RETRY_AFTER, Tried};
use super::limits::Limits;
use crate::table::route::Route;

/// Sleeps (on tokio's clock, so paused-time tests step over it) before
/// retry number `retry` of a request whose last try was `failed`, within
/// the request's `limits`.
pub(super) async fn sleep_before_retry(route: &Route, retry: u32, failed: &Tried, limits: Limits) {
    let asked = match failed {
        Tried::Answered { response, .. } | Tried::Settled { response, .. } => {
            retry_after(response.headers())
        }
        _ => None,
    };
    let now = Instant::now();
    let to_deadline = limits.deadline.map(|d| d.remaining(&TokioClock));
    let to_guard = limits.guard.map(|g| g.saturating_duration_since(now));
    let left = match (to_deadline, to_guard) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    };
    let wait = wait_before_retry(route.retry.base, route.retry.max, retry, asked, left);
    if !wait.is_zero() {
        tokio::time::sleep(wait).await;
    }
}

/// The wait before retry number `retry` (1 for the first retry) with a
/// uniform `u` in [0, 1): `u × min(max, base × 2^(retry−1))`.
pub(crate) fn full_jitter(base: Duration, max: Duration, retry: u32, u: f64) -> Duration {
    let doubled = base.saturating_mul(1u32 << retry.saturating_sub(1).min(20));
    Jitter::Full.apply(doubled.min(max), u)
}

/// The wait the failed answer asks for in `Retry-After` (seconds or an
/// HTTP date, read as the endpoint parking reads it), at most
/// [`MAX_RETRY_AFTER`].
pub(crate) fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let value = headers.get(header::RETRY_AFTER)?.to_str().ok()?;
    match RetryDecision::from_retry_after(value) {
        RetryDecision::RetryAfter(wait) => Some(wait.min(MAX_RETRY_AFTER)),
        _ => None,
    }
}

/// The wait before a retry: the answer's `Retry-After` when it gave one,
/// else the jittered back-off; never more than `left` (the time the
/// request has before its deadline, when it has one).
pub(crate) fn wait_before_retry(
    base: Duration,
    max: Duration,
    retry: u32,
    asked: Option<Duration>,
    left: Option<Duration>,
) -> Duration {
    let wait = asked.unwrap_or_else(|| full_jitter(base, max, retry, uniform()));
    left.map_or(wait, |left| wait.min(left))
}

/// A uniform number in [0, 1) from a per-thread stream of the library's
/// jitter generator, seeded from the process's random hasher keys, so
/// proxies (and threads) never retry in step.
fn uniform() -> f64 {
    thread_local! {
        static STATE: Cell<u64> = Cell::new(RandomState::new().hash_one(0u64));
    }
    STATE.with(|state| {
        let mut next = state.get();
        let u = tripline::rng::unit_f64(&mut next);
        state.set(next);
        u
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: Duration = Duration::from_millis(25);
    const MAX: Duration = Duration::from_millis(250);

    #[test]
    fn the_cap_doubles_per_retry_up_to_max() {
        let caps: Vec<_> = (1..=6)
            .map(|n| full_jitter(BASE, MAX, n, 0.999_999).as_millis())
            .collect();
        assert_eq!(caps, [24, 49, 99, 199, 249, 249]);
        assert_eq!(full_jitter(BASE, MAX, 3, 0.0), Duration::ZERO);
        assert_eq!(full_jitter(BASE, MAX, 3, 0.5), Duration::from_millis(50));
    }

    #[test]
    fn a_large_retry_number_does_not_overflow() {
        assert_eq!(full_jitter(BASE, MAX, u32::MAX, 0.5), MAX / 2);
    }

    #[test]
    fn retry_after_wins_and_the_deadline_bounds_every_wait() {
        let asked = Some(Duration::from_secs(2));
        assert_eq!(
            wait_before_retry(BASE, MAX, 1, asked, None),
            Duration::from_secs(2)
        );
        let left = Some(Duration::from_millis(300));
        assert_eq!(
            wait_before_retry(BASE, MAX, 1, asked, left),
            Duration::from_millis(300)
        );
        let jittered = wait_before_retry(BASE, MAX, 9, None, Some(Duration::from_millis(10)));
        assert!(jittered <= Duration::from_millis(10));
    }

    #[test]
    fn retry_after_is_read_in_seconds_and_capped() {
        let mut headers = HeaderMap::new();
        assert_eq!(retry_after(&headers), None);
        headers.insert(header::RETRY_AFTER, "3".parse().expect("value"));
        assert_eq!(retry_after(&headers), Some(Duration::from_secs(3)));
        headers.insert(header::RETRY_AFTER, "86400".parse().expect("value"));
        assert_eq!(retry_after(&headers), Some(MAX_RETRY_AFTER));
        headers.insert(header::RETRY_AFTER, "soon".parse().expect("value"));
        assert_eq!(retry_after(&headers), None);
    }

    #[test]
    fn the_random_stream_spreads_over_the_unit_interval() {
        let draws: Vec<f64> = (0..1000).map(|_| uniform()).collect();
        assert!(draws.iter().all(|u| (0.0..1.0).contains(u)));
        let below_half = draws.iter().filter(|u| **u < 0.5).count();
        assert!((400..600).contains(&below_half), "{below_half}");
    }
}

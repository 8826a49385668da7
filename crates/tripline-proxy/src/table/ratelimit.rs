//! Rate limits: the `governor` crate's GCRA token buckets, on the proxy's
//! clock.
//!
//! A route's limit is one bucket (`key = "route"`), or one bucket per
//! client address or per value of a request header. The buckets run on
//! the same [`SharedClock`] as the breakers, through a small
//! [`governor::clock::Clock`] adapter: a test on a
//! [`ManualClock`](tripline::ManualClock) refills buckets by advancing the
//! clock, never by sleeping.
//!
//! # Bounded memory
//!
//! A keyed limiter keeps one 8-byte state per key in governor's DashMap
//! store. Two things bound it:
//!
//! - once per refill period (`burst / per_second`, at least 1 s) the first
//!   request after it runs governor's `retain_recent`, which drops every
//!   key whose bucket has refilled (a refilled bucket is the same as a
//!   new one, so nothing is forgotten that matters);
//! - `max_keys` caps the table: when it holds that many keys even after a
//!   sweep, keyed requests are counted against one shared overflow bucket
//!   until a sweep makes room. Clients are then limited together, never
//!   unlimited, and memory stays at about `max_keys` entries (concurrent
//!   first requests of new keys can overshoot by the number in flight).

use std::net::IpAddr;
use std::num::NonZeroU32;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use governor::clock::Clock as GovernorClock;
use governor::middleware::NoOpMiddleware;
use governor::nanos::Nanos;
use governor::state::keyed::DashMapStateStore;
use governor::state::{InMemoryState, NotKeyed};
use governor::{Quota, RateLimiter};
use http::HeaderValue;
use http::request::Parts;
use tripline::Clock;
use tripline::clock::SharedClock;

use crate::config::{RateLimitKey, RateLimitSection};

/// The proxy's clock as governor sees it: nanoseconds since the clock's
/// origin.
#[derive(Clone)]
struct ProxyClock(SharedClock);

impl GovernorClock for ProxyClock {
    type Instant = Nanos;

    fn now(&self) -> Nanos {
        Nanos::from(self.0.now().as_nanos())
    }
}

type Direct = RateLimiter<NotKeyed, InMemoryState, ProxyClock, NoOpMiddleware<Nanos>>;
type Keyed =
    RateLimiter<BucketKey, DashMapStateStore<BucketKey>, ProxyClock, NoOpMiddleware<Nanos>>;

/// Whose bucket a request takes.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum BucketKey {
    Ip(IpAddr),
    Header(HeaderValue),
    /// A request without the keying header.
    Unkeyed,
}

/// A route's rate limit, built from its config section.
pub(crate) struct RouteRateLimit {
    clock: ProxyClock,
    limiter: Limiter,
}

enum Limiter {
    Route(Direct),
    Keyed {
        key: RateLimitKey,
        limiter: Keyed,
        overflow: Direct,
        max_keys: usize,
        sweep_every: Nanos,
        last_sweep: AtomicU64,
    },
}

impl RouteRateLimit {
    /// The limit `section` describes, on `clock` (validated already).
    pub(crate) fn new(section: &RateLimitSection, clock: &SharedClock) -> RouteRateLimit {
        let per_second = NonZeroU32::new(section.per_second).unwrap_or(NonZeroU32::MIN);
        let burst = NonZeroU32::new(section.burst).unwrap_or(NonZeroU32::MIN);
        let quota = Quota::per_second(per_second).allow_burst(burst);
        let clock = ProxyClock(clock.clone());
        let limiter = match &section.key {
            RateLimitKey::Route => {
                Limiter::Route(RateLimiter::direct_with_clock(quota, clock.clone()))
            }
            key => {
                let refill =
                    Duration::from_secs_f64(f64::from(burst.get()) / f64::from(per_second.get()));
                Limiter::Keyed {
                    key: key.clone(),
                    limiter: RateLimiter::dashmap_with_clock(quota, clock.clone()),
                    overflow: RateLimiter::direct_with_clock(quota, clock.clone()),
                    max_keys: section.max_keys,
                    sweep_every: Nanos::from(refill.max(Duration::from_secs(1))),
                    last_sweep: AtomicU64::new(clock.now().as_u64()),
                }
            }
        };
        RouteRateLimit { clock, limiter }
    }

    /// Takes a token for the request, or says how long until one is free.
    pub(crate) fn check(&self, parts: &Parts, peer: IpAddr) -> Result<(), Duration> {
        let now = self.clock.now();
        let checked = match &self.limiter {
            Limiter::Route(direct) => direct.check(),
            Limiter::Keyed {
                key,
                limiter,
                overflow,
                max_keys,
                sweep_every,
                last_sweep,
            } => {
                let due = now
                    .as_u64()
                    .saturating_sub(last_sweep.load(Ordering::Relaxed))
                    >= sweep_every.as_u64();
                // One request per period sweeps: the one whose `fetch_max`
                // moved the mark.
                if due && last_sweep.fetch_max(now.as_u64(), Ordering::Relaxed) < now.as_u64() {
                    limiter.retain_recent();
                    limiter.shrink_to_fit();
                }
                if limiter.len() >= *max_keys {
                    overflow.check()
                } else {
                    limiter.check_key(&bucket_key(key, parts, peer))
                }
            }
        };
        checked.map_err(|not_until| not_until.wait_time_from(now))
    }

    /// Keys tracked now (0 for a route-wide limit).
    #[cfg(test)]
    fn tracked_keys(&self) -> usize {
        match &self.limiter {
            Limiter::Route(_) => 0,
            Limiter::Keyed { limiter, .. } => limiter.len(),
        }
    }
}

fn bucket_key(key: &RateLimitKey, parts: &Parts, peer: IpAddr) -> BucketKey {
    match key {
        RateLimitKey::ClientIp => BucketKey::Ip(peer),
        RateLimitKey::Header(name) => parts
            .headers
            .get(name.as_str())
            .map_or(BucketKey::Unkeyed, |v| BucketKey::Header(v.clone())),
        RateLimitKey::Route => BucketKey::Unkeyed,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use tripline::ManualClock;

    fn request(tenant: &str) -> Parts {
        let (parts, ()) = http::Request::get("/")
            .header("x-tenant", tenant)
            .body(())
            .unwrap()
            .into_parts();
        parts
    }

    fn section(key: &str, max_keys: usize) -> RateLimitSection {
        RateLimitSection {
            per_second: 10,
            burst: 2,
            key: RateLimitKey::try_from(key.to_string()).unwrap(),
            max_keys,
        }
    }

    const PEER: IpAddr = IpAddr::V4(std::net::Ipv4Addr::LOCALHOST);

    #[test]
    fn a_bucket_refills_as_the_clock_advances() {
        let clock = ManualClock::new();
        let limit = RouteRateLimit::new(&section("route", 1), &clock.clone().into());
        let req = request("a");
        assert!(limit.check(&req, PEER).is_ok());
        assert!(limit.check(&req, PEER).is_ok());
        let wait = limit.check(&req, PEER).unwrap_err();
        assert_eq!(wait, Duration::from_millis(100), "one token per 100 ms");
        clock.advance(Duration::from_millis(100));
        assert!(limit.check(&req, PEER).is_ok());
    }

    #[test]
    fn refilled_keys_are_swept_and_a_full_table_shares_the_overflow_bucket() {
        let clock = ManualClock::new();
        let limit = RouteRateLimit::new(&section("header:x-tenant", 2), &clock.clone().into());
        assert!(limit.check(&request("a"), PEER).is_ok());
        assert!(limit.check(&request("b"), PEER).is_ok());
        assert_eq!(limit.tracked_keys(), 2);
        // The table is full: tenant c is counted in the shared bucket,
        // which holds a burst of 2.
        assert!(limit.check(&request("c"), PEER).is_ok());
        assert!(limit.check(&request("c"), PEER).is_ok());
        assert!(limit.check(&request("c"), PEER).is_err());
        assert_eq!(limit.tracked_keys(), 2, "never more than max_keys");
        // A refill period later, a and b's buckets are full again: swept.
        clock.advance(Duration::from_secs(1));
        assert!(limit.check(&request("c"), PEER).is_ok());
        assert_eq!(limit.tracked_keys(), 1, "only c is tracked now");
    }
}

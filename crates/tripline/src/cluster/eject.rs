//! Ejection, return and panic mode: the health book of one cluster, kept
//! under its health lock, and the analysis pass that fills it.
//!
//! This is the outlier detector acting on the cluster's endpoints, so it
//! lives in the cluster: [`crate::outlier`] holds what the detector is
//! (config, per-host counters, events) and knows no cluster type, and the
//! cluster imports it. Before, this code sat in `outlier` and reached back
//! into the cluster's endpoint set, so each imported the other.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::clock::Timestamp;
use crate::cluster::Endpoint;
use crate::cluster::endpoint::{EJECTED, UNHEALTHY};
use crate::cluster::set::EndpointSet;
use crate::outlier::{
    ClusterEvent, ClusterEventKind, Detector, DetectorStats, OutlierConfig, PanicStats, SkipReason,
    ejection_cap, host,
};

mod analysis;

pub(crate) use analysis::analyze;

/// What a health decision needs besides the book: where to write.
pub(crate) struct Ctx<'a> {
    pub(crate) cluster: &'a Arc<str>,
    pub(crate) now: Timestamp,
    /// The cluster's panic threshold, percent (0: never).
    pub(crate) panic_threshold: u32,
    /// The flag selection reads.
    pub(crate) panic_flag: &'a AtomicBool,
    /// Events to emit once the lock is released.
    pub(crate) events: Vec<ClusterEvent>,
}

impl Ctx<'_> {
    pub(crate) fn push(&mut self, kind: ClusterEventKind) {
        self.events.push(ClusterEvent {
            cluster: self.cluster.clone(),
            at: self.now,
            wall: crate::clock::system_time_after(Duration::ZERO),
            kind,
        });
    }
}

/// The cluster's health counts and the analysis' scratch space.
#[derive(Debug, Default)]
pub(crate) struct HealthBook {
    /// Endpoints ejected now.
    pub(crate) ejected: usize,
    /// Endpoints not routable now (ejected or marked unhealthy).
    pub(crate) out: usize,
    pub(crate) panic: bool,
    rng: u64,
    /// Interval counts per endpoint position (reused every pass).
    pub(crate) counts: Vec<[u64; 4]>,
    /// Candidates of one detector: (rate, position, requests).
    pub(crate) candidates: Vec<(f64, usize, u64)>,
}

impl HealthBook {
    pub(crate) fn new(seed: u64) -> Self {
        HealthBook {
            rng: seed,
            ..Default::default()
        }
    }

    fn random(&mut self) -> u64 {
        crate::rng::splitmix64(&mut self.rng)
    }

    /// Sets or clears `bit` on `e`, keeping the counts (and panic) exact.
    pub(crate) fn set_flag(
        &mut self,
        e: &Endpoint,
        bit: u8,
        on: bool,
        total: usize,
        ctx: &mut Ctx,
    ) {
        let before = e.inner.flags.load(Ordering::Relaxed);
        let after = if on { before | bit } else { before & !bit };
        if before == after {
            return;
        }
        e.inner.flags.store(after, Ordering::Relaxed);
        if bit == EJECTED {
            if on {
                self.ejected += 1;
            } else {
                self.ejected -= 1;
            }
        }
        match (before == 0, after == 0) {
            (true, false) => self.out += 1,
            (false, true) => self.out -= 1,
            _ => {}
        }
        self.update_panic(total, ctx);
    }

    /// Recounts after the endpoint set changed.
    pub(crate) fn recount(&mut self, set: &EndpointSet, ctx: &mut Ctx) {
        let flags = set
            .endpoints
            .iter()
            .map(|e| e.inner.flags.load(Ordering::Relaxed));
        self.ejected = flags.clone().filter(|f| f & EJECTED != 0).count();
        self.out = flags.filter(|f| f & (EJECTED | UNHEALTHY) != 0).count();
        self.update_panic(set.len(), ctx);
    }

    /// Enters or leaves panic mode when the healthy share crosses the threshold.
    pub(crate) fn update_panic(&mut self, total: usize, ctx: &mut Ctx) {
        let healthy = total - self.out.min(total);
        let t = u128::from(ctx.panic_threshold.min(100));
        let panic = total > 0 && (healthy as u128) * 100 < t * total as u128;
        if panic == self.panic {
            return;
        }
        self.panic = panic;
        ctx.panic_flag.store(panic, Ordering::Relaxed);
        let stats = PanicStats {
            healthy,
            total,
            threshold_percent: ctx.panic_threshold,
        };
        ctx.push(if panic {
            ClusterEventKind::PanicEntered(stats)
        } else {
            ClusterEventKind::PanicLeft(stats)
        });
    }

    /// Ejects `e` for `detector` unless its enforcement roll or the cap
    /// says no (reported as [`ClusterEventKind::Detected`]). An endpoint
    /// already ejected is left alone.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn try_eject(
        &mut self,
        config: &OutlierConfig,
        e: &Endpoint,
        total: usize,
        detector: Detector,
        stats: DetectorStats,
        enforcing_percent: u32,
        ctx: &mut Ctx,
    ) -> bool {
        if e.is_ejected() {
            return false;
        }
        e.inner.outlier.reset_streaks();
        let enforced = match enforcing_percent {
            0 => false,
            p if p >= 100 => true,
            p => self.random() % 100 < u64::from(p),
        };
        let cap = ejection_cap(total, config.max_ejection_percent, config.always_eject_one);
        let skipped = if !enforced {
            Some(SkipReason::NotEnforced)
        } else if self.ejected >= cap {
            Some(SkipReason::MaxEjectionPercent { cap })
        } else {
            None
        };
        if let Some(skipped) = skipped {
            ctx.push(ClusterEventKind::Detected {
                endpoint: e.id().clone(),
                detector,
                stats,
                skipped,
            });
            return false;
        }
        let o = &e.inner.outlier;
        let base = config.base_ejection_time;
        let mut m = o.multiplier.load(Ordering::Relaxed);
        // Grow the multiplier only while it still lengthens the ejection,
        // so that it decays back promptly once the endpoint behaves.
        if base.saturating_mul(m) < config.max_ejection_time {
            m += 1;
            o.multiplier.store(m, Ordering::Relaxed);
        }
        let mut duration = base.saturating_mul(m.max(1)).min(config.max_ejection_time);
        let jitter = config.max_ejection_time_jitter;
        if !jitter.is_zero() {
            let nanos = u64::try_from(jitter.as_nanos()).unwrap_or(u64::MAX);
            duration = duration.saturating_add(Duration::from_nanos(
                self.random() % nanos.saturating_add(1),
            ));
        }
        o.ejected_at.store(ctx.now.as_nanos(), Ordering::Relaxed);
        o.ejected_until
            .store((ctx.now + duration).as_nanos(), Ordering::Relaxed);
        o.ejections.fetch_add(1, Ordering::Relaxed);
        // Count first so the event carries the new total, then flip the
        // flag (which may enter panic mode: that event follows this one).
        ctx.push(ClusterEventKind::Ejected {
            endpoint: e.id().clone(),
            detector,
            stats,
            duration,
            multiplier: m,
            ejected: self.ejected + 1,
            total,
        });
        self.set_flag(e, EJECTED, true, total, ctx);
        true
    }

    /// Returns `e` to the pool if its ejection is over; otherwise, if it
    /// is not ejected, forgives one ejection of its multiplier.
    pub(crate) fn return_or_decay(&mut self, e: &Endpoint, total: usize, ctx: &mut Ctx) {
        let o = &e.inner.outlier;
        if e.is_ejected() {
            if ctx.now.as_nanos() >= o.ejected_until.load(Ordering::Relaxed) {
                let since = Timestamp::from_nanos(o.ejected_at.load(Ordering::Relaxed));
                ctx.push(ClusterEventKind::Returned {
                    endpoint: e.id().clone(),
                    ejected_for: ctx.now - since,
                });
                self.set_flag(e, EJECTED, false, total, ctx);
            }
        } else {
            let m = o.multiplier.load(Ordering::Relaxed);
            if m > 0 {
                o.multiplier.store(m - 1, Ordering::Relaxed);
            }
        }
    }
}

/// The stats of a streak that reached its threshold.
pub(crate) fn streak_stats(e: &Endpoint, detector: Detector, threshold: u32) -> DetectorStats {
    let i = match detector {
        Detector::ConsecutiveGatewayFailures => host::STREAK_GATEWAY,
        Detector::ConsecutiveLocalOriginFailures => host::STREAK_LOCAL,
        _ => host::STREAK_FAILURES,
    };
    DetectorStats::Consecutive {
        count: e.inner.outlier.streak(i).max(threshold),
        threshold,
    }
}

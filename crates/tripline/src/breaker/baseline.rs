//! Baseline-relative slow calls: a slow-call threshold learned from the
//! dependency's own healthy latency ("P99 of the
//! steady state × 2–3"), instead of a number someone guessed.
//!
//! # Sketch
//!
//! A log-linear histogram: 4 buckets per power of two from 1 µs to ~73 min
//! (128 × `AtomicU32`, 512 bytes, allocated only for breakers that use a
//! baseline). A bucket's relative width is ≤ 19%, so a quantile is known
//! to within that. Recording is one relaxed `fetch_add`.
//!
//! # Learning rules
//!
//! * Only successful, not-slow calls admitted while Closed are samples.
//! * Once per window (a time window's length, or a count window's size in
//!   samples) the threshold moves to `factor × quantile`, clamped to
//!   `[floor, ceiling]` — but by at most `max_step` of its current value,
//!   so a dependency that degrades slowly cannot drag it up unnoticed.
//! * A period whose window was unhealthy (failure or slow rate at half its
//!   threshold or more) teaches nothing: its samples are dropped.
//! * After each update the counts are halved, so the sketch follows the
//!   recent past in bounded memory.

use std::time::Duration;

use super::config::SlowCallBaseline;
use crate::clock::duration_to_nanos;
use crate::sync::{AtomicU64, Ordering};

const BUCKETS: usize = 128;
const MIN_NANOS: u64 = 1 << 10;
const UNSET: u64 = u64::MAX;

/// Histogram of healthy latencies and the learned threshold.
pub(crate) struct Baseline {
    counts: Box<[AtomicU64]>,
    /// Samples since the last update.
    samples: AtomicU64,
    /// When the current period started (nanoseconds on the breaker clock).
    period_start: AtomicU64,
    /// The learned threshold in nanoseconds, `UNSET` until learned.
    learned: AtomicU64,
    updating: AtomicU64,
}

fn bucket_of(nanos: u64) -> usize {
    if nanos < MIN_NANOS {
        return 0;
    }
    let log = 63 - u64::from(nanos.leading_zeros());
    let quarter = (nanos >> (log - 2)) & 3;
    (((log - 10) * 4 + quarter) as usize).min(BUCKETS - 1)
}

/// The upper bound of bucket `i`, in nanoseconds.
fn upper_bound(i: usize) -> u64 {
    let log = (i / 4) as u32 + 10;
    let quarter = (i % 4) as u64;
    (4 + quarter + 1) << (log - 2)
}

impl Baseline {
    pub(crate) fn new(now: u64) -> Self {
        Baseline {
            counts: (0..BUCKETS).map(|_| AtomicU64::new(0)).collect(),
            samples: AtomicU64::new(0),
            period_start: AtomicU64::new(now),
            learned: AtomicU64::new(UNSET),
            updating: AtomicU64::new(0),
        }
    }

    /// Adds one healthy latency; returns the number of samples this period.
    #[inline]
    pub(crate) fn sample(&self, nanos: u64) -> u64 {
        self.counts[bucket_of(nanos)].fetch_add(1, Ordering::Relaxed);
        self.samples.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// Whether the period that began at `period_start` is over at `now`.
    pub(crate) fn period_over(&self, now: u64, samples: u64, period: Period) -> bool {
        match period {
            Period::Samples(n) => samples >= n,
            Period::Time(length) => {
                now.saturating_sub(self.period_start.load(Ordering::Relaxed)) >= length
            }
        }
    }

    /// Ends the current period: learns from it if `healthy`, else forgets
    /// it. Returns the new threshold when it changed. One thread at a time.
    pub(crate) fn update(&self, config: &SlowCallBaseline, healthy: bool, now: u64) -> Option<u64> {
        if self
            .updating
            .compare_exchange(0, 1, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            return None;
        }
        let result = self.update_locked(config, healthy);
        self.samples.store(0, Ordering::Relaxed);
        self.period_start.store(now, Ordering::Relaxed);
        self.updating.store(0, Ordering::Release);
        result
    }

    fn update_locked(&self, config: &SlowCallBaseline, healthy: bool) -> Option<u64> {
        if !healthy {
            for c in self.counts.iter() {
                c.store(0, Ordering::Relaxed);
            }
            return None;
        }
        let counts: Vec<u64> = self
            .counts
            .iter()
            .map(|c| c.load(Ordering::Relaxed))
            .collect();
        let total: u64 = counts.iter().sum();
        if total < u64::from(config.min_samples) {
            return None;
        }
        let rank = ((total as f64) * config.baseline_quantile).ceil() as u64;
        let mut seen = 0;
        let quantile = counts
            .iter()
            .enumerate()
            .find_map(|(i, c)| {
                seen += c;
                (seen >= rank.max(1)).then(|| upper_bound(i))
            })
            .unwrap_or(upper_bound(BUCKETS - 1));
        let floor = duration_to_nanos(config.floor);
        let ceiling = duration_to_nanos(config.ceiling);
        let candidate = ((quantile as f64 * config.factor) as u64).clamp(floor, ceiling);
        let current = self.learned.load(Ordering::Relaxed);
        let next = if current == UNSET {
            candidate
        } else {
            let step = (current as f64 * config.max_step) as u64;
            candidate.clamp(current.saturating_sub(step), current.saturating_add(step))
        };
        for c in self.counts.iter() {
            let v = c.load(Ordering::Relaxed);
            c.store(v / 2, Ordering::Relaxed);
        }
        self.learned.store(next, Ordering::Relaxed);
        (next != current).then_some(next)
    }

    /// The learned threshold clamped to `config`'s bounds, if learned.
    pub(crate) fn threshold(&self, config: &SlowCallBaseline) -> Option<u64> {
        let v = self.learned.load(Ordering::Relaxed);
        (v != UNSET).then(|| {
            v.clamp(
                duration_to_nanos(config.floor),
                duration_to_nanos(config.ceiling),
            )
        })
    }

    /// The learned threshold, for snapshots.
    pub(crate) fn learned(&self) -> Option<Duration> {
        let v = self.learned.load(Ordering::Relaxed);
        (v != UNSET).then(|| Duration::from_nanos(v))
    }

    /// Restores a threshold learned by an earlier process.
    pub(crate) fn restore(&self, d: Duration) {
        self.learned.store(duration_to_nanos(d), Ordering::Relaxed);
    }
}

/// How long a learning period lasts.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Period {
    /// A count window's size, in samples.
    Samples(u64),
    /// A time window's length, in nanoseconds.
    Time(u64),
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    fn config() -> SlowCallBaseline {
        SlowCallBaseline {
            baseline_quantile: 0.9,
            factor: 3.0,
            floor: Duration::from_millis(10),
            ceiling: Duration::from_secs(2),
            max_step: 0.1,
            min_samples: 10,
        }
    }

    #[test]
    fn buckets_bound_their_values() {
        for n in [1_024u64, 1_500, 2_047, 65_536, 1_000_000, 123_456_789] {
            let b = bucket_of(n);
            assert!(
                upper_bound(b) > n,
                "{n} in bucket {b} up to {}",
                upper_bound(b)
            );
            assert!(b == 0 || upper_bound(b - 1) <= n, "{n}");
            assert!(upper_bound(b) as f64 <= n as f64 * 1.26, "{n}: ≤ 25% wide");
        }
    }

    #[test]
    fn learns_factor_times_quantile_then_moves_by_bounded_steps() {
        let b = Baseline::new(0);
        let c = config();
        for _ in 0..100 {
            b.sample(20_000_000); // 20 ms
        }
        let first = b.update(&c, true, 0).unwrap();
        // The 20 ms bucket's upper bound (≤ 25% above) × 3.
        assert!((60_000_000..=75_000_000).contains(&first), "{first}");
        // The dependency degrades to 200 ms: the threshold rises 10% per period.
        for _ in 0..100 {
            b.sample(200_000_000);
        }
        let second = b.update(&c, true, 1).unwrap();
        assert_eq!(second, first + first / 10);
        // An unhealthy period teaches nothing.
        for _ in 0..100 {
            b.sample(1_000_000_000);
        }
        assert_eq!(b.update(&c, false, 2), None);
        assert_eq!(b.threshold(&c), Some(second));
    }
}

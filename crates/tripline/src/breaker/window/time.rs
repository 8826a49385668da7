//! Time window: the outcomes of the last `length`, in `buckets` slices.
//!
//! # Algorithm
//!
//! Time is cut into epochs of `width = length / buckets`; epoch `e` lives in
//! bucket `e % buckets` and is its `lap = e / buckets`. Every counter word
//! carries the lap it counts for in its top 28 bits (count in the low 36),
//! so a stale bucket resets itself: a writer that finds an older lap CASes
//! the word to `(lap, 1)` and folds the old count into the cumulative total.
//! Readers sum only the words whose lap is the live one for their bucket.
//! No word is ever zeroed under a writer's feet, so there is no reset race.
//!
//! # Striping
//!
//! Each thread writes its own stripe (see `stripe.rs`): two threads sharing
//! a breaker touch different cache lines, so the time window scales across
//! cores. Readers sum the stripes. A stripe's buckets are contiguous and
//! cache-line aligned.
//!
//! # Limits
//!
//! A 36-bit count holds 68·10⁹ calls per stripe per bucket. A 28-bit lap
//! repeats every 2²⁸ window lengths (8.5 years for the 1 s minimum), so a
//! word untouched for exactly that long would be read as live; the breaker
//! documents this and nothing else can alias.

use super::{FAILURE, SLOW, Totals, WindowSnapshot};
use crate::breaker::stripe::{self, LINE_WORDS, Lines};
use crate::clock::{Timestamp, duration_to_nanos};
use crate::sync::{AtomicU64, Ordering};
use std::time::Duration;

const COUNT_BITS: u32 = 36;
const COUNT_MASK: u64 = (1 << COUNT_BITS) - 1;
const LAP_MASK: u64 = (1 << (64 - COUNT_BITS)) - 1;
/// Words per bucket: calls, failures, slow, slow failures.
const FIELDS: usize = 4;

pub(crate) struct TimeWindow {
    width: u64,
    buckets: u64,
    /// `⌊2⁶⁴ / buckets⌋ + 1`: divides an epoch by `buckets` with one
    /// multiply (exact because epoch × buckets < 2⁶⁴ for every valid window).
    buckets_inverse: u64,
    /// The epoch of the latest call, so that finding the bucket costs a
    /// multiply and two compares instead of a 64-bit division (the division
    /// runs once per bucket width).
    cached_epoch: AtomicU64,
    stripes: u32,
    /// Words of one stripe, rounded up to whole cache lines.
    stripe_words: u32,
    /// `(epoch << 1) | pending` as of the last evaluation (see
    /// [`TimeWindow::success_may_trip`]).
    last_eval: AtomicU64,
    /// Each stripe's words, on lines of their own when striped.
    lines: Lines,
    /// Per stripe and field: counts folded out of expired words. Written
    /// once per bucket rollover, so not padded per stripe.
    folded: Box<[AtomicU64]>,
}

#[inline]
fn lap_of(word: u64) -> u64 {
    word >> COUNT_BITS
}

impl TimeWindow {
    pub(crate) fn new(length: Duration, buckets: u32, stripes: usize) -> Self {
        let buckets = u64::from(buckets.max(1));
        let width = (duration_to_nanos(length) / buckets).max(1);
        let stripe_words = (buckets as usize * FIELDS).div_ceil(LINE_WORDS) * LINE_WORDS;
        let lines = Lines::new(stripes * stripe_words / LINE_WORDS, stripes > 1);
        TimeWindow {
            width,
            buckets,
            buckets_inverse: (u64::MAX / buckets).wrapping_add(1),
            cached_epoch: AtomicU64::new(0),
            stripes: stripes as u32,
            stripe_words: stripe_words as u32,
            last_eval: AtomicU64::new(u64::MAX),
            lines,
            folded: (0..stripes * FIELDS).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    pub(crate) fn length_nanos(&self) -> u64 {
        self.width * self.buckets
    }

    #[inline]
    fn word(&self, stripe: usize, bucket: usize, field: usize) -> &AtomicU64 {
        let i = stripe * self.stripe_words as usize + bucket * FIELDS + field;
        self.lines.word(i)
    }

    #[inline]
    fn epoch(&self, now: Timestamp) -> u64 {
        now.as_nanos() / self.width
    }

    /// The epoch of `now`, from the cache when it is still current.
    #[inline(always)]
    pub(crate) fn current_epoch(&self, now: Timestamp) -> u64 {
        let cached = self.cached_epoch.load(Ordering::Relaxed);
        // cached × width ≤ any reading that produced it, so no overflow; a
        // `now` before the cached epoch wraps to a huge offset and misses.
        if now.as_nanos().wrapping_sub(cached * self.width) < self.width {
            return cached;
        }
        let epoch = self.epoch(now);
        self.cached_epoch.store(epoch, Ordering::Relaxed);
        epoch
    }

    /// `(epoch / buckets, epoch % buckets)` without a division.
    #[inline(always)]
    fn lap_and_bucket(&self, epoch: u64) -> (u64, usize) {
        if self.buckets == 1 {
            return (epoch, 0);
        }
        let lap = ((u128::from(epoch) * u128::from(self.buckets_inverse)) >> 64) as u64;
        (lap, (epoch - lap * self.buckets) as usize)
    }

    #[inline(always)]
    pub(crate) fn record(&self, bits: u8, epoch: u64) {
        let (lap, bucket) = self.lap_and_bucket(epoch);
        let lap = lap & LAP_MASK;
        let stripe = stripe::current(self.stripes as usize);
        self.bump(stripe, bucket, 0, lap);
        if bits != 0 {
            if bits & FAILURE != 0 {
                self.bump(stripe, bucket, 1, lap);
            }
            if bits & SLOW != 0 {
                self.bump(stripe, bucket, 2, lap);
            }
            if bits == FAILURE | SLOW {
                self.bump(stripe, bucket, 3, lap);
            }
        }
    }

    #[inline(always)]
    fn bump(&self, stripe: usize, bucket: usize, field: usize, lap: u64) {
        let word = self.word(stripe, bucket, field);
        let mut old = word.load(Ordering::Relaxed);
        loop {
            let new = if lap_of(old) == lap {
                old + 1
            } else {
                (lap << COUNT_BITS) | 1
            };
            match word.compare_exchange_weak(old, new, Ordering::AcqRel, Ordering::Relaxed) {
                Ok(_) => {
                    if lap_of(old) != lap {
                        self.fold(stripe, field, old);
                    }
                    return;
                }
                Err(v) => {
                    old = v;
                    stripe::collided();
                }
            }
        }
    }

    fn fold(&self, stripe: usize, field: usize, old: u64) {
        let n = old & COUNT_MASK;
        if n != 0 {
            self.folded[stripe * FIELDS + field].fetch_add(n, Ordering::Relaxed);
        }
    }

    /// A success can raise the failure rate only by expiring older calls
    /// (a new epoch since the last evaluation) or complete a sample with bad
    /// calls in it (the last evaluation saw bad calls below `minimum_calls`).
    #[inline(always)]
    pub(crate) fn success_may_trip(&self, epoch: u64) -> bool {
        let last = self.last_eval.load(Ordering::Relaxed);
        last & 1 == 1 || last >> 1 != epoch
    }

    /// Records what an evaluation at `now` found. Concurrent evaluations may
    /// overwrite each other; a lost `pending` delays the next evaluation to
    /// the next failure or epoch, never past one bucket width.
    pub(crate) fn evaluated(&self, now: Timestamp, pending: bool) {
        let v = (self.epoch(now) << 1) | u64::from(pending);
        if self.last_eval.load(Ordering::Relaxed) != v {
            self.last_eval.store(v, Ordering::Relaxed);
        }
    }

    pub(crate) fn snapshot(&self, now: Timestamp) -> WindowSnapshot {
        let epoch = self.epoch(now);
        let mut sums = [0u64; FIELDS];
        for bucket in 0..self.buckets {
            // The live epoch of this bucket: the latest e ≤ now with e % B == bucket.
            let back = (epoch % self.buckets + self.buckets - bucket) % self.buckets;
            let Some(live) = epoch.checked_sub(back) else {
                continue;
            };
            let lap = (live / self.buckets) & LAP_MASK;
            for stripe in 0..self.stripes as usize {
                for (field, sum) in sums.iter_mut().enumerate() {
                    let w = self
                        .word(stripe, bucket as usize, field)
                        .load(Ordering::Acquire);
                    if lap_of(w) == lap {
                        *sum += w & COUNT_MASK;
                    }
                }
            }
        }
        WindowSnapshot {
            calls: sums[0],
            failures: sums[1],
            slow: sums[2],
            slow_failures: sums[3],
        }
    }

    /// The live buckets at `now`: (start time, [calls, failures, slow,
    /// slow failures]) summed over stripes.
    pub(crate) fn live(&self, now: Timestamp) -> Vec<(Timestamp, [u64; FIELDS])> {
        let epoch = self.epoch(now);
        let first = epoch.saturating_sub(self.buckets - 1);
        (first..=epoch)
            .filter_map(|e| {
                let (lap, bucket) = self.lap_and_bucket(e);
                let mut counts = [0u64; FIELDS];
                for stripe in 0..self.stripes as usize {
                    for (field, c) in counts.iter_mut().enumerate() {
                        let w = self.word(stripe, bucket, field).load(Ordering::Acquire);
                        if lap_of(w) == lap & LAP_MASK {
                            *c += w & COUNT_MASK;
                        }
                    }
                }
                (counts[0] > 0).then(|| (Timestamp::from_nanos(e * self.width), counts))
            })
            .collect()
    }

    /// Adds `counts` to the bucket holding `at`, if `at` is still inside
    /// the window at `now`.
    pub(crate) fn add_at(&self, at: Timestamp, counts: [u64; FIELDS], now: Timestamp) {
        let epoch = self.epoch(at);
        if epoch + self.buckets <= self.epoch(now) {
            return;
        }
        let (lap, bucket) = self.lap_and_bucket(epoch);
        let lap = lap & LAP_MASK;
        for (field, n) in counts.into_iter().enumerate() {
            if n == 0 {
                continue;
            }
            let word = self.word(0, bucket, field);
            let mut old = word.load(Ordering::Acquire);
            loop {
                let new = if lap_of(old) == lap {
                    old + n
                } else {
                    (lap << COUNT_BITS) | n
                };
                match word.compare_exchange_weak(old, new, Ordering::AcqRel, Ordering::Acquire) {
                    Ok(_) => {
                        if lap_of(old) != lap {
                            self.fold(0, field, old);
                        }
                        break;
                    }
                    Err(v) => old = v,
                }
            }
        }
    }

    /// Zeroes every word, folding what it held into the totals. Words that
    /// writers bump concurrently restart from zero: the reset wins or the
    /// write lands after it, and nothing is double counted.
    pub(crate) fn reset(&self) {
        for stripe in 0..self.stripes as usize {
            for bucket in 0..self.buckets as usize {
                for field in 0..FIELDS {
                    let old = self.word(stripe, bucket, field).swap(0, Ordering::AcqRel);
                    self.fold(stripe, field, old);
                }
            }
        }
        self.last_eval.store(u64::MAX, Ordering::Relaxed);
    }

    pub(crate) fn totals(&self) -> Totals {
        let mut sums = [0u64; FIELDS];
        for stripe in 0..self.stripes as usize {
            for (field, sum) in sums.iter_mut().enumerate() {
                *sum += self.folded[stripe * FIELDS + field].load(Ordering::Relaxed);
                for bucket in 0..self.buckets as usize {
                    *sum += self.word(stripe, bucket, field).load(Ordering::Relaxed) & COUNT_MASK;
                }
            }
        }
        Totals {
            calls: sums[0],
            failures: sums[1],
            slow: sums[2],
            slow_failures: sums[3],
        }
    }

    pub(crate) fn heap_bytes(&self) -> usize {
        self.lines.heap_bytes() + self.folded.len() * 8
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    fn at(ms: u64) -> Timestamp {
        Timestamp::from_nanos(ms * 1_000_000)
    }

    #[test]
    fn division_free_bucket_math_is_exact() {
        for buckets in [1u32, 2, 3, 7, 10, 60, 120] {
            let w = TimeWindow::new(Duration::from_secs(3600), buckets, 1);
            let max_epoch = u64::MAX / w.width;
            for e in (0..10_000).chain(max_epoch - 10_000..=max_epoch) {
                let b = u64::from(buckets);
                assert_eq!(w.lap_and_bucket(e), (e / b, (e % b) as usize));
            }
        }
        let w = TimeWindow::new(Duration::from_secs(10), 10, 1);
        for t in [0u64, 999, 1_000, 5_500, 3_000, 1_000_000_000] {
            assert_eq!(w.current_epoch(at(t)), t / 1_000, "at {t} ms");
        }
    }

    #[test]
    fn buckets_expire_and_reset_on_reuse() {
        // 10 s in 10 buckets of 1 s.
        let w = TimeWindow::new(Duration::from_secs(10), 10, 2);
        let record = |bits, t| w.record(bits, w.current_epoch(t));
        record(FAILURE, at(0));
        record(0, at(500));
        record(SLOW, at(9_999));
        let s = w.snapshot(at(9_999));
        assert_eq!((s.calls, s.failures, s.slow), (3, 1, 1));
        // At 10 s the first bucket (0..1 s) has expired.
        let s = w.snapshot(at(10_000));
        assert_eq!((s.calls, s.failures, s.slow), (1, 0, 1));
        // Writing at 10.5 s reuses bucket 0: its stale counts are replaced.
        record(0, at(10_500));
        let s = w.snapshot(at(10_500));
        assert_eq!((s.calls, s.failures, s.slow), (2, 0, 1));
        assert_eq!(w.totals().calls, 4);
        assert_eq!(w.totals().failures, 1);
        w.reset();
        assert_eq!(w.snapshot(at(10_500)), WindowSnapshot::default());
        assert_eq!(w.totals().calls, 4, "totals survive resets");
    }
}

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
//! # Cumulative totals
//!
//! Metrics' totals are the folded counts plus every word's count. A
//! rollover or a reset moves a count from a word into the folded total in
//! two steps, so a reader between them would miss it (and a later reader
//! would not): totals would go backwards. Each move is therefore bracketed
//! by two counters, `moves_started` before and `moves_finished` after, and
//! a reader retries while a move overlapped its read (a seqlock whose
//! writers never wait for each other). Moves happen once per bucket width
//! and per reset, never on a call that stays in its lap, so the recording
//! path pays nothing for this.
//!
//! A call's failure and slow words are bumped before its call word, and a
//! reader sums the call words before the others: every call it counts has
//! its failure counted too, so `calls − failures` never counts a failure
//! as a success.
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
use crate::sync::{AtomicU64, Ordering, yield_now};
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
    /// Moves of counts from words into `folded` begun and ended (see
    /// "Cumulative totals"): equal when none is in progress.
    moves_started: AtomicU64,
    moves_finished: AtomicU64,
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
            moves_started: AtomicU64::new(0),
            moves_finished: AtomicU64::new(0),
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
        // The call word last: see "Cumulative totals".
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
        self.bump(stripe, bucket, 0, lap);
    }

    #[inline(always)]
    fn bump(&self, stripe: usize, bucket: usize, field: usize, lap: u64) {
        let word = self.word(stripe, bucket, field);
        let mut old = word.load(Ordering::Relaxed);
        loop {
            if lap_of(old) != lap {
                return self.roll_over(stripe, word, field, lap, 1);
            }
            match word.compare_exchange_weak(old, old + 1, Ordering::AcqRel, Ordering::Relaxed) {
                Ok(_) => return,
                Err(v) => {
                    old = v;
                    stripe::collided();
                }
            }
        }
    }

    /// Adds `n` to `word` for `lap`, restarting it if it holds an older
    /// lap (whose count is folded into the totals) — as a move, so that
    /// readers of the totals never see the count in neither place.
    #[cold]
    #[inline(never)]
    fn roll_over(&self, stripe: usize, word: &AtomicU64, field: usize, lap: u64, n: u64) {
        self.begin_move();
        let mut old = word.load(Ordering::Acquire);
        loop {
            let new = if lap_of(old) == lap {
                old + n
            } else {
                (lap << COUNT_BITS) | n
            };
            match word.compare_exchange_weak(old, new, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => break,
                Err(v) => old = v,
            }
        }
        if lap_of(old) != lap {
            self.fold(stripe, field, old);
        }
        self.end_move();
    }

    /// Announces a move of counts into `folded`: readers of the totals that
    /// overlap it will read again.
    fn begin_move(&self) {
        self.moves_started.fetch_add(1, Ordering::AcqRel);
    }

    /// Ends a move: everything it wrote is visible to a reader that sees
    /// the end.
    fn end_move(&self) {
        self.moves_finished.fetch_add(1, Ordering::Release);
    }

    fn fold(&self, stripe: usize, field: usize, old: u64) {
        let n = old & COUNT_MASK;
        if n != 0 {
            self.folded[stripe * FIELDS + field].fetch_add(n, Ordering::AcqRel);
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
        // The call word last, as a call records (see "Cumulative totals").
        for field in [1, 2, 3, 0] {
            if counts[field] != 0 {
                self.roll_over(0, self.word(0, bucket, field), field, lap, counts[field]);
            }
        }
    }

    /// Zeroes every word, folding what it held into the totals. Words that
    /// writers bump concurrently restart from zero: the reset wins or the
    /// write lands after it, and nothing is double counted.
    pub(crate) fn reset(&self) {
        self.begin_move();
        for stripe in 0..self.stripes as usize {
            for bucket in 0..self.buckets as usize {
                for field in 0..FIELDS {
                    let old = self.word(stripe, bucket, field).swap(0, Ordering::AcqRel);
                    self.fold(stripe, field, old);
                }
            }
        }
        self.end_move();
        self.last_eval.store(u64::MAX, Ordering::Relaxed);
    }

    /// Everything ever recorded, read consistently: no move of counts
    /// into `folded` overlapped the read (see "Cumulative totals"). Moves
    /// come once per bucket width or reset, so a read retries rarely, and
    /// yields its time slice to the mover before it does.
    pub(crate) fn totals(&self) -> Totals {
        loop {
            let finished = self.moves_finished.load(Ordering::Acquire);
            let started = self.moves_started.load(Ordering::Acquire);
            if started == finished {
                let sums = self.sum_words();
                // Seqlock reader: every load above is Acquire, so a word a
                // move wrote makes its start visible to this load.
                if self.moves_started.load(Ordering::Acquire) == started {
                    return Totals {
                        calls: sums[0],
                        failures: sums[1],
                        slow: sums[2],
                        slow_failures: sums[3],
                    };
                }
            }
            yield_now();
        }
    }

    /// The folded counts plus every word's, field by field with the call
    /// words first (see "Cumulative totals").
    fn sum_words(&self) -> [u64; FIELDS] {
        let mut sums = [0u64; FIELDS];
        for (field, sum) in sums.iter_mut().enumerate() {
            for stripe in 0..self.stripes as usize {
                *sum += self.folded[stripe * FIELDS + field].load(Ordering::Acquire);
                for bucket in 0..self.buckets as usize {
                    *sum += self.word(stripe, bucket, field).load(Ordering::Acquire) & COUNT_MASK;
                }
            }
        }
        sums
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

//! The throttle's counters: `requests`, `accepts` and `throttled` over a
//! sliding time window, lock-free and striped per thread.
//!
//! # Algorithm
//!
//! The same lap-stamped buckets as the breaker's time window: time is cut
//! into epochs of `width = length / buckets`; epoch `e` lives in bucket
//! `e % buckets` as lap `e / buckets`. Each counter word carries its lap in
//! the top 28 bits and the count in the low 36, so a writer that finds an
//! older lap replaces the word with `(lap, 1)` in one CAS (folding the old
//! count into a cumulative total) and readers count only live laps. Nothing
//! is ever zeroed under a writer's feet.
//!
//! # Striping
//!
//! Each thread writes the words of its own stripe (a hint per thread,
//! moved on to another stripe after a lost CAS), so two threads sharing a
//! throttle do not write one cache line on every call. The stripe count
//! follows the machine's cores, at most 4.
//!
//! # The read side
//!
//! Every admission needs the window's sums. Summing all buckets of all
//! stripes on each call would cost ~`buckets × stripes × 2` loads, so the
//! sums of the *completed* buckets are cached once per epoch (two words,
//! each tagged with the epoch they hold, so a reader never pairs sums of
//! different epochs) and only the current bucket is read live. A call that
//! lands in the previous bucket just after the cache was filled is missed
//! by the cache until the next epoch: at most one bucket's stragglers.
//!
//! Of the current bucket, an admission reads its own thread's stripe live
//! and the other stripes from a snapshot at most [`SNAPSHOT_PERIOD`] old
//! (one line of words, each tagged with the period it was read in; the
//! first admission of a period that finds a word stale re-reads that
//! stripe). Reading every stripe live made each admission load a line that
//! another thread was writing on every call: on two threads a call went
//! from 22 to ~107 ns. A single thread sees its own calls at once, other
//! threads' calls at most 10 ms late, and the metrics ([`Window::sums`])
//! stay exact.
//!
//! The module mirrors the breaker's time window rather than sharing it:
//! the breaker's internals are private to it and still moving.

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use crate::clock::{Timestamp, duration_to_nanos};

const COUNT_BITS: u32 = 36;
const COUNT_MASK: u64 = (1 << COUNT_BITS) - 1;
const LAP_MASK: u64 = (1 << (64 - COUNT_BITS)) - 1;

/// Counter fields of a bucket.
pub(crate) const REQUESTS: usize = 0;
pub(crate) const ACCEPTS: usize = 1;
pub(crate) const THROTTLED: usize = 2;
const FIELDS: usize = 3;

/// How old another stripe's share of the current bucket may be when an
/// admission reads it (see "The read side").
pub(crate) const SNAPSHOT_PERIOD: Duration = Duration::from_millis(10);

/// One 64-byte cache line of words.
#[derive(Default)]
#[repr(align(64))]
struct Line([AtomicU64; 8]);

/// Window sums at one moment.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Sums {
    pub(crate) requests: u64,
    pub(crate) accepts: u64,
    pub(crate) throttled: u64,
}

pub(crate) struct Window {
    width: u64,
    buckets: u64,
    stripes: usize,
    /// Words of one stripe, rounded up to whole cache lines.
    stripe_words: usize,
    /// The epoch of the latest call: saves a 64-bit division per call.
    cached_epoch: AtomicU64,
    /// `(epoch tag << 36) | sum` of the completed buckets, for requests
    /// and accepts (see the module docs); a sum of `COUNT_MASK` marks an
    /// empty slot (real sums are capped one below).
    completed: Line,
    /// Per stripe, its requests and accepts of the current bucket as an
    /// admission last read them: word `2 × stripe + field`, tagged like the
    /// counters with the snapshot period it was read in; a count of
    /// `COUNT_MASK` marks an empty word. At most 4 stripes fill one line.
    snapshot: Line,
    /// Snapshot periods per epoch, and the length of one in nanoseconds.
    periods: u64,
    period: u64,
    lines: Box<[Line]>,
    /// Per stripe: counts folded out of expired words, per field.
    folded: Box<[Line]>,
}

#[inline]
fn lap_of(word: u64) -> u64 {
    word >> COUNT_BITS
}

impl Window {
    pub(crate) fn new(length: Duration, buckets: u32) -> Self {
        let buckets = u64::from(buckets.max(1));
        let width = (duration_to_nanos(length) / buckets).max(1);
        let stripes = stripes();
        let stripe_words = (buckets as usize * FIELDS).div_ceil(8) * 8;
        let periods = width.div_ceil(duration_to_nanos(SNAPSHOT_PERIOD)).max(1);
        Window {
            width,
            buckets,
            stripes,
            stripe_words,
            cached_epoch: AtomicU64::new(0),
            completed: Line([const { AtomicU64::new(u64::MAX) }; 8]),
            snapshot: Line([const { AtomicU64::new(u64::MAX) }; 8]),
            periods,
            period: width.div_ceil(periods).max(1),
            lines: (0..stripes * stripe_words / 8)
                .map(|_| Line::default())
                .collect(),
            folded: (0..stripes).map(|_| Line::default()).collect(),
        }
    }

    #[inline]
    fn word(&self, stripe: usize, bucket: usize, field: usize) -> &AtomicU64 {
        let i = stripe * self.stripe_words + bucket * FIELDS + field;
        &self.lines[i / 8].0[i % 8]
    }

    /// The epoch of `now`, from the cache when it is still current.
    #[inline]
    pub(crate) fn epoch(&self, now: Timestamp) -> u64 {
        let cached = self.cached_epoch.load(Ordering::Relaxed);
        // cached × width ≤ the reading that produced it; a `now` before it
        // wraps to a huge offset and misses.
        if now.as_nanos().wrapping_sub(cached * self.width) < self.width {
            return cached;
        }
        let epoch = now.as_nanos() / self.width;
        self.cached_epoch.store(epoch, Ordering::Relaxed);
        epoch
    }

    #[inline]
    fn lap_and_bucket(&self, epoch: u64) -> (u64, usize) {
        (
            (epoch / self.buckets) & LAP_MASK,
            (epoch % self.buckets) as usize,
        )
    }

    /// Counts one event of `field` (and a request with it) in `epoch`.
    #[inline]
    pub(crate) fn record(&self, epoch: u64, field: Option<usize>) {
        let (lap, bucket) = self.lap_and_bucket(epoch);
        let stripe = current_stripe(self.stripes);
        self.bump(stripe, bucket, REQUESTS, lap);
        if let Some(field) = field {
            self.bump(stripe, bucket, field, lap);
        }
    }

    #[inline]
    fn bump(&self, stripe: usize, bucket: usize, field: usize, lap: u64) {
        let word = self.word(stripe, bucket, field);
        let mut old = word.load(Ordering::Relaxed);
        loop {
            let new = if lap_of(old) == lap {
                // Saturate rather than carry into the lap bits.
                old + u64::from(old & COUNT_MASK != COUNT_MASK)
            } else {
                (lap << COUNT_BITS) | 1
            };
            match word.compare_exchange_weak(old, new, Ordering::AcqRel, Ordering::Relaxed) {
                Ok(_) => {
                    if lap_of(old) != lap && old & COUNT_MASK != 0 {
                        self.folded[stripe].0[field].fetch_add(old & COUNT_MASK, Ordering::Relaxed);
                    }
                    return;
                }
                Err(v) => {
                    old = v;
                    collided();
                }
            }
        }
    }

    /// Sum of `field` over the buckets of `epochs`, live words only.
    fn sum(&self, field: usize, epochs: impl Iterator<Item = u64>) -> u64 {
        let mut sum = 0u64;
        for e in epochs {
            let (lap, bucket) = self.lap_and_bucket(e);
            for stripe in 0..self.stripes {
                let w = self.word(stripe, bucket, field).load(Ordering::Acquire);
                if lap_of(w) == lap {
                    sum += w & COUNT_MASK;
                }
            }
        }
        sum
    }

    /// The buckets before `epoch` that are still in the window.
    fn completed_epochs(&self, epoch: u64) -> impl Iterator<Item = u64> {
        epoch.saturating_sub(self.buckets - 1)..epoch
    }

    /// Requests and accepts in the window ending in `epoch`: the cached
    /// completed buckets plus the live current one.
    #[inline]
    pub(crate) fn requests_and_accepts(&self, epoch: u64, now: Timestamp) -> (u64, u64) {
        let tag = epoch & LAP_MASK;
        let mut completed = [0u64; 2];
        for (field, sum) in completed.iter_mut().enumerate() {
            let w = self.completed.0[field].load(Ordering::Acquire);
            *sum = if lap_of(w) == tag && w & COUNT_MASK != COUNT_MASK {
                w & COUNT_MASK
            } else {
                self.fill_cache(field, epoch)
            };
        }
        let (lap, bucket) = self.lap_and_bucket(epoch);
        let own = current_stripe(self.stripes);
        let period = self.period_tag(epoch, now);
        let current = |field| {
            let mut sum = self.live(own, bucket, field, lap);
            for stripe in (0..self.stripes).filter(|&s| s != own) {
                sum += self.snapshot_of(stripe, bucket, field, lap, period);
            }
            sum
        };
        (
            completed[REQUESTS] + current(REQUESTS),
            completed[ACCEPTS] + current(ACCEPTS),
        )
    }

    /// The snapshot period of `now` within `epoch`, as a word tag.
    #[inline]
    fn period_tag(&self, epoch: u64, now: Timestamp) -> u64 {
        let into = now
            .as_nanos()
            .wrapping_sub(epoch.wrapping_mul(self.width))
            .min(self.width - 1);
        epoch
            .wrapping_mul(self.periods)
            .wrapping_add(into / self.period)
            & LAP_MASK
    }

    /// `field` of `stripe` in `bucket`, if the word holds lap `lap`.
    #[inline]
    fn live(&self, stripe: usize, bucket: usize, field: usize, lap: u64) -> u64 {
        let w = self.word(stripe, bucket, field).load(Ordering::Acquire);
        if lap_of(w) == lap { w & COUNT_MASK } else { 0 }
    }

    /// `field` of another stripe's current bucket, as snapshotted in the
    /// period `period` (re-read if the snapshot is older).
    #[inline]
    fn snapshot_of(
        &self,
        stripe: usize,
        bucket: usize,
        field: usize,
        lap: u64,
        period: u64,
    ) -> u64 {
        let slot = &self.snapshot.0[2 * stripe + field];
        let w = slot.load(Ordering::Relaxed);
        if lap_of(w) == period && w & COUNT_MASK != COUNT_MASK {
            return w & COUNT_MASK;
        }
        // Stale: re-read the stripe, at most once a period per word.
        // Racing refreshers store counts read at about the same time: any
        // of them is a fair snapshot of this period.
        let count = self.live(stripe, bucket, field, lap).min(COUNT_MASK - 1);
        slot.store((period << COUNT_BITS) | count, Ordering::Relaxed);
        count
    }

    #[cold]
    fn fill_cache(&self, field: usize, epoch: u64) -> u64 {
        let sum = self
            .sum(field, self.completed_epochs(epoch))
            .min(COUNT_MASK - 1);
        let tagged = ((epoch & LAP_MASK) << COUNT_BITS) | sum;
        self.completed.0[field].store(tagged, Ordering::Release);
        sum
    }

    /// Exact sums of the window ending in `epoch` (no cache), for reports.
    pub(crate) fn sums(&self, epoch: u64) -> Sums {
        let all = || self.completed_epochs(epoch).chain(std::iter::once(epoch));
        Sums {
            requests: self.sum(REQUESTS, all()),
            accepts: self.sum(ACCEPTS, all()),
            throttled: self.sum(THROTTLED, all()),
        }
    }

    /// Everything ever counted, for cumulative metrics.
    pub(crate) fn totals(&self) -> Sums {
        let mut sums = [0u64; FIELDS];
        for stripe in 0..self.stripes {
            for (field, sum) in sums.iter_mut().enumerate() {
                *sum += self.folded[stripe].0[field].load(Ordering::Relaxed);
                for bucket in 0..self.buckets as usize {
                    *sum += self.word(stripe, bucket, field).load(Ordering::Relaxed) & COUNT_MASK;
                }
            }
        }
        Sums {
            requests: sums[REQUESTS],
            accepts: sums[ACCEPTS],
            throttled: sums[THROTTLED],
        }
    }
}

/// Stripes per window: the core count rounded up to a power of two, at
/// most 4.
fn stripes() -> usize {
    use std::sync::OnceLock;
    static STRIPES: OnceLock<usize> = OnceLock::new();
    *STRIPES.get_or_init(|| {
        std::thread::available_parallelism()
            .map_or(1, |n| n.get())
            .next_power_of_two()
            .min(4)
    })
}

static NEXT_HINT: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    static HINT: Cell<usize> = const { Cell::new(usize::MAX) };
}

/// This thread's stripe among `n` (a power of two), assigned round-robin.
#[inline]
fn current_stripe(n: usize) -> usize {
    HINT.with(|h| {
        let mut v = h.get();
        if v == usize::MAX {
            v = NEXT_HINT.fetch_add(1, Ordering::Relaxed) & (usize::MAX >> 1);
            h.set(v);
        }
        v & (n - 1)
    })
}

/// After a lost CAS, this thread moves to the next stripe.
#[cold]
fn collided() {
    HINT.with(|h| h.set(h.get().wrapping_add(1) & (usize::MAX >> 1)));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(ms: u64) -> Timestamp {
        Timestamp::from_nanos(ms * 1_000_000)
    }

    /// What an admission at `ms` sees: (requests, accepts).
    fn admission(w: &Window, ms: u64) -> (u64, u64) {
        w.requests_and_accepts(w.epoch(at(ms)), at(ms))
    }

    #[test]
    fn buckets_expire_and_the_cache_follows_epochs() {
        let w = Window::new(Duration::from_secs(4), 4);
        w.record(w.epoch(at(0)), Some(ACCEPTS));
        w.record(w.epoch(at(500)), None);
        w.record(w.epoch(at(1_500)), Some(THROTTLED));
        assert_eq!(admission(&w, 1_500), (3, 1));
        w.record(w.epoch(at(2_500)), Some(ACCEPTS));
        // The cache for epoch 2 holds epochs 0 and 1; epoch 2 is live.
        assert_eq!(admission(&w, 2_500), (4, 2));
        assert_eq!(admission(&w, 2_900), (4, 2));
        // At 4 s, epoch 0 has left the window.
        assert_eq!(admission(&w, 4_000), (2, 1));
        let s = w.sums(w.epoch(at(4_000)));
        assert_eq!((s.requests, s.accepts, s.throttled), (2, 1, 1));
        // Reusing bucket 0 folds its stale counts into the totals.
        w.record(w.epoch(at(4_100)), None);
        assert_eq!(w.totals().requests, 5);
        assert_eq!(w.totals().accepts, 2);
        assert_eq!(admission(&w, 100_000), (0, 0));
    }

    /// Another thread's calls of the current bucket reach this thread's
    /// admissions through the snapshot: at once if nothing was snapshotted
    /// in this period yet, at most one `SNAPSHOT_PERIOD` later otherwise,
    /// and at once when both threads share a stripe (one-core machines).
    #[test]
    fn other_threads_calls_are_seen_within_a_snapshot_period() {
        let w = Window::new(Duration::from_secs(10), 1);
        let record_elsewhere = |n: u32, ms: u64| {
            std::thread::scope(|s| {
                s.spawn(|| (0..n).for_each(|_| w.record(w.epoch(at(ms)), Some(ACCEPTS))));
            })
        };
        record_elsewhere(3, 1_000);
        assert_eq!(admission(&w, 1_000), (3, 3), "a stale snapshot is re-read");
        record_elsewhere(2, 1_001);
        let seen = admission(&w, 1_001);
        assert!(seen == (3, 3) || seen == (5, 5), "{seen:?}");
        let later = 1_001 + SNAPSHOT_PERIOD.as_millis() as u64;
        assert_eq!(admission(&w, later), (5, 5), "one period later");
        // This thread's own calls are seen at once.
        w.record(w.epoch(at(later)), None);
        assert_eq!(admission(&w, later), (6, 5));
        // The metrics stay exact throughout.
        let s = w.sums(w.epoch(at(later)));
        assert_eq!((s.requests, s.accepts), (6, 5));
    }
}

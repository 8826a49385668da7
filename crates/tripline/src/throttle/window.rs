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
        Window {
            width,
            buckets,
            stripes,
            stripe_words,
            cached_epoch: AtomicU64::new(0),
            completed: Line([const { AtomicU64::new(u64::MAX) }; 8]),
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
    pub(crate) fn requests_and_accepts(&self, epoch: u64) -> (u64, u64) {
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
        let current = |field| self.sum(field, std::iter::once(epoch));
        (
            completed[REQUESTS] + current(REQUESTS),
            completed[ACCEPTS] + current(ACCEPTS),
        )
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

    #[test]
    fn buckets_expire_and_the_cache_follows_epochs() {
        let w = Window::new(Duration::from_secs(4), 4);
        w.record(w.epoch(at(0)), Some(ACCEPTS));
        w.record(w.epoch(at(500)), None);
        w.record(w.epoch(at(1_500)), Some(THROTTLED));
        assert_eq!(w.requests_and_accepts(w.epoch(at(1_500))), (3, 1));
        w.record(w.epoch(at(2_500)), Some(ACCEPTS));
        // The cache for epoch 2 holds epochs 0 and 1; epoch 2 is live.
        assert_eq!(w.requests_and_accepts(w.epoch(at(2_500))), (4, 2));
        assert_eq!(w.requests_and_accepts(w.epoch(at(2_900))), (4, 2));
        // At 4 s, epoch 0 has left the window.
        assert_eq!(w.requests_and_accepts(w.epoch(at(4_000))), (2, 1));
        let s = w.sums(w.epoch(at(4_000)));
        assert_eq!((s.requests, s.accepts, s.throttled), (2, 1, 1));
        // Reusing bucket 0 folds its stale counts into the totals.
        w.record(w.epoch(at(4_100)), None);
        assert_eq!(w.totals().requests, 5);
        assert_eq!(w.totals().accepts, 2);
        assert_eq!(w.requests_and_accepts(w.epoch(at(100_000))), (0, 0));
    }
}

//! The breaker's monotonic event counters, striped per thread.
//!
//! Most counters move by an atomic add on the caller's stripe. Rejections
//! are different: an open breaker rejects at the full call rate, and there
//! the atomic read-modify-write would be the most expensive instruction on
//! the path (~2.7 ns of a ~4 ns rejection on our machine). So each stripe's
//! rejections are split in two exact parts:
//!
//! * an **owned** word `tag << 48 | count`, claimed (by CAS, once) by the
//!   first tagged thread that rejects on the stripe, and from then on bumped
//!   by that thread alone with a plain load and store — one writer cannot
//!   lose its own updates;
//! * a **shared** count that every other thread bumps atomically.
//!
//! Readers add both. The owned count saturates at 2⁴⁸ − 1; the word is then
//! retired (nobody matches it) and its owner counts in the shared part, so
//! no update is ever lost and no reading ever decreases. Thread tags are
//! unique among live threads and recycled on exit (`thread_slot.rs`); a
//! recycled tag's new holder continues the count exactly, because the old
//! holder's stores happen-before the handover.

use super::stripe::{LINE_WORDS, Lines, current, of_slot};
use super::thread_slot::{self, MAX_TAG, TAG_SHIFT};
use crate::sync::{AtomicU64, Ordering};

/// Counters per stripe: one cache line.
const SLOTS: usize = LINE_WORDS;

/// Index of each counter in a stripe.
#[derive(Clone, Copy, Debug)]
#[repr(usize)]
pub(crate) enum Counter {
    /// Rejections counted by threads that do not own the stripe (read
    /// through [`Counters::rejected`], which adds the owned part).
    Rejected = 0,
    Ignored = 1,
    LateSuccess = 2,
    LateFailure = 3,
    ProbeSuccess = 4,
    ProbeFailure = 5,
    Cancelled = 6,
}

/// The slot of the owned rejection word.
const OWNED: usize = 7;
const COUNT_MASK: u64 = (1 << TAG_SHIFT) - 1;
/// An owned word nobody has claimed yet.
const UNCLAIMED: u64 = (MAX_TAG + 2) << TAG_SHIFT;
/// An owned word whose count saturated: nobody matches it any more.
const RETIRED: u64 = (MAX_TAG + 1) << TAG_SHIFT | COUNT_MASK;

/// Monotonic event counters, striped per thread: one line per stripe,
/// aligned only when there are several ([`Lines`]).
pub(crate) struct Counters {
    /// One line per stripe; their number is a power of two.
    lines: Lines,
}

impl Counters {
    pub(crate) fn new(n: usize) -> Self {
        let counters = Counters {
            lines: Lines::new(n, n > 1),
        };
        for i in 0..n {
            counters.stripe(i)[OWNED].store(UNCLAIMED, Ordering::Relaxed);
        }
        counters
    }

    #[inline(always)]
    pub(crate) fn stripes(&self) -> usize {
        self.lines.len()
    }

    /// The words of stripe `i`.
    #[inline(always)]
    fn stripe(&self, i: usize) -> &[AtomicU64; SLOTS] {
        self.lines.line(i)
    }

    #[inline]
    pub(crate) fn add(&self, c: Counter, n: u64) {
        let s = current(self.stripes());
        self.stripe(s)[c as usize].fetch_add(n, Ordering::Relaxed);
    }

    /// Counts one rejection: a plain store on the stripe this thread owns,
    /// an atomic add otherwise.
    #[inline]
    pub(crate) fn add_rejected(&self) {
        let slot = thread_slot::get();
        let s = of_slot(slot, self.stripes());
        // One word by index (one bounds check), not the stripe's line.
        let owned = self.lines.word(s * SLOTS + OWNED);
        let word = owned.load(Ordering::Relaxed);
        // One comparison: the tag bits cancel only if this thread owns the
        // word, and what is left is then the count, below saturation.
        if word ^ (slot & !thread_slot::HINT_MASK) < COUNT_MASK {
            // Only this thread writes this word (it holds the tag), so the
            // load above read its own last store: nothing can be lost.
            owned.store(word + 1, Ordering::Relaxed);
        } else {
            Self::add_rejected_unowned(self.stripe(s), slot, word);
        }
    }

    #[cold]
    fn add_rejected_unowned(stripe: &[AtomicU64; SLOTS], slot: u64, word: u64) {
        let tag = thread_slot::tag(slot);
        if tag == thread_slot::NO_TAG || word == RETIRED {
            // More live threads than tags, or a retired word: count shared.
        } else if word >> TAG_SHIFT == tag {
            // Ours, and saturated: retire it (its count stays, nobody adds
            // to it any more) and count shared from now on.
            stripe[OWNED].store(RETIRED, Ordering::Relaxed);
        } else if word == UNCLAIMED {
            let claimed = tag << TAG_SHIFT | 1;
            if stripe[OWNED]
                .compare_exchange(word, claimed, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
            {
                return;
            }
        } else {
            // Owned by another thread: look for a stripe of our own next
            // time (harmless to the window, which only wants spreading).
            thread_slot::collided();
        }
        stripe[Counter::Rejected as usize].fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn heap_bytes(&self) -> usize {
        self.lines.heap_bytes()
    }

    pub(crate) fn get(&self, c: Counter) -> u64 {
        if let Counter::Rejected = c {
            return self.rejected();
        }
        self.sum(|s| s[c as usize].load(Ordering::Relaxed))
    }

    /// Every rejection: the shared and the owned parts of every stripe.
    pub(crate) fn rejected(&self) -> u64 {
        self.sum(|s| {
            s[Counter::Rejected as usize]
                .load(Ordering::Relaxed)
                .wrapping_add(s[OWNED].load(Ordering::Relaxed) & COUNT_MASK)
        })
    }

    fn sum(&self, f: impl Fn(&[AtomicU64; SLOTS]) -> u64) -> u64 {
        (0..self.stripes())
            .map(|i| f(self.stripe(i)))
            .fold(0u64, u64::wrapping_add)
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    fn owned_word(c: &Counters) -> &AtomicU64 {
        let stripe = current(c.stripes());
        &c.stripe(stripe)[OWNED]
    }

    #[test]
    fn the_first_rejecting_thread_owns_its_stripe() {
        let c = Counters::new(1);
        c.add_rejected();
        c.add_rejected();
        let word = owned_word(&c).load(Ordering::Relaxed);
        assert_eq!(word >> TAG_SHIFT, thread_slot::tag(thread_slot::get()));
        assert_eq!(word & COUNT_MASK, 2);
        assert_eq!(c.rejected(), 2);
        assert_eq!(c.get(Counter::Rejected), 2);
    }

    #[test]
    fn a_saturated_owned_count_retires_and_loses_nothing() {
        let c = Counters::new(1);
        c.add_rejected();
        let tag = thread_slot::tag(thread_slot::get());
        owned_word(&c).store(tag << TAG_SHIFT | (COUNT_MASK - 2), Ordering::Relaxed);
        for _ in 0..5 {
            c.add_rejected();
        }
        assert_eq!(owned_word(&c).load(Ordering::Relaxed), RETIRED);
        assert_eq!(c.rejected(), COUNT_MASK - 2 + 5);
    }

    /// Threads that share one stripe — one owner, the rest counting
    /// atomically — lose no rejection.
    #[test]
    fn owners_and_sharers_together_count_exactly() {
        let c = Counters::new(1);
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| (0..50_000).for_each(|_| c.add_rejected()));
            }
        });
        assert_eq!(c.rejected(), 200_000);
    }

    /// Counts survive their owner: a thread that takes a recycled tag
    /// continues the count where the exited owner left it.
    #[test]
    fn a_recycled_tag_continues_the_count() {
        let c = Counters::new(1);
        for _ in 0..200 {
            std::thread::scope(|s| {
                s.spawn(|| (0..100).for_each(|_| c.add_rejected()));
            });
        }
        assert_eq!(c.rejected(), 20_000);
    }
}

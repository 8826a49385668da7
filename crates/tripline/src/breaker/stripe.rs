//! Striping: spreading hot counters over cache lines so threads that share a
//! breaker do not write the same line on every call.
//!
//! Each thread carries a stripe hint (`thread_slot.rs`), assigned
//! round-robin on first use. When a CAS on a striped word fails (another
//! thread wrote it), the thread moves to the next stripe for its later
//! calls, so persistent collisions resolve themselves (the probe rehash of
//! Java's `LongAdder`).

use super::thread_slot;
use crate::sync::AtomicU64;

/// Words per cache line.
pub(crate) const LINE_WORDS: usize = 8;

/// A buffer of atomic words in whole cache lines, for striped data. With
/// `aligned`, each line's worth of words starts on a cache line, found by
/// hand in a plainly aligned buffer (seven words longer) rather than by an
/// over-aligned allocation: glibc serves a 64-byte-aligned request from a
/// larger block and trims it, which costs ~130 bytes a buffer — measured
/// at a million keyed breakers, more than a one-line buffer itself.
/// Without `aligned` (one stripe: nothing else is striped to share its
/// lines with) the buffer is exactly its words.
pub(crate) struct Lines {
    words: Box<[AtomicU64]>,
    /// Index of the first word of line 0 (below 8).
    first: u32,
    /// Number of lines.
    lines: u32,
}

impl Lines {
    /// `lines` lines of zeroed words.
    pub(crate) fn new(lines: usize, aligned: bool) -> Self {
        let slack = if aligned { LINE_WORDS - 1 } else { 0 };
        let words: Box<[AtomicU64]> = (0..lines * LINE_WORDS + slack)
            .map(|_| AtomicU64::new(0))
            .collect();
        let first = if aligned {
            let misalignment = words.as_ptr() as usize % 64;
            (64 - misalignment) % 64 / std::mem::size_of::<AtomicU64>()
        } else {
            0
        };
        Lines {
            words,
            first: first as u32,
            lines: u32::try_from(lines).expect("a breaker's lines fit in u32"),
        }
    }

    /// Word `i`, counted from the start of line 0.
    #[inline(always)]
    pub(crate) fn word(&self, i: usize) -> &AtomicU64 {
        &self.words[self.first as usize + i]
    }

    /// The words of line `i`.
    #[inline(always)]
    pub(crate) fn line(&self, i: usize) -> &[AtomicU64; LINE_WORDS] {
        self.words[self.first as usize + i * LINE_WORDS..]
            .first_chunk()
            .expect("line i is in the buffer")
    }

    /// Number of lines.
    pub(crate) fn len(&self) -> usize {
        self.lines as usize
    }

    pub(crate) fn heap_bytes(&self) -> usize {
        self.words.len() * std::mem::size_of::<AtomicU64>()
    }
}

/// A breaker's stripes unless its builder says otherwise: the core count,
/// at most two. Two threads then record side by side (the scaling the
/// breaker promises), and a breaker with a 10-bucket time window stays
/// within 2 KiB on any machine — each further stripe would cost another
/// copy of the window's buckets (~400 B). A breaker that many cores hammer
/// at once can ask for more with `CircuitBreakerBuilder::stripes`.
pub(crate) fn breaker_default() -> usize {
    stripes().min(2)
}

/// Stripes for a structure shared by every thread on this machine: the
/// core count rounded up to a power of two, at most 4 (more stripes cost
/// memory and read time for no gain on the machines we target).
pub(crate) fn stripes() -> usize {
    #[cfg(loom)]
    {
        1
    }
    #[cfg(not(loom))]
    {
        use std::sync::OnceLock;
        static STRIPES: OnceLock<usize> = OnceLock::new();
        *STRIPES.get_or_init(|| {
            std::thread::available_parallelism()
                .map_or(1, |n| n.get())
                .next_power_of_two()
                .min(4)
        })
    }
}

/// This thread's stripe among `n` (a power of two).
#[inline]
pub(crate) fn current(n: usize) -> usize {
    of_slot(thread_slot::get(), n)
}

/// The stripe among `n` of a thread whose slot word is `slot`. A breaker
/// has at most 64 stripes (the builder refuses more), so `n - 1` never
/// reaches the slot's tag bits and masking by it alone selects the hint.
#[inline]
pub(crate) fn of_slot(slot: u64, n: usize) -> usize {
    debug_assert!(n.is_power_of_two() && (n as u64) <= thread_slot::HINT_MASK);
    slot as usize & (n - 1)
}

/// Called after a CAS lost to another thread: move to another stripe.
#[inline]
pub(crate) fn collided() {
    thread_slot::collided()
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn aligned_lines_each_start_a_cache_line() {
        for lines in [1, 2, 3, 8] {
            let l = Lines::new(lines, true);
            for i in 0..lines {
                assert_eq!(l.line(i).as_ptr() as usize % 64, 0, "line {i} of {lines}");
            }
            assert_eq!(l.heap_bytes(), (lines * LINE_WORDS + LINE_WORDS - 1) * 8);
        }
        let plain = Lines::new(1, false);
        assert_eq!(
            plain.heap_bytes(),
            LINE_WORDS * 8,
            "no slack without alignment"
        );
        assert!(std::ptr::eq(plain.word(3), &plain.line(0)[3]));
    }
}

//! Striping: spreading hot counters over cache lines so threads that share a
//! breaker do not write the same line on every call.
//!
//! Each thread carries a stripe hint (`thread_slot.rs`), assigned
//! round-robin on first use. When a CAS on a striped word fails (another
//! thread wrote it), the thread moves to the next stripe for its later
//! calls, so persistent collisions resolve themselves (the probe rehash of
//! Java's `LongAdder`).

use super::thread_slot;

/// Aligns `T` to a 64-byte cache line. Written here rather than taken from
/// crossbeam because `CachePadded` pads to 128 bytes on x86_64, which would
/// double the footprint of 20 000 keyed breakers for no measured gain.
#[derive(Debug, Default)]
#[repr(align(64))]
pub(crate) struct Padded<T>(pub(crate) T);

impl<T> std::ops::Deref for Padded<T> {
    type Target = T;
    #[inline]
    fn deref(&self) -> &T {
        &self.0
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

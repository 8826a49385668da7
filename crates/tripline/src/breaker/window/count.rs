//! Count window: the last N recorded outcomes.
//!
//! # Algorithm
//!
//! A cursor hands out positions; position `p` lives in slot `p % N`. Each
//! slot is a `u32` holding `tag << 2 | bits`, where `tag` is the low 30
//! bits of the window generation (bumped by every reset) and `bits` are
//! [`FAILURE`]/[`SLOW`]; tags compare with wrap-around, so a slot would
//! be misread only if it survived 2²⁹ resets untouched while its neighbours
//! were written.
//! A slot written under an older tag counts as empty, so a reset is O(1):
//! bump the tag, zero the aggregate, remember the cursor as the new base.
//!
//! The aggregate packs failures, slow and slow-failure counts with the low
//! 16 bits of the tag into one word, so each change is a single CAS that
//! fails if a reset intervened. Fields are 16-bit two's-complement: while
//! two writers race on one slot a count may dip below zero for an instant,
//! and the decoder recovers the exact signed values (|field| < 2^15, hence
//! the 30 000-slot limit). `calls` is `min(cursor − base, N)`.
//!
//! # Hot path
//!
//! A success recorded while the window holds no failure and no slow call
//! is one `fetch_add` on the cursor and one load of the aggregate: it
//! touches no slot. A success only ever needs to write its slot to evict a
//! failure or slow call of the current generation, and the aggregate says
//! there is none: every slot holds a success of this generation or counts
//! as empty (an older generation's), which is the same to every count, to
//! `recent` and to the trip decision, while `calls` comes from the cursor.
//! A bad call placed in the same slot a lap earlier by a writer preempted
//! for that whole lap is the lap race below, already tolerated. Failures,
//! slow calls and successes while a bad call is in the window CAS their
//! slot, and the aggregate when the slot's bits change.
//!
//! # Concurrency argument
//!
//! Invariant: `aggregate = Σ bits of slots tagged with the current tag`,
//! at every quiescent moment.
//! * A slot CAS replaces exactly the value the writer read, so the delta it
//!   applies to the aggregate is exactly the change in that slot.
//! * A writer never overwrites a slot tagged newer than its own tag.
//! * A reset stores the new aggregate before publishing the new tag. A
//!   writer that read the old tag either CASes the aggregate before the
//!   reset (and the reset discards it, along with its now-stale slot) or
//!   fails its CAS and abandons the update (its slot is stale too).
//! * Positions racing on the same slot (a writer preempted for a whole lap)
//!   may be attributed to the neighbouring lap; no count is lost or drifts.

use super::{FAILURE, SLOW, Totals, WindowSnapshot};
use crate::breaker::stripe::Padded;
use crate::sync::{AtomicU32, AtomicU64, Ordering};

const TAG_MASK: u64 = 0xFFFF;
const F_ONE: u64 = 1 << 16;
const S_ONE: u64 = 1 << 32;
const SF_ONE: u64 = 1 << 48;

/// Laid out by hand: the cursor, written by every record, alone on its
/// line; then the words every record reads (aggregate, tag) with the
/// read-only ones, written only by failures and resets.
#[repr(C)]
pub(crate) struct CountWindow {
    cursor: Padded<AtomicU64>,
    aggregate: AtomicU64,
    /// Current generation tag and the cursor value at the last reset.
    tag: AtomicU64,
    base: AtomicU64,
    size: u64,
    /// `u64::MAX / size + 1`: Lemire's fastmod multiplier, so the slot of a
    /// position costs two multiplies instead of a 64-bit division.
    fastmod: u64,
    slots: Box<[AtomicU32]>,
    /// Cumulative failure / slow / slow-failure counts, for metrics.
    totals: [AtomicU64; 3],
}

const SLOT_TAG_MASK: u64 = (1 << 30) - 1;

/// The 30-bit tag a slot stores for generation `tag`.
#[inline(always)]
fn slot_tag(tag: u64) -> u32 {
    (tag & SLOT_TAG_MASK) as u32
}

/// Whether slot tag `a` is a later generation than `b` (wrap-aware).
#[inline(always)]
fn is_newer(a: u32, b: u32) -> bool {
    let d = a.wrapping_sub(b) & SLOT_TAG_MASK as u32;
    d != 0 && d < (1 << 29)
}

fn encode(bits: u8) -> u64 {
    let mut v = 0;
    if bits & FAILURE != 0 {
        v += F_ONE;
    }
    if bits & SLOW != 0 {
        v += S_ONE;
    }
    if bits == FAILURE | SLOW {
        v += SF_ONE;
    }
    v
}

/// Decodes the three signed 16-bit fields above the tag.
fn decode(aggregate: u64) -> [i64; 3] {
    let mut x = (aggregate >> 16) as i64;
    let mut out = [0i64; 3];
    for field in &mut out {
        let v = i64::from(x as u16 as i16);
        *field = v;
        x = (x - v) >> 16;
    }
    out
}

impl CountWindow {
    pub(crate) fn new(size: u32) -> Self {
        let size = u64::from(size.max(1));
        CountWindow {
            size,
            fastmod: (u64::MAX / size).wrapping_add(1),
            cursor: Padded(AtomicU64::new(0)),
            aggregate: AtomicU64::new(0),
            tag: AtomicU64::new(0),
            base: AtomicU64::new(0),
            totals: [AtomicU64::new(0), AtomicU64::new(0), AtomicU64::new(0)],
            slots: (0..size).map(|_| AtomicU32::new(0)).collect(),
        }
    }

    /// Records one outcome; returns whether it may trip the breaker (it
    /// was bad, or bad calls are in the window), i.e. whether the caller
    /// evaluates: the clean-success check has already read the aggregate.
    #[inline(always)]
    pub(crate) fn record(&self, bits: u8) -> bool {
        let p = self.cursor.fetch_add(1, Ordering::Relaxed);
        if bits == 0 && !self.has_bad_calls() {
            return false; // see "Hot path"
        }
        self.place(p, bits);
        true
    }

    /// Writes `bits` at position `p`: the slot's CAS, then the aggregate's
    /// when the slot's bits changed.
    #[inline(always)]
    fn place(&self, p: u64, bits: u8) {
        if bits != 0 {
            self.count_total(bits);
        }
        let tag = self.tag.load(Ordering::Acquire);
        let slot = &self.slots[self.slot_of(p)];
        let tag30 = slot_tag(tag);
        let new = (tag30 << 2) | u32::from(bits);
        let mut old = slot.load(Ordering::Acquire);
        loop {
            if old == new || is_newer(old >> 2, tag30) {
                // Unchanged, or a newer generation owns the slot.
                return;
            }
            match slot.compare_exchange_weak(old, new, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => break,
                Err(v) => old = v,
            }
        }
        let old_bits = if old >> 2 == tag30 {
            (old & 3) as u8
        } else {
            0
        };
        if old_bits == bits {
            return;
        }
        let delta = encode(bits).wrapping_sub(encode(old_bits));
        let mut agg = self.aggregate.load(Ordering::Acquire);
        while agg & TAG_MASK == tag & TAG_MASK {
            match self.aggregate.compare_exchange_weak(
                agg,
                agg.wrapping_add(delta),
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return,
                Err(v) => agg = v,
            }
        }
    }

    /// `p mod size` over the low 32 bits of `p` (exact for 32-bit operands).
    /// Positions wrap every 2³² records, which only reorders slots once.
    #[inline]
    fn slot_of(&self, p: u64) -> usize {
        let low = self.fastmod.wrapping_mul(u64::from(p as u32));
        ((u128::from(low) * u128::from(self.size)) >> 64) as usize
    }

    #[cold]
    fn count_total(&self, bits: u8) {
        if bits & FAILURE != 0 {
            self.totals[0].fetch_add(1, Ordering::Relaxed);
        }
        if bits & SLOW != 0 {
            self.totals[1].fetch_add(1, Ordering::Relaxed);
        }
        if bits == FAILURE | SLOW {
            self.totals[2].fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Whether the window holds any failure or slow call.
    #[inline]
    fn has_bad_calls(&self) -> bool {
        self.aggregate.load(Ordering::Acquire) >> 16 != 0
    }

    pub(crate) fn snapshot(&self) -> WindowSnapshot {
        let [failures, slow, slow_failures] = decode(self.aggregate.load(Ordering::Acquire));
        let base = self.base.load(Ordering::Acquire);
        let cursor = self.cursor.load(Ordering::Acquire);
        WindowSnapshot {
            calls: cursor.saturating_sub(base).min(self.size),
            failures: failures.max(0) as u64,
            slow: slow.max(0) as u64,
            slow_failures: slow_failures.max(0) as u64,
        }
    }

    pub(crate) fn size(&self) -> u64 {
        self.size
    }

    /// The bits of the newest `n` outcomes in the window, oldest first.
    pub(crate) fn recent(&self, n: usize) -> Vec<u8> {
        let tag = self.tag.load(Ordering::Acquire);
        let cursor = self.cursor.load(Ordering::Acquire);
        let base = self.base.load(Ordering::Acquire);
        let live = cursor.saturating_sub(base).min(self.size).min(n as u64);
        (cursor - live..cursor)
            .map(|p| {
                let v = self.slots[self.slot_of(p)].load(Ordering::Acquire);
                if v >> 2 == slot_tag(tag) {
                    (v & 3) as u8
                } else {
                    0
                }
            })
            .collect()
    }

    /// Only the transition winner resets, so resets never race each other.
    pub(crate) fn reset(&self) {
        let tag = self.tag.load(Ordering::Acquire) + 1;
        self.base
            .store(self.cursor.load(Ordering::Acquire), Ordering::Release);
        self.aggregate.store(tag & TAG_MASK, Ordering::Release);
        self.tag.store(tag, Ordering::Release);
    }

    pub(crate) fn totals(&self) -> Totals {
        Totals {
            calls: self.cursor.load(Ordering::Relaxed),
            failures: self.totals[0].load(Ordering::Relaxed),
            slow: self.totals[1].load(Ordering::Relaxed),
            slow_failures: self.totals[2].load(Ordering::Relaxed),
        }
    }

    pub(crate) fn heap_bytes(&self) -> usize {
        self.slots.len() * std::mem::size_of::<AtomicU32>()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn decode_recovers_transiently_negative_fields() {
        let agg = 5u64 // tag
            .wrapping_add(encode(SLOW))
            .wrapping_sub(encode(FAILURE))
            .wrapping_sub(encode(FAILURE | SLOW));
        assert_eq!(decode(agg), [-2, 0, -1]);
        assert_eq!(agg & TAG_MASK, 5);
    }

    #[test]
    fn fastmod_matches_division() {
        for size in [1u32, 2, 3, 7, 10, 100, 997, 30_000] {
            let w = CountWindow::new(size);
            for p in (0..5_000u64).chain([u64::from(u32::MAX) - 3, u64::from(u32::MAX)]) {
                assert_eq!(w.slot_of(p) as u64, (p as u32 as u64) % u64::from(size));
            }
        }
    }

    #[test]
    fn clean_successes_take_positions_without_touching_slots() {
        let w = CountWindow::new(3);
        w.record(FAILURE);
        w.reset();
        // The failure's slot keeps the old generation: it reads as empty.
        w.record(0);
        w.record(0);
        assert_eq!(w.recent(3), [0, 0]);
        assert_eq!(w.snapshot().calls, 2);
        w.record(SLOW);
        assert_eq!(w.recent(3), [0, 0, SLOW]);
        // With a bad call in the window, successes write their slots: the
        // third one evicts the slow call.
        for _ in 0..3 {
            w.record(0);
        }
        let s = w.snapshot();
        assert_eq!((s.calls, s.slow, s.failures), (3, 0, 0));
        assert_eq!(w.recent(3), [0, 0, 0]);
        assert_eq!(w.totals().calls, 7);
    }

    #[test]
    fn evicts_the_oldest_outcome() {
        let w = CountWindow::new(3);
        for bits in [FAILURE, 0, SLOW] {
            w.record(bits);
        }
        let s = w.snapshot();
        assert_eq!((s.calls, s.failures, s.slow), (3, 1, 1));
        w.record(0); // evicts the failure
        let s = w.snapshot();
        assert_eq!((s.calls, s.failures, s.slow), (3, 0, 1));
        w.reset();
        assert_eq!(w.snapshot(), WindowSnapshot::default());
        w.record(FAILURE | SLOW);
        let s = w.snapshot();
        assert_eq!((s.calls, s.failures, s.slow, s.slow_failures), (1, 1, 1, 1));
        assert_eq!(w.totals().calls, 5);
        assert_eq!(w.totals().failures, 2);
    }
}

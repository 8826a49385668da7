//! Count window: the last N recorded outcomes.
//!
//! # Algorithm
//!
//! A cursor hands out positions; position `p` lives in slot `p % N`. Slots
//! are packed sixteen to a `u64` word: the high 32 bits hold `tag`, the
//! window generation (bumped by every reset), the low 32 bits two outcome
//! bits ([`FAILURE`]/[`SLOW`]) per slot. A 100-call window takes 56 bytes
//! instead of one word per slot, which is what lets a million keyed
//! breakers fit in memory. Tags compare with wrap-around, so a word would
//! be misread only if it survived 2³¹ resets untouched while its
//! neighbours were written.
//! A word written under an older tag counts as empty in every slot, so a
//! reset is O(1): bump the tag, zero the aggregate, remember the cursor as
//! the new base. The first write of the new generation into such a word
//! replaces it with the new tag and only its own slot's bits.
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
//! slot's word, and the aggregate when the slot's bits change.
//!
//! # Concurrency argument
//!
//! Invariant: `aggregate = Σ bits of slots in words tagged with the
//! current tag`, at every quiescent moment.
//! * A word CAS replaces exactly the value the writer read and changes only
//!   the writer's slot (or retags a word whose slots all count as empty),
//!   so the delta it applies to the aggregate is exactly the change in that
//!   slot. A CAS that fails because a neighbouring slot changed retries.
//! * A writer never overwrites a word tagged newer than its own tag.
//! * A reset stores the new aggregate before publishing the new tag. A
//!   writer that read the old tag either CASes the aggregate before the
//!   reset (and the reset discards it, along with its now-stale slot) or
//!   fails its CAS and abandons the update (its slot is stale too).
//! * Positions racing on the same slot (a writer preempted for a whole lap)
//!   may be attributed to the neighbouring lap; no count is lost or drifts.

use super::{FAILURE, SLOW, Totals, WindowSnapshot};
use crate::sync::{AtomicU64, Ordering};

const TAG_MASK: u64 = 0xFFFF;
const F_ONE: u64 = 1 << 16;
const S_ONE: u64 = 1 << 32;
const SF_ONE: u64 = 1 << 48;

/// Laid out by hand (see "Layout" on the breaker's `Inner`): the
/// aggregate, which every record reads, first; then the words of bad calls
/// and resets; then the cursor, which every record writes, 72 bytes past
/// the end of the aggregate (at least 64 between their nearest bytes), so
/// that the two can never share a cache line.
#[repr(C)]
pub(crate) struct CountWindow {
    aggregate: AtomicU64,
    /// Current generation tag and the cursor value at the last reset.
    tag: AtomicU64,
    base: AtomicU64,
    size: u64,
    /// `u64::MAX / size + 1`: Lemire's fastmod multiplier, so the slot of a
    /// position costs two multiplies instead of a 64-bit division.
    fastmod: u64,
    /// Sixteen slots a word (see "Algorithm").
    words: Box<[AtomicU64]>,
    /// Cumulative failure / slow / slow-failure counts, for metrics.
    totals: [AtomicU64; 3],
    cursor: AtomicU64,
}

const SLOTS_PER_WORD: u64 = 16;
/// The two bits of one slot.
const SLOT_MASK: u64 = 3;

/// The 32-bit tag a word stores for generation `tag`.
#[inline(always)]
fn word_tag(tag: u64) -> u32 {
    tag as u32
}

/// The tag of a slot word.
#[inline(always)]
fn tag_of(word: u64) -> u32 {
    (word >> 32) as u32
}

/// Whether word tag `a` is a later generation than `b` (wrap-aware).
#[inline(always)]
fn is_newer(a: u32, b: u32) -> bool {
    let d = a.wrapping_sub(b);
    d != 0 && d < (1 << 31)
}

/// Where slot `slot` lives: its word and the shift of its bits.
#[inline(always)]
fn locate(slot: usize) -> (usize, u32) {
    (
        slot / SLOTS_PER_WORD as usize,
        (slot as u32 % SLOTS_PER_WORD as u32) * 2,
    )
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
    /// Where the cursor sits in the window, for the breaker's layout test.
    #[cfg(test)]
    pub(crate) const CURSOR_OFFSET: usize = std::mem::offset_of!(CountWindow, cursor);
    /// Where the aggregate sits in the window, for the same test.
    #[cfg(test)]
    pub(crate) const AGGREGATE_OFFSET: usize = std::mem::offset_of!(CountWindow, aggregate);

    pub(crate) fn new(size: u32) -> Self {
        let size = u64::from(size.max(1));
        CountWindow {
            size,
            fastmod: (u64::MAX / size).wrapping_add(1),
            cursor: AtomicU64::new(0),
            aggregate: AtomicU64::new(0),
            tag: AtomicU64::new(0),
            base: AtomicU64::new(0),
            totals: [AtomicU64::new(0), AtomicU64::new(0), AtomicU64::new(0)],
            words: (0..size.div_ceil(SLOTS_PER_WORD))
                .map(|_| AtomicU64::new(0))
                .collect(),
        }
    }

    /// Records one outcome; returns whether it may trip the breaker (it
    /// was bad, or bad calls are in the window), i.e. whether the caller
    /// evaluates: the clean-success check has already read the aggregate.
    #[inline(always)]
    pub(crate) fn record(&self, bits: u8) -> bool {
        // A bad call's total before its call is counted (the cursor), and
        // readers take the cursor first: every call a reader counts has its
        // failure counted too, so `calls − failures` never counts a failure
        // as a success. Release orders the two for other cores.
        if bits != 0 {
            self.count_total(bits);
        }
        let p = self.cursor.fetch_add(1, Ordering::Release);
        if bits == 0 && !self.has_bad_calls() {
            return false; // see "Hot path"
        }
        self.place(p, bits);
        true
    }

    /// Writes `bits` at position `p`: the CAS of the slot's word, then the
    /// aggregate's when the slot's bits changed. `inline`, not `always`:
    /// forced into the clean-success path that never runs it, its word
    /// arithmetic cost that path seven instructions of register pressure
    /// (`call` 75 → 82).
    #[inline]
    fn place(&self, p: u64, bits: u8) {
        let tag = self.tag.load(Ordering::Acquire);
        let (index, shift) = locate(self.slot_of(p));
        let word = &self.words[index];
        let tag32 = word_tag(tag);
        let mut old = word.load(Ordering::Acquire);
        let old_bits = loop {
            let old_tag = tag_of(old);
            if is_newer(old_tag, tag32) {
                return; // a newer generation owns the word
            }
            // Slots of an older generation's word all count as empty.
            let live = if old_tag == tag32 { old as u32 } else { 0 };
            let old_bits = (u64::from(live) >> shift & SLOT_MASK) as u8;
            if old_bits == bits {
                return; // unchanged (a success needs no retagging)
            }
            let slots = u64::from(live) & !(SLOT_MASK << shift) | u64::from(bits) << shift;
            let new = u64::from(tag32) << 32 | slots;
            match word.compare_exchange_weak(old, new, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => break old_bits,
                Err(v) => old = v,
            }
        };
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
                let (index, shift) = locate(self.slot_of(p));
                let v = self.words[index].load(Ordering::Acquire);
                if tag_of(v) == word_tag(tag) {
                    (v >> shift & SLOT_MASK) as u8
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

    /// Everything ever recorded: the cursor first (see [`Self::record`]).
    pub(crate) fn totals(&self) -> Totals {
        let calls = self.cursor.load(Ordering::Acquire);
        Totals {
            calls,
            failures: self.totals[0].load(Ordering::Relaxed),
            slow: self.totals[1].load(Ordering::Relaxed),
            slow_failures: self.totals[2].load(Ordering::Relaxed),
        }
    }

    pub(crate) fn heap_bytes(&self) -> usize {
        self.words.len() * std::mem::size_of::<AtomicU64>()
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
    fn slots_sharing_a_word_keep_their_own_outcomes() {
        // 20 slots: two words, the second one partly used.
        let w = CountWindow::new(20);
        assert_eq!(w.heap_bytes(), 16);
        let pattern = |i: u64| [0, FAILURE, SLOW, FAILURE | SLOW][(i % 4) as usize];
        for i in 0..20 {
            w.record(pattern(i));
        }
        let want: Vec<u8> = (0..20).map(pattern).collect();
        assert_eq!(w.recent(20), want);
        let s = w.snapshot();
        assert_eq!(
            (s.calls, s.failures, s.slow, s.slow_failures),
            (20, 10, 10, 5)
        );
        // A reset leaves the words under the old tag: a failure retags its
        // word and keeps only its own slot; the neighbours read as empty.
        w.reset();
        w.record(FAILURE);
        assert_eq!(w.recent(20), [FAILURE]);
        for _ in 0..19 {
            w.record(0);
        }
        let s = w.snapshot();
        assert_eq!((s.calls, s.failures, s.slow), (20, 1, 0));
        assert_eq!(w.recent(20).iter().filter(|&&b| b != 0).count(), 1);
        // A lap later the failure is evicted by a success.
        w.record(0);
        assert_eq!(w.snapshot().failures, 0);
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

//! Pending completions in `(end, sequence)` order.
//!
//! Calls of equal latency end in the order they started, so most entries
//! arrive in order: those go to a FIFO ring (O(1)). An entry that would end
//! before the ring's last (a fast call after a slow one) goes to a binary
//! heap. Popping takes the smaller head of the two. Both halves are sorted,
//! so the merge is exactly the `(end, sequence)` order.

use std::cmp::Ordering;
use std::collections::{BinaryHeap, VecDeque};

/// A queued item with its ordering key.
pub(crate) struct Entry<T> {
    pub(crate) end: u64,
    pub(crate) seq: u64,
    pub(crate) item: T,
}

impl<T> Entry<T> {
    #[inline]
    fn key(&self) -> (u64, u64) {
        (self.end, self.seq)
    }
}

impl<T> PartialEq for Entry<T> {
    fn eq(&self, other: &Self) -> bool {
        self.key() == other.key()
    }
}
impl<T> Eq for Entry<T> {}
impl<T> PartialOrd for Entry<T> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl<T> Ord for Entry<T> {
    /// Reversed, so that std's max-heap pops the earliest entry.
    fn cmp(&self, other: &Self) -> Ordering {
        other.key().cmp(&self.key())
    }
}

/// The completion queue.
pub(crate) struct Completions<T> {
    ring: VecDeque<Entry<T>>,
    heap: BinaryHeap<Entry<T>>,
    seq: u64,
}

impl<T> Completions<T> {
    pub(crate) fn new() -> Self {
        Completions {
            ring: VecDeque::new(),
            heap: BinaryHeap::new(),
            seq: 0,
        }
    }

    /// Queues `item` to complete at `end`, after everything queued before
    /// at the same `end`.
    #[inline]
    pub(crate) fn push(&mut self, end: u64, item: T) {
        let seq = self.seq;
        self.seq += 1;
        let e = Entry { end, seq, item };
        match self.ring.back() {
            Some(last) if last.key() > e.key() => self.heap.push(e),
            _ => self.ring.push_back(e),
        }
    }

    /// Removes the earliest entry if it ends at or before `t`.
    #[inline]
    pub(crate) fn pop_due(&mut self, t: u64) -> Option<Entry<T>> {
        let ring = self.ring.front().map(Entry::key);
        let heap = self.heap.peek().map(Entry::key);
        match (ring, heap) {
            (Some(r), Some(h)) if h < r => (h.0 <= t).then(|| self.heap.pop()).flatten(),
            (Some(r), _) => (r.0 <= t).then(|| self.ring.pop_front()).flatten(),
            (None, Some(h)) => (h.0 <= t).then(|| self.heap.pop()).flatten(),
            (None, None) => None,
        }
    }

    /// Whether nothing is queued.
    #[cfg(test)]
    pub(crate) fn is_empty(&self) -> bool {
        self.ring.is_empty() && self.heap.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pops_in_end_then_sequence_order() {
        let mut q = Completions::new();
        for (end, id) in [
            (10, 'a'),
            (30, 'b'),
            (20, 'c'),
            (30, 'd'),
            (5, 'e'),
            (20, 'f'),
        ] {
            q.push(end, id);
        }
        assert!(q.pop_due(4).is_none());
        let mut order = Vec::new();
        while let Some(e) = q.pop_due(u64::MAX) {
            order.push(e.item);
        }
        assert_eq!(order, ['e', 'a', 'c', 'f', 'b', 'd']);
        assert!(q.is_empty());
    }
}

//! Where a breaker's window lives, and how a reshaped window is retired.
//!
//! # Layout
//!
//! The window a breaker is built with stays inline, and until the first
//! reconfiguration that changes the window's shape (a reshape) it is the
//! only one: the breaker's hot path reads it directly, after one load of a
//! flag on the state word's cache line, with no indirection and no
//! reference count. Most breakers are never reshaped and pay nothing more.
//!
//! A reshape moves the window out of line: the cell then holds the current
//! window behind an `ArcSwap`, and a call records into whatever it loaded,
//! holding the load's guard for the few nanoseconds of the record. Each
//! later reshape swaps in a new window; `ArcSwap::swap` returns the old one
//! only after turning every outstanding guard of it into a counted
//! reference, so once the returned `Arc` is the only one left no call can
//! still record into that window and it is freed. Calls through a reshaped
//! breaker pay one `ArcSwap` load more, however many reshapes came before;
//! memory is the inline window plus the current one (plus, for the moment a
//! call is still recording into it, a replaced one).
//!
//! The inline window cannot be freed (nothing owns it but the breaker), so
//! after the first reshape it stays as the one spare window; calls that
//! loaded it before the reshape may still record into it, and do no harm.
//!
//! # Cumulative totals
//!
//! Metrics' totals are derived from the windows' own words, and a new
//! window starts with what it took over of its predecessor's live contents
//! (which it counts again in its own totals). So the breaker's totals are
//! every window's totals, each less what it handed on to its successor:
//!
//! ```text
//! totals = first + Σ replaced (totals − handed on) + current
//! ```
//!
//! The [`Ledger`] keeps the handed-on amounts and, folded into one sum, the
//! final share of every window already freed. Late records into a replaced
//! window still count (its totals are read until it is freed, and its final
//! totals are folded then), so no recorded call is lost and no total ever
//! decreases across a reshape.

use super::{Totals, Window};
use crate::sync::{Arc, Mutex, lock};
use std::sync::OnceLock;

/// A breaker's window: inline until the first reshape, swappable after it.
/// `repr(C)`: the window first, where the breaker's layout puts it.
#[repr(C)]
pub(crate) struct WindowCell {
    /// The window the breaker was built with, inline so the hot path of a
    /// breaker never reshaped reaches it without an indirection.
    first: Window,
    /// Set by the first reshape; allocated only then, so a breaker that is
    /// never reshaped carries one pointer and a once-flag for it.
    reshaped: OnceLock<Box<Reshaped>>,
}

/// The out-of-line half of a reshaped breaker's window cell.
struct Reshaped {
    /// The window calls record into.
    #[cfg(not(loom))]
    current: arc_swap::ArcSwap<Window>,
    /// Loom models no `ArcSwap`: a mutex gives the same guarantee (a
    /// reader holds a counted reference while it records).
    #[cfg(loom)]
    current: Mutex<Arc<Window>>,
    /// Taken by reshapes and by readers of totals and memory, never on the
    /// call path; never held while user code runs.
    ledger: Mutex<Ledger>,
}

/// The bookkeeping of replaced windows (see the module docs).
struct Ledger {
    /// The inline window's total less what it handed on, plus the final
    /// share of every replaced window already freed. Wrapping: it starts
    /// below zero (the inline window's hand-over is subtracted here while
    /// its totals are read live) and the full sum never is.
    carried: Totals,
    /// Replaced windows that a call was still recording into when they were
    /// swapped out, each with what it handed on: freed by the first ledger
    /// access after their last reader is done.
    draining: Vec<(Arc<Window>, Totals)>,
}

impl Ledger {
    /// Folds `window`'s final share into `carried` if no call can record
    /// into it any more (ours is its last reference), else keeps it.
    fn retire(&mut self, mut window: Arc<Window>, handed_on: Totals) {
        if is_unique(&mut window) {
            let share = window.totals().wrapping_sub(handed_on);
            self.carried = self.carried.wrapping_add(share);
        } else {
            self.draining.push((window, handed_on));
        }
    }

    /// Frees the draining windows whose last reader is done. Nobody can
    /// take a new reference to one (it left the cell), so once unique it
    /// stays unique.
    fn drain(&mut self) {
        let Ledger { carried, draining } = self;
        draining.retain_mut(|(window, handed_on)| {
            let done = is_unique(window);
            if done {
                *carried = carried.wrapping_add(window.totals().wrapping_sub(*handed_on));
            }
            !done
        });
        if draining.is_empty() {
            // Usually never allocated; when it was, give it back.
            draining.shrink_to_fit();
        }
    }
}

/// Whether `window` is the last reference to its window. `Arc::get_mut`
/// rather than a look at the strong count: it acquires the count, so the
/// records of the reader that dropped the last other reference are
/// visible to the totals folded next (a relaxed count would not promise
/// that off x86).
fn is_unique(window: &mut Arc<Window>) -> bool {
    Arc::get_mut(window).is_some()
}

/// Heap bytes of a window shared behind an `Arc` (its two counts, the
/// window, and what the window owns).
fn shared_bytes(window: &Window) -> usize {
    16 + std::mem::size_of::<Window>() + window.heap_bytes()
}

impl WindowCell {
    /// Where the inline window sits in the cell, for the breaker's layout
    /// test.
    #[cfg(test)]
    pub(crate) const FIRST_OFFSET: usize = std::mem::offset_of!(WindowCell, first);

    /// A cell holding the breaker's first window, not yet reshaped.
    pub(crate) fn new(first: Window) -> Self {
        WindowCell {
            first,
            reshaped: OnceLock::new(),
        }
    }

    /// The window the breaker was built with: the current one until the
    /// breaker is reshaped.
    #[inline(always)]
    pub(crate) fn first(&self) -> &Window {
        &self.first
    }

    /// Runs `f` on the current window, holding it for `f`'s duration.
    /// Out of line: only reshaped breakers come here.
    #[cold]
    #[inline(never)]
    pub(crate) fn with_current<R>(&self, f: impl FnOnce(&Window) -> R) -> R {
        let Some(r) = self.reshaped.get() else {
            return f(&self.first);
        };
        #[cfg(not(loom))]
        {
            f(&r.current.load())
        }
        #[cfg(loom)]
        {
            let current = lock(&r.current).clone();
            f(&current)
        }
    }

    /// Makes `fresh` the current window. The caller serialises reshapes
    /// and has filled `fresh` from the current window, and nothing has
    /// recorded into `fresh` yet: its totals are exactly what it took over.
    pub(crate) fn replace(&self, fresh: Window) {
        let handed_on = fresh.totals();
        let fresh = Arc::new(fresh);
        let mut first_reshape = false;
        let r = self.reshaped.get_or_init(|| {
            first_reshape = true;
            Box::new(Reshaped {
                #[cfg(not(loom))]
                current: arc_swap::ArcSwap::new(fresh.clone()),
                #[cfg(loom)]
                current: Mutex::new(fresh.clone()),
                ledger: Mutex::new(Ledger {
                    carried: Totals::default().wrapping_sub(handed_on),
                    draining: Vec::new(),
                }),
            })
        });
        if first_reshape {
            return;
        }
        let mut ledger = lock(&r.ledger);
        #[cfg(not(loom))]
        let old = r.current.swap(fresh);
        #[cfg(loom)]
        let old = std::mem::replace(&mut *lock(&r.current), fresh);
        ledger.retire(old, handed_on);
        ledger.drain();
    }

    /// Everything ever recorded, in every window the breaker has had.
    pub(crate) fn totals(&self) -> Totals {
        let Some(r) = self.reshaped.get() else {
            return self.first.totals();
        };
        // Under the ledger lock no reshape moves a window between the
        // terms of the sum, so each window is counted exactly once.
        let mut ledger = lock(&r.ledger);
        ledger.drain();
        let replaced = ledger
            .draining
            .iter()
            .fold(ledger.carried, |sum, (window, handed_on)| {
                sum.wrapping_add(window.totals().wrapping_sub(*handed_on))
            });
        let current = self.with_current(Window::totals);
        replaced
            .wrapping_add(self.first.totals())
            .wrapping_add(current)
    }

    /// Bytes the cell owns on the heap: the inline window's buffers and,
    /// once reshaped, the current window and any replaced one not yet
    /// freed.
    pub(crate) fn heap_bytes(&self) -> usize {
        let first = self.first.heap_bytes();
        let Some(r) = self.reshaped.get() else {
            return first;
        };
        let mut ledger = lock(&r.ledger);
        ledger.drain();
        let draining: usize = ledger.draining.iter().map(|(w, _)| shared_bytes(w)).sum();
        let entries = ledger.draining.capacity() * std::mem::size_of::<(Arc<Window>, Totals)>();
        first
            + std::mem::size_of::<Reshaped>()
            + self.with_current(shared_bytes)
            + draining
            + entries
    }

    /// Replaced windows not yet freed (a call was recording into them when
    /// they were swapped out), for tests of the retirement.
    #[cfg(test)]
    pub(crate) fn draining(&self) -> usize {
        self.reshaped
            .get()
            .map_or(0, |r| lock(&r.ledger).draining.len())
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::super::{FAILURE, WindowConfig};
    use super::*;
    use crate::clock::Timestamp;

    fn count(size: u32) -> Window {
        Window::new(&WindowConfig::Count { size }, 1)
    }

    fn record(window: &Window, bits: u8) {
        if let Window::Count(c) = window {
            c.record(bits);
        }
    }

    /// A reshape as `Inner::install` makes one: the fresh window takes over
    /// what fits of the current one, then replaces it.
    fn reshape(cell: &WindowCell, fresh: Window) {
        cell.with_current(|current| fresh.absorb(current, Timestamp::ZERO));
        cell.replace(fresh);
    }

    #[test]
    fn a_replaced_window_is_freed_once_its_last_reader_is_done() {
        let cell = WindowCell::new(count(10));
        (0..5).for_each(|_| record(cell.first(), 0));
        reshape(&cell, count(3));
        cell.with_current(|old| {
            // A call still recording into the window being replaced.
            reshape(&cell, count(4));
            assert_eq!(cell.draining(), 1, "kept while a reader holds it");
            record(old, FAILURE);
            assert_eq!(cell.totals().failures, 1, "a late record counts");
        });
        let t = cell.totals();
        assert_eq!(cell.draining(), 0, "freed by the next ledger access");
        assert_eq!((t.calls, t.failures), (6, 1), "and still counts");
        // The current window counts only what it took over (the three
        // outcomes the 3-slot window held), the ledger the rest.
        assert_eq!(cell.with_current(Window::totals).calls, 3);
    }

    #[test]
    fn thousands_of_reshapes_keep_two_windows() {
        let cell = WindowCell::new(count(100));
        reshape(&cell, count(10));
        let footprint = cell.heap_bytes();
        for i in 0..3_000 {
            record(cell.first(), 0); // a call that loaded the inline window
            cell.with_current(|w| record(w, (i % 2) as u8));
            reshape(&cell, count(if i % 2 == 0 { 7 } else { 10 }));
        }
        assert_eq!(cell.draining(), 0);
        assert_eq!(
            cell.heap_bytes(),
            footprint,
            "the inline window and one more"
        );
        let t = cell.totals();
        assert_eq!((t.calls, t.failures), (6_000, 1_500), "every call, once");
    }
}

//! Each thread's stripe hint and owner tag, in one thread-local word.
//!
//! * The **hint** spreads threads over a breaker's stripes (`stripe.rs`):
//!   assigned round-robin on a thread's first use, moved on a collision.
//! * The **tag** names the thread among the live threads (`1..=MAX_TAG`), so
//!   a stripe's rejection counter can be *owned* by one thread and bumped by
//!   a plain load and store — exact, since one writer never races itself —
//!   instead of an atomic read-modify-write (`counters.rs`). Tags go back to
//!   a pool when their thread exits, so a process that churns threads never
//!   runs out; a thread that finds the pool empty (more than `MAX_TAG` live
//!   threads) gets [`NO_TAG`] and counts the slower, equally exact way.
//!
//! Both live in one `u64` so the hot paths pay one thread-local read:
//! `tag << TAG_SHIFT | hint`.

/// Where the tag starts in the slot word (and in an owned counter word).
pub(crate) const TAG_SHIFT: u32 = 48;
/// The hint's bits.
pub(crate) const HINT_MASK: u64 = (1 << TAG_SHIFT) - 1;
/// The tag of a thread that has none: it never owns a counter.
pub(crate) const NO_TAG: u64 = 0;
/// The highest tag a thread can hold; the two above it are reserved for
/// counter words ("unclaimed", "retired").
pub(crate) const MAX_TAG: u64 = 0xFFFD;

/// The slot before the thread's first use (its tag bits are reserved, so no
/// counter word can ever match it).
const UNSET: u64 = u64::MAX;

/// This thread's tag.
#[inline]
pub(crate) fn tag(slot: u64) -> u64 {
    slot >> TAG_SHIFT
}

/// This thread's slot word: `tag << TAG_SHIFT | hint`.
#[inline]
pub(crate) fn get() -> u64 {
    imp::get()
}

/// Called after this thread lost a race on a striped word: use the next
/// stripe from now on (the probe rehash of Java's `LongAdder`).
#[inline]
pub(crate) fn collided() {
    imp::collided()
}

#[cfg(not(loom))]
mod imp {
    use std::cell::{Cell, RefCell};
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicU64, Ordering};

    use super::{HINT_MASK, MAX_TAG, NO_TAG, TAG_SHIFT, UNSET};

    static NEXT_HINT: AtomicU64 = AtomicU64::new(0);

    /// Tags of exited threads, and the next never-used one.
    struct Pool {
        next: u64,
        free: Vec<u64>,
    }

    static POOL: Mutex<Pool> = Mutex::new(Pool {
        next: 1,
        free: Vec::new(),
    });

    fn pool() -> std::sync::MutexGuard<'static, Pool> {
        // Nothing panics while holding the lock; recover if it ever did.
        POOL.lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Returns its tag to the pool when the thread exits. Everything the
    /// thread wrote under the tag happens-before the next holder takes it
    /// (through the pool's lock), so the next holder's plain stores continue
    /// the count exactly.
    struct Release(u64);

    impl Drop for Release {
        fn drop(&mut self) {
            // Later uses on this thread (other thread-locals' destructors)
            // count without a tag; the slot itself has no destructor, so it
            // is always accessible.
            let _ = SLOT.try_with(|s| s.set(s.get() & HINT_MASK));
            pool().free.push(self.0);
        }
    }

    thread_local! {
        static SLOT: Cell<u64> = const { Cell::new(UNSET) };
        static RELEASE: RefCell<Option<Release>> = const { RefCell::new(None) };
    }

    #[inline]
    pub(super) fn get() -> u64 {
        SLOT.with(|s| {
            let v = s.get();
            if v != UNSET { v } else { init(s) }
        })
    }

    #[cold]
    fn init(slot: &Cell<u64>) -> u64 {
        let hint = NEXT_HINT.fetch_add(1, Ordering::Relaxed) & HINT_MASK;
        let tag = RELEASE
            .try_with(|r| {
                let mut p = pool();
                let tag = match p.free.pop() {
                    Some(t) => t,
                    None if p.next <= MAX_TAG => {
                        p.next += 1;
                        p.next - 1
                    }
                    None => return NO_TAG,
                };
                drop(p);
                *r.borrow_mut() = Some(Release(tag));
                tag
            })
            // The thread is exiting: count without a tag.
            .unwrap_or(NO_TAG);
        let v = tag << TAG_SHIFT | hint;
        slot.set(v);
        v
    }

    #[cold]
    pub(super) fn collided() {
        SLOT.with(|s| {
            let v = s.get();
            if v != UNSET {
                s.set((v & !HINT_MASK) | (v.wrapping_add(1) & HINT_MASK));
            }
        })
    }

    #[cfg(test)]
    mod tests {
        use super::super::{MAX_TAG, NO_TAG, get, tag};

        #[test]
        fn live_threads_hold_distinct_tags() {
            let mine = tag(get());
            let barrier = std::sync::Barrier::new(2);
            let (a, b) = std::thread::scope(|s| {
                let a = s.spawn(|| {
                    let t = tag(get());
                    barrier.wait();
                    t
                });
                let b = s.spawn(|| {
                    let t = tag(get());
                    barrier.wait();
                    t
                });
                (a.join().unwrap_or(NO_TAG), b.join().unwrap_or(NO_TAG))
            });
            assert!(mine != NO_TAG && a != NO_TAG && b != NO_TAG);
            assert!(mine != a && mine != b && a != b, "{mine} {a} {b}");
        }

        /// More threads than there are tags, one after another: each
        /// returns its tag on exit, so none is left without one.
        #[test]
        fn exited_threads_return_their_tags() {
            for i in 0..MAX_TAG + 100 {
                let t = std::thread::spawn(|| tag(get())).join().unwrap_or(NO_TAG);
                assert_ne!(t, NO_TAG, "thread {i} got no tag");
            }
        }
    }
}

#[cfg(loom)]
mod imp {
    //! Under loom every model thread gets its own tag (from a counter that
    //! loom resets per execution) and stays on stripe 0, so the models
    //! explore owners and non-owners sharing one stripe.
    use std::cell::Cell;

    use loom::sync::atomic::{AtomicU64, Ordering};

    use super::{TAG_SHIFT, UNSET};

    loom::lazy_static! {
        static ref NEXT_TAG: AtomicU64 = AtomicU64::new(1);
    }

    loom::thread_local! {
        static SLOT: Cell<u64> = Cell::new(UNSET);
    }

    pub(super) fn get() -> u64 {
        SLOT.with(|s| {
            if s.get() == UNSET {
                s.set(NEXT_TAG.fetch_add(1, Ordering::Relaxed) << TAG_SHIFT);
            }
            s.get()
        })
    }

    pub(super) fn collided() {}
}

//! The waker an [`AsyncCall`](super::AsyncCall) polls with: the library
//! stores it where it waits on Rust state (a bulkhead queue), and waking it
//! completes the future the asyncio task waits on — from any thread, via
//! `loop.call_soon_threadsafe`.

use std::sync::Mutex;
use std::task::Wake;

use pyo3::prelude::*;

#[derive(Default)]
struct State {
    /// Woken since the last poll began, before a target was set.
    woken: bool,
    /// What completes the task's future (`_AnyOf.wake_threadsafe`).
    target: Option<Py<PyAny>>,
}

/// One driver's wake-up state.
#[derive(Default)]
pub(crate) struct WakeCell {
    state: Mutex<State>,
}

impl WakeCell {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A poll begins: forget earlier wake-ups and targets.
    pub(crate) fn arm(&self) {
        let mut s = self.lock();
        s.woken = false;
        s.target = None;
    }

    /// Whether the waker fired since the poll began.
    pub(crate) fn woken(&self) -> bool {
        self.lock().woken
    }

    /// Sets what a wake-up completes; `false` when it already fired.
    pub(crate) fn target(&self, wake: Py<PyAny>) -> bool {
        let mut s = self.lock();
        if s.woken {
            return false;
        }
        s.target = Some(wake);
        true
    }
}

impl Wake for WakeCell {
    fn wake(self: std::sync::Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &std::sync::Arc<Self>) {
        // Taken out before calling Python: the lock is never held across it.
        let target = {
            let mut s = self.lock();
            s.woken = true;
            s.target.take()
        };
        if let Some(wake) = target {
            Python::attach(|py| {
                if let Err(e) = wake.bind(py).call0() {
                    e.write_unraisable(py, None);
                }
            });
        }
    }
}

//! The library's `Timer` on the running asyncio loop: backoff waits,
//! bulkhead queue limits and timeouts of the async policies sleep on
//! `loop.call_later`, so the task awaiting the call is suspended, never
//! the thread.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use pyo3::intern;
use pyo3::prelude::*;
use tripline::clock::{Clock, SharedClock, Timestamp};
use tripline::timeout::{Sleep, Timer};

/// Sleeps on the running loop of the awaiting task.
///
/// With the policy's clock, a sleep also lasts `d` on that clock: the
/// library's cached monotonic tick may lag the loop's time by its
/// resolution, and a timeout that fired "early" by the policy's clock would
/// be judged an attempt timeout where the deadline had passed. A sleep that
/// ends early on the clock is re-armed for the rest. Without a clock (a
/// manual clock, which only tests move) the loop's time alone decides.
pub(crate) struct AsyncioTimer {
    clock: Option<SharedClock>,
}

impl AsyncioTimer {
    /// A timer whose sleeps also last their time on `clock` (unless it is
    /// a manual clock).
    pub(crate) fn new(clock: Option<&SharedClock>) -> Self {
        AsyncioTimer {
            clock: clock.filter(|c| c.as_manual().is_none()).cloned(),
        }
    }
}

impl Timer for AsyncioTimer {
    fn sleep(&self, d: Duration) -> Sleep {
        let until = self
            .clock
            .as_ref()
            .map(|c| (c.clone(), c.now().saturating_add(d)));
        Box::pin(SleepLeaf {
            delay: d,
            until,
            armed: None,
            suspended_at: 0,
        })
    }
}

/// One sleep: a loop future completed by a `call_later` handle.
struct SleepLeaf {
    delay: Duration,
    /// When it ends on the policy's clock, if it has one.
    until: Option<(SharedClock, Timestamp)>,
    /// The future and the handle, once first polled.
    armed: Option<(Py<PyAny>, Py<PyAny>)>,
    /// The poll in which it last waited (0: never).
    suspended_at: u64,
}

impl SleepLeaf {
    /// Whether the sleep is over: its loop future done and, with a clock,
    /// its time passed there too (else re-armed for the rest).
    fn is_over(&mut self, py: Python<'_>, fut: &Bound<'_, PyAny>) -> PyResult<bool> {
        if !fut.call_method0(intern!(py, "done"))?.is_truthy()? {
            return Ok(false);
        }
        let Some((clock, until)) = &self.until else {
            return Ok(true);
        };
        let now = clock.now();
        if now >= *until {
            return Ok(true);
        }
        self.delay = (*until - now) + clock.resolution();
        self.armed = None;
        Ok(false)
    }

    fn arm(&mut self, py: Python<'_>) -> PyResult<&Py<PyAny>> {
        if self.armed.is_none() {
            let event_loop = super::event_loop(py)?;
            let l = event_loop.bind(py);
            let fut = l.call_method0(intern!(py, "create_future"))?;
            let wake = super::helpers(py)?.getattr(intern!(py, "wake"))?;
            let handle = l.call_method1(
                intern!(py, "call_later"),
                (self.delay.as_secs_f64(), wake, &fut),
            )?;
            self.armed = Some((fut.unbind(), handle.unbind()));
        }
        match &self.armed {
            Some((fut, _)) => Ok(fut),
            None => Err(pyo3::exceptions::PyRuntimeError::new_err("timer not armed")),
        }
    }
}

impl SleepLeaf {
    /// Whether the sleep is over; else its future is reported to the poll.
    fn poll_py(&mut self, py: Python<'_>) -> PyResult<bool> {
        loop {
            let fut = self.arm(py)?.bind(py).clone();
            if self.is_over(py, &fut)? {
                return Ok(true);
            }
            if self.armed.is_some() {
                fut.setattr(intern!(py, "_asyncio_future_blocking"), true)?;
                super::wait_on(fut.unbind());
                self.suspended_at = super::poll_id();
                return Ok(false);
            }
            // Re-armed for the rest of the time on the clock: arm anew.
        }
    }
}

impl Future for SleepLeaf {
    type Output = ();

    fn poll(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<()> {
        let this = self.get_mut();
        if super::is_thrown_at(this.suspended_at) {
            // Cancelled while waiting (its future may read cancelled, not
            // over): the driver drops the whole call.
            return Poll::Pending;
        }
        Python::attach(|py| match this.poll_py(py) {
            Ok(true) => Poll::Ready(()),
            Ok(false) => Poll::Pending,
            Err(e) => {
                // No running loop (awaited outside asyncio): end the call
                // with the error rather than hang.
                super::abort(e);
                Poll::Pending
            }
        })
    }
}

impl Drop for SleepLeaf {
    fn drop(&mut self) {
        if let Some((fut, handle)) = self.armed.take() {
            Python::attach(|py| {
                let _ = handle.bind(py).call_method0(intern!(py, "cancel"));
                let _ = fut.bind(py).call_method0(intern!(py, "cancel"));
            });
        }
    }
}

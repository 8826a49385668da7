//! The frame of one poll: what the leaves of an [`AsyncCall`]'s future
//! report to it (the futures they wait on, an abort) and read from it (an
//! exception thrown into the call, the running loop), kept per thread
//! while the poll runs.
//!
//! [`AsyncCall`]: super::AsyncCall

use std::cell::RefCell;

use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;

/// What the leaves of one poll report to the driver.
pub(super) struct Frame {
    /// This poll's number (increasing per thread): a leaf suspended in an
    /// earlier poll is one a thrown exception is for.
    id: u64,
    /// An exception thrown into the awaitable (a task's cancellation), for
    /// the suspended coroutines.
    pub(super) thrown: Option<PyErr>,
    /// Whether a coroutine took `thrown`.
    pub(super) thrown_used: bool,
    /// The futures the leaves wait on (`None` for "step me again soon").
    pub(super) yielded: Vec<Py<PyAny>>,
    /// A `BaseException` that ends the whole call unrecorded.
    pub(super) abort: Option<PyErr>,
    /// The running loop, looked up when a leaf first needs it.
    pub(super) event_loop: Option<Py<PyAny>>,
}

thread_local! {
    /// The frames of the polls in progress on this thread, innermost last
    /// (a coroutine stepped by one driver may await another).
    static FRAMES: RefCell<Vec<Frame>> = const { RefCell::new(Vec::new()) };
    /// The last poll number given out on this thread.
    static POLLS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// The current poll's number (0 outside any poll).
pub(crate) fn poll_id() -> u64 {
    with_frame(|f| f.id).unwrap_or(0)
}

/// Runs `f` on the innermost frame; `None` outside any poll. Borrows for
/// `f` only: `f` must not step Python code that could poll a driver.
fn with_frame<R>(f: impl FnOnce(&mut Frame) -> R) -> Option<R> {
    FRAMES.with(|frames| frames.borrow_mut().last_mut().map(f))
}

/// The exception thrown into this poll, for a coroutine suspended since
/// poll `suspended_at` (0: never suspended): asyncio throws into what was
/// waiting — a task's cancellation, or the exception of the future the
/// coroutine awaited — never into a coroutine started after the throw.
pub(crate) fn take_thrown(py: Python<'_>, suspended_at: u64) -> Option<PyErr> {
    with_frame(|f| {
        if suspended_at == 0 || suspended_at >= f.id {
            return None;
        }
        let e = f.thrown.as_ref()?.clone_ref(py);
        f.thrown_used = true;
        Some(e)
    })
    .flatten()
}

/// Whether an exception was thrown into this poll for what was suspended
/// since poll `suspended_at` (see [`take_thrown`]), without taking it.
pub(crate) fn is_thrown_at(suspended_at: u64) -> bool {
    with_frame(|f| f.thrown.is_some() && suspended_at != 0 && suspended_at < f.id).unwrap_or(false)
}

/// Reports a future a leaf waits on.
pub(crate) fn wait_on(future: Py<PyAny>) {
    with_frame(|f| f.yielded.push(future));
}

/// Ends the call unrecorded with `err` (the first one wins).
pub(crate) fn abort(err: PyErr) {
    with_frame(|f| {
        if f.abort.is_none() {
            f.abort = Some(err);
        }
    });
}

static GET_RUNNING_LOOP: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
static HELPERS: PyOnceLock<Py<PyModule>> = PyOnceLock::new();

/// The running asyncio loop of this poll, looked up once per call.
pub(crate) fn event_loop(py: Python<'_>) -> PyResult<Py<PyAny>> {
    if let Some(Some(l)) = with_frame(|f| f.event_loop.as_ref().map(|l| l.clone_ref(py))) {
        return Ok(l);
    }
    let l = running_loop(py)?;
    with_frame(|f| f.event_loop = Some(l.clone_ref(py)));
    Ok(l)
}

/// `asyncio.get_running_loop()`.
pub(super) fn running_loop(py: Python<'_>) -> PyResult<Py<PyAny>> {
    let get = GET_RUNNING_LOOP.get_or_try_init(py, || {
        Ok::<_, PyErr>(py.import("asyncio")?.getattr("get_running_loop")?.unbind())
    })?;
    Ok(get.bind(py).call0()?.unbind())
}

/// `tripline._aio`, the few Python helpers (future callbacks).
pub(crate) fn helpers(py: Python<'_>) -> PyResult<&Bound<'_, PyModule>> {
    HELPERS
        .get_or_try_init(py, || Ok::<_, PyErr>(py.import("tripline._aio")?.unbind()))
        .map(|m| m.bind(py))
}

/// Begins a poll: a new innermost frame.
pub(super) fn enter(thrown: Option<PyErr>, event_loop: Option<Py<PyAny>>) {
    let id = POLLS.with(|p| {
        p.set(p.get() + 1);
        p.get()
    });
    FRAMES.with(|frames| {
        frames.borrow_mut().push(Frame {
            id,
            thrown,
            thrown_used: false,
            yielded: Vec::new(),
            abort: None,
            event_loop,
        })
    });
}

/// Ends the poll begun last, returning its frame.
pub(super) fn leave() -> Option<Frame> {
    FRAMES.with(|frames| frames.borrow_mut().pop())
}

//! Sync forking: the Rust `Forking` race (an async future) over calls run
//! on worker threads, driven to its end on the calling thread.
//!
//! A `def` cannot be raced on one thread, so each fork is submitted to
//! the cluster's `concurrent.futures.ThreadPoolExecutor`; the calling
//! thread waits with the GIL released and is woken when a fork finishes.
//! The first success wins as in Rust: the losers' breaker permits are
//! released unrecorded when their futures drop. A loser already running
//! cannot be stopped — it runs to its end on its worker, its answer
//! discarded; one not yet started is cancelled.

use std::future::Future;
use std::pin::{Pin, pin};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll, Wake, Waker};
use std::thread::Thread;

use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};
use tripline::cluster::{ClusterAttempt, Endpoint, Forking};

use super::Cluster;
use super::call::{PyResultAny, endpoint_args, endpoint_outcome, error};

/// Wakes the thread blocked in [`block_on`].
struct ThreadWake {
    thread: Thread,
    woken: AtomicBool,
}

impl Wake for ThreadWake {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.woken.store(true, Ordering::Release);
        self.thread.unpark();
    }
}

/// Wakes a Rust waker when a `concurrent.futures.Future` is done.
#[pyclass(frozen, module = "tripline")]
pub struct WakeOnDone {
    waker: Waker,
}

#[pymethods]
impl WakeOnDone {
    fn __call__(&self, _future: &Bound<'_, PyAny>) {
        self.waker.wake_by_ref();
    }
}

/// One fork: a call submitted to a worker thread.
struct ThreadLeaf {
    future: Option<Py<PyAny>>,
    /// Whether the done-callback is registered.
    hooked: bool,
}

impl Future for ThreadLeaf {
    type Output = PyResultAny;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<PyResultAny> {
        let this = self.get_mut();
        Python::attach(|py| {
            let Some(f) = &this.future else {
                return Poll::Pending;
            };
            let f = f.bind(py).clone();
            let done = f
                .call_method0(intern!(py, "done"))
                .and_then(|d| d.is_truthy());
            match done {
                Ok(true) => {
                    this.future = None;
                    Poll::Ready(f.call_method0(intern!(py, "result")).map(Bound::unbind))
                }
                Ok(false) if this.hooked => Poll::Pending,
                Ok(false) => {
                    let hook = WakeOnDone {
                        waker: cx.waker().clone(),
                    };
                    // Runs at once if the call finished meanwhile.
                    match f.call_method1(intern!(py, "add_done_callback"), (hook,)) {
                        Ok(_) => {
                            this.hooked = true;
                            Poll::Pending
                        }
                        Err(e) => Poll::Ready(Err(e)),
                    }
                }
                Err(e) => Poll::Ready(Err(e)),
            }
        })
    }
}

impl Drop for ThreadLeaf {
    fn drop(&mut self) {
        if let Some(f) = self.future.take() {
            // A loser: cancelled if it has not started; else it runs on.
            Python::attach(|py| {
                let _ = f.bind(py).call_method0(intern!(py, "cancel"));
            });
        }
    }
}

/// The worker pool, made at the first sync forking call.
fn workers<'py>(py: Python<'py>, c: &Cluster, forks: usize) -> PyResult<Bound<'py, PyAny>> {
    let pool = c.workers.get_or_try_init(py, || {
        let kwargs = PyDict::new(py);
        // Room for the forks of several concurrent calls, and for losers
        // still running.
        kwargs.set_item("max_workers", (forks * 8).max(8))?;
        kwargs.set_item(
            "thread_name_prefix",
            format!("tripline-fork-{}", c.cluster.name()),
        )?;
        Ok::<_, PyErr>(
            py.import("concurrent.futures")?
                .getattr("ThreadPoolExecutor")?
                .call((), Some(&kwargs))?
                .unbind(),
        )
    })?;
    Ok(pool.bind(py).clone())
}

/// Runs `fut` to its end on this thread, parked with the GIL released
/// between polls.
fn block_on<F: Future>(py: Python<'_>, fut: F) -> F::Output {
    let wake = Arc::new(ThreadWake {
        thread: std::thread::current(),
        woken: AtomicBool::new(false),
    });
    let waker = Waker::from(wake.clone());
    let mut cx = Context::from_waker(&waker);
    let mut fut = pin!(fut);
    loop {
        if let Poll::Ready(v) = fut.as_mut().poll(&mut cx) {
            return v;
        }
        let w = wake.clone();
        py.detach(move || {
            while !w.woken.swap(false, Ordering::AcqRel) {
                std::thread::park();
            }
        });
    }
}

/// A sync forking call.
pub(crate) fn call(
    c: &Cluster,
    py: Python<'_>,
    f: &Forking,
    args: &Bound<'_, PyTuple>,
    kwargs: Option<&Bound<'_, PyDict>>,
) -> PyResult<Py<PyAny>> {
    let pool = workers(py, c, 2)?;
    let classify = |r: &PyResultAny| endpoint_outcome(py, &c.classify, &c.connect, r);
    let op = |e: Endpoint, _: ClusterAttempt| {
        let submitted = endpoint_args(py, &e, args).and_then(|full| {
            let mut items: Vec<Bound<'_, PyAny>> = vec![c.call.bind(py).clone()];
            items.extend(full.iter());
            let call_args = PyTuple::new(py, items)?;
            pool.getattr(intern!(py, "submit"))?
                .call(call_args, kwargs)
                .map(Bound::unbind)
        });
        let (future, ready) = match submitted {
            Ok(f) => (Some(f), None),
            Err(e) => (None, Some(e)),
        };
        async move {
            match ready {
                Some(e) => Err(e),
                None => {
                    ThreadLeaf {
                        future,
                        hooked: false,
                    }
                    .await
                }
            }
        }
    };
    block_on(py, f.call_with(&classify, op)).map_err(|e| error(py, e))
}

//! `PyIter_Send`, looked up at run time.
//!
//! Driving a coroutine through its `send` method makes it report its
//! return value as a `StopIteration` exception, created, raised and caught
//! on every guarded `await`: the largest cost of the async guard. CPython
//! 3.10 added `PyIter_Send`, which hands the value back directly; the
//! abi3-py39 module cannot link it (3.9 lacks it), so it is found with
//! `dlsym` when the module first steps a coroutine, and the `send` method
//! is the fallback on 3.9 and where symbols cannot be looked up.

use std::ffi::c_int;
use std::sync::OnceLock;

use pyo3::exceptions::PyStopIteration;
use pyo3::intern;
use pyo3::prelude::*;

type SendFn = unsafe extern "C" fn(
    *mut pyo3::ffi::PyObject,
    *mut pyo3::ffi::PyObject,
    *mut *mut pyo3::ffi::PyObject,
) -> c_int;

static SEND: OnceLock<Option<SendFn>> = OnceLock::new();

/// `PYGEN_RETURN` and `PYGEN_NEXT` of CPython's `PySendResult`.
const RETURNED: c_int = 0;
const YIELDED: c_int = 1;

#[cfg(unix)]
#[allow(unsafe_code)] // the symbol lookup; see the module comment
fn lookup() -> Option<SendFn> {
    // SAFETY: dlsym with RTLD_DEFAULT and a NUL-terminated name only reads;
    // a non-null result is CPython's PyIter_Send, whose C signature SendFn
    // matches (int PyIter_Send(PyObject *, PyObject *, PyObject **)).
    unsafe {
        let p = libc::dlsym(libc::RTLD_DEFAULT, c"PyIter_Send".as_ptr());
        (!p.is_null()).then(|| std::mem::transmute::<*mut libc::c_void, SendFn>(p))
    }
}

#[cfg(not(unix))]
fn lookup() -> Option<SendFn> {
    None
}

/// One step of a coroutine.
pub(crate) enum Step {
    /// It is suspended, awaiting this.
    Yielded(Py<PyAny>),
    /// It returned this.
    Returned(Py<PyAny>),
}

/// Sends `value` into `iter` with `PyIter_Send`; `None` when it is not
/// available (then use the `send` method).
#[allow(unsafe_code)] // the FFI call; see the SAFETY comment
pub(crate) fn send(iter: &Bound<'_, PyAny>, value: &Bound<'_, PyAny>) -> Option<PyResult<Step>> {
    let f = (*SEND.get_or_init(lookup))?;
    let py = iter.py();
    let mut result: *mut pyo3::ffi::PyObject = std::ptr::null_mut();
    // SAFETY: both objects are alive (borrowed for the call), we are
    // attached to the interpreter, and PyIter_Send stores a new reference
    // in `result` for RETURNED and YIELDED, and sets an exception otherwise.
    let status = unsafe { f(iter.as_ptr(), value.as_ptr(), &mut result) };
    Some(match status {
        // SAFETY: a new, non-null reference, owned from here.
        RETURNED | YIELDED if !result.is_null() => {
            let object = unsafe { Py::from_owned_ptr(py, result) };
            Ok(if status == RETURNED {
                Step::Returned(object)
            } else {
                Step::Yielded(object)
            })
        }
        _ => Err(PyErr::fetch(py)),
    })
}

/// A step through a method (`send`, `throw`), its `StopIteration` read
/// back as the return value.
pub(crate) fn by_method(py: Python<'_>, result: PyResult<Bound<'_, PyAny>>) -> PyResult<Step> {
    match result {
        Ok(y) => Ok(Step::Yielded(y.unbind())),
        Err(e) if e.is_instance_of::<PyStopIteration>(py) => {
            let value = e.value(py).getattr(intern!(py, "value"))?;
            Ok(Step::Returned(value.unbind()))
        }
        Err(e) => Err(e),
    }
}

/// Sends `value` into `coro`: `PyIter_Send` where the interpreter has it
/// (no `StopIteration` per call), else its `send` method.
pub(crate) fn send_into(coro: &Bound<'_, PyAny>, value: &Bound<'_, PyAny>) -> PyResult<Step> {
    match send(coro, value) {
        Some(step) => step,
        None => by_method(
            coro.py(),
            coro.call_method1(intern!(coro.py(), "send"), (value,)),
        ),
    }
}

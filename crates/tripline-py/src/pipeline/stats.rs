//! A pipeline's policy counts as a dict: what `Pipeline.stats()` returns
//! and what `tripline.prometheus` exports (retry, retry budget, bulkhead
//! families, labelled by the pipeline's name).

use pyo3::prelude::*;
use pyo3::types::PyDict;
use tripline::budget::RetryBudget;
use tripline::retry::RetryRefusal;

/// `{"name", "retry", "budget", "bulkhead"}`, a policy absent as `None`.
pub(crate) fn stats<'py>(
    py: Python<'py>,
    name: &str,
    pipeline: &tripline::Pipeline,
) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("name", name)?;
    let retry = match pipeline.retry_stats() {
        Some(r) => {
            let refused = PyDict::new(py);
            for reason in RetryRefusal::ALL {
                refused.set_item(reason.as_str(), r.refused(reason))?;
            }
            let rd = PyDict::new(py);
            rd.set_item("attempts", r.attempts)?;
            rd.set_item("retries", r.retries)?;
            rd.set_item("refused", refused)?;
            Some(rd)
        }
        None => None,
    };
    d.set_item("retry", retry)?;
    d.set_item(
        "budget",
        pipeline.budget().map(|b| budget_stats(py, b)).transpose()?,
    )?;
    let bulkhead = match pipeline.bulkhead() {
        Some(b) => {
            let s = b.stats();
            let bd = PyDict::new(py);
            bd.set_item("in_flight", s.in_flight)?;
            bd.set_item("waiting", s.waiting)?;
            bd.set_item("admitted", s.admitted)?;
            bd.set_item("rejected", s.rejected)?;
            bd.set_item("max_concurrent", b.config().max_concurrent)?;
            bd.set_item("max_queue", b.config().max_queue)?;
            Some(bd)
        }
        None => None,
    };
    d.set_item("bulkhead", bulkhead)?;
    Ok(d)
}

/// A retry budget's level and counts.
pub(crate) fn budget_stats<'py>(py: Python<'py>, b: &RetryBudget) -> PyResult<Bound<'py, PyDict>> {
    let s = b.stats();
    let d = PyDict::new(py);
    d.set_item("available", b.available())?;
    d.set_item("deposits", s.deposits)?;
    d.set_item("withdrawals", s.withdrawals)?;
    d.set_item("refused", s.refused)?;
    Ok(d)
}

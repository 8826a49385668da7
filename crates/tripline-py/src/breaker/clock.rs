//! `tripline.ManualClock`: virtual time for tests.

use pyo3::prelude::*;
use tripline::Clock;

use crate::convert::duration;

/// A virtual clock for tests: time moves only when `advance` is called.
#[pyclass(frozen, module = "tripline")]
pub struct ManualClock {
    pub(crate) clock: tripline::ManualClock,
}

#[pymethods]
impl ManualClock {
    #[new]
    fn new() -> Self {
        ManualClock {
            clock: tripline::ManualClock::new(),
        }
    }

    /// Moves time forward by `duration` (timedelta, seconds or `"5s"`).
    fn advance(&self, duration_: &Bound<'_, PyAny>) -> PyResult<()> {
        self.clock.advance(duration(duration_, "duration")?);
        Ok(())
    }

    /// The current reading, in seconds since the clock's epoch.
    #[getter]
    fn now(&self) -> f64 {
        self.clock.now().as_secs_f64()
    }
}

//! `tripline.Event`: one breaker event, explained as the library explains it.

use pyo3::prelude::*;
use tripline::EventKind;

use crate::convert::serde_to_py;

/// An event of a breaker. `str(event)` is the library's one-line
/// explanation, e.g. `payments: closed → open (failure rate 62% ≥ 50% over
/// 20 calls; open for 5s)`.
#[pyclass(frozen, module = "tripline")]
pub struct Event {
    event: tripline::Event,
}

impl From<tripline::Event> for Event {
    fn from(event: tripline::Event) -> Self {
        Event { event }
    }
}

#[pymethods]
impl Event {
    /// The breaker's name.
    #[getter]
    fn breaker(&self) -> &str {
        &self.event.breaker
    }

    /// `"transition"`, `"would_trip"`, `"open_deadline_changed"`,
    /// `"window_reset"` or `"config_changed"`.
    #[getter]
    fn kind(&self) -> &'static str {
        match &self.event.kind {
            EventKind::Transition(_) => "transition",
            EventKind::WouldTrip { .. } => "would_trip",
            EventKind::OpenDeadlineChanged { .. } => "open_deadline_changed",
            EventKind::WindowReset { .. } => "window_reset",
            EventKind::ConfigChanged { .. } => "config_changed",
            _ => "other",
        }
    }

    /// The state before a transition (`None` for other events).
    #[getter(from_state)]
    #[allow(clippy::wrong_self_convention)] // a Python attribute name
    fn from_state(&self) -> Option<&'static str> {
        match &self.event.kind {
            EventKind::Transition(t) => Some(t.from.as_str()),
            _ => None,
        }
    }

    /// The state after a transition (`None` for other events).
    #[getter]
    fn to_state(&self) -> Option<&'static str> {
        match &self.event.kind {
            EventKind::Transition(t) => Some(t.to.as_str()),
            _ => None,
        }
    }

    /// Why, in words (`"failure rate 62% ≥ 50% over 20 calls"`), for a
    /// transition or a would-trip report.
    #[getter]
    fn reason(&self) -> Option<String> {
        match &self.event.kind {
            EventKind::Transition(_) | EventKind::WouldTrip { .. } => {
                Some(explanation(&self.event))
            }
            _ => None,
        }
    }

    /// The event as a dict (the library's serde form).
    fn as_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        serde_to_py(py, &self.event)
    }

    fn __str__(&self) -> String {
        self.event.to_string()
    }

    fn __repr__(&self) -> String {
        format!("<tripline.Event {:?}>", self.event.to_string())
    }
}

/// The "why" of a transition or would-trip event: its `Display` text
/// between the parentheses, without the open duration
/// (`failure rate 62% ≥ 50% over 20 calls`).
pub(crate) fn explanation(event: &tripline::Event) -> String {
    let text = event.to_string();
    let inner = match (text.find(" ("), text.rfind(')')) {
        (Some(open), Some(close)) if close > open + 2 => &text[open + 2..close],
        _ => text.as_str(),
    };
    inner.split("; open for").next().unwrap_or(inner).to_owned()
}

//! Values between Python and the library's serde vocabulary.
//!
//! Config keyword arguments become the JSON value the TOML/YAML/JSON files
//! deserialise from, so Python accepts exactly the file vocabulary (and
//! refuses what files refuse, with the same messages); durations are also
//! accepted as `datetime.timedelta` or a number of seconds. Results
//! (metrics, snapshots) come back as plain dicts and lists.

use std::time::Duration;

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDelta, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};
use serde_json::{Map, Number, Value};

/// Keys whose values are durations, at any depth of the config.
const DURATION_KEYS: &[&str] = &[
    "slow_call_duration",
    "open_duration",
    "max_half_open_duration",
    "min_state_duration",
    "length",
    "step_duration",
    "duration",
    "floor",
    "ceiling",
    "initial",
    "max",
    "timeout",
    "max_backoff",
    "base",
    "max_delay",
    "initial_delay",
    "delay",
    "max_wait",
    "per_attempt",
    "overall",
    "window",
    "interval",
    "base_ejection_time",
    "max_ejection_time",
    "max_ejection_time_jitter",
];

/// A Python duration — `timedelta`, seconds as a number, or the config
/// text (`"5s"`) — as the config text the library parses.
pub(crate) fn duration_text(obj: &Bound<'_, PyAny>, field: &str) -> PyResult<String> {
    Ok(format!("{}ns", duration(obj, field)?.as_nanos()))
}

/// A Python duration as a [`Duration`]; strings parse like config files.
pub(crate) fn duration(obj: &Bound<'_, PyAny>, field: &str) -> PyResult<Duration> {
    if let Ok(delta) = obj.cast::<PyDelta>() {
        let part = |name: &str| -> PyResult<i64> { delta.getattr(name)?.extract() };
        let micros =
            (part("days")? * 86_400 + part("seconds")?) * 1_000_000 + part("microseconds")?;
        return u64::try_from(micros)
            .map(Duration::from_micros)
            .map_err(|_| {
                PyValueError::new_err(format!("`{field}`: a duration cannot be negative"))
            });
    }
    if obj.is_instance_of::<PyBool>() {
        return Err(PyTypeError::new_err(format!(
            "`{field}` must be a duration (timedelta, seconds or text like \"5s\"), not bool"
        )));
    }
    if obj.is_instance_of::<PyInt>() || obj.is_instance_of::<PyFloat>() {
        let secs: f64 = obj.extract()?;
        return Duration::try_from_secs_f64(secs).map_err(|_| {
            PyValueError::new_err(format!(
                "`{field}`: {secs} is not a duration in seconds (must be finite and not negative)"
            ))
        });
    }
    if let Ok(text) = obj.cast::<PyString>() {
        return tripline::clock::duration_serde::parse(&text.to_cow()?)
            .map_err(|e| PyValueError::new_err(format!("`{field}`: {e}")));
    }
    Err(PyTypeError::new_err(format!(
        "`{field}` must be a duration (timedelta, seconds or text like \"5s\"), not {}",
        obj.get_type().name()?
    )))
}

/// Converts a Python value to JSON; `key` says whether it is a duration.
pub(crate) fn to_json(obj: &Bound<'_, PyAny>, key: &str, path: &str) -> PyResult<Value> {
    if obj.is_none() {
        return Ok(Value::Null);
    }
    if DURATION_KEYS.contains(&key) && !obj.is_instance_of::<PyDict>() {
        return duration_text(obj, path).map(Value::String);
    }
    if let Ok(b) = obj.cast::<PyBool>() {
        return Ok(Value::Bool(b.is_true()));
    }
    if obj.is_instance_of::<PyInt>() {
        if let Ok(i) = obj.extract::<i64>() {
            return Ok(Value::Number(i.into()));
        }
        return obj
            .extract::<u64>()
            .map(|u| Value::Number(u.into()))
            .map_err(|_| PyValueError::new_err(format!("`{path}`: {obj} is out of range")));
    }
    if obj.is_instance_of::<PyFloat>() {
        let f: f64 = obj.extract()?;
        return Number::from_f64(f).map(Value::Number).ok_or_else(|| {
            PyValueError::new_err(format!("`{path}` must be a finite number, not {f}"))
        });
    }
    if let Ok(s) = obj.cast::<PyString>() {
        return Ok(Value::String(s.to_cow()?.into_owned()));
    }
    if let Ok(d) = obj.cast::<PyDict>() {
        let mut map = Map::new();
        for (k, v) in d.iter() {
            let k: String = k
                .extract()
                .map_err(|_| PyTypeError::new_err(format!("`{path}`: keys must be strings")))?;
            let child = if path.is_empty() {
                k.clone()
            } else {
                format!("{path}.{k}")
            };
            let value = to_json(&v, &k, &child)?;
            map.insert(k, value);
        }
        return Ok(Value::Object(map));
    }
    if obj.is_instance_of::<PyList>() || obj.is_instance_of::<PyTuple>() {
        let mut items = Vec::new();
        for (i, v) in obj.try_iter()?.enumerate() {
            items.push(to_json(&v?, "", &format!("{path}[{i}]"))?);
        }
        return Ok(Value::Array(items));
    }
    Err(PyTypeError::new_err(format!(
        "`{path}` must be a number, string, bool, duration, dict or list, not {}",
        obj.get_type().name()?
    )))
}

/// Converts JSON (a serialised metrics record, snapshot or config) to
/// plain Python values.
pub(crate) fn to_py<'py>(py: Python<'py>, value: &Value) -> PyResult<Bound<'py, PyAny>> {
    Ok(match value {
        Value::Null => py.None().into_bound(py),
        Value::Bool(b) => PyBool::new(py, *b).to_owned().into_any(),
        Value::Number(n) => match (n.as_u64(), n.as_i64()) {
            (Some(u), _) => u.into_pyobject(py)?.into_any(),
            (None, Some(i)) => i.into_pyobject(py)?.into_any(),
            _ => n.as_f64().unwrap_or(f64::NAN).into_pyobject(py)?.into_any(),
        },
        Value::String(s) => PyString::new(py, s).into_any(),
        Value::Array(items) => {
            let list = PyList::empty(py);
            for item in items {
                list.append(to_py(py, item)?)?;
            }
            list.into_any()
        }
        Value::Object(map) => {
            let dict = PyDict::new(py);
            for (k, v) in map {
                dict.set_item(k, to_py(py, v)?)?;
            }
            dict.into_any()
        }
    })
}

/// Serialises `value` to Python through JSON.
pub(crate) fn serde_to_py<'py, T: serde::Serialize>(
    py: Python<'py>,
    value: &T,
) -> PyResult<Bound<'py, PyAny>> {
    let json = serde_json::to_value(value)
        .map_err(|e| PyValueError::new_err(format!("cannot convert to Python: {e}")))?;
    to_py(py, &json)
}

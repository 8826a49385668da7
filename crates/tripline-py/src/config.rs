//! Breaker configs from Python keyword arguments, dicts and files.

use std::path::PathBuf;

use pyo3::prelude::*;
use pyo3::types::PyDict;
use serde_json::{Map, Value};
use tripline::CircuitBreakerConfig;

use crate::convert::to_json;
use crate::errors::config_error;

/// Deserialises `value` as `T`, naming the field of any error.
pub(crate) fn from_json<T: serde::de::DeserializeOwned>(value: Value) -> PyResult<T> {
    from_json_as("breaker", value)
}

/// [`from_json`] for a config of another `subject` (`"throttle"`), which
/// its errors name.
pub(crate) fn from_json_as<T: serde::de::DeserializeOwned>(
    subject: &str,
    value: Value,
) -> PyResult<T> {
    serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        config_error(subject, &path, &e.inner().to_string())
    })
}

/// A config dict of a `subject` (`"budget"`, `"failback"`) as its config
/// type, errors naming `subject` and the field.
pub(crate) fn section<T: serde::de::DeserializeOwned>(
    dict: &Bound<'_, PyDict>,
    subject: &str,
) -> PyResult<T> {
    from_json_as(subject, Value::Object(kwargs_json(Some(dict))?))
}

/// `kwargs` as a JSON object (durations normalised to config text).
pub(crate) fn kwargs_json(kwargs: Option<&Bound<'_, PyDict>>) -> PyResult<Map<String, Value>> {
    match kwargs {
        None => Ok(Map::new()),
        Some(d) => match to_json(d.as_any(), "", "")? {
            Value::Object(map) => Ok(map),
            _ => Ok(Map::new()),
        },
    }
}

/// A breaker config named `name` from the file vocabulary in `fields`.
pub(crate) fn breaker_config(
    name: &str,
    mut fields: Map<String, Value>,
) -> PyResult<CircuitBreakerConfig> {
    fields.insert("name".into(), Value::String(name.to_owned()));
    let config: CircuitBreakerConfig = from_json(Value::Object(fields))?;
    validate(&config)?;
    Ok(config)
}

/// Validates `config` up front, so a bad value raises before any breaker
/// exists; warnings go to the `tripline` logger.
pub(crate) fn validate(config: &CircuitBreakerConfig) -> PyResult<()> {
    match config.validate() {
        Ok(warnings) => {
            if !warnings.is_empty() {
                Python::attach(|py| {
                    for w in warnings {
                        crate::errors::log_warning(py, &format!("breaker {:?}: {w}", config.name));
                    }
                });
            }
            Ok(())
        }
        Err(e) => Err(pyo3::exceptions::PyValueError::new_err(e.to_string())),
    }
}

/// `config` with the fields in `overrides` replaced (for `reconfigure`).
pub(crate) fn merged(
    config: &CircuitBreakerConfig,
    overrides: Map<String, Value>,
) -> PyResult<CircuitBreakerConfig> {
    let mut base = match serde_json::to_value(config) {
        Ok(Value::Object(map)) => map,
        _ => Map::new(),
    };
    let name = config.name.clone();
    for (k, v) in overrides {
        base.insert(k, v);
    }
    breaker_config(&name, base)
}

/// Reads a config file (TOML, YAML or JSON by extension) with the
/// library's reader: errors carry the file, line and field.
pub(crate) fn from_path(path: PathBuf) -> PyResult<CircuitBreakerConfig> {
    let config = CircuitBreakerConfig::from_path(&path)
        .map_err(|e| pyo3::exceptions::PyValueError::new_err(e.to_string()))?;
    validate(&config)?;
    Ok(config)
}

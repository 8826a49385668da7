//! The breaker's config: a file in the library's vocabulary, or the
//! defaults for pipeline steps.

use std::path::Path;
use std::time::Duration;

use tripline::breaker::{ConfigFileError, OpenDuration};
use tripline::{CircuitBreakerConfig, HalfOpenPolicy, WindowConfig};

use crate::CliError;

/// Defaults for a pipeline step guarding a shared dependency: trip at a
/// failure rate of 50% over the last 60 s once 10 runs were seen, stay
/// open 30 s, then let 3 probe runs through: all three must succeed to
/// close, and the first failure reopens (the round's threshold, 30%, is
/// reached by one failure of three). No half-open time cap:
/// a probe is a whole pipeline step and may take minutes; a probe that
/// never reports back is reclaimed through its lease instead.
pub(crate) fn defaults(name: &str) -> CircuitBreakerConfig {
    CircuitBreakerConfig {
        name: name.to_owned(),
        window: WindowConfig::Time {
            length: Duration::from_secs(60),
            buckets: 12,
        },
        minimum_calls: 10,
        failure_rate_threshold: 0.5,
        open_duration: OpenDuration::Fixed(Duration::from_secs(30)),
        half_open: HalfOpenPolicy::Permits {
            calls: 3,
            failure_rate_threshold: 0.3,
        },
        max_half_open_duration: None,
        ..Default::default()
    }
}

/// Names become file names: keep them to a safe alphabet.
pub(crate) fn check_name(name: &str) -> Result<(), CliError> {
    let ok = !name.is_empty()
        && name.len() <= 128
        && !name.starts_with('.')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if ok {
        Ok(())
    } else {
        Err(CliError::input(format!(
            "breaker name {name:?}: must be 1-128 characters of A-Z a-z 0-9 - _ . and not start with '.'"
        )))
    }
}

/// Loads and validates the config for `name`. Features that depend on the
/// moment a breaker was created or last changed state in memory (warm-up,
/// cooldown, hysteresis, a learned slow-call baseline, the ramp policy's
/// steps) would restart in every short-lived process, so they are refused
/// rather than silently not honoured.
pub(crate) fn load(name: &str, file: Option<&Path>) -> Result<CircuitBreakerConfig, CliError> {
    let mut config = match file {
        None => defaults(name),
        Some(path) => {
            CircuitBreakerConfig::from_path(path).map_err(|e| {
                // The breaker runs as `--breaker NAME` whatever the file
                // calls it; a file without a name is named by that.
                let breaker = e.breaker.clone().or_else(|| Some(name.into()));
                CliError::input(ConfigFileError { breaker, ..e }.to_string())
            })?
        }
    };
    config.name = name.to_owned();
    let unsupported = [
        ("warm_up", config.warm_up.is_some()),
        ("cooldown", config.cooldown.is_some()),
        ("min_state_duration", config.min_state_duration.is_some()),
        ("slow_call", config.slow_call.is_some()),
        (
            "half_open.policy = \"ramp\"",
            matches!(config.half_open, HalfOpenPolicy::Ramp { .. }),
        ),
    ];
    if let Some((key, _)) = unsupported.iter().find(|(_, set)| *set) {
        return Err(CliError::input(format!(
            "breaker {name:?}: {key}: not supported by `tripline run` (it would restart in every short-lived run); remove it"
        )));
    }
    config
        .validate()
        .map_err(|e| CliError::input(format!("breaker {name:?}: {e}")))?;
    Ok(config)
}

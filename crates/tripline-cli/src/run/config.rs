//! The breaker's config: a file in the library's vocabulary, or the
//! defaults for pipeline steps.

use std::path::Path;
use std::time::Duration;

use tripline::breaker::{ConfigFileError, ConfigFormat, OpenDuration};
use tripline::{CircuitBreakerConfig, HalfOpenPolicy, WindowConfig};

use crate::CliError;

/// Defaults for a pipeline step guarding a shared dependency: trip at a
/// failure rate of 50% over the last 10 minutes once 5 runs were seen,
/// stay open 30 s, then let 3 probe runs through: all three must succeed
/// to close, and the first failure reopens (the round's threshold, 30%, is
/// reached by one failure of three).
///
/// Why these numbers: pipeline steps and cron jobs run a few times an
/// hour, not a few times a second, so the window is minutes long (a 60 s
/// window would rarely hold enough runs to judge), and 5 runs are enough
/// evidence for a whole step (one flaky run of five is 20%, far from a
/// trip; three failures of five are a broken dependency). The 3 probes fit
/// within the 5 runs (validation requires probes ≤ `minimum_calls`). No
/// half-open time cap: a probe is a whole pipeline step and may take
/// minutes; a probe that never reports back is reclaimed through its lease
/// instead.
pub(crate) const DEFAULT_MINIMUM_RUNS: u32 = 5;

/// The defaults described on [`DEFAULT_MINIMUM_RUNS`].
pub(crate) fn defaults(name: &str) -> CircuitBreakerConfig {
    CircuitBreakerConfig {
        name: name.to_owned(),
        window: WindowConfig::Time {
            length: Duration::from_secs(600),
            buckets: 10,
        },
        minimum_calls: DEFAULT_MINIMUM_RUNS,
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

/// Reads the breaker part of the file: a TOML file's `[store]` table says
/// where the breaker lives (see `store_spec`), not how it behaves, so its
/// lines are blanked before the library reads the rest.
fn read_breaker(path: &Path) -> Result<CircuitBreakerConfig, ConfigFileError> {
    if path.extension().is_none_or(|e| e != "toml") {
        return CircuitBreakerConfig::from_path(path);
    }
    let in_file = |e: ConfigFileError| ConfigFileError {
        file: Some(path.to_owned()),
        ..e
    };
    let text = std::fs::read_to_string(path).map_err(|e| ConfigFileError {
        file: Some(path.to_owned()),
        line: None,
        column: None,
        breaker: None,
        field: None,
        message: format!("cannot read: {e}"),
    })?;
    let (breaker, _) = super::store_spec::split_store_section(&text);
    CircuitBreakerConfig::from_str_with_format(&breaker, ConfigFormat::Toml).map_err(in_file)
}

/// Loads and validates the config for `name`. `warm_up`, `cooldown` and
/// `min_state_duration` are honoured across runs: the state file carries
/// the moments they count from (the library's `StateTimes`), so the warm-up
/// counts from the breaker's first run, the cooldown from the run that
/// closed it, the hold from the run that changed its state. What lives in
/// one process's memory and cannot be carried is refused, naming the field,
/// rather than silently not honoured: a learned `slow_call` baseline (it
/// learns from a stream of calls no single run sees), and the `ramp`
/// policy (it admits a share of all the calls that arrive, refused ones
/// included, while the probe log replays only the admitted probes).
pub(crate) fn load(name: &str, file: Option<&Path>) -> Result<CircuitBreakerConfig, CliError> {
    let mut config = match file {
        None => defaults(name),
        Some(path) => {
            read_breaker(path).map_err(|e| {
                // The breaker runs as `--breaker NAME` whatever the file
                // calls it; a file without a name is named by that.
                let breaker = e.breaker.clone().or_else(|| Some(name.into()));
                CliError::input(ConfigFileError { breaker, ..e }.to_string())
            })?
        }
    };
    config.name = name.to_owned();
    let unsupported = [
        (
            "slow_call",
            config.slow_call.is_some(),
            "a learned baseline lives in one process; use a fixed slow_call_duration",
        ),
        (
            "half_open.policy = \"ramp\"",
            matches!(config.half_open, HalfOpenPolicy::Ramp { .. }),
            "its share of traffic counts refused runs, which the state file does not replay; use \"permits\" or \"consecutive\"",
        ),
    ];
    if let Some((key, _, why)) = unsupported.iter().find(|(_, set, _)| *set) {
        return Err(CliError::input(format!(
            "breaker {name:?}: {key}: not supported by `tripline run` ({why}); remove it"
        )));
    }
    config
        .validate()
        .map_err(|e| CliError::input(format!("breaker {name:?}: {e}")))?;
    Ok(config)
}

//! "Now" as wall-clock nanoseconds since the Unix epoch.
//!
//! The state file outlives processes, so its times are wall times; the
//! rebuilt breaker runs on a `ManualClock` set to the same numbers. Tests
//! replace the wall clock with `TRIPLINE_NOW` or `--clock-file` (RFC 3339
//! or Unix seconds) to move time without sleeping; they are for tests
//! only — a production run reads the real clock.

use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::CliError;

/// Where "now" comes from for this run.
#[derive(Clone, Debug)]
pub(crate) enum WallClock {
    /// The real wall clock.
    Real,
    /// A fixed instant from `TRIPLINE_NOW` (tests only).
    Fixed(u64),
    /// Re-read from a file on every reading (tests only).
    File(std::path::PathBuf),
}

impl WallClock {
    pub(crate) fn from_args(file: Option<&Path>) -> Result<Self, CliError> {
        if let Some(f) = file {
            let clock = WallClock::File(f.to_path_buf());
            clock.now()?;
            return Ok(clock);
        }
        match std::env::var("TRIPLINE_NOW") {
            Ok(v) => Ok(WallClock::Fixed(parse(&v, "TRIPLINE_NOW")?)),
            Err(_) => Ok(WallClock::Real),
        }
    }

    /// Nanoseconds since the Unix epoch.
    pub(crate) fn now(&self) -> Result<u64, CliError> {
        match self {
            WallClock::Real => {
                // The library's one sanctioned wall-clock read.
                let t = tripline::clock::system_time_after(Duration::ZERO);
                Ok(nanos_since_epoch(t))
            }
            WallClock::Fixed(n) => Ok(*n),
            WallClock::File(p) => {
                let text = std::fs::read_to_string(p)
                    .map_err(|e| CliError::input(format!("--clock-file {}: {e}", p.display())))?;
                parse(text.trim(), "--clock-file")
            }
        }
    }
}

fn nanos_since_epoch(t: SystemTime) -> u64 {
    let d = t.duration_since(UNIX_EPOCH).unwrap_or(Duration::ZERO);
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// RFC 3339 (`2026-01-01T00:00:00Z`) or Unix seconds (`1767225600`,
/// fractions allowed).
fn parse(text: &str, what: &str) -> Result<u64, CliError> {
    if let Ok(secs) = text.parse::<f64>()
        && secs.is_finite()
        && secs >= 0.0
    {
        return Ok((secs * 1e9) as u64);
    }
    humantime::parse_rfc3339_weak(text)
        .map(nanos_since_epoch)
        .map_err(|_| {
            CliError::input(format!(
                "{what}: {text:?} is neither RFC 3339 nor Unix seconds"
            ))
        })
}

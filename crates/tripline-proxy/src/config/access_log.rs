//! The access log: one JSON line per request, written off the request path.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::ConfigError;

/// `[access_log]`: which requests are logged, and where.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AccessLogSection {
    /// Off, a sample, or every request.
    pub mode: AccessLogMode,
    /// With `mode = "sampled"`: the share of requests logged, 0–100.
    pub sample_percent: f64,
    /// The line format; only `"json"` (one JSON object per line).
    pub format: AccessLogFormat,
    /// The file lines are appended to (created if missing); absent: stdout.
    pub path: Option<PathBuf>,
    /// Lines queued for the writer at most; a line that finds the queue
    /// full is dropped and counted, so a slow disk never slows a request.
    pub buffer: usize,
}

/// Which requests are logged.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AccessLogMode {
    /// None.
    #[default]
    Off,
    /// `sample_percent` of them, chosen at random.
    Sampled,
    /// Every one.
    Full,
}

/// How a line is written.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AccessLogFormat {
    /// One JSON object per line.
    #[default]
    Json,
}

impl Default for AccessLogSection {
    /// Off; when sampled, 1 %; stdout; 4096 queued lines.
    fn default() -> Self {
        AccessLogSection {
            mode: AccessLogMode::Off,
            sample_percent: 1.0,
            format: AccessLogFormat::Json,
            path: None,
            buffer: 4096,
        }
    }
}

impl AccessLogSection {
    /// Refuses a share outside 0–100 and an empty queue.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if !(0.0..=100.0).contains(&self.sample_percent) {
            return Err(ConfigError::invalid(
                "access_log.sample_percent",
                format!("must be within 0-100, got {}", self.sample_percent),
            ));
        }
        if self.buffer == 0 {
            return Err(ConfigError::invalid(
                "access_log.buffer",
                "must be at least 1 line",
            ));
        }
        Ok(())
    }
}

//! The access log: one line per request (JSON, or text from a template),
//! written off the request path.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::ConfigError;

/// `[access_log]`: which requests are logged, how, and where.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AccessLogSection {
    /// Off, a sample, or every request.
    pub mode: AccessLogMode,
    /// With `mode = "sampled"`: the share of requests logged, 0–100.
    pub sample_percent: f64,
    /// The line format: `"json"` (one JSON object per line) or `"text"`
    /// (a line built from `template`).
    pub format: AccessLogFormat,
    /// With `format = "text"`: the line, with `%OPERATOR%`s (Envoy's
    /// command-operator syntax) for the request's fields; absent:
    /// [`DEFAULT_TEMPLATE`](AccessLogSection::DEFAULT_TEMPLATE). Parsed
    /// when the config is loaded, so a typo fails the load instead of
    /// leaving holes in every line.
    pub template: Option<String>,
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
    /// One JSON object per line: every field, for log pipelines that
    /// parse JSON.
    #[default]
    Json,
    /// One line from `template`: the fields chosen, in the order chosen,
    /// for tools (and eyes) that read Envoy- or nginx-style lines.
    Text,
}

impl Default for AccessLogSection {
    /// Off; when sampled, 1 %; JSON; stdout; 4096 queued lines.
    fn default() -> Self {
        AccessLogSection {
            mode: AccessLogMode::Off,
            sample_percent: 1.0,
            format: AccessLogFormat::Json,
            template: None,
            path: None,
            buffer: 4096,
        }
    }
}

impl AccessLogSection {
    /// The text line when `format = "text"` names no `template`: the
    /// shape of Envoy's default format, so that a reader of Envoy's logs
    /// finds the fields where it expects them, followed by tripline's
    /// own (retries, every try).
    pub const DEFAULT_TEMPLATE: &'static str = "[%START_TIME%] \"%METHOD% %PATH%\" %RESPONSE_CODE% \
         %RESPONSE_FLAGS% %DURATION% %ROUTE_NAME% %UPSTREAM_CLUSTER% %UPSTREAM_HOST% \
         %DOWNSTREAM_REMOTE_ADDRESS% %RETRIES% %ATTEMPTS%";

    /// The text template in force: the configured one, else the default.
    pub(crate) fn text_template(&self) -> &str {
        self.template.as_deref().unwrap_or(Self::DEFAULT_TEMPLATE)
    }

    /// Refuses a share outside 0–100, an empty queue, a template that
    /// would be ignored (JSON lines) and a template that does not parse.
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
        match self.format {
            AccessLogFormat::Json if self.template.is_some() => Err(ConfigError::invalid(
                "access_log.template",
                "is used only with format = \"text\"",
            )),
            AccessLogFormat::Json => Ok(()),
            AccessLogFormat::Text => {
                super::access_log_template::Template::parse(self.text_template()).map(|_| ())
            }
        }
    }
}

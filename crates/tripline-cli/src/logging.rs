//! The binary's `tracing` subscriber, on stderr.
//!
//! The library and the proxy report what they decide through `tracing`
//! (breaker transitions, refused config pushes, a client disconnected for
//! a rapid reset); without a subscriber those lines are built and dropped.
//! The level comes from `--log-level`, else `RUST_LOG`, else the command's
//! default: `info` for `proxy` (a long-running service whose state changes
//! are its operator's record), `error` for `demo` (which prints every
//! transition and ejection itself), `warn` for everything else (a one-shot
//! command's own output is the report; warnings still show). Both take
//! `EnvFilter` directives, so `--log-level tripline::breaker=debug,warn`
//! works too. `--log-format json` writes one JSON object per line for log
//! shippers.

use clap::ValueEnum;
use tracing_subscriber::EnvFilter;

use crate::CliError;

/// How log lines are written.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub(crate) enum LogFormat {
    /// `2026-12-04T22:30:00Z  INFO target: message key=value`.
    #[default]
    Text,
    /// One JSON object per line: timestamp, level, target, fields.
    Json,
}

/// Installs the subscriber. `flag` is `--log-level`; `default` the
/// command's own level when neither the flag nor `RUST_LOG` is set.
pub(crate) fn install(
    flag: Option<&str>,
    format: LogFormat,
    default: &str,
) -> Result<(), CliError> {
    let filter = match flag {
        Some(directives) => EnvFilter::try_new(directives)
            .map_err(|e| CliError::input(format!("--log-level {directives:?}: {e}")))?,
        None => match std::env::var("RUST_LOG") {
            Ok(directives) if !directives.trim().is_empty() => EnvFilter::try_new(&directives)
                .map_err(|e| CliError::input(format!("RUST_LOG={directives:?}: {e}")))?,
            _ => EnvFilter::new(default),
        },
    };
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    // A subscriber already set (never, in this binary) keeps its place.
    let _ = match format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder.json().try_init(),
    };
    Ok(())
}

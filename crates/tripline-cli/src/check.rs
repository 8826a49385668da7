//! `tripline check FILE`: validates a breaker config (TOML, YAML or JSON by
//! extension, the library's vocabulary) before it is deployed, printing its warnings — the same
//! checks a breaker runs at construction and on live reconfiguration. A
//! proxy config (one with listeners, routes or clusters) is validated as
//! the proxy would at start, with the warnings of every breaker in it.

use std::path::PathBuf;

use clap::Args;
use tripline::CircuitBreakerConfig;
use tripline::breaker::{ConfigFileError, ConfigFormat};
use tripline_proxy::config::ProxyConfig;

use crate::CliError;

/// Options of `tripline check`.
#[derive(Args, Debug)]
pub(crate) struct CheckArgs {
    /// The breaker config (`.toml`, `.yaml`/`.yml`, `.json`) or proxy
    /// config (`.toml`) to validate.
    file: PathBuf,
}

pub(crate) fn run(args: &CheckArgs) -> Result<(), CliError> {
    let path = args.file.display();
    let format = ConfigFormat::from_path(&args.file).unwrap_or(ConfigFormat::Toml);
    let config = if format == ConfigFormat::Toml {
        let bytes =
            std::fs::read(&args.file).map_err(|e| CliError::input(format!("{path}: {e}")))?;
        let text = tripline::breaker::utf8_text(&bytes).map_err(|e| {
            CliError::input(format!(
                "{path}:{}:{}: {e}; a config is UTF-8 text",
                e.line, e.column
            ))
        })?;
        if ProxyConfig::looks_like_proxy_config(text) {
            return check_proxy(&args.file, text);
        }
        if crate::kind::looks_like_scenario(text) {
            return Err(CliError::input(format!(
                "{path}: this looks like a fault scenario (it has [traffic], [[fault]] or [[breaker]] tables), not a breaker config; run it with `tripline simulate {path}`"
            )));
        }
        CircuitBreakerConfig::from_str_with_format(text, format).map_err(|e| {
            let e = ConfigFileError {
                file: Some(args.file.clone()),
                ..e
            };
            CliError::input(e.to_string())
        })?
    } else {
        CircuitBreakerConfig::from_path(&args.file).map_err(|e| CliError::input(e.to_string()))?
    };
    let warnings = config
        .validate()
        .map_err(|e| CliError::input(format!("{path}: breaker {:?}: {e}", config.name)))?;
    for w in &warnings {
        println!("warning: {w}");
    }
    println!(
        "{path}: valid breaker config `{}` ({} warning{})",
        config.name,
        warnings.len(),
        if warnings.len() == 1 { "" } else { "s" }
    );
    Ok(())
}

fn check_proxy(file: &std::path::Path, text: &str) -> Result<(), CliError> {
    let config =
        ProxyConfig::from_toml(text).map_err(|e| CliError::input(e.in_file(file).to_string()))?;
    let mut warnings = 0;
    let routes = config
        .routes
        .iter()
        .enumerate()
        .map(|(i, r)| (format!("routes[{i}].breaker"), r.breaker.as_ref()));
    let clusters = config
        .clusters
        .iter()
        .map(|(name, c)| (format!("clusters.{name}.breaker"), c.breaker.as_ref()));
    for (at, breaker) in routes.chain(clusters) {
        // Validated in full above; this only collects the warnings.
        for w in breaker.and_then(|b| b.validate().ok()).unwrap_or_default() {
            println!("warning: `{at}.{}`: {}", w.field, w.message);
            warnings += 1;
        }
    }
    println!(
        "{}: valid proxy config ({} listener{}, {} route{}, {} cluster{}, {warnings} warning{})",
        file.display(),
        config.listeners.len(),
        plural(config.listeners.len()),
        config.routes.len(),
        plural(config.routes.len()),
        config.clusters.len(),
        plural(config.clusters.len()),
        plural(warnings),
    );
    Ok(())
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

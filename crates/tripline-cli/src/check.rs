//! `tripline check FILE`: validates a breaker config (TOML, YAML or JSON by
//! extension, the library's vocabulary) before it is deployed, printing its warnings — the same
//! checks a breaker runs at construction and on live reconfiguration. A
//! proxy config (TOML or YAML, one with listeners, routes or clusters) is
//! checked as `tripline proxy` checks it at start — parsed, validated and
//! built, TLS files and admin token read — short of binding its
//! listeners, with the warnings of every breaker in it. `--explain` also
//! prints the breakers the config builds, with their parameters in force.
//! A fleet config document (with `[[profile]]` or `[[override]]` tables, or
//! with `--at`) is checked as every instance will, and the check says
//! which profile holds at `--at`.

use std::path::{Path, PathBuf};

use clap::Args;
use tripline::CircuitBreakerConfig;
use tripline::breaker::{ConfigFileError, ConfigFormat};
use tripline::clock::EventLoopClock;
use tripline_proxy::Proxy;
use tripline_proxy::config::{ConfigFile, ProxyConfig};

use crate::CliError;

/// Options of `tripline check`.
#[derive(Args, Debug)]
pub(crate) struct CheckArgs {
    /// The breaker config (`.toml`, `.yaml`/`.yml`, `.json`) or proxy
    /// config (`.toml`, `.yaml`/`.yml`) to validate.
    file: PathBuf,
    /// Also print the breakers the config builds — for a proxy config its
    /// route breakers, each cluster's endpoint breakers and each keyed
    /// family — with every parameter in force, defaults filled in.
    #[arg(long)]
    explain: bool,
    /// For a fleet config document (one with `[[profile]]` or
    /// `[[override]]` tables): say which profile holds at this instant
    /// (RFC 3339; default now), as `tripline config check` does.
    #[arg(long, value_parser = humantime::parse_rfc3339_weak)]
    at: Option<std::time::SystemTime>,
}

pub(crate) fn run(args: &CheckArgs) -> Result<(), CliError> {
    let path = args.file.display();
    let format = ConfigFormat::from_path(&args.file).unwrap_or(ConfigFormat::Toml);
    let config = if format == ConfigFormat::Json {
        CircuitBreakerConfig::from_path(&args.file).map_err(|e| CliError::input(e.to_string()))?
    } else {
        let bytes =
            std::fs::read(&args.file).map_err(|e| CliError::input(format!("{path}: {e}")))?;
        let text = tripline::breaker::utf8_text(&bytes).map_err(|e| {
            CliError::input(format!(
                "{path}:{}:{}: {e}; a config is UTF-8 text",
                e.line, e.column
            ))
        })?;
        if ProxyConfig::looks_like_proxy_config(text) {
            return check_proxy(&args.file, text, args.explain);
        }
        if args.at.is_some() || looks_like_fleet_document(text) {
            return crate::config_cmd::check_doc::check_document(&args.file, args.at);
        }
        if format == ConfigFormat::Toml && crate::kind::looks_like_scenario(text) {
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
    };
    let warnings = config
        .validate()
        .map_err(|e| CliError::input(format!("{path}: breaker {:?}: {e}", config.name)))?;
    for w in &warnings {
        println!("warning: {w}");
    }
    if args.explain {
        println!("breaker {}", config.name);
        for line in tripline_proxy::explain::parameters(&config) {
            println!("  {line}");
        }
    }
    println!(
        "{path}: valid breaker config `{}` ({} warning{})",
        config.name,
        warnings.len(),
        if warnings.len() == 1 { "" } else { "s" }
    );
    Ok(())
}

/// A fleet config document (`tripline config push`'s) rather than one
/// breaker's config: it has profiles or overrides.
/// A fleet config document: one with profiles or overrides, or whose
/// top level holds only a document's keys (`[[breaker]]` tables with an
/// `author` or `rollout`, say) — a scenario always has its `[traffic]`.
fn looks_like_fleet_document(text: &str) -> bool {
    text.lines()
        .map(str::trim)
        .any(|l| l.starts_with("[[profile]]") || l.starts_with("[[override]]"))
        || crate::kind::looks_like_document(text)
}

fn check_proxy(file: &Path, text: &str, explain: bool) -> Result<(), CliError> {
    let source = ConfigFile::from_text(file, text);
    let config = source.parse().map_err(|e| CliError::input(e.to_string()))?;
    let proxy = build_as_at_start(&source, &config)?;
    if explain {
        // Every breaker the proxy would run, the hidden ones included.
        for built in proxy.breakers_built() {
            println!("{}", built.summary());
            for line in built.parameters() {
                println!("  {line}");
            }
        }
    }
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
    // The gaps a production route should not have: no time limit of its
    // own, no breaker of its own, retries on the default budget.
    for gap in config.advice() {
        println!("warning: {}", source.place(gap));
        warnings += 1;
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

/// Builds the proxy as `tripline proxy` does before it binds anything, so
/// that what only the build finds (a TLS file that is missing or does not
/// fit its key, an unreadable admin token file) fails the check rather
/// than the start. The build binds no socket and starts no task, and the
/// runtime it is entered in (there in case some part of the build ever
/// needs one) ends with the check; the proxy built is kept only to list
/// its breakers.
fn build_as_at_start(source: &ConfigFile, config: &ProxyConfig) -> Result<Proxy, CliError> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| CliError::other(format!("cannot start a runtime to build the proxy: {e}")))?;
    let _entered = runtime.enter();
    // The clock `tripline proxy` serves on; unlike the default monotonic
    // clock it starts no ticker thread.
    Proxy::builder(config.clone())
        .clock(EventLoopClock)
        .build()
        .map_err(|e| CliError::input(source.place(e).to_string()))
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

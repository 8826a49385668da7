//! `tripline check FILE`: validates a breaker config (TOML, the library's
//! vocabulary) before it is deployed, printing its warnings — the same
//! checks a breaker runs at construction and on live reconfiguration.

use std::path::PathBuf;

use clap::Args;
use tripline::CircuitBreakerConfig;

use crate::CliError;

/// Options of `tripline check`.
#[derive(Args, Debug)]
pub(crate) struct CheckArgs {
    /// The breaker config to validate.
    file: PathBuf,
}

pub(crate) fn run(args: &CheckArgs) -> Result<(), CliError> {
    let path = args.file.display();
    let text =
        std::fs::read_to_string(&args.file).map_err(|e| CliError::input(format!("{path}: {e}")))?;
    let config: CircuitBreakerConfig =
        toml::from_str(&text).map_err(|e| CliError::input(format!("{path}: {e}")))?;
    let warnings = config
        .validate()
        .map_err(|e| CliError::input(format!("{path}: {e}")))?;
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

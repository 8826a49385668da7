//! `tripline simulate FILE`: replay a fault scenario against real breakers
//! in virtual time and report what happened and what it cost.
//!
//! All the work is in `tripline-sim`; this file maps arguments to it and
//! its errors to exit statuses. Output is built completely before anything
//! is printed, so a failure leaves stdout empty.

use std::path::PathBuf;

use clap::{Args, ValueEnum};
use tripline_sim::report::text;
use tripline_sim::{Report, Scenario, chart};

use crate::CliError;

/// Report formats of `simulate`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum Format {
    /// Transition timelines, per-fault costs and a comparison table.
    Text,
    /// The stable JSON schema documented in `tripline_sim::report`.
    Json,
}

/// Options of `tripline simulate`.
#[derive(Args, Debug)]
pub(crate) struct SimulateArgs {
    /// The scenario file (TOML): traffic, faults and breaker tables.
    file: PathBuf,
    /// Report format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,
    /// Also write an SVG chart: state bands, outcomes per second, fault
    /// intervals and downstream load, per breaker.
    #[arg(long, value_name = "OUT.svg")]
    chart: Option<PathBuf>,
    /// List every transition in the text report; by default repeated
    /// failed probe rounds of a replica are collapsed into one row.
    #[arg(long, short)]
    verbose: bool,
}

pub(crate) fn run(args: &SimulateArgs) -> Result<(), CliError> {
    let scenario = Scenario::load(&args.file).map_err(|e| CliError::input(e.to_string()))?;
    let report = Report::simulate(&scenario).map_err(|e| CliError::input(e.to_string()))?;
    let out = match args.format {
        Format::Text => text::render_with(
            &scenario,
            &report,
            text::TextOptions {
                verbose: args.verbose,
            },
        ),
        Format::Json => report.to_json(),
    };
    if let Some(path) = &args.chart {
        std::fs::write(path, chart::render(&scenario, &report)).map_err(|e| {
            CliError::other(format!("cannot write the chart to {}: {e}", path.display()))
        })?;
    }
    print!("{out}");
    Ok(())
}

//! `tripline simulate FILE`: replay a fault scenario against real breakers
//! in virtual time and report what happened and what it cost.
//!
//! All the work is in `tripline-sim`; this file maps arguments to it and
//! its errors to exit statuses. Output is built completely before anything
//! is printed, so a failure leaves stdout empty.

use std::io::Read;
use std::path::{Path, PathBuf};

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
    /// The per-second series of every breaker (outcomes, load on the
    /// dependency, replicas open and half-open), to plot.
    Csv,
}

/// Options of `tripline simulate`.
#[derive(Args, Debug)]
pub(crate) struct SimulateArgs {
    /// The scenario file (TOML): traffic, faults and breaker tables; `-`
    /// reads it from stdin.
    file: PathBuf,
    /// Report format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,
    /// Also write a chart: state bands, outcomes per second, fault
    /// intervals and downstream load, per breaker; SVG, or PNG when the
    /// file ends in .png.
    #[arg(long, value_name = "OUT.svg|OUT.png")]
    chart: Option<PathBuf>,
    /// List every transition in the text report; by default repeated
    /// failed probe rounds of a replica are collapsed into one row.
    #[arg(long, short)]
    verbose: bool,
}

pub(crate) fn run(args: &SimulateArgs) -> Result<(), CliError> {
    crate::chart_file::check(args.chart.as_deref())?;
    let scenario = load(&args.file)?;
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
        Format::Csv => {
            let runs: Vec<(&str, &[tripline_sim::report::series::Second])> = report
                .runs
                .iter()
                .map(|r| (r.breaker.as_str(), r.series.as_slice()))
                .collect();
            tripline_sim::report::series::csv(&runs)
        }
    };
    if let Some(path) = &args.chart {
        crate::chart_file::write(path, &chart::render(&scenario, &report))?;
    }
    print!("{out}");
    Ok(())
}

/// The scenario at `path` (`-`: stdin). A file of another kind — a breaker
/// or proxy config — is named as such, with the command that reads it.
fn load(path: &Path) -> Result<Scenario, CliError> {
    let (name, bytes) = if path == Path::new("-") {
        let mut bytes = Vec::new();
        std::io::stdin()
            .read_to_end(&mut bytes)
            .map_err(|e| CliError::input(format!("<stdin>: cannot read the scenario: {e}")))?;
        ("<stdin>".to_owned(), bytes)
    } else {
        let bytes = std::fs::read(path).map_err(|e| {
            CliError::input(format!("{}: cannot read the file: {e}", path.display()))
        })?;
        (path.display().to_string(), bytes)
    };
    let text =
        tripline_sim::scenario::text(&name, &bytes).map_err(|e| CliError::input(e.to_string()))?;
    Scenario::from_toml(&name, text).map_err(|e| {
        let hint = if tripline_proxy::config::ProxyConfig::looks_like_proxy_config(text) {
            format!("\n{name} looks like a proxy config; run it with `tripline proxy --config {name}` or check it with `tripline check {name}`")
        } else if crate::kind::looks_like_breaker_config(text) {
            format!("\n{name} looks like a breaker config, not a scenario; validate it with `tripline check {name}`, or paste it into a scenario's [[breaker]] table to simulate it")
        } else {
            String::new()
        };
        CliError::input(format!("{e}{hint}"))
    })
}

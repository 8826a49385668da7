//! `tripline sweep FILE --grid KEY=V1,V2,...`: the cartesian product of
//! breaker parameters on one scenario, run on every core and ranked.
//!
//! A progress bar goes to stderr (only when it is a terminal); the ranking
//! goes to stdout once everything has run, so a failure leaves it empty.

use std::path::PathBuf;

use clap::{Args, ValueEnum};
use indicatif::{ProgressBar, ProgressStyle};
use tripline_sim::sweep::output;
use tripline_sim::{Grid, Scenario, Sweep};

use crate::CliError;

/// Output formats of `sweep`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum Format {
    /// The best configs as a ranked table.
    Text,
    /// Every config, in the JSON schema documented in `tripline_sim::sweep::output`.
    Json,
    /// Every config, one CSV row each, best first.
    Csv,
}

/// How configs are ranked, shown under `tripline sweep --help`.
const SCORE_HELP: &str = "\
Ranking, lower is better: score = detection + 5s × false trips + collateral + load + lockstep, where
- detection sums the detection delays of the faults with expect_trip = true
  (a fault never tripped on counts its whole length),
- false trips are trips on faults with expect_trip = false or before any fault,
- collateral is the healthy calls rejected ÷ the calls per second of all replicas,
- load is the calls still sent to a failing dependency after the trip ÷ the same rate,
- lockstep is 10s × the share of replicas probing in the same second, per outage.
Rows whose scores are equal to the millisecond are marked as ties (rank `3=`).";

/// Options of `tripline sweep`.
///
/// Score (lower is better): see `SCORE_HELP` and `tripline_sim::score`.
#[derive(Args, Debug)]
#[command(after_help = SCORE_HELP)]
pub(crate) struct SweepArgs {
    /// The scenario file; its first breaker table is the base config
    /// unless `--breaker` names another.
    file: PathBuf,
    /// The `[[breaker]]` (by name) whose parameters are swept.
    #[arg(long, value_name = "NAME")]
    breaker: Option<String>,
    /// A key of the breaker table (dotted for nested ones) and its values,
    /// e.g. `minimum_calls=5,10,20` or `open_duration=2s,5s,10s`; repeat
    /// for more keys.
    #[arg(long = "grid", value_name = "KEY=V1,V2,...", required = true)]
    grid: Vec<String>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,
    /// Also write a chart of detection delay against false trips and
    /// collateral rejections; SVG, or PNG when the file ends in .png.
    #[arg(long, value_name = "OUT.svg|OUT.png")]
    chart: Option<PathBuf>,
}

pub(crate) fn run(args: &SweepArgs) -> Result<(), CliError> {
    crate::chart_file::check(args.chart.as_deref())?;
    let scenario = Scenario::load(&args.file).map_err(|e| CliError::input(e.to_string()))?;
    let grid = Grid::parse(&args.grid)
        .map_err(|m| CliError::input(format!("{}: {m}", args.file.display())))?;
    let bar = ProgressBar::new(grid.len() as u64);
    if let Ok(style) =
        ProgressStyle::with_template("{bar:40} {pos}/{len} configs, {elapsed} elapsed, eta {eta}")
    {
        bar.set_style(style);
    }
    let tick = || bar.inc(1);
    let sweep = Sweep::run_breaker(&scenario, args.breaker.as_deref(), &grid, &tick);
    bar.finish_and_clear();
    let sweep = sweep.map_err(|e| CliError::input(e.to_string()))?;
    let out = match args.format {
        Format::Text => output::text(&sweep),
        Format::Json => output::json(&sweep),
        Format::Csv => output::csv(&sweep),
    };
    if let Some(path) = &args.chart {
        crate::chart_file::write(path, &output::chart(&sweep))?;
    }
    print!("{out}");
    Ok(())
}

//! `tripline tune --access-log FILE`: breaker parameters recommended from
//! recorded traffic (see `tripline_sim::tune`).
//!
//! The report goes to stdout; `--out` writes the recommended config as a
//! breaker table named after the route, or, when the traffic differs by
//! hour, as a config document with a daily profile for the peak hours. A progress bar goes to stderr when it is a terminal.

use std::fs::File;
use std::io::BufReader;
use std::path::PathBuf;

use clap::{Args, ValueEnum};
use indicatif::{ProgressBar, ProgressStyle};
use tripline::CircuitBreakerConfig;
use tripline_sim::tune::{self, Objective, ReadOptions};

use crate::CliError;

/// Objectives on the command line.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum ObjectiveArg {
    /// Catch outages earliest; a false trip weighs 1 s.
    Sensitive,
    /// The simulator's score: a false trip weighs 5 s.
    Balanced,
    /// Avoid false trips; one weighs 60 s.
    Conservative,
}

impl From<ObjectiveArg> for Objective {
    fn from(o: ObjectiveArg) -> Self {
        match o {
            ObjectiveArg::Sensitive => Objective::Sensitive,
            ObjectiveArg::Balanced => Objective::Balanced,
            ObjectiveArg::Conservative => Objective::Conservative,
        }
    }
}

/// Options of `tripline tune`.
#[derive(Args, Debug)]
pub(crate) struct TuneArgs {
    /// The proxy's JSON access log, or CSV / JSON lines of
    /// `timestamp,outcome,duration[,key]`.
    #[arg(long, value_name = "FILE")]
    access_log: PathBuf,
    /// Only this route (proxy logs) or key (plain logs).
    #[arg(long, value_name = "NAME")]
    route: Option<String>,
    /// Which trade-off the recommendation takes.
    #[arg(long, value_enum, default_value_t = ObjectiveArg::Balanced)]
    objective: ObjectiveArg,
    /// Write the recommended breaker config (TOML) here.
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
    /// Also write the recorded traffic as a scenario file (with the
    /// recommended breaker) for `tripline simulate` and `sweep`.
    #[arg(long, value_name = "FILE")]
    emit_scenario: Option<PathBuf>,
    /// Also draw the recorded failure and slow shares with each
    /// objective's trips marked; SVG, or PNG when the file ends in .png.
    #[arg(long, value_name = "OUT.svg|OUT.png")]
    chart: Option<PathBuf>,
    /// The outages, instead of detecting them: `FROM..TO`, each an offset
    /// (`90s`), a UTC time of day (`14:02`) or RFC 3339; repeatable.
    #[arg(long, value_name = "FROM..TO")]
    outage: Vec<String>,
    /// Score this breaker config (TOML) on the same traffic and say what
    /// the recommendation would have changed.
    #[arg(long, value_name = "FILE")]
    current: Option<PathBuf>,
    /// Skip malformed lines (counted and the first quoted) instead of refusing the log.
    #[arg(long)]
    skip_bad_lines: bool,
}

pub(crate) fn run(args: &TuneArgs) -> Result<(), CliError> {
    let name = args.access_log.display().to_string();
    crate::chart_file::check(args.chart.as_deref())?;
    let file = File::open(&args.access_log)
        .map_err(|e| CliError::input(format!("{name}: cannot open: {e}")))?;
    let options = ReadOptions {
        route: args.route.clone(),
        skip_bad_lines: args.skip_bad_lines,
    };
    let traffic = tune::read::read(BufReader::with_capacity(1 << 20, file), &options)
        .map_err(|e| CliError::input(format!("{name}: {e}")))?;
    if traffic.bad_lines > 0 {
        eprintln!(
            "tripline: {name}: skipped {} malformed line(s) of {}",
            traffic.bad_lines, traffic.lines
        );
    }
    let labelled = if args.outage.is_empty() {
        None
    } else {
        let ranges = args
            .outage
            .iter()
            .map(|o| tune::outage::parse_range(o, &traffic))
            .collect::<Result<Vec<_>, _>>()
            .map_err(CliError::input)?;
        Some(ranges)
    };
    let current = match &args.current {
        Some(path) => Some(read_config(path)?),
        None => None,
    };
    let bar = ProgressBar::new(0);
    if let Ok(style) = ProgressStyle::with_template("{bar:40} {pos} configs, {elapsed} elapsed") {
        bar.set_style(style);
    }
    let tick = || bar.inc(1);
    let tuning = tune::recommend::tune(&traffic, labelled, current, &tick);
    bar.finish_and_clear();
    let tuning = tuning.map_err(|m| CliError::input(format!("{name}: {m}")))?;
    let objective = Objective::from(args.objective);
    let periods = tune::daytime::tune_periods(&traffic, &tuning, &tick)
        .map_err(|m| CliError::input(format!("{name}: {m}")))?;
    print!("{}", tune::recommend::text(&tuning, objective));
    let name = breaker_name(args.route.as_deref(), &traffic.routes);
    print!("{}", tune::daytime::text(&periods, objective, &name));
    if let Some(path) = &args.out {
        let text = match tune::daytime::document_toml(&periods, objective, &name) {
            // One config per period: a config document whose profile
            // switches to the peak config at the peak hours.
            Some(document) => document,
            None => {
                let mut config = tuning.pick(objective).0.clone();
                config.name = name.clone();
                tune::recommend::config_toml(&config)
            }
        };
        std::fs::write(path, text)
            .map_err(|e| CliError::other(format!("{}: cannot write: {e}", path.display())))?;
    }
    if let Some(path) = &args.chart {
        crate::chart_file::write(path, &tune::chart::render(&tuning, &traffic.seconds))?;
    }
    if let Some(path) = &args.emit_scenario {
        let (config, _) = tuning.pick(objective);
        std::fs::write(path, tune::scenario::scenario_toml(&tuning, config))
            .map_err(|e| CliError::other(format!("{}: cannot write: {e}", path.display())))?;
    }
    Ok(())
}

/// The name the written config gives its breaker: the route it was tuned
/// for (a route's breaker is named after its route, so the table fits
/// `breaker = {…}` and `tripline config push` alike), the log's only
/// route, or `tuned` when the log mixes routes.
fn breaker_name(route: Option<&str>, routes: &std::collections::BTreeSet<String>) -> String {
    match (route, routes.len()) {
        (Some(route), _) => route.to_owned(),
        (None, 1) => routes.iter().next().cloned().unwrap_or_default(),
        _ => "tuned".to_owned(),
    }
}

/// A breaker table from a TOML file, validated.
fn read_config(path: &std::path::Path) -> Result<CircuitBreakerConfig, CliError> {
    let name = path.display().to_string();
    let text = std::fs::read_to_string(path)
        .map_err(|e| CliError::input(format!("{name}: cannot read: {e}")))?;
    let config: CircuitBreakerConfig =
        toml::from_str(&text).map_err(|e| CliError::input(format!("{name}: {e}")))?;
    config
        .validate()
        .map_err(|e| CliError::input(format!("{name}: {e}")))?;
    Ok(config)
}

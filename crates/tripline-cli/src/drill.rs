//! `tripline drill DRILL.toml`: a fault-injection drill against a proxy,
//! judged against its expectations (see `tripline_drill`).
//!
//! Exit status: 0 every expectation held, 1 one failed, 2 the drill's
//! abort rule stopped it, 3 it could not run (a bad drill file, naming the
//! field and line; a target that does not answer; Ctrl-C). A drill file is
//! input a drill could not run with, so it is 3 here rather than the 2 of
//! the other commands: 2 is the abort rule's.
//!
//! The drill engine is the cargo feature `drill` (on by default); a build
//! without it (the README's quick first build) keeps the command and says
//! how to get it.

use std::path::PathBuf;

use clap::{Args, ValueEnum};
#[cfg(feature = "drill")]
use tripline_drill::{Drill, compare, render};

use crate::CliError;

/// Report formats of `drill`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum Format {
    /// The verdict table, the load's counts and the transitions seen.
    Text,
    /// Every row and measurement as JSON.
    Json,
}

/// Options of `tripline drill`.
#[derive(Args, Debug)]
#[cfg_attr(not(feature = "drill"), allow(dead_code))]
pub(crate) struct DrillArgs {
    /// The drill file (TOML): target, load, phases, abort rule, expectations.
    file: PathBuf,
    /// Report format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,
    /// Also write a JUnit XML report (one testcase per expectation).
    #[arg(long, value_name = "FILE")]
    junit: Option<PathBuf>,
    /// Simulate this scenario too and print simulated against measured
    /// for the keys both know.
    #[arg(long, value_name = "SCENARIO")]
    compare_sim: Option<PathBuf>,
}

fn could_not_run(message: impl Into<String>) -> CliError {
    CliError {
        message: message.into(),
        status: 3,
    }
}

/// Without the drill engine: the command exists and says how to get it.
#[cfg(not(feature = "drill"))]
pub(crate) fn run(_args: &DrillArgs) -> Result<(), CliError> {
    Err(could_not_run(
        "this tripline was built without drills (cargo feature `drill`); build it with the default features",
    ))
}

#[cfg(feature = "drill")]
pub(crate) fn run(args: &DrillArgs) -> Result<(), CliError> {
    let drill = Drill::load(&args.file).map_err(|e| could_not_run(e.to_string()))?;
    // Simulated first: a bad scenario fails before any load is sent.
    let simulated = match &args.compare_sim {
        Some(path) => {
            Some(compare::simulate(&drill, path).map_err(|e| could_not_run(e.to_string()))?)
        }
        None => None,
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| could_not_run(format!("cannot start the runtime: {e}")))?;
    let outcome = runtime
        .block_on(tripline_drill::run(&drill))
        .map_err(|e| could_not_run(e.to_string()))?;
    let compared = match (&args.compare_sim, &simulated) {
        (Some(scenario), Some(sim)) => Some((scenario, sim, compare::compare(sim, &outcome))),
        _ => None,
    };
    let out = match (args.format, compared) {
        (Format::Text, None) => render::text(&drill, &outcome),
        (Format::Text, Some((scenario, sim, rows))) => {
            render::text(&drill, &outcome) + &compare::text(scenario, sim, &rows)
        }
        (Format::Json, None) => render::json(&outcome),
        // One JSON document: the comparison joins the outcome's object.
        (Format::Json, Some((scenario, sim, rows))) => {
            let mut value = serde_json::to_value(&outcome).unwrap_or_default();
            value["compare_sim"] = serde_json::json!({
                "scenario": scenario.display().to_string(),
                "breaker": sim.breaker,
                "rows": rows,
            });
            let mut s = serde_json::to_string_pretty(&value).unwrap_or_default();
            s.push('\n');
            s
        }
    };
    if let Some(path) = &args.junit {
        std::fs::write(path, render::junit(&outcome)).map_err(|e| {
            could_not_run(format!(
                "cannot write the JUnit report to {}: {e}",
                path.display()
            ))
        })?;
    }
    print!("{out}");
    match outcome.exit_code() {
        0 => Ok(()),
        1 => Err(CliError {
            message: format!(
                "drill failed: {} of {} expectations failed",
                outcome.rows.iter().filter(|r| !r.pass).count(),
                outcome.rows.len()
            ),
            status: 1,
        }),
        code => Err(CliError {
            message: format!(
                "drill aborted: {}",
                outcome.aborted.as_deref().unwrap_or("by its abort rule")
            ),
            status: code,
        }),
    }
}

//! The `tripline` command: thin argument parsing over the library crates.
//!
//! Exit status: 0 on success, 2 on bad input (a config or scenario that
//! fails validation), 1 on any other error; `drill` has its own statuses
//! (see `drill.rs`). Log lines from the library and the proxy go to stderr
//! through the subscriber in `logging.rs`.

mod allocator;
mod chart_file;
mod check;
mod config_cmd;
mod demo;
mod demo_live;
mod drill;
mod kind;
mod logging;
mod proxy;
mod run;
mod simulate;
mod sweep;
mod tune;
mod words;

use std::process::ExitCode;

use clap::error::{ContextKind, ContextValue, ErrorKind};
use clap::{Parser, Subcommand};

/// Fault tolerance for services that call other services.
#[derive(Parser, Debug)]
#[command(name = "tripline", version, about)]
struct Cli {
    /// Log level or `RUST_LOG`-style directives for the lines on stderr
    /// (default: `info` for `proxy`, `error` for `demo`, `warn` otherwise;
    /// `RUST_LOG` when set).
    #[arg(long, global = true, value_name = "LEVEL")]
    log_level: Option<String>,
    /// Log lines as text or as one JSON object per line.
    #[arg(long, global = true, value_enum, default_value_t = logging::LogFormat::Text)]
    log_format: logging::LogFormat,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Drive a breaker through a scripted failing dependency on a virtual
    /// clock and print every transition with its reason and window;
    /// with `--live`, the real proxy and its live dashboard instead.
    Demo(demo::DemoArgs),
    /// Replay a fault scenario (TOML) against real breakers in virtual time
    /// and report every transition and what it cost.
    Simulate(simulate::SimulateArgs),
    /// Run the cartesian product of breaker parameters on a scenario, in
    /// parallel, ranked by score.
    Sweep(sweep::SweepArgs),
    /// Validate a breaker or proxy config file and print its warnings.
    Check(check::CheckArgs),
    /// Run the HTTP sidecar proxy: routes, clusters, breakers, retry
    /// budgets and outlier detection from a config file; drains on
    /// SIGTERM or Ctrl-C.
    Proxy(proxy::ProxyArgs),
    /// The fleet's dynamic config in etcd: status, push, rollback.
    Config(config_cmd::ConfigArgs),
    /// Run a fault-injection drill against a proxy: real load, faults
    /// through its admin API, a verdict per expectation (exit 0 all held,
    /// 1 one failed, 2 aborted by its abort rule, 3 could not run).
    Drill(drill::DrillArgs),
    /// Run a command behind a circuit breaker kept in a state file (CI/CD
    /// steps, cron jobs); fails fast with exit 75 while it is open.
    Run(run::RunArgs),
    /// Recommend breaker parameters from recorded traffic (a proxy's
    /// access log, or CSV/JSON lines of timestamp, outcome, duration).
    Tune(tune::TuneArgs),
}

fn main() -> ExitCode {
    allocator::configure();
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return usage_error(e),
    };
    let default_level = match cli.command {
        Command::Proxy(_) => "info",
        // The demo prints every transition and ejection itself: the same
        // events as log lines would say everything twice.
        Command::Demo(_) => "error",
        _ => "warn",
    };
    if let Err(e) = logging::install(cli.log_level.as_deref(), cli.log_format, default_level) {
        eprintln!("tripline: {}", e.message);
        return ExitCode::from(e.status);
    }
    let result = match cli.command {
        Command::Demo(args) => demo::run(&args),
        Command::Simulate(args) => simulate::run(&args),
        Command::Sweep(args) => sweep::run(&args),
        Command::Check(args) => check::run(&args),
        Command::Proxy(args) => proxy::run(&args),
        Command::Config(args) => config_cmd::run(&args),
        Command::Drill(args) => drill::run(&args),
        Command::Tune(args) => tune::run(&args),
        Command::Run(args) => return run::run(&args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("tripline: {}", e.message);
            ExitCode::from(e.status)
        }
    }
}

/// Prints clap's error (exit 2) or help (exit 0). A command given to
/// `tripline run` without `--` before it is the commonest slip there, and
/// clap alone only says "unexpected argument": say where the `--` goes.
fn usage_error(mut e: clap::Error) -> ExitCode {
    let args: Vec<_> = std::env::args_os().skip(1).collect();
    let in_run = args.iter().take_while(|a| *a != "--").any(|a| a == "run");
    if in_run && e.kind() == ErrorKind::UnknownArgument {
        e.insert(
            ContextKind::Suggested,
            ContextValue::StyledStrs(vec![
                "put `--` before the command: tripline run [OPTIONS] -- CMD ARGS".into(),
            ]),
        );
    }
    let _ = e.print();
    ExitCode::from(u8::try_from(e.exit_code()).unwrap_or(2))
}

/// An error for the user, with the exit status it maps to.
#[derive(Debug)]
pub(crate) struct CliError {
    pub(crate) message: String,
    pub(crate) status: u8,
}

impl CliError {
    /// Bad input: exit status 2.
    pub(crate) fn input(message: impl Into<String>) -> Self {
        CliError {
            message: message.into(),
            status: 2,
        }
    }

    /// Any other failure (an unwritable output file): exit status 1.
    pub(crate) fn other(message: impl Into<String>) -> Self {
        CliError {
            message: message.into(),
            status: 1,
        }
    }
}

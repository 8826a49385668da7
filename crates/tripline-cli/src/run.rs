//! `tripline run`: a circuit breaker around one command, for CI/CD
//! pipeline steps and cron jobs.
//!
//! A pipeline step is a short-lived process, so an in-memory breaker
//! forgets everything when it exits. Here every run rebuilds the breaker
//! named `--breaker` from a state file, asks it for a permit, runs the
//! command (or fails fast), records the outcome and saves the state again.
//! Every decision — the trip, the open duration and its backoff, the probe
//! round — is the library's; this module only carries state between
//! processes and keeps many processes on one runner from tripping over
//! each other.
//!
//! # How the state crosses processes
//!
//! The library's aggregate [`tripline::breaker::Snapshot`] is not enough:
//! restored, its window lands in the current bucket (and would never age
//! out across many short runs), a half-open round restarts in every
//! process (unlimited probes), and its wall-clock deadline is read from the
//! real clock (no test override). So the state file holds an exact
//! *checkpoint* plus a bounded *probe log* (see [`state`]):
//!
//! * **Closed** — the window's exact contents
//!   ([`tripline::breaker::WindowContents`]: each live bucket at its start
//!   time, or a count window's outcomes in order). The breaker runs on a
//!   [`ManualClock`](tripline::clock::ManualClock) that reads wall-clock
//!   nanoseconds since the Unix epoch, so buckets saved by one process age
//!   out on time in the next. Nothing is replayed, so nothing can be
//!   invented: the window is the saved one.
//! * **Open** — the deadline and the backoff round: exact, restored with
//!   `open_until` on the same wall-time clock.
//! * **Half-open** — the Open checkpoint plus the log of this round's probe
//!   admissions and outcomes, replayed through the real breaker at their
//!   wall times. The log is bounded by one round (the policy's probe
//!   count); any transition writes a new checkpoint and clears it.
//!
//! Every checkpoint change bumps an *epoch*. A run remembers the epoch it
//! was admitted in; if the breaker moved on while the command ran (it
//! tripped, or the probe round ended), the outcome is counted but does not
//! move the new state — the library's generation rule, across processes.
//!
//! Beside the checkpoint the file keeps the breaker's *state times*
//! ([`tripline::breaker::StateTimes`]: when it entered its state, began its
//! warm-up, last recovered), restored into every rebuilt breaker, so
//! `warm_up`, `cooldown` and `min_state_duration` count from the runs that
//! started them, as in a long-lived breaker.
//!
//! # Probes are leases
//!
//! A probe admission is written to the log as a lease `{id, pid, owner,
//! expires_at}` before the command starts. While the lease is held, the
//! replayed breaker holds that probe's permit, so half-open admits at most
//! the policy's number of probes across all processes. The owner is the
//! pid's start time, boot id and pid namespace (see [`owner`]): a later run
//! in the same boot and namespace that finds the owner dead (`kill -9`: the
//! pid gone, a zombie, or reused by another process) frees the slot at once
//! and counts the lease as **abandoned** — a killed probe says nothing of
//! the dependency. A lease that outlives its expiry (`--timeout` plus a
//! minute, else an hour) — or whose owner cannot be judged from here, as
//! from another container — is reclaimed when it expires and counted as a
//! **failed probe**: a probe that never reported back in time is no
//! evidence of recovery.
//!
//! # Locking and crash safety
//!
//! An advisory lock (`File::lock`) on `<name>.lock` is held only around
//! each read–decide–write, never while the command runs. The state is
//! written to a temp file and renamed over `<name>.json`, so a crash of
//! the process at any point leaves the old or the new state. A write that
//! changes a decision (the state, a lease) is fsynced, file and directory;
//! one that only adds evidence (most closed runs) is not, which on a power
//! loss may cost a few runs of evidence (see `Store::write`). A state file
//! that does not parse is reported on stderr and replaced by a fresh
//! breaker.
//!
//! # A shared store
//!
//! With `--store etcd://HOST:PORT/PREFIX` (or `TRIPLINE_STORE`, or
//! `[store] url`) the same state lives in etcd instead, shared by every
//! runner on every host: each read–decide–write is one transaction guarded
//! by the state key's revision, and a probe's lease is an etcd lease its
//! run renews (see [`store_etcd`]). When etcd cannot be reached,
//! `on_store_error` decides: `run` (default) runs the command without the
//! breaker, `refuse` exits 69.
//!
//! # Exit codes
//!
//! The command's own exit code (128 + signal if it was killed, 124 on
//! `--timeout`, 127 if it could not be started); `--open-exit-code`
//! (default 75, `EX_TEMPFAIL`) when the breaker is open and the command was
//! not run; 69 (`EX_UNAVAILABLE`) when the shared store cannot be reached
//! and `on_store_error = "refuse"`; 2 on bad input (the command is never
//! run); 1 when the state could not be saved.

mod backend;
mod clock;
mod config;
mod exec;
mod export;
mod ops;
mod owner;
mod rebuild;
mod state;
mod store;
mod store_etcd;
mod store_spec;

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{ArgGroup, Args};

use crate::CliError;

/// Arguments of `tripline run`.
#[derive(Args, Debug)]
#[command(group(
    ArgGroup::new("operation")
        .args(["breaker", "status", "reset", "force_open"])
        .required(true)
))]
pub(crate) struct RunArgs {
    /// The breaker guarding the command (also names its state file).
    #[arg(long, value_name = "NAME")]
    breaker: Option<String>,
    /// Print the breaker's state and exit.
    #[arg(long, value_name = "NAME")]
    status: Option<String>,
    /// Operator: close the breaker with an empty window (also leaves a
    /// forced open).
    #[arg(long, value_name = "NAME")]
    reset: Option<String>,
    /// Operator: hold the breaker open until `--reset`.
    #[arg(long = "force-open", value_name = "NAME")]
    force_open: Option<String>,
    /// Breaker config (TOML, YAML or JSON, the library's vocabulary);
    /// default: failure rate ≥ 50% over the last 10 minutes, at least 5
    /// runs, 30 s open, 3 probes.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Where state files live; default `$XDG_STATE_HOME/tripline`
    /// (`~/.local/state/tripline`).
    #[arg(long, value_name = "DIR")]
    state_dir: Option<PathBuf>,
    /// Keep the breaker in etcd, shared by every runner that names it:
    /// `etcd://HOST:PORT/PREFIX`. Also `TRIPLINE_STORE`, or `[store] url`
    /// in a TOML `--config` (flag over environment over file). Default:
    /// the state dir.
    #[arg(long, value_name = "URL")]
    store: Option<String>,
    /// When the store cannot be reached: `run` the command without the
    /// breaker (default; warns once, counts it) or `refuse` (exit 69).
    #[arg(long, value_name = "WHAT", value_enum)]
    on_store_error: Option<store_spec::OnStoreError>,
    /// Kill the command (SIGTERM, then SIGKILL 10 s later) after this long
    /// and count a failure; exit 124.
    #[arg(long, value_name = "DURATION", value_parser = parse_timeout)]
    timeout: Option<Duration>,
    /// Exit codes that count as failures (comma-separated); other non-zero
    /// codes are ignored by the breaker. Default: every non-zero code.
    #[arg(long, value_name = "CODES", value_delimiter = ',', value_parser = clap::value_parser!(u8).range(1..))]
    fail_on_exit: Vec<u8>,
    /// Exit status while the breaker is open and the command is not run.
    #[arg(long, value_name = "CODE", default_value_t = 75, value_parser = clap::value_parser!(u8).range(1..))]
    open_exit_code: u8,
    /// Write `<NAME>.prom` into this directory for node_exporter's textfile
    /// collector.
    #[arg(long, value_name = "DIR")]
    textfile: Option<PathBuf>,
    /// Push the metrics to this Prometheus Pushgateway (`http://host:9091`).
    #[arg(long, value_name = "URL")]
    pushgateway: Option<String>,
    /// For tests only: read "now" from this file (RFC 3339 or Unix
    /// seconds) instead of the wall clock; `TRIPLINE_NOW` does the same.
    #[arg(long, value_name = "FILE", hide = true)]
    clock_file: Option<PathBuf>,
    /// The command and its arguments, after `--`.
    #[arg(last = true, value_name = "CMD")]
    command: Vec<OsString>,
}

fn parse_timeout(s: &str) -> Result<Duration, String> {
    let d = humantime::parse_duration(s).map_err(|e| format!("{e} (e.g. 30s, 10m)"))?;
    if d.is_zero() {
        return Err("must be longer than zero".into());
    }
    Ok(d)
}

/// Runs `tripline run`; the exit code is the command's (see the module docs).
pub(crate) fn run(args: &RunArgs) -> ExitCode {
    match dispatch(args) {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("tripline: {}", e.message);
            ExitCode::from(e.status)
        }
    }
}

fn dispatch(args: &RunArgs) -> Result<u8, CliError> {
    let (name, op) = match (&args.breaker, &args.status, &args.reset, &args.force_open) {
        (Some(n), ..) => (n, ops::Op::Run),
        (_, Some(n), ..) => (n, ops::Op::Status),
        (_, _, Some(n), _) => (n, ops::Op::Reset),
        (.., Some(n)) => (n, ops::Op::ForceOpen),
        _ => {
            return Err(CliError::input(
                "one of --breaker, --status, --reset, --force-open is required",
            ));
        }
    };
    config::check_name(name)?;
    if op != ops::Op::Run && !args.command.is_empty() {
        return Err(CliError::input(
            "a command is only run with --breaker NAME -- CMD; --status, --reset and --force-open take none",
        ));
    }
    if op == ops::Op::Run && args.command.is_empty() {
        return Err(CliError::input(
            "missing command: tripline run --breaker NAME -- CMD ARGS...",
        ));
    }
    let cfg = config::load(name, args.config.as_deref())?;
    let now = clock::WallClock::from_args(args.clock_file.as_deref())?;
    let spec = store_spec::resolve(
        args.store.as_deref(),
        args.on_store_error,
        args.config.as_deref(),
    )?;
    let local = store::Store::open(args.state_dir.clone(), name)?;
    let store = match &spec.etcd {
        None => backend::Backend::File(local),
        Some(url) => backend::Backend::Etcd(
            Box::new(store_etcd::EtcdStore::open(url, &spec, name)?),
            local,
        ),
    };
    let ctx = ops::Context {
        name,
        config: cfg,
        store,
        clock: now,
        exports: export::Exports::new(args.textfile.clone(), args.pushgateway.clone(), name)?,
        on_store_error: spec.on_error,
        warned: std::cell::Cell::new(false),
    };
    match op {
        ops::Op::Run => ops::run_command(
            &ctx,
            &exec::Spec {
                command: &args.command,
                timeout: args.timeout,
                fail_on_exit: &args.fail_on_exit,
            },
            args.open_exit_code,
        ),
        ops::Op::Status => ops::status(&ctx),
        ops::Op::Reset => ops::operator(&ctx, state::Operator::Reset),
        ops::Op::ForceOpen => ops::operator(&ctx, state::Operator::ForceOpen),
    }
}

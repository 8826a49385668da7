//! `tripline config …`: the fleet's dynamic config in etcd, from the
//! operator's side.
//!
//! - `status --breakers` sums the breakers the instances report (see
//!   [`fleet`]): "payments: open on 3 of 5 instances (…) for 42 s".
//! - `status` lists every live instance's leased status key: the config
//!   version and etcd revision it applied, whether it is a canary of the
//!   current rollout, and its last refusal — how far a rollout has reached.
//! - `push FILE` validates a document exactly as every instance will,
//!   and writes it only if it passes: a typo is caught here, not refused
//!   by the whole fleet. `--dry-run` prints what it would change (a table
//!   patches each instance's own config: see [`dry_run`]) and writes nothing.
//! - `force-open NAME --for 10m --reason TEXT`, `disable NAME …` and
//!   `clear NAME` write a fleet-wide override into the document (see
//!   [`overrides`]): every instance holds the breaker until the override
//!   ends by itself, and audits it with its author and reason.
//! - `check FILE --at TIME` validates a document offline and says which
//!   `[[profile]]` holds at TIME (see [`check_doc`]).
//! - `rollback --revision R` pushes again the document etcd held at
//!   revision R (etcd keeps history until compaction), so the whole fleet
//!   rolls back, audited as a new change.

mod bare_table;
pub(crate) mod check_doc;
mod dry_run;
mod fleet;
mod kinds;
mod overrides;

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Subcommand};
use tripline_config::etcd::{Gateway, document_at, fleet_status, push_document};
use tripline_config::{Document, OverrideState};

use crate::CliError;

/// Options of `tripline config`.
#[derive(Args, Debug)]
pub(crate) struct ConfigArgs {
    /// etcd's client URL (its v3 JSON gateway), e.g. http://127.0.0.1:2379.
    #[arg(long, global = true, default_value = "http://127.0.0.1:2379")]
    etcd: String,
    /// The fleet's key prefix: the document is `<prefix>/config`, statuses
    /// `<prefix>/status/<instance>`.
    #[arg(long, global = true, default_value = "/tripline")]
    prefix: String,
    #[command(subcommand)]
    action: ConfigAction,
}

#[derive(Subcommand, Debug)]
enum ConfigAction {
    /// Show every instance's applied version, canary flag and last error.
    Status {
        /// Instead, sum the fleet's breakers: each one's state on how many
        /// instances, which, and for how long.
        #[arg(long)]
        breakers: bool,
    },
    /// Validate a document (TOML or JSON) and write it to etcd if it passes.
    Push {
        /// The document.
        file: PathBuf,
        /// Print the effective change per kind of instance; write nothing.
        #[arg(long)]
        dry_run: bool,
    },
    /// Hold a breaker forced open on every instance, until --for/--until.
    ForceOpen(overrides::HoldArgs),
    /// Hold a breaker disabled (admitting every call) on every instance.
    Disable(overrides::HoldArgs),
    /// Lift the fleet override of a breaker: every instance resets it.
    Clear {
        /// The breaker.
        name: String,
    },
    /// Validate a document without etcd, and say which profile holds at --at.
    Check {
        /// The document.
        file: PathBuf,
        /// When (RFC 3339, e.g. 2026-12-07T10:00:00Z); default now.
        #[arg(long, value_parser = humantime::parse_rfc3339_weak)]
        at: Option<std::time::SystemTime>,
    },
    /// Push again the document etcd held at an earlier revision.
    Rollback {
        /// The etcd revision to restore (see `status`'s REVISION column).
        #[arg(long)]
        revision: i64,
    },
}

pub(crate) fn run(args: &ConfigArgs) -> Result<(), CliError> {
    if let ConfigAction::Check { file, at } = &args.action {
        return check_doc::check_document(file, *at);
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| CliError::other(format!("cannot start the runtime: {e}")))?;
    let gateway = Gateway::new(args.etcd.clone(), Duration::from_secs(5));
    runtime.block_on(async {
        match &args.action {
            ConfigAction::Status { breakers } => status(&gateway, &args.prefix, *breakers).await,
            ConfigAction::Push { file, dry_run } => {
                push(&gateway, &args.prefix, file, *dry_run).await
            }
            ConfigAction::ForceOpen(hold) => {
                overrides::hold(&gateway, &args.prefix, OverrideState::ForcedOpen, hold).await
            }
            ConfigAction::Disable(hold) => {
                overrides::hold(&gateway, &args.prefix, OverrideState::Disabled, hold).await
            }
            ConfigAction::Clear { name } => overrides::clear(&gateway, &args.prefix, name).await,
            ConfigAction::Check { .. } => Ok(()),
            ConfigAction::Rollback { revision } => {
                rollback(&gateway, &args.prefix, *revision).await
            }
        }
    })
}

async fn status(gateway: &Gateway, prefix: &str, breakers: bool) -> Result<(), CliError> {
    let fleet = fleet_status(gateway, prefix)
        .await
        .map_err(|e| CliError::other(e.to_string()))?;
    if breakers {
        let now = tripline::clock::system_time_after(Duration::ZERO)
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
        for line in fleet::summary(&fleet, now) {
            println!("{line}");
        }
        return Ok(());
    }
    if fleet.is_empty() {
        println!("no instance reports under {prefix}/status/");
        return Ok(());
    }
    let width = fleet
        .iter()
        .map(|s| s.instance.len())
        .max()
        .unwrap_or(0)
        .max(8);
    println!(
        "{:<width$}  {:>7}  {:>8}  {:<6}  {:<6}  LAST ERROR",
        "INSTANCE", "VERSION", "REVISION", "CANARY", "PHASE"
    );
    for s in &fleet {
        println!(
            "{:<width$}  {:>7}  {:>8}  {:<6}  {:<6}  {}",
            s.instance,
            s.version,
            s.revision.as_deref().unwrap_or("-"),
            if s.canary { "yes" } else { "no" },
            s.phase.as_deref().unwrap_or("-"),
            s.last_error.as_deref().unwrap_or("-"),
        );
    }
    let canaries = fleet.iter().filter(|s| s.canary).count();
    println!(
        "{} instance(s), {canaries} canary, versions {}",
        fleet.len(),
        version_range(&fleet)
    );
    Ok(())
}

fn version_range(fleet: &[tripline_config::InstanceStatus]) -> String {
    let min = fleet.iter().map(|s| s.version).min().unwrap_or(0);
    let max = fleet.iter().map(|s| s.version).max().unwrap_or(0);
    if min == max {
        min.to_string()
    } else {
        format!("{min}–{max}")
    }
}

async fn push(
    gateway: &Gateway,
    prefix: &str,
    file: &PathBuf,
    dry_run: bool,
) -> Result<(), CliError> {
    let path = file.display();
    let bytes = std::fs::read(file).map_err(|e| CliError::input(format!("{path}: {e}")))?;
    let (bytes, wrapped) = bare_table::as_document(&bytes);
    if wrapped {
        println!("{path}: one breaker table, pushed as a document with that [[breaker]]");
    }
    let (doc, warnings) = Document::parse_and_validate(&bytes)
        .map_err(|e| CliError::input(format!("{path}: {e}")))?;
    for w in &warnings {
        println!(
            "warning: breaker {:?}: `{}` {}",
            w.breaker, w.field, w.message
        );
    }
    let now = tripline::clock::system_time_after(Duration::ZERO);
    overrides::checked(gateway, prefix, &doc, now)
        .await
        .map_err(|e| CliError {
            message: format!("{path}: {}", e.message),
            status: e.status,
        })?;
    let kinds = kinds::live(gateway, prefix).await?;
    if dry_run {
        let current = document_at(gateway, prefix, 0)
            .await
            .map_err(|e| CliError::other(e.to_string()))?;
        // A current document that no longer parses is shown as none.
        let current = current.and_then(|b| Document::parse(&b).ok());
        for line in dry_run::report(current.as_ref(), &doc, &kinds) {
            println!("{line}");
        }
        println!("dry run: nothing written to {prefix}/config");
        return Ok(());
    }
    kinds::refused_by_any(&kinds, &doc).map_err(|e| CliError {
        message: format!("{path}: {}", e.message),
        status: e.status,
    })?;
    let revision = push_document(gateway, prefix, &bytes)
        .await
        .map_err(|e| CliError::other(e.to_string()))?;
    println!(
        "pushed {} breaker(s) to {prefix}/config at revision {revision}",
        doc.breakers.len()
    );
    Ok(())
}

async fn rollback(gateway: &Gateway, prefix: &str, revision: i64) -> Result<(), CliError> {
    let old = document_at(gateway, prefix, revision)
        .await
        .map_err(|e| CliError::input(format!("revision {revision}: {e}")))?
        .ok_or_else(|| {
            CliError::input(format!(
                "{prefix}/config did not exist at revision {revision}"
            ))
        })?;
    // It was accepted once, but validation rules may have tightened since.
    Document::parse_and_validate(&old)
        .map_err(|e| CliError::input(format!("the document of revision {revision}: {e}")))?;
    let new = push_document(gateway, prefix, &old)
        .await
        .map_err(|e| CliError::other(e.to_string()))?;
    println!("pushed the document of revision {revision} again, now revision {new}");
    Ok(())
}

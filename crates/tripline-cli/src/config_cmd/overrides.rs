//! `tripline config force-open | disable | clear NAME`: fleet-wide
//! overrides, written into the fleet's document so every instance applies
//! them from its watch, keeps them through restarts, and ends them by
//! itself at `until`.
//!
//! The document in etcd is read, its override of NAME replaced (or
//! removed), overrides already expired dropped, and the result validated
//! as every instance will — and beyond: `until` must be ahead, and NAME
//! must be a breaker a live instance reports (or one the document
//! configures) — before it is written. A refusal names the field and
//! writes nothing.

use std::time::{Duration, SystemTime};

use clap::Args;
use tripline_config::etcd::{Gateway, fleet_status};
use tripline_config::{Document, FleetOverride, OverrideState};

use crate::CliError;

/// Options of `config force-open` and `config disable`.
#[derive(Args, Debug)]
pub(crate) struct HoldArgs {
    /// The breaker to hold (a proxy's route breaker name).
    name: String,
    /// How long, e.g. 10m; it ends by itself then.
    #[arg(long = "for", value_parser = humantime::parse_duration, conflicts_with = "until")]
    for_: Option<Duration>,
    /// Or until when (RFC 3339, e.g. 2026-12-05T10:00:00Z).
    #[arg(long, value_parser = humantime::parse_rfc3339_weak)]
    until: Option<SystemTime>,
    /// Why: audited on every instance, shown by /api/breakers.
    #[arg(long)]
    reason: String,
    /// Who (default: $USER).
    #[arg(long)]
    author: Option<String>,
}

/// Writes an override holding `args.name` in `state`.
pub(super) async fn hold(
    gateway: &Gateway,
    prefix: &str,
    state: OverrideState,
    args: &HoldArgs,
) -> Result<(), CliError> {
    let now = tripline::clock::system_time_after(Duration::ZERO);
    let until = match (args.for_, args.until) {
        (Some(d), _) if d.is_zero() => {
            return Err(CliError::input("--for must be longer than zero"));
        }
        (Some(d), _) => now + d,
        (None, Some(t)) => t,
        (None, None) => return Err(CliError::input("say how long: --for 10m or --until TIME")),
    };
    let (mut doc, seen) = current(gateway, prefix, now).await?;
    doc.overrides.retain(|o| o.breaker != args.name);
    doc.overrides.push(FleetOverride {
        breaker: args.name.clone(),
        state,
        until,
        reason: args.reason.clone(),
        author: args.author.clone().or_else(|| std::env::var("USER").ok()),
    });
    let revision = write(gateway, prefix, &doc, now, seen).await?;
    let written = doc.overrides.last().map_or(until, |o| o.until);
    println!(
        "fleet override: {} {} until {} (revision {revision})",
        args.name,
        state.as_str(),
        humantime::format_rfc3339_seconds(written)
    );
    Ok(())
}

/// Removes the override of `name`; every instance resets the breaker.
pub(super) async fn clear(gateway: &Gateway, prefix: &str, name: &str) -> Result<(), CliError> {
    let now = tripline::clock::system_time_after(Duration::ZERO);
    let (mut doc, seen) = current(gateway, prefix, now).await?;
    let before = doc.overrides.len();
    doc.overrides.retain(|o| o.breaker != name);
    if doc.overrides.len() == before {
        return Err(CliError::input(format!(
            "no fleet override holds {name:?} in {prefix}/config"
        )));
    }
    let revision = write(gateway, prefix, &doc, now, seen).await?;
    println!("fleet override of {name} lifted (revision {revision})");
    Ok(())
}

/// The document in force, without overrides already expired, and the
/// revision of its last change (0: none yet).
async fn current(
    gateway: &Gateway,
    prefix: &str,
    now: SystemTime,
) -> Result<(Document, i64), CliError> {
    let key = format!("{}/config", prefix.trim_end_matches('/'));
    let (kvs, _) = gateway
        .range(key.as_bytes(), false, 0)
        .await
        .map_err(|e| CliError::other(e.to_string()))?;
    let (mut doc, seen) = match kvs.first() {
        Some(kv) => (
            Document::parse(&kv.value).map_err(|e| {
                CliError::input(format!(
                    "{prefix}/config does not parse ({e}): push a good document first"
                ))
            })?,
            kv.mod_revision,
        ),
        None => (Document::default(), 0),
    };
    doc.overrides.retain(|o| o.until > now);
    Ok((doc, seen))
}

/// Checks `doc` as [`checked`] does, then writes it if the document in
/// etcd is still the one read at `seen` (two operators changing overrides
/// at once must not lose one's change); returns the revision.
async fn write(
    gateway: &Gateway,
    prefix: &str,
    doc: &Document,
    now: SystemTime,
    seen: i64,
) -> Result<i64, CliError> {
    checked(gateway, prefix, doc, now).await?;
    let text = doc.to_toml().map_err(|e| CliError::other(e.to_string()))?;
    let key = format!("{}/config", prefix.trim_end_matches('/'));
    gateway
        .put_if_unchanged(key.as_bytes(), text.as_bytes(), seen)
        .await
        .map_err(|e| CliError::other(e.to_string()))?
        .ok_or_else(|| {
            CliError::other(format!(
                "{prefix}/config changed while this was written (someone else pushed): nothing written; run it again"
            ))
        })
}

/// Validates `doc` as every instance will, and its overrides against `now`
/// and the breakers the live instances report.
pub(super) async fn checked(
    gateway: &Gateway,
    prefix: &str,
    doc: &Document,
    now: SystemTime,
) -> Result<(), CliError> {
    doc.validate().map_err(|e| CliError::input(e.to_string()))?;
    if doc.overrides.is_empty() {
        return Ok(());
    }
    let fleet = fleet_status(gateway, prefix)
        .await
        .map_err(|e| CliError::other(e.to_string()))?;
    let mut known: Vec<String> = fleet
        .iter()
        .flat_map(|s| {
            let breakers = s.breakers.iter().map(|b| b.name.clone());
            breakers.chain(s.families.iter().map(|f| f.name.clone()))
        })
        .collect();
    known.sort();
    known.dedup();
    doc.check_overrides(now, &known)
        .map_err(|e| CliError::input(e.to_string()))
}

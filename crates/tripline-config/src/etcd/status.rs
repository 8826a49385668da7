//! The status loop (leased status key, rollout steps, fleet samples for a
//! baking canary) and the fleet-wide operations the CLI uses.

use std::collections::BTreeMap;

use tripline::CircuitBreakerConfig;

use super::gateway::{EtcdError, Gateway};
use super::{EtcdOptions, config_key, status_prefix};
use crate::applier::{Applier, InstanceStatus};
use crate::rollout::TrafficSample;

pub(super) async fn run(gateway: Gateway, applier: Applier, options: EtcdOptions) {
    let key = options.status_key(applier.instance_id()).into_bytes();
    let mut lease = 0_i64;
    let mut last_kind = None;
    let mut interval = tokio::time::interval(options.status_interval);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        interval.tick().await;
        applier.tick();
        if let Err(e) = report(
            &gateway,
            &applier,
            &options,
            &key,
            &mut lease,
            &mut last_kind,
        )
        .await
        {
            tracing::warn!(error = %e, "tripline-config: status report to etcd failed");
            // A lost lease (etcd restarted past its TTL) is granted afresh.
            lease = 0;
        }
    }
}

async fn report(
    gateway: &Gateway,
    applier: &Applier,
    options: &EtcdOptions,
    key: &[u8],
    lease: &mut i64,
    last_kind: &mut Option<String>,
) -> Result<(), EtcdError> {
    if *lease != 0 && gateway.lease_keepalive(*lease).await? <= 0 {
        *lease = 0;
    }
    if *lease == 0 {
        *lease = gateway.lease_grant(options.lease_ttl).await?;
    }
    let mut status = applier.status();
    let kind = applier.kind();
    if last_kind.as_deref() != Some(kind.as_str()) {
        // Once per kind change, not leased: a kind outlives any one of its
        // instances, and readers only look up kinds live instances name.
        let bases =
            serde_json::to_vec(&applier.bases()).map_err(|e| EtcdError::Protocol(e.to_string()))?;
        gateway
            .put(kind_key(&options.prefix, &kind).as_bytes(), &bases, 0)
            .await?;
        *last_kind = Some(kind.clone());
    }
    status.kind = Some(kind);
    let status = serde_json::to_vec(&status).map_err(|e| EtcdError::Protocol(e.to_string()))?;
    gateway.put(key, &status, *lease).await?;
    if applier.needs_fleet_sample() {
        let mut fleet = TrafficSample::default();
        let mut peers = 0;
        for peer in fleet_status(gateway, &options.prefix).await? {
            if !peer.canary && peer.instance != applier.instance_id() {
                fleet.add(&peer.sample);
                peers += 1;
            }
        }
        // With no non-canary peer there is nothing to compare with: an
        // empty sum would make any rejection look worse than the fleet.
        if peers > 0 {
            applier.set_fleet_sample(fleet);
        }
    }
    Ok(())
}

/// Every live instance's status under `prefix`, sorted by instance id.
/// Entries that do not parse are skipped with a warning (a peer of a
/// newer version may report more).
pub async fn fleet_status(
    gateway: &Gateway,
    prefix: &str,
) -> Result<Vec<InstanceStatus>, EtcdError> {
    let (kvs, _) = gateway
        .range(status_prefix(prefix).as_bytes(), true, 0)
        .await?;
    let mut fleet: Vec<InstanceStatus> = kvs
        .iter()
        .filter_map(|kv| match serde_json::from_slice(&kv.value) {
            Ok(status) => Some(status),
            Err(e) => {
                tracing::warn!(key = %String::from_utf8_lossy(&kv.key), error = %e,
                    "tripline-config: unreadable status entry skipped");
                None
            }
        })
        .collect();
    fleet.sort_by(|a, b| a.instance.cmp(&b.instance));
    Ok(fleet)
}

/// The configs the breakers of instances of `kind` started with (see
/// [`Applier::kind`]), if an instance of that kind wrote them.
pub async fn kind_bases(
    gateway: &Gateway,
    prefix: &str,
    kind: &str,
) -> Result<Option<BTreeMap<String, CircuitBreakerConfig>>, EtcdError> {
    let (kvs, _) = gateway
        .range(kind_key(prefix, kind).as_bytes(), false, 0)
        .await?;
    match kvs.first() {
        Some(kv) => serde_json::from_slice(&kv.value)
            .map(Some)
            .map_err(|e| EtcdError::Protocol(format!("kind {kind}: {e}"))),
        None => Ok(None),
    }
}

fn kind_key(prefix: &str, kind: &str) -> String {
    format!("{}/kinds/{kind}", prefix.trim_end_matches('/'))
}

/// Writes `document` as the config under `prefix`; returns its revision.
/// Validate it first ([`Document::parse_and_validate`](crate::Document::parse_and_validate)):
/// etcd stores anything, and every instance would refuse it.
pub async fn push_document(
    gateway: &Gateway,
    prefix: &str,
    document: &[u8],
) -> Result<i64, EtcdError> {
    gateway
        .put(config_key(prefix).as_bytes(), document, 0)
        .await
}

/// The config document under `prefix` as it was at `revision` (etcd keeps
/// history until compaction): what a fleet-wide rollback pushes again.
pub async fn document_at(
    gateway: &Gateway,
    prefix: &str,
    revision: i64,
) -> Result<Option<Vec<u8>>, EtcdError> {
    let (kvs, _) = gateway
        .range(config_key(prefix).as_bytes(), false, revision)
        .await?;
    Ok(kvs.into_iter().next().map(|kv| kv.value))
}

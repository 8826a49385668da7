//! The watch loop: read the document, then follow it revision by revision,
//! resuming after any disconnect from the revision after the last one seen.

use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::STANDARD as B64;
use serde_json::json;

use super::EtcdOptions;
use super::gateway::{EtcdError, Gateway, int, key_value};
use crate::applier::{Applier, Origin};

const BACKOFF_START: Duration = Duration::from_millis(100);
const BACKOFF_MAX: Duration = Duration::from_secs(5);

pub(super) async fn run(gateway: Gateway, applier: Applier, options: EtcdOptions) {
    let key = options.config_key().into_bytes();
    // The last revision whose events were handled; `None`: read afresh.
    let mut seen: Option<i64> = None;
    let mut backoff = BACKOFF_START;
    loop {
        let result = match seen {
            None => match read_current(&gateway, &applier, &key).await {
                Ok(rev) => {
                    // Read: follow from here at once.
                    seen = Some(rev);
                    continue;
                }
                Err(e) => Err(e),
            },
            Some(rev) => follow(&gateway, &applier, &key, rev, &mut seen, &mut backoff).await,
        };
        match result {
            Err(EtcdError::Compacted(oldest)) => {
                tracing::warn!(
                    oldest,
                    "tripline-config: etcd compacted past the last revision seen; reading afresh"
                );
                seen = None;
                continue;
            }
            Err(e) => {
                tracing::warn!(error = %e, "tripline-config: etcd watch interrupted; reconnecting")
            }
            Ok(()) => {}
        }
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(BACKOFF_MAX);
    }
}

/// Applies the key's current value, if any; returns the store revision.
async fn read_current(gateway: &Gateway, applier: &Applier, key: &[u8]) -> Result<i64, EtcdError> {
    let (kvs, revision) = gateway.range(key, false, 0).await?;
    if let Some(kv) = kvs.first() {
        apply(applier, &kv.value, kv.mod_revision);
    }
    Ok(revision)
}

/// Watches from `after + 1` until the stream breaks, advancing `seen`.
async fn follow(
    gateway: &Gateway,
    applier: &Applier,
    key: &[u8],
    after: i64,
    seen: &mut Option<i64>,
    backoff: &mut Duration,
) -> Result<(), EtcdError> {
    let request = json!({
        "create_request": {
            "key": B64.encode(key),
            "start_revision": (after + 1).to_string(),
        }
    });
    let mut stream = gateway.stream("/v3/watch", request).await?;
    while let Some(message) = stream.next().await? {
        if message.get("error").is_some() {
            return Err(EtcdError::Protocol(message.to_string()));
        }
        let result = &message["result"];
        let compacted = int(&result["compact_revision"]);
        if compacted > 0 {
            return Err(EtcdError::Compacted(compacted));
        }
        if result["created"].as_bool() == Some(true) {
            // Connected again: the next failure starts its backoff afresh.
            *backoff = BACKOFF_START;
        }
        if result["canceled"].as_bool() == Some(true) {
            return Err(EtcdError::Protocol(format!("watch cancelled: {result}")));
        }
        for event in result["events"].as_array().into_iter().flatten() {
            let kv = key_value(&event["kv"])?;
            if event["type"].as_str() == Some("DELETE") {
                tracing::warn!("tripline-config: config key deleted; last good config kept");
            } else {
                apply(applier, &kv.value, kv.mod_revision);
            }
            *seen = Some(kv.mod_revision.max(seen.unwrap_or(0)));
        }
    }
    Ok(())
}

fn apply(applier: &Applier, value: &[u8], revision: i64) {
    let origin = Origin::new("etcd", Some(revision.to_string()));
    // Refusals are audited, logged and counted by the applier.
    let _ = applier.apply(value, origin);
}

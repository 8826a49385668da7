//! Multi-key transactions guarded by one key's revision, and lease revoke.
//!
//! A store that keeps a decision in etcd (the state of `tripline run`'s
//! shared breaker) must change the decision and its side keys (a probe's
//! leased key) in one step that either happens whole or not at all, and
//! only if nobody changed the decision since it was read. On a conflict
//! the same round trip brings back what is there now, so a retry needs no
//! extra read.

use base64::Engine;
use base64::engine::general_purpose::STANDARD as B64;
use serde_json::{Value, json};

use super::{EtcdError, Gateway, KeyValue, int, key_value, prefix_end};

/// One write of a transaction.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TxnOp {
    /// Writes `value` under `key`, attached to `lease` when non-zero (the
    /// key then disappears with the lease).
    Put {
        /// The key.
        key: Vec<u8>,
        /// The value.
        value: Vec<u8>,
        /// The lease id, or 0.
        lease: i64,
    },
    /// Deletes `key` (nothing if it does not exist).
    Delete {
        /// The key.
        key: Vec<u8>,
    },
}

/// How a guarded transaction ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TxnOutcome {
    /// Every write happened; the store's new revision.
    Committed(i64),
    /// The guard key had changed: nothing was written. The keys under the
    /// read prefix as they are now, and the store's revision.
    Conflict(Vec<KeyValue>, i64),
}

impl Gateway {
    /// Applies `ops` in one transaction if `guard`'s last change is still
    /// `mod_revision` (0: it does not exist); otherwise writes nothing and
    /// reads every key starting with `read_prefix`, in the same round trip.
    pub async fn txn_if_unchanged(
        &self,
        guard: &[u8],
        mod_revision: i64,
        ops: &[TxnOp],
        read_prefix: &[u8],
    ) -> Result<TxnOutcome, EtcdError> {
        let success: Vec<Value> = ops.iter().map(op_json).collect();
        let body = json!({
            "compare": [{
                "key": B64.encode(guard),
                "target": "MOD",
                "result": "EQUAL",
                "mod_revision": mod_revision.to_string(),
            }],
            "success": success,
            "failure": [{ "request_range": {
                "key": B64.encode(read_prefix),
                "range_end": B64.encode(prefix_end(read_prefix)),
            }}],
        });
        let answer = self.unary("/v3/kv/txn", body).await?;
        let revision = int(&answer["header"]["revision"]);
        if answer["succeeded"].as_bool() == Some(true) {
            return Ok(TxnOutcome::Committed(revision));
        }
        let kvs = match answer["responses"][0]["response_range"]["kvs"].as_array() {
            Some(kvs) => kvs.iter().map(key_value).collect::<Result<_, _>>()?,
            None => Vec::new(),
        };
        Ok(TxnOutcome::Conflict(kvs, revision))
    }

    /// Ends `lease` now; its keys are deleted with it.
    pub async fn lease_revoke(&self, lease: i64) -> Result<(), EtcdError> {
        self.unary("/v3/lease/revoke", json!({ "ID": lease.to_string() }))
            .await
            .map(drop)
    }
}

fn op_json(op: &TxnOp) -> Value {
    match op {
        TxnOp::Put { key, value, lease } => {
            let mut put = json!({ "key": B64.encode(key), "value": B64.encode(value) });
            if *lease != 0 {
                put["lease"] = json!(lease.to_string());
            }
            json!({ "request_put": put })
        }
        TxnOp::Delete { key } => json!({ "request_delete_range": { "key": B64.encode(key) } }),
    }
}

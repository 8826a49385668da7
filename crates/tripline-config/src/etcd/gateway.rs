//! A small client for etcd's v3 JSON gateway over the hyper client.
//!
//! The gateway maps each gRPC call to `POST /v3/<service>/<method>` with
//! the request message as JSON; keys and values are base64, and 64-bit
//! integers come back as strings. Streaming calls (watch, lease
//! keep-alive) answer with a body of JSON objects one after another.

use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::STANDARD as B64;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use serde_json::{Value, json};

mod txn;

pub use txn::{TxnOp, TxnOutcome};

/// Why a call to etcd failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum EtcdError {
    /// Connecting, sending or reading failed (etcd down, network).
    #[error("etcd at {endpoint}: {message}")]
    Transport {
        /// The endpoint.
        endpoint: String,
        /// What failed.
        message: String,
    },
    /// etcd answered with an error.
    #[error("etcd answered {status}: {body}")]
    Status {
        /// The HTTP status.
        status: u16,
        /// The answer.
        body: String,
    },
    /// The answer was not the JSON expected.
    #[error("etcd answer not understood: {0}")]
    Protocol(String),
    /// The revision asked for was compacted away.
    #[error("revision compacted (oldest kept: {0})")]
    Compacted(i64),
}

/// One key-value pair as etcd stores it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyValue {
    /// The key.
    pub key: Vec<u8>,
    /// The value (raw bytes: not necessarily UTF-8).
    pub value: Vec<u8>,
    /// The revision of its last change.
    pub mod_revision: i64,
}

/// A client of one etcd endpoint's JSON gateway (`http://host:port`).
#[derive(Clone, Debug)]
pub struct Gateway {
    endpoint: String,
    client: Client<HttpConnector, Full<Bytes>>,
    timeout: Duration,
}

impl Gateway {
    /// A client of `endpoint`; unary calls give up after `timeout`.
    pub fn new(endpoint: impl Into<String>, timeout: Duration) -> Self {
        let mut connector = HttpConnector::new();
        connector.set_connect_timeout(Some(timeout));
        connector.set_nodelay(true);
        Gateway {
            endpoint: endpoint.into().trim_end_matches('/').to_owned(),
            client: Client::builder(TokioExecutor::new()).build(connector),
            timeout,
        }
    }

    /// The endpoint.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// The values of `key` — or of every key starting with it when
    /// `prefix` — at `revision` (0: the latest), and the store's revision.
    pub async fn range(
        &self,
        key: &[u8],
        prefix: bool,
        revision: i64,
    ) -> Result<(Vec<KeyValue>, i64), EtcdError> {
        let mut body = json!({ "key": B64.encode(key) });
        if prefix {
            body["range_end"] = json!(B64.encode(prefix_end(key)));
        }
        if revision > 0 {
            body["revision"] = json!(revision.to_string());
        }
        let answer = self.unary("/v3/kv/range", body).await?;
        let store_revision = int(&answer["header"]["revision"]);
        let kvs = match answer["kvs"].as_array() {
            Some(kvs) => kvs.iter().map(key_value).collect::<Result<_, _>>()?,
            None => Vec::new(),
        };
        Ok((kvs, store_revision))
    }

    /// Writes `value` under `key` (attached to `lease` if non-zero);
    /// returns the new revision.
    pub async fn put(&self, key: &[u8], value: &[u8], lease: i64) -> Result<i64, EtcdError> {
        let mut body = json!({ "key": B64.encode(key), "value": B64.encode(value) });
        if lease != 0 {
            body["lease"] = json!(lease.to_string());
        }
        let answer = self.unary("/v3/kv/put", body).await?;
        Ok(int(&answer["header"]["revision"]))
    }

    /// Writes `value` under `key` only if the key's last change is still
    /// `mod_revision` (0: the key does not exist), in one transaction;
    /// returns the new revision, or `None` if someone wrote it meanwhile.
    pub async fn put_if_unchanged(
        &self,
        key: &[u8],
        value: &[u8],
        mod_revision: i64,
    ) -> Result<Option<i64>, EtcdError> {
        let key = B64.encode(key);
        let body = json!({
            "compare": [{
                "key": key,
                "target": "MOD",
                "result": "EQUAL",
                "mod_revision": mod_revision.to_string(),
            }],
            "success": [{ "request_put": { "key": key, "value": B64.encode(value) } }],
        });
        let answer = self.unary("/v3/kv/txn", body).await?;
        Ok(match answer["succeeded"].as_bool() {
            Some(true) => Some(int(&answer["header"]["revision"])),
            _ => None,
        })
    }

    /// Grants a lease of `ttl`; returns its id.
    pub async fn lease_grant(&self, ttl: Duration) -> Result<i64, EtcdError> {
        let answer = self
            .unary(
                "/v3/lease/grant",
                json!({ "TTL": ttl.as_secs().max(1).to_string() }),
            )
            .await?;
        match int(&answer["ID"]) {
            0 => Err(EtcdError::Protocol(format!(
                "lease grant without an ID: {answer}"
            ))),
            id => Ok(id),
        }
    }

    /// Renews `lease` once; returns its remaining TTL in seconds (0: the
    /// lease is gone and must be granted again).
    pub async fn lease_keepalive(&self, lease: i64) -> Result<i64, EtcdError> {
        let body = json!({ "ID": lease.to_string() });
        let mut stream = self.stream("/v3/lease/keepalive", body).await?;
        let first = tokio::time::timeout(self.timeout, stream.next())
            .await
            .map_err(|_| self.transport("lease keep-alive timed out"))??;
        match first {
            Some(message) => Ok(int(&message["result"]["TTL"])),
            None => Err(self.transport("lease keep-alive stream ended")),
        }
    }

    /// Opens a streaming call: its body is read as a sequence of JSON objects.
    pub(crate) async fn stream(&self, path: &str, body: Value) -> Result<JsonStream, EtcdError> {
        let response = tokio::time::timeout(self.timeout, self.send(path, &body))
            .await
            .map_err(|_| self.transport("request timed out"))??;
        Ok(JsonStream {
            body: response,
            buffer: Vec::new(),
            endpoint: self.endpoint.clone(),
        })
    }

    async fn unary(&self, path: &str, body: Value) -> Result<Value, EtcdError> {
        let call = async {
            let response = self.send(path, &body).await?;
            let bytes = response
                .collect()
                .await
                .map_err(|e| self.transport(&e.to_string()))?
                .to_bytes();
            serde_json::from_slice::<Value>(&bytes)
                .map_err(|e| EtcdError::Protocol(format!("{path}: {e}")))
        };
        tokio::time::timeout(self.timeout, call)
            .await
            .map_err(|_| self.transport("request timed out"))?
    }

    async fn send(&self, path: &str, body: &Value) -> Result<Incoming, EtcdError> {
        let request = http::Request::post(format!("{}{path}", self.endpoint))
            .header(http::header::CONTENT_TYPE, "application/json")
            .body(Full::new(Bytes::from(body.to_string())))
            .map_err(|e| self.transport(&e.to_string()))?;
        let response = self
            .client
            .request(request)
            .await
            .map_err(|e| self.transport(&e.to_string()))?;
        let status = response.status();
        if !status.is_success() {
            let body = response.into_body().collect().await.map(|b| b.to_bytes());
            let body = body.map(|b| String::from_utf8_lossy(&b).into_owned());
            return Err(EtcdError::Status {
                status: status.as_u16(),
                body: body.unwrap_or_default(),
            });
        }
        Ok(response.into_body())
    }

    fn transport(&self, message: &str) -> EtcdError {
        EtcdError::Transport {
            endpoint: self.endpoint.clone(),
            message: message.to_owned(),
        }
    }
}

/// The JSON objects of a streaming answer, one at a time.
pub(crate) struct JsonStream {
    body: Incoming,
    buffer: Vec<u8>,
    endpoint: String,
}

impl JsonStream {
    /// The next object; `None` when the stream ended cleanly.
    pub(crate) async fn next(&mut self) -> Result<Option<Value>, EtcdError> {
        loop {
            let mut objects =
                serde_json::Deserializer::from_slice(&self.buffer).into_iter::<Value>();
            match objects.next() {
                Some(Ok(value)) => {
                    let used = objects.byte_offset();
                    self.buffer.drain(..used);
                    return Ok(Some(value));
                }
                Some(Err(e)) if !e.is_eof() => {
                    return Err(EtcdError::Protocol(format!("stream: {e}")));
                }
                _ => {}
            }
            match self.body.frame().await {
                Some(Ok(frame)) => {
                    if let Ok(data) = frame.into_data() {
                        self.buffer.extend_from_slice(&data);
                    }
                }
                Some(Err(e)) => {
                    return Err(EtcdError::Transport {
                        endpoint: self.endpoint.clone(),
                        message: e.to_string(),
                    });
                }
                None => return Ok(None),
            }
        }
    }
}

/// The end of the range of keys starting with `key`: `key` with its last
/// byte below 0xff incremented (etcd's prefix convention).
pub(crate) fn prefix_end(key: &[u8]) -> Vec<u8> {
    let mut end = key.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return end;
        }
    }
    vec![0]
}

/// A 64-bit integer the gateway sends as a string (or, rarely, a number).
pub(crate) fn int(value: &Value) -> i64 {
    match value {
        Value::String(s) => s.parse().unwrap_or(0),
        Value::Number(n) => n.as_i64().unwrap_or(0),
        _ => 0,
    }
}

pub(crate) fn key_value(kv: &Value) -> Result<KeyValue, EtcdError> {
    let decode = |field: &str| -> Result<Vec<u8>, EtcdError> {
        match kv[field].as_str() {
            Some(s) => B64
                .decode(s)
                .map_err(|e| EtcdError::Protocol(format!("{field} is not base64: {e}"))),
            // An empty value is omitted from the JSON.
            None => Ok(Vec::new()),
        }
    };
    Ok(KeyValue {
        key: decode("key")?,
        value: decode("value")?,
        mod_revision: int(&kv["mod_revision"]),
    })
}

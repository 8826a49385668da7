//! The JSON format: one object per line, every field.

use std::fmt::Display;
use std::net::SocketAddr;

use serde::{Serialize, Serializer};

use super::{Attempt, Record, millis};

/// A record's line as JSON, borrowing the record: the writer reuses one
/// buffer for every line, and allocates nothing per line but what a
/// `flag` of two flags needs.
#[derive(Serialize)]
struct Line<'a> {
    #[serde(serialize_with = "as_text")]
    timestamp: humantime::Rfc3339Timestamp,
    route: Option<&'a str>,
    cluster: Option<&'a str>,
    method: &'a str,
    path: &'a str,
    status: u16,
    flag: Option<std::borrow::Cow<'a, str>>,
    retries: usize,
    duration_ms: f64,
    #[serde(serialize_with = "as_text")]
    peer: SocketAddr,
    #[serde(serialize_with = "tries")]
    attempts: &'a [Attempt],
    #[serde(skip_serializing_if = "Option::is_none")]
    client_cert: Option<&'a str>,
}

#[derive(Serialize)]
struct Try<'a> {
    endpoint: Option<&'a str>,
    outcome: &'static str,
    duration_ms: f64,
    hedge: bool,
}

/// Writes `record`'s line (without its line end) to `out`.
pub(super) fn render(record: &Record, out: &mut Vec<u8>) -> serde_json::Result<()> {
    let trail = &record.trail;
    let line = Line {
        timestamp: humantime::format_rfc3339_millis(trail.timestamp),
        route: record.route.as_deref(),
        cluster: record.cluster.as_deref(),
        method: trail.method.as_str(),
        path: &trail.path,
        status: record.status,
        flag: record.flag(),
        retries: record.retries(),
        duration_ms: millis(record.duration),
        peer: trail.peer,
        attempts: &trail.attempts,
        client_cert: trail.client_cert.as_deref(),
    };
    serde_json::to_writer(out, &line)
}

fn as_text<T: Display, S: Serializer>(value: &T, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(value)
}

fn tries<S: Serializer>(attempts: &&[Attempt], s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(attempts.iter().map(|a| Try {
        endpoint: a.endpoint.as_ref().map(|e| e.as_str()),
        outcome: a.outcome_name(),
        duration_ms: millis(a.took),
        hedge: a.hedge,
    }))
}

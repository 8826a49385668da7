//! Breaker transitions as the drill sees them, from either source: the
//! breakers of an in-process proxy (subscribed directly), or a running
//! proxy's `GET /api/events` (Server-Sent Events, `event: transition`).
//!
//! A transition is stamped with the drill's own clock when it arrives,
//! so it is compared with phase boundaries on one time line; on loopback
//! the delivery delay is well under the margins expectations need.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http::{Request, StatusCode};
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use serde::Serialize;
use tokio::time::Instant;
use tripline::breaker::{Event, EventKind};

use crate::DrillError;

/// One breaker transition, as seen by the drill.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TransitionSeen {
    /// The breaker's name.
    pub breaker: String,
    /// State before (`closed`, `open`, `half_open`, …).
    pub from: String,
    /// State after.
    pub to: String,
    /// Why (`failure_rate`, `slow_call_rate`, `probe_failed`, …).
    pub reason: String,
    /// Seconds from the drill's start when the drill learnt of it.
    #[serde(serialize_with = "secs")]
    pub at: Duration,
}

fn secs<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64())
}

/// Transitions collected so far, shared with their source.
#[derive(Clone)]
pub struct TransitionLog {
    start: Instant,
    seen: Arc<Mutex<Vec<TransitionSeen>>>,
    /// Set when an event stream ended: later transitions were missed.
    lost: Arc<AtomicBool>,
}

impl TransitionLog {
    /// An empty log whose times count from `start`.
    pub fn new(start: Instant) -> TransitionLog {
        TransitionLog {
            start,
            seen: Arc::default(),
            lost: Arc::default(),
        }
    }

    /// Every transition so far, in arrival order.
    pub fn snapshot(&self) -> Vec<TransitionSeen> {
        self.seen.lock().map(|v| v.clone()).unwrap_or_default()
    }

    /// Whether the event stream feeding this log ended (the proxy closed
    /// it or went away): a drill measured on a partial log would judge
    /// trips and recoveries it never saw.
    pub fn stream_lost(&self) -> bool {
        self.lost.load(Ordering::Acquire)
    }

    fn push(&self, breaker: &str, from: &str, to: &str, reason: &str) {
        let t = TransitionSeen {
            breaker: breaker.to_owned(),
            from: from.to_owned(),
            to: to.to_owned(),
            reason: reason.to_owned(),
            at: Instant::now().saturating_duration_since(self.start),
        };
        if let Ok(mut v) = self.seen.lock() {
            v.push(t);
        }
    }

    /// A callback for [`tripline::CircuitBreaker::subscribe`].
    pub(crate) fn breaker_listener(&self) -> impl Fn(&Event) + Send + Sync + 'static {
        let log = self.clone();
        move |e: &Event| {
            if let EventKind::Transition(t) = &e.kind {
                log.push(
                    &e.breaker,
                    t.from.as_str(),
                    t.to.as_str(),
                    t.reason.as_str(),
                );
            }
        }
    }
}

/// Subscribes to `admin`'s `GET /api/events` and feeds every
/// `transition` event into a new log counting from `start`. Returns once
/// the stream is open; fails fast if the target does not serve it.
pub async fn subscribe_sse(admin: &str, start: Instant) -> Result<TransitionLog, DrillError> {
    let uri = format!("{admin}/api/events");
    let client = Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();
    let req = Request::get(&uri)
        .header(http::header::ACCEPT, "text/event-stream")
        .body(Empty::new())
        .map_err(|e| DrillError::Target(format!("{uri}: {e}")))?;
    let res = tokio::time::timeout(Duration::from_secs(3), client.request(req))
        .await
        .map_err(|_| DrillError::Target(format!("GET {uri}: no answer within 3s")))?
        .map_err(|e| DrillError::Target(format!("GET {uri}: {e}")))?;
    if res.status() != StatusCode::OK {
        return Err(DrillError::Target(format!(
            "GET {uri} answered {}: the proxy must serve breaker events at /api/events for a drill to see trips",
            res.status()
        )));
    }
    let log = TransitionLog::new(start);
    let fed = log.clone();
    let mut body = res.into_body();
    tokio::spawn(async move {
        let mut buffer = String::new();
        while let Some(Ok(frame)) = body.frame().await {
            let Ok(data) = frame.into_data() else {
                continue;
            };
            buffer.push_str(&String::from_utf8_lossy(&data));
            // Events end with a blank line; normalise CRLF first.
            if buffer.contains('\r') {
                buffer = buffer.replace("\r\n", "\n");
            }
            while let Some(end) = buffer.find("\n\n") {
                let block: String = buffer.drain(..end + 2).collect();
                if let Some(t) = parse_sse_transition(&block) {
                    fed.push(&t.0, &t.1, &t.2, &t.3);
                }
            }
        }
        fed.lost.store(true, Ordering::Release);
    });
    Ok(log)
}

/// One SSE event block, if it is a transition: `(breaker, from, to, reason)`.
/// Other events, comments (`: keep-alive`) and malformed data are skipped.
pub fn parse_sse_transition(block: &str) -> Option<(String, String, String, String)> {
    let mut event = "message";
    let mut data = String::new();
    for line in block.lines() {
        if let Some(v) = line.strip_prefix("event:") {
            event = v.trim();
        } else if let Some(v) = line.strip_prefix("data:") {
            if !data.is_empty() {
                data.push('\n');
            }
            data.push_str(v.strip_prefix(' ').unwrap_or(v));
        }
    }
    if event != "transition" {
        return None;
    }
    let v: serde_json::Value = serde_json::from_str(&data).ok()?;
    let field = |k: &str| v[k].as_str().map(str::to_owned);
    Some((
        field("breaker")?,
        field("from")?,
        field("to")?,
        field("reason").unwrap_or_default(),
    ))
}

//! `GET /api/events`: Server-Sent Events, one per breaker transition
//! (`event: transition`) and outlier ejection or return (`event: ejection`).
//!
//! Each config document the `[config_source]` applier handles is an
//! `event: config` whose data is the audit entry `GET /api/audit` lists.
//!
//! A transition's data is one JSON object, a stable shape drills and the
//! dashboard parse:
//!
//! ```text
//! event: transition
//! data: {"breaker":"api","from":"closed","to":"open","reason":"failure_rate","at":"2026-12-01T07:00:00.123Z","message":"api: closed → open (failure rate 62% ≥ 50% over 20 calls; open for 5.0s)","window":{"calls":20,"failures":13,"slow":0}}
//! ```
//!
//! A comment (`: keep-alive`) goes out every [`KEEP_ALIVE`] so proxies and
//! browsers keep an idle stream open. Each client has a task and a queue
//! of [`CLIENT_QUEUE`] chunks; while a slow client's queue is full its task
//! waits and the shared feed runs ahead of it: the events it missed are
//! counted and reported as `event: dropped` with
//! `{"dropped": n, "total": m}`, and summed over all clients in the
//! `tripline_proxy_events_dropped_total` metric. The proxy never waits for
//! a client. The
//! stream ends when the client goes or the proxy starts draining.

use std::time::Duration;

use bytes::Bytes;
use http::{Response, header};
use tokio::sync::broadcast::error::RecvError;
use tokio::sync::{mpsc, watch};

use super::hub::Hub;
use super::respond::{AdminBody, ChannelBody};
use crate::server::{DRAINING, reached};

/// How often an idle stream gets a comment.
pub(crate) const KEEP_ALIVE: Duration = Duration::from_secs(15);
/// Chunks queued for one client.
const CLIENT_QUEUE: usize = 64;

/// Opens a stream for one client.
pub(crate) fn stream(hub: &Hub, mut stop: watch::Receiver<u8>) -> Response<AdminBody> {
    let mut feed = hub.listen();
    let lost = hub.dropped.clone();
    let (tx, rx) = mpsc::channel::<Bytes>(CLIENT_QUEUE);
    tokio::spawn(async move {
        let mut keep_alive =
            tokio::time::interval_at(tokio::time::Instant::now() + KEEP_ALIVE, KEEP_ALIVE);
        let mut dropped = 0u64;
        let mut next = Some(Bytes::from_static(b": tripline events\n\n"));
        loop {
            if let Some(chunk) = next.take() {
                tokio::select! {
                    sent = tx.send(chunk) => if sent.is_err() { return },
                    _ = reached(&mut stop, DRAINING) => return,
                }
            }
            next = Some(tokio::select! {
                _ = reached(&mut stop, DRAINING) => return,
                _ = tx.closed() => return,
                _ = keep_alive.tick() => Bytes::from_static(b": keep-alive\n\n"),
                received = feed.recv() => match received {
                    Ok(e) => Bytes::from(format!("event: {}\ndata: {}\n\n", e.name, e.data)),
                    Err(RecvError::Lagged(n)) => {
                        dropped += n;
                        lost.inc_by(n);
                        Bytes::from(format!(
                            "event: dropped\ndata: {{\"dropped\":{n},\"total\":{dropped}}}\n\n"
                        ))
                    }
                    Err(RecvError::Closed) => return,
                },
            });
        }
    });
    let mut r = Response::new(ChannelBody::boxed(rx));
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("text/event-stream"),
    );
    h.insert(
        header::CACHE_CONTROL,
        header::HeaderValue::from_static("no-cache"),
    );
    r
}

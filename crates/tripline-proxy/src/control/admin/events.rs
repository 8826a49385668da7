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
use crate::http::drain::{DRAINING, reached};

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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly

    use http_body_util::BodyExt;
    use serde_json::json;

    use super::*;
    use crate::http::drain::RUNNING;

    /// A reader that does not read while more events than the feed holds
    /// go out loses the oldest: the stream says how many, and the
    /// proxy-wide counter behind `tripline_proxy_events_dropped_total`
    /// adds them up.
    #[tokio::test]
    async fn a_reader_that_falls_behind_is_told_and_the_loss_is_counted() {
        let hub = Hub::new();
        let (_stop, stop_rx) = watch::channel(RUNNING);
        let mut body = stream(&hub, stop_rx).into_body();
        // The reader's task has not run yet: everything published now
        // waits in the shared feed, which holds the newest FEED events.
        let published = 1024 + 300;
        for i in 0..published {
            hub.publish("transition", &json!({ "i": i }));
        }
        assert_eq!(
            hub.dropped.get(),
            0,
            "nothing is lost before the reader reads"
        );
        let mut text = String::new();
        let reported = tokio::time::timeout(Duration::from_secs(5), async {
            loop {
                let frame = body.frame().await.expect("the stream stays open").unwrap();
                if let Ok(data) = frame.into_data() {
                    text.push_str(&String::from_utf8_lossy(&data));
                }
                if let Some(line) = text.lines().find(|l| l.starts_with("data: {\"dropped\"")) {
                    let v: serde_json::Value =
                        serde_json::from_str(line.trim_start_matches("data: ")).unwrap();
                    return v["dropped"].as_u64().unwrap();
                }
            }
        })
        .await
        .expect("a dropped event within 5 s");
        assert_eq!(reported, 300, "the feed keeps the newest 1024");
        assert_eq!(hub.dropped.get(), 300);
        // The events after the gap still arrive, oldest kept first.
        let next = tokio::time::timeout(Duration::from_secs(5), async {
            loop {
                let frame = body.frame().await.unwrap().unwrap();
                if let Ok(data) = frame.into_data() {
                    let chunk = String::from_utf8_lossy(&data).into_owned();
                    if chunk.starts_with("event: transition") {
                        return chunk;
                    }
                }
            }
        })
        .await
        .unwrap();
        assert!(next.contains("{\"i\":300}"), "{next}");
    }
}

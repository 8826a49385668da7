//! The access log: one JSON object per line per request, written off the
//! request path.
//!
//! A request builds its line as it goes (each try's endpoint, outcome and
//! duration) and hands it to a bounded queue with `try_send`; a writer
//! task appends the lines to the file (or stdout). When the queue is full
//! the line is dropped and counted in
//! `tripline_proxy_access_log_dropped_total`: a request never waits for the
//! disk. The writer flushes whenever the queue runs empty, and on drain
//! writes what is queued before the proxy returns.
//!
//! A line:
//!
//! ```json
//! {"timestamp":"2026-12-01T06:30:00.123Z","route":"api","cluster":"backend","method":"GET",
//!  "path":"/users/7","status":200,"flag":null,"retries":1,"duration_ms":12.5,"peer":"10.0.0.9:51234",
//!  "attempts":[{"endpoint":"10.0.0.2:8080","outcome":"gateway_failure","duration_ms":3.1},
//!              {"endpoint":"10.0.0.3:8080","outcome":"success","duration_ms":9.0}]}
//! ```
//!
//! `duration_ms` runs until the answer's headers are ready (a streamed
//! body may take longer); `flag` is the refusal or upstream-failure flag
//! the answer carries (see [`rejection`](crate::rejection)). An attempt's
//! `outcome` is the endpoint's (`success`, `ignored`, `upstream_failure`,
//! `gateway_failure`, `connect_failure`, `local_origin_failure`),
//! `refused` when nothing could be sent, or `client_body` when the
//! client's own body broke, or the try's time ran out waiting for more of
//! it (charged to no endpoint).

mod writer;

use std::net::SocketAddr;
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

use http::Response;
use http::request::Parts;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::registry::Registry;
use serde::Serialize;
use tokio::io::AsyncWrite;
use tokio::sync::{mpsc, oneshot};
use tripline::cluster::EndpointId;

use crate::config::{AccessLogMode, AccessLogSection};
use crate::fault::Dice;
use crate::rejection::FLAG_HEADER;
pub(crate) use writer::Writer;
use writer::write_lines;

/// The log's sink: the queue's sending side and the drop count.
pub(crate) struct AccessLog {
    config: AccessLogSection,
    dice: Dice,
    queue: mpsc::Sender<String>,
    /// Taken by the writer when the proxy starts.
    pending: Mutex<Option<mpsc::Receiver<String>>>,
    dropped: Counter,
}

/// One request's line in the making.
pub(crate) struct Trail {
    timestamp: SystemTime,
    start: tokio::time::Instant,
    method: String,
    path: String,
    peer: SocketAddr,
    attempts: Vec<Attempt>,
}

#[derive(Serialize)]
struct Attempt {
    endpoint: Option<String>,
    outcome: &'static str,
    duration_ms: f64,
}

#[derive(Serialize)]
struct Line<'a> {
    timestamp: String,
    route: Option<&'a str>,
    cluster: Option<&'a str>,
    method: &'a str,
    path: &'a str,
    status: u16,
    flag: Option<&'a str>,
    retries: usize,
    duration_ms: f64,
    peer: String,
    attempts: &'a [Attempt],
}

impl AccessLog {
    pub(crate) fn new(config: &AccessLogSection) -> AccessLog {
        let (queue, pending) = mpsc::channel(config.buffer.max(1));
        AccessLog {
            config: config.clone(),
            dice: Dice::unseeded(),
            queue,
            pending: Mutex::new(Some(pending)),
            dropped: Counter::default(),
        }
    }

    /// Registers `tripline_proxy_access_log_dropped_total`.
    pub(crate) fn register(&self, registry: &mut Registry, prefix: &str) {
        registry.register(
            format!("{prefix}_proxy_access_log_dropped"),
            "Access log lines dropped because the writer's queue was full or the write failed",
            self.dropped.clone(),
        );
    }

    /// Starts a line for this request, if it is to be logged.
    pub(crate) fn begin(&self, parts: &Parts, peer: SocketAddr) -> Option<Trail> {
        let logged = match self.config.mode {
            AccessLogMode::Off => false,
            AccessLogMode::Full => true,
            AccessLogMode::Sampled => self.dice.hits(self.config.sample_percent),
        };
        logged.then(|| Trail {
            // The wall-clock reading tripline sanctions (logs need dates).
            timestamp: tripline::clock::system_time_after(Duration::ZERO),
            start: tokio::time::Instant::now(),
            method: parts.method.to_string(),
            path: parts.uri.path().to_owned(),
            peer,
            attempts: Vec::new(),
        })
    }

    /// Queues the line of a request answered with `response`, or drops
    /// and counts it when the queue is full.
    pub(crate) fn finish<B>(
        &self,
        trail: Option<Trail>,
        route: Option<(&str, &str)>,
        response: &Response<B>,
    ) {
        let Some(trail) = trail else { return };
        let line = Line {
            timestamp: humantime::format_rfc3339_millis(trail.timestamp).to_string(),
            route: route.map(|r| r.0),
            cluster: route.map(|r| r.1),
            method: &trail.method,
            path: &trail.path,
            status: response.status().as_u16(),
            flag: response
                .headers()
                .get(FLAG_HEADER)
                .and_then(|v| v.to_str().ok()),
            retries: trail.attempts.len().saturating_sub(1),
            duration_ms: millis(trail.start.elapsed()),
            peer: trail.peer.to_string(),
            attempts: &trail.attempts,
        };
        let Ok(text) = serde_json::to_string(&line) else {
            self.dropped.inc();
            return;
        };
        if self.queue.try_send(text).is_err() {
            self.dropped.inc();
        }
    }

    /// Starts the writer task (once; `None` when the log is off or the
    /// writer runs already). Opening the file is the only thing that can
    /// fail, and it fails the start: a log asked for is never silently lost.
    pub(crate) async fn start_writer(&self) -> std::io::Result<Option<Writer>> {
        if self.config.mode == AccessLogMode::Off {
            return Ok(None);
        }
        let Some(lines) = self.pending.lock().ok().and_then(|mut p| p.take()) else {
            return Ok(None);
        };
        let out: Box<dyn AsyncWrite + Send + Unpin> = match &self.config.path {
            Some(path) => Box::new(
                tokio::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(path)
                    .await?,
            ),
            None => Box::new(tokio::io::stdout()),
        };
        let (stop, stopped) = oneshot::channel();
        let task = tokio::spawn(write_lines(lines, out, stopped, self.dropped.clone()));
        Ok(Some(Writer { stop, task }))
    }
}

impl Trail {
    /// Adds one try: the endpoint it went to (none if it was refused
    /// before one was chosen), what it came to, how long it took.
    pub(crate) fn attempt(
        &mut self,
        endpoint: Option<&EndpointId>,
        outcome: &'static str,
        took: Duration,
    ) {
        self.attempts.push(Attempt {
            endpoint: endpoint.map(|e| e.as_str().to_owned()),
            outcome,
            duration_ms: millis(took),
        });
    }
}

fn millis(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn request() -> Parts {
        http::Request::get("/x").body(()).unwrap().into_parts().0
    }

    #[tokio::test]
    async fn a_full_queue_drops_and_counts_and_never_waits() {
        let config = AccessLogSection {
            mode: AccessLogMode::Full,
            buffer: 1,
            ..AccessLogSection::default()
        };
        // No writer started: nothing empties the queue of one line.
        let log = AccessLog::new(&config);
        let peer: SocketAddr = "127.0.0.1:1".parse().unwrap();
        let ok = Response::new(());
        for _ in 0..3 {
            let trail = log.begin(&request(), peer);
            log.finish(trail, Some(("api", "backend")), &ok);
        }
        assert_eq!(log.dropped.get(), 2);
        let queued = log
            .pending
            .lock()
            .unwrap()
            .take()
            .unwrap()
            .try_recv()
            .unwrap();
        let json: serde_json::Value = serde_json::from_str(&queued).unwrap();
        assert_eq!(
            (json["route"].as_str(), json["status"].as_u64()),
            (Some("api"), Some(200))
        );
    }

    #[test]
    fn an_off_log_starts_no_line() {
        let log = AccessLog::new(&AccessLogSection::default());
        assert!(
            log.begin(&request(), "127.0.0.1:1".parse().unwrap())
                .is_none()
        );
    }
}

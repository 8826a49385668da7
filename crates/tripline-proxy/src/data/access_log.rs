//! The access log: one line per request, JSON or text from a template,
//! written off the request path.
//!
//! A request builds its record as it goes (each try's endpoint, outcome
//! and duration) and hands it to a bounded queue with `try_send`; a
//! writer task formats the records and appends the lines to the file (or
//! stdout). When the queue is full the record is dropped and counted in
//! `tripline_proxy_access_log_dropped_total`: a request never waits for
//! the disk, and never formats a line — formatting (JSON or the
//! template, parsed once at load) is the writer's work. The writer
//! flushes whenever the queue runs empty, and on drain writes what is
//! queued before the proxy returns. With the log off, a request pays one
//! branch: no record, no clock reading per try, no lock.
//!
//! A JSON line:
//!
//! ```json
//! {"timestamp":"2026-12-01T06:30:00.123Z","route":"api","cluster":"backend","method":"GET",
//!  "path":"/users/7","status":200,"flag":null,"retries":1,"duration_ms":12.5,"peer":"10.0.0.9:51234",
//!  "attempts":[{"endpoint":"10.0.0.2:8080","outcome":"gateway_failure","duration_ms":3.1,"hedge":false},
//!              {"endpoint":"10.0.0.3:8080","outcome":"success","duration_ms":9.0,"hedge":false}]}
//! ```
//!
//! `duration_ms` runs until the answer's headers are ready (a streamed
//! body may take longer); `flag` is the refusal or upstream-failure flag
//! the answer carries (see [`rejection`](crate::http::rejection)), followed by
//! `BE` when a retry was due but the retry budget refused it (the answer
//! is then the last try's, and says so in `x-tripline-retry-refused`):
//! `"BE"` alone for an upstream's answer, `"UF,BE"` for a failure the
//! proxy answered, as Envoy joins its response flags. `retries` counts
//! the retries, not the hedges.
//!
//! `attempts` lists every try sent, in the order they were sent, hedges
//! (`"hedge": true`) included, each with its own endpoint, outcome and
//! duration. An attempt's `outcome` is the endpoint's (`success`,
//! `ignored`, `upstream_failure`, `gateway_failure`, `connect_failure`,
//! `local_origin_failure`); `cancelled` for a try that lost a hedged race
//! (its request was dropped when another try's answer won; its duration
//! runs until then); `refused` when nothing could be sent (no endpoint,
//! no time left: only a retry's or a first try's refusal is listed, not
//! a hedge that found no endpoint); or `client_body` when the client's
//! own body broke, or the try's time ran out waiting for more of it
//! (charged to no endpoint). A hedge the budget refused was never sent
//! and is not listed.
//!
//! The text format (`format = "text"`) writes the `template`'s literal
//! text with its `%OPERATOR%`s replaced; see [`template`] and the
//! README's access-log section for the operators.

mod json;
mod template;
mod writer;

use std::borrow::Cow;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use http::request::Parts;
use http::{HeaderValue, Method, Response};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::registry::Registry;
use tokio::io::AsyncWrite;
use tokio::sync::{mpsc, oneshot};
use tripline::cluster::EndpointId;

pub(crate) use crate::config::access_log_template::Template;
use crate::config::{AccessLogFormat, AccessLogMode, AccessLogSection};
use crate::http::rejection::{FLAG_HEADER, RETRY_REFUSED_HEADER, Reason};
use crate::table::fault::Dice;
pub(crate) use writer::Writer;
use writer::write_lines;

/// What a try that lost a hedged race is called: its future was dropped
/// when another try won, so no outcome of its own ever came.
const CANCELLED: &str = "cancelled";

/// The flag of a request dropped before its answer (Envoy's `DC`).
const DOWNSTREAM_TERMINATED: &str = "DC";

/// What a try that sent nothing is called (as the forwarder's
/// `Tried::name` says it).
const REFUSED: &str = "refused";

/// The log's sink: the queue's sending side and the drop count.
pub(crate) struct AccessLog {
    config: AccessLogSection,
    dice: Dice,
    queue: mpsc::Sender<Record>,
    /// Taken by the writer when the proxy starts, with the line format.
    pending: Mutex<Option<(mpsc::Receiver<Record>, Format)>>,
    dropped: Counter,
}

/// How the writer turns a record into a line.
enum Format {
    Json,
    Text(Template),
}

/// One request's line in the making.
pub(crate) struct Trail {
    timestamp: SystemTime,
    start: tokio::time::Instant,
    method: Method,
    path: String,
    peer: SocketAddr,
    attempts: Vec<Attempt>,
    /// The verified client certificate's subject, on a listener that logs
    /// it.
    pub(crate) client_cert: Option<Arc<str>>,
}

/// One try, as the log shows it.
struct Attempt {
    endpoint: Option<EndpointId>,
    /// `None` while the try is in flight.
    outcome: Option<&'static str>,
    started: tokio::time::Instant,
    took: Duration,
    /// Sent by the hedge (racing the pass's first try), not by a retry.
    hedge: bool,
}

/// A request's line until its answer is known: dropped unanswered (its
/// future dropped with a client that went away), it still queues its line,
/// so that every request the proxy began to serve has one.
pub(crate) struct Pending<'a> {
    log: &'a AccessLog,
    /// `None` when the request is not logged, or once it was answered.
    pub(crate) trail: Option<Trail>,
    /// The route and cluster, once the request was routed.
    pub(crate) route: Option<(&'a str, &'a str)>,
}

impl<'a> Pending<'a> {
    /// A line for the request `parts` from `peer`, if it is to be logged.
    pub(crate) fn begin(log: &'a AccessLog, parts: &Parts, peer: SocketAddr) -> Pending<'a> {
        Pending {
            log,
            trail: log.begin(parts, peer),
            route: None,
        }
    }

    /// Queues the line of the request answered with `response`.
    pub(crate) fn answered<B>(mut self, response: &Response<B>) {
        let trail = self.trail.take();
        self.log.finish(trail, self.route, response);
    }
}

impl Drop for Pending<'_> {
    fn drop(&mut self) {
        if let Some(trail) = self.trail.take() {
            self.log.finish_unanswered(trail, self.route);
        }
    }
}

/// A try opened on a [`Trail`], to be closed with its outcome.
#[derive(Clone, Copy, Debug)]
pub(crate) struct OpenTry(usize);

/// A request's facts as queued for the writer, which alone formats them.
struct Record {
    trail: Trail,
    route: Option<Box<str>>,
    cluster: Option<Box<str>>,
    status: u16,
    /// The answer's `x-tripline-flag`.
    flag: Option<HeaderValue>,
    /// The answer's `x-tripline-retry-refused`: a retry was due and the
    /// budget (`BE`) or the cluster's `max_retries` (`UO`) refused it.
    retry_refused: Option<&'static str>,
    duration: Duration,
}

impl AccessLog {
    /// The log `config` asks for, its template parsed now so that the
    /// writer never parses; the writer starts with the proxy.
    pub(crate) fn new(config: &AccessLogSection) -> AccessLog {
        let (queue, pending) = mpsc::channel(config.buffer.max(1));
        AccessLog {
            config: config.clone(),
            dice: Dice::unseeded(),
            queue,
            pending: Mutex::new(Some((pending, Format::of(config)))),
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
            method: parts.method.clone(),
            path: parts.uri.path().to_owned(),
            peer,
            attempts: Vec::new(),
            client_cert: None,
        })
    }

    /// Queues the record of a request answered with `response`, or drops
    /// and counts it when the queue is full. Only facts are gathered here;
    /// the writer formats them.
    pub(crate) fn finish<B>(
        &self,
        trail: Option<Trail>,
        route: Option<(&str, &str)>,
        response: &Response<B>,
    ) {
        let Some(trail) = trail else { return };
        let headers = response.headers();
        self.queue_line(
            trail,
            route,
            response.status().as_u16(),
            headers.get(FLAG_HEADER).cloned(),
            headers
                .get(RETRY_REFUSED_HEADER)
                .map(|v| Reason::of_retry_refused(v.as_bytes()).flag()),
        );
    }

    /// Queues the record of a request dropped before it was answered:
    /// the client went away (or the drain's cut came) while the proxy
    /// worked on it. Envoy's way: status 0 and flag `DC` (downstream
    /// connection termination), with the tries made so far.
    fn finish_unanswered(&self, trail: Trail, route: Option<(&str, &str)>) {
        let flag = Some(HeaderValue::from_static(DOWNSTREAM_TERMINATED));
        self.queue_line(trail, route, 0, flag, None);
    }

    /// Queues a request's record, or drops and counts it when the queue is
    /// full. Every try in a record has an outcome: one still open now was
    /// given up with its request.
    fn queue_line(
        &self,
        mut trail: Trail,
        route: Option<(&str, &str)>,
        status: u16,
        flag: Option<HeaderValue>,
        retry_refused: Option<&'static str>,
    ) {
        trail.cancel_open_tries();
        let record = Record {
            duration: trail.start.elapsed(),
            trail,
            route: route.map(|r| r.0.into()),
            cluster: route.map(|r| r.1.into()),
            status,
            flag,
            retry_refused,
        };
        if self.queue.try_send(record).is_err() {
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
        let Some((records, format)) = self.pending.lock().ok().and_then(|mut p| p.take()) else {
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
        let task = tokio::spawn(write_lines(
            records,
            format,
            out,
            stopped,
            self.dropped.clone(),
        ));
        Ok(Some(Writer { stop, task }))
    }
}

impl Format {
    /// The config's format, its template parsed. The config was validated
    /// before the proxy was built, so the parse cannot fail; if it did,
    /// the lines are written as JSON rather than lost.
    fn of(config: &AccessLogSection) -> Format {
        match config.format {
            AccessLogFormat::Json => Format::Json,
            AccessLogFormat::Text => match Template::parse(config.text_template()) {
                Ok(template) => Format::Text(template),
                Err(e) => {
                    tracing::warn!(error = %e, "access log template refused; writing JSON lines");
                    Format::Json
                }
            },
        }
    }

    /// Writes `record`'s line, without its line end, to `out`.
    fn render(&self, record: &Record, out: &mut Vec<u8>) -> std::io::Result<()> {
        match self {
            Format::Json => json::render(record, out).map_err(std::io::Error::from),
            Format::Text(template) => template::render(template, record, out),
        }
    }
}

impl Trail {
    /// Opens a try sent to `endpoint` (`None`: refused before one was
    /// chosen), its clock running from now; `hedge` when the hedge sent it
    /// rather than the retry loop. Tries are listed in the order opened.
    pub(crate) fn open_try(&mut self, endpoint: Option<&EndpointId>, hedge: bool) -> OpenTry {
        self.attempts.push(Attempt {
            endpoint: endpoint.cloned(),
            outcome: None,
            started: tokio::time::Instant::now(),
            took: Duration::ZERO,
            hedge,
        });
        OpenTry(self.attempts.len() - 1)
    }

    /// Closes an open try with what it came to (the forwarder's
    /// `Tried::name`). A try closes once: a later close is ignored.
    pub(crate) fn close_try(&mut self, open: OpenTry, outcome: &'static str) {
        if let Some(attempt) = self.attempts.get_mut(open.0)
            && attempt.outcome.is_none()
        {
            attempt.outcome = Some(outcome);
            attempt.took = attempt.started.elapsed();
        }
    }

    /// Closes every try still open as `cancelled`: after a hedged race,
    /// the tries whose futures were dropped when another try won.
    pub(crate) fn cancel_open_tries(&mut self) {
        for attempt in &mut self.attempts {
            if attempt.outcome.is_none() {
                attempt.outcome = Some(CANCELLED);
                attempt.took = attempt.started.elapsed();
            }
        }
    }
}

impl Attempt {
    fn outcome_name(&self) -> &'static str {
        self.outcome.unwrap_or(CANCELLED)
    }
}

impl Record {
    /// The answer's flags, Envoy-style: its own flag, then `BE` (or `UO`)
    /// when the budget (or the cluster's `max_retries`) refused a retry,
    /// comma-joined when both.
    fn flag(&self) -> Option<Cow<'_, str>> {
        let own = self.flag.as_ref().and_then(|v| v.to_str().ok());
        match (own, self.retry_refused) {
            (None, None) => None,
            (Some(own), None) => Some(Cow::Borrowed(own)),
            (None, Some(retry)) => Some(Cow::Borrowed(retry)),
            (Some(own), Some(retry)) => Some(Cow::Owned(format!("{own},{retry}"))),
        }
    }

    /// Retries: the passes of the retry loop after the first. Each pass
    /// opens exactly one try that is not a hedge (sent or refused).
    fn retries(&self) -> usize {
        let passes = self.trail.attempts.iter().filter(|a| !a.hedge).count();
        passes.saturating_sub(1)
    }

    /// The tries that reached an endpoint (Envoy's attempt count).
    fn tries_sent(&self) -> usize {
        let attempts = &self.trail.attempts;
        attempts
            .iter()
            .filter(|a| a.endpoint.is_some() && a.outcome != Some(REFUSED))
            .count()
    }

    /// The endpoint whose answer the client got: the last try sent that
    /// did not lose a race (a refused retry leaves the answer before it).
    fn upstream_host(&self) -> Option<&str> {
        let attempts = &self.trail.attempts;
        attempts
            .iter()
            .rev()
            .filter(|a| !matches!(a.outcome, Some(CANCELLED | REFUSED)))
            .find_map(|a| a.endpoint.as_ref())
            .map(|e| e.as_str())
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

    fn full(format: AccessLogFormat, template: Option<&str>) -> AccessLogSection {
        AccessLogSection {
            mode: AccessLogMode::Full,
            format,
            template: template.map(str::to_owned),
            ..AccessLogSection::default()
        }
    }

    /// The line `log`'s writer would write for the one record queued.
    fn written(log: &AccessLog) -> String {
        let (mut records, format) = log.pending.lock().unwrap().take().unwrap();
        let record = records.try_recv().unwrap();
        let mut line = Vec::new();
        format.render(&record, &mut line).unwrap();
        String::from_utf8(line).unwrap()
    }

    #[tokio::test]
    async fn a_full_queue_drops_and_counts_and_never_waits() {
        let config = AccessLogSection {
            buffer: 1,
            ..full(AccessLogFormat::Json, None)
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
        let json: serde_json::Value = serde_json::from_str(&written(&log)).unwrap();
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

    /// A request whose connect failed, whose retry raced a hedge the first
    /// try of the pass lost, and whose answer carries both its own flag and
    /// the budget's refusal of a further retry.
    fn eventful(log: &AccessLog) {
        let mut trail = log
            .begin(&request(), "127.0.0.1:1".parse().unwrap())
            .unwrap();
        let (a, b, c) = (
            EndpointId::from("10.0.0.1:80"),
            EndpointId::from("10.0.0.2:80"),
            EndpointId::from("10.0.0.3:80"),
        );
        let first = trail.open_try(Some(&a), false);
        trail.close_try(first, "connect_failure");
        let slow = trail.open_try(Some(&b), false);
        let hedge = trail.open_try(Some(&c), true);
        trail.close_try(hedge, "success");
        trail.cancel_open_tries();
        trail.close_try(slow, "success");
        let mut answer = Response::new(());
        let headers = answer.headers_mut();
        headers.insert(FLAG_HEADER, HeaderValue::from_static("UF"));
        headers.insert(
            RETRY_REFUSED_HEADER,
            HeaderValue::from_static("budget_exhausted"),
        );
        log.finish(Some(trail), Some(("api", "backend")), &answer);
    }

    #[test]
    fn each_try_keeps_its_own_outcome_and_both_flags_are_written() {
        let log = AccessLog::new(&full(AccessLogFormat::Json, None));
        eventful(&log);
        let json: serde_json::Value = serde_json::from_str(&written(&log)).unwrap();
        assert_eq!(json["flag"], "UF,BE");
        assert_eq!(json["retries"], 1, "the hedge is no retry");
        let tries: Vec<(String, String, bool)> = json["attempts"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| {
                (
                    t["endpoint"].as_str().unwrap().to_owned(),
                    t["outcome"].as_str().unwrap().to_owned(),
                    t["hedge"].as_bool().unwrap(),
                )
            })
            .collect();
        let expected = [
            ("10.0.0.1:80", "connect_failure", false),
            ("10.0.0.2:80", "cancelled", false),
            ("10.0.0.3:80", "success", true),
        ]
        .map(|(e, o, h)| (e.to_owned(), o.to_owned(), h));
        assert_eq!(tries, expected, "a closed try stays closed");
    }

    #[test]
    fn a_text_line_follows_its_template() {
        let template = "%METHOD% %PATH% %RESPONSE_CODE% %RESPONSE_FLAGS% %ROUTE_NAME% \
             %UPSTREAM_CLUSTER% %UPSTREAM_HOST% %UPSTREAM_REQUEST_ATTEMPT_COUNT% %RETRIES% \
             %DOWNSTREAM_REMOTE_ADDRESS% 100%%";
        let log = AccessLog::new(&full(AccessLogFormat::Text, Some(template)));
        eventful(&log);
        assert_eq!(
            written(&log),
            "GET /x 200 UF,BE api backend 10.0.0.3:80 3 1 127.0.0.1:1 100%"
        );

        let log = AccessLog::new(&full(AccessLogFormat::Text, Some("%ATTEMPTS%")));
        eventful(&log);
        let line = written(&log);
        let shape: Vec<&str> = line
            .split(',')
            .map(|t| t.rsplit_once('/').unwrap().0)
            .collect();
        assert_eq!(
            shape,
            [
                "10.0.0.1:80/connect_failure",
                "10.0.0.2:80/cancelled",
                "+10.0.0.3:80/success"
            ],
            "{line}"
        );
    }

    #[test]
    fn a_line_without_values_writes_dashes() {
        let template = "%RESPONSE_FLAGS% %ROUTE_NAME% %UPSTREAM_CLUSTER% %UPSTREAM_HOST% %ATTEMPTS% %START_TIME%";
        let log = AccessLog::new(&full(AccessLogFormat::Text, Some(template)));
        let trail = log.begin(&request(), "127.0.0.1:1".parse().unwrap());
        log.finish(trail, None, &Response::new(()));
        let line = written(&log);
        let (dashes, time) = line.rsplit_once(' ').unwrap();
        assert_eq!(dashes, "- - - - -");
        assert!(humantime::parse_rfc3339(time).is_ok(), "{time}");
    }
}

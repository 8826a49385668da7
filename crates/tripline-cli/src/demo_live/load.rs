//! The load generator of `tripline demo --live`: a steady rate of GETs
//! through the proxy, with a cap on requests in flight, tallied by how
//! they ended.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http_body_util::{BodyExt, Empty};
use hyper::body::Bytes;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use tokio::sync::{Semaphore, watch};
use tripline_proxy::rejection::{FLAG_HEADER, REJECTED_HEADER};

/// Requests per second sent through the proxy.
pub(crate) const RATE: u64 = 40;
/// Requests in flight at most: when upstreams turn slow the generator
/// skips ticks rather than piling up connections without bound.
const IN_FLIGHT: usize = 20;
/// A request still unanswered after this is counted as without answer.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(3);

/// How the requests ended.
#[derive(Debug, Default)]
pub(crate) struct Tally {
    sent: u64,
    skipped: u64,
    answered: u64,
    /// Upstream failures the proxy passed on or answered for, by flag or
    /// status (`503`, `UF`, …).
    failed: BTreeMap<String, u64>,
    /// Requests the proxy refused itself, by `x-tripline-rejected` cause.
    refused: BTreeMap<String, u64>,
    unanswered: u64,
}

impl Tally {
    /// The two summary lines printed at the end of the demo.
    pub(crate) fn summary(&self) -> String {
        let failed: u64 = self.failed.values().sum();
        let refused: u64 = self.refused.values().sum();
        format!(
            "requests: {} sent ({} skipped at the in-flight cap), {} answered 2xx, {failed} failed upstream{}, {} without answer\n\
             refused by the proxy: {refused}{}",
            self.sent,
            self.skipped,
            self.answered,
            by_cause(&self.failed),
            self.unanswered,
            by_cause(&self.refused),
        )
    }
}

fn by_cause(counts: &BTreeMap<String, u64>) -> String {
    if counts.is_empty() {
        return String::new();
    }
    let mut text = String::from(" (");
    for (i, (cause, n)) in counts.iter().enumerate() {
        let sep = if i == 0 { "" } else { ", " };
        let _ = write!(text, "{sep}{cause} {n}");
    }
    text.push(')');
    text
}

/// Sends [`RATE`] requests per second to `proxy` until `stop` turns true,
/// then waits for the requests in flight (each bounded by its timeout).
pub(crate) async fn generate(
    proxy: SocketAddr,
    tally: Arc<Mutex<Tally>>,
    mut stop: watch::Receiver<bool>,
) {
    let client = Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();
    let slots = Arc::new(Semaphore::new(IN_FLIGHT));
    let mut tick = tokio::time::interval(Duration::from_millis(1000 / RATE));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = stop.wait_for(|s| *s) => break,
        }
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            lock(&tally).skipped += 1;
            continue;
        };
        lock(&tally).sent += 1;
        let (client, tally) = (client.clone(), tally.clone());
        tokio::spawn(async move {
            let _slot = slot;
            let request = hyper::Request::get(format!("http://{proxy}/demo"))
                .body(Empty::new())
                .map_err(|_| ());
            let ended = match request {
                Ok(request) => tokio::time::timeout(REQUEST_TIMEOUT, send(&client, request)).await,
                Err(()) => Ok(None),
            };
            let mut t = lock(&tally);
            match ended {
                Ok(Some(Ending::Answered)) => t.answered += 1,
                Ok(Some(Ending::Refused(cause))) => *t.refused.entry(cause).or_default() += 1,
                Ok(Some(Ending::Failed(cause))) => *t.failed.entry(cause).or_default() += 1,
                Ok(None) | Err(_) => t.unanswered += 1,
            }
        });
    }
    // Every slot back: every request spawned above has ended.
    let _ = slots.acquire_many(IN_FLIGHT as u32).await;
}

enum Ending {
    Answered,
    Refused(String),
    Failed(String),
}

async fn send(
    client: &Client<hyper_util::client::legacy::connect::HttpConnector, Empty<Bytes>>,
    request: hyper::Request<Empty<Bytes>>,
) -> Option<Ending> {
    let response = client.request(request).await.ok()?;
    let header = |name: hyper::header::HeaderName| {
        response
            .headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    };
    let ending = if let Some(cause) = header(REJECTED_HEADER) {
        Ending::Refused(cause)
    } else if response.status().is_success() {
        Ending::Answered
    } else {
        Ending::Failed(
            header(FLAG_HEADER).unwrap_or_else(|| response.status().as_u16().to_string()),
        )
    };
    // Read the body so the pooled connection can be reused.
    let _ = response.into_body().collect().await;
    Some(ending)
}

/// The tally is only counters: a panic elsewhere cannot leave it torn, so
/// a poisoned lock is still good to count on.
pub(crate) fn lock(tally: &Mutex<Tally>) -> std::sync::MutexGuard<'_, Tally> {
    tally.lock().unwrap_or_else(|e| e.into_inner())
}

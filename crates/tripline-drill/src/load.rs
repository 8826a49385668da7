//! The load: an open loop of real HTTP requests at a fixed rate, with a
//! bound on requests in flight.
//!
//! Open loop, because a breaker's job shows under traffic that does not
//! slow down when the dependency does; bounded, because a drill must not
//! become the outage. A tick that finds every slot busy is counted as
//! skipped and not made up later, and a tick the runtime was late for is
//! dropped rather than fired in a burst.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http::Request;
use http_body_util::{BodyExt, Full};
use tokio::sync::{Semaphore, watch};
use tokio::time::{Instant, MissedTickBehavior};

use crate::admin::{HttpClient, client};
use crate::file::Load;

/// One request the drill sent.
#[derive(Clone, Debug)]
pub(crate) struct Sample {
    /// When it started, from the drill's start.
    pub(crate) start: Duration,
    /// How long until the whole answer arrived, or until the request
    /// failed (the client timeout at most).
    pub(crate) latency: Duration,
    /// The answer's status; `None`: no answer (refused connection, reset, timeout).
    pub(crate) status: Option<u16>,
    /// The proxy's `x-tripline-flag`, if any.
    pub(crate) flag: Option<String>,
}

impl Sample {
    /// A 5xx or no answer at all.
    pub(crate) fn is_error(&self) -> bool {
        self.status.is_none_or(|s| s >= 500)
    }

    /// Turned away by a breaker (route or endpoint) or for want of a
    /// routable endpoint: the simulator's "rejected".
    pub(crate) fn is_breaker_refusal(&self) -> bool {
        matches!(self.flag.as_deref(), Some("CO" | "HF" | "NH"))
    }

    /// Refused by the proxy before any try (breaker, bulkhead, rate limit,
    /// deadline): it never reached the dependency.
    pub(crate) fn is_refused(&self) -> bool {
        matches!(
            self.flag.as_deref(),
            Some("CO" | "HF" | "NH" | "BF" | "RL" | "DX")
        )
    }
}

/// Samples shared between the load and the abort-rule watcher, with
/// answers and errors counted per second of completion as they arrive,
/// so the watcher never rescans every sample.
#[derive(Clone, Default)]
pub(crate) struct Samples(Arc<Mutex<Recorded>>);

#[derive(Default)]
struct Recorded {
    samples: Vec<Sample>,
    /// (answers, errors) by the whole second they completed in.
    per_second: Vec<(u64, u64)>,
}

impl Samples {
    fn push(&self, done: Duration, s: Sample) {
        if let Ok(mut r) = self.0.lock() {
            let second = usize::try_from(done.as_secs()).unwrap_or(usize::MAX);
            if second < 1 << 20 {
                if r.per_second.len() <= second {
                    r.per_second.resize(second + 1, (0, 0));
                }
                r.per_second[second].0 += 1;
                r.per_second[second].1 += u64::from(s.is_error());
            }
            r.samples.push(s);
        }
    }

    /// Every sample, in completion order.
    pub(crate) fn all(&self) -> Vec<Sample> {
        self.0.lock().map(|r| r.samples.clone()).unwrap_or_default()
    }

    /// (answers, errors) completed in each whole second before `now`.
    pub(crate) fn per_second_before(&self, now: u64) -> Vec<(u64, u64)> {
        let now = usize::try_from(now).unwrap_or(usize::MAX);
        let mut v = self
            .0
            .lock()
            .map(|r| r.per_second.clone())
            .unwrap_or_default();
        v.resize(now, (0, 0));
        v
    }
}

/// What the load did, besides its samples.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct LoadTotals {
    /// Ticks skipped because every slot was busy.
    pub(crate) skipped: u64,
}

/// Drives `load` at `url` from `start` until its duration ends or `stop`
/// turns true, then waits for requests in flight (each bounded by the
/// load's timeout).
pub(crate) async fn drive(
    load: Load,
    url: String,
    start: Instant,
    samples: Samples,
    mut stop: watch::Receiver<bool>,
) -> LoadTotals {
    let client = client(load.concurrency);
    let slots = Arc::new(Semaphore::new(load.concurrency));
    let mut ticks = tokio::time::interval_at(start, Duration::from_secs_f64(1.0 / load.rate));
    ticks.set_missed_tick_behavior(MissedTickBehavior::Skip);
    let end = start + load.duration;
    let mut totals = LoadTotals::default();
    let mut n = 0usize;
    loop {
        tokio::select! {
            _ = ticks.tick() => {}
            _ = stop.changed() => break,
        }
        let now = Instant::now();
        if now >= end || *stop.borrow() {
            break;
        }
        let Ok(permit) = slots.clone().try_acquire_owned() else {
            totals.skipped += 1;
            continue;
        };
        let uri = format!("{url}{}", load.paths[n % load.paths.len()]);
        n += 1;
        let (client, samples, timeout) = (client.clone(), samples.clone(), load.timeout);
        tokio::spawn(async move {
            let sample = one(&client, &uri, now.duration_since(start), timeout).await;
            samples.push(Instant::now().duration_since(start), sample);
            drop(permit);
        });
    }
    // Every request in flight ends within its timeout.
    let all = u32::try_from(load.concurrency).unwrap_or(u32::MAX);
    let _ = tokio::time::timeout(
        load.timeout + Duration::from_secs(1),
        slots.acquire_many(all),
    )
    .await;
    totals
}

async fn one(client: &HttpClient, uri: &str, start: Duration, timeout: Duration) -> Sample {
    let began = Instant::now();
    let answer = async {
        let req = Request::get(uri).body(Full::new(Bytes::new())).ok()?;
        let res = client.request(req).await.ok()?;
        let status = res.status().as_u16();
        let flag = res
            .headers()
            .get(tripline_proxy::rejection::FLAG_HEADER)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        res.into_body().collect().await.ok()?;
        Some((status, flag))
    };
    let (status, flag) = match tokio::time::timeout(timeout, answer).await {
        Ok(Some((s, f))) => (Some(s), f),
        _ => (None, None),
    };
    Sample {
        start,
        latency: began.elapsed(),
        status,
        flag,
    }
}

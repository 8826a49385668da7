//! The proof with real parts: the example service under a real Prometheus
//! server (Debian package `prometheus`; missing, the test fails naming it).
//!
//! The service's `payments` breaker runs on a manual clock and is driven
//! through the public API: closed, tripped by failures, held open for real
//! seconds until the shipped `TriplineBreakerOpen` rule fires, probed
//! half-open, closed again. Each state is held until Prometheus has scraped
//! it (polling the API, no fixed sleeps); then the history and the counts
//! Prometheus recorded must be exactly what the breaker did.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly

#[path = "support/bin.rs"]
mod bin;
#[path = "support/client.rs"]
mod client;
#[path = "../examples/breaker_service.rs"]
mod example;
#[path = "support/prometheus.rs"]
mod prometheus;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tripline::clock::{Clock, SharedClock};
use tripline::{ManualClock, Outcome, State};

use prometheus::Prometheus;

const STATE: &str = r#"tripline_breaker_state_code{name="payments"}"#;
const WAIT: Duration = Duration::from_secs(20);

async fn state_seen(prom: &Prometheus, code: f64) -> bool {
    prom.value(STATE).await == Some(code)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prometheus_records_what_the_breaker_did_and_the_open_alert_fires() {
    let clock = ManualClock::new();
    let demo = Arc::new(example::demo(SharedClock::from(clock.clone())).unwrap());
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let target = listener.local_addr().unwrap();
    tokio::spawn(example::run(listener, demo.clone()));
    let rules = bin::repo_root().join("deploy/prometheus/tripline-alerts.yml");
    let prom = Prometheus::start(target, &[rules]);

    prom.until("the target to be up", WAIT, async || {
        let t = prom.api("/api/v1/targets").await.unwrap_or_default();
        t["data"]["activeTargets"][0]["health"] == "up"
    })
    .await;
    let start = prom.now().await - 1.0;
    let b = &demo.payments;

    // Closed, with three successes.
    for _ in 0..3 {
        b.call(|| Ok::<_, ()>(())).unwrap();
    }
    prom.until("closed", WAIT, async || state_seen(&prom, 0.0).await)
        .await;

    // Tripped by failures; the next call is rejected.
    while b.state() == State::Closed {
        let _ = b.call(|| Err::<(), _>("down"));
    }
    assert!(b.call(|| Ok::<_, ()>(())).unwrap_err().is_rejected());
    prom.until("open", WAIT, async || state_seen(&prom, 1.0).await)
        .await;
    prom.until(
        "TriplineBreakerOpen to fire",
        Duration::from_secs(30),
        async || {
            let a = prom.api("/api/v1/alerts").await.unwrap_or_default();
            a["data"]["alerts"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|a| {
                    a["labels"]["alertname"] == "TriplineBreakerOpen"
                        && a["labels"]["name"] == "payments"
                        && a["state"] == "firing"
                })
        },
    )
    .await;

    // The open duration passes on the breaker's clock: the next call is a
    // probe, held in flight until Prometheus saw the half-open state.
    let until = b.open_until_time().unwrap();
    clock.advance(until - clock.now());
    let probe = b.try_acquire().unwrap();
    assert_eq!(b.state(), State::HalfOpen);
    prom.until("half-open", WAIT, async || state_seen(&prom, 2.0).await)
        .await;
    probe.record(Outcome::Success, Duration::from_millis(5));
    assert_eq!(b.state(), State::Closed);
    prom.until("closed again", WAIT, async || state_seen(&prom, 0.0).await)
        .await;

    // The counts Prometheus holds are the breaker's own.
    let m = b.metrics();
    let calls = |outcome: &str| {
        format!(r#"tripline_breaker_calls_total{{name="payments",outcome="{outcome}"}}"#)
    };
    prom.until("the final counts", WAIT, async || {
        prom.value(&calls("successful")).await == Some(m.calls.successful as f64)
    })
    .await;
    assert_eq!(m.calls.successful, 4, "three calls and the probe");
    for (outcome, n) in [("failed", m.calls.failed), ("rejected", m.calls.rejected)] {
        assert_eq!(
            prom.value(&calls(outcome)).await,
            Some(n as f64),
            "{outcome}"
        );
    }
    assert_eq!(m.calls.rejected, 1);
    let compat = r#"circuit_breaker_requests_total{name="payments",result="short_circuited"}"#;
    assert_eq!(prom.value(compat).await, Some(1.0));

    let mut transitions = BTreeMap::new();
    for s in prom
        .query(r#"tripline_breaker_transitions_total{name="payments"}"#)
        .await
    {
        let l = &s["metric"];
        let key = format!("{} -> {} ({})", l["from"], l["to"], l["reason"]).replace('"', "");
        transitions.insert(key, s["value"][1].as_str().unwrap().to_string());
    }
    let expected: BTreeMap<String, String> = [
        "closed -> open (failure_rate)",
        "open -> half_open (open_duration_elapsed)",
        "half_open -> closed (probes_succeeded)",
    ]
    .into_iter()
    .map(|k| (k.to_string(), "1".to_string()))
    .collect();
    assert_eq!(transitions, expected);

    // The state history, without repeats: closed, open, half-open, closed.
    let end = prom.now().await + 1.0; // past the last scrape
    let mut history = prom.samples(STATE, start, end).await;
    history.dedup();
    assert_eq!(history, [0.0, 1.0, 2.0, 0.0], "{}", prom.log());
}

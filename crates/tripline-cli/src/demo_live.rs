//! `tripline demo --live`: the proxy for real, in one process, with a
//! scripted outage to watch on its live dashboard.
//!
//! Two in-process upstreams (A and B) sit behind a [`Proxy`] with a route
//! breaker, an endpoint breaker per upstream, outlier detection and a retry
//! budget; a load generator sends [`load::RATE`] requests per second. The
//! script, scaled to `--duration` (60 s by default): both healthy for the
//! first sixth, A answers 503 for the next third (20 s), B turns slow for
//! a quarter, then both are healthy again. Every breaker transition is
//! printed as it happens, with its reason, so the trip → probe → recover
//! cycle can be followed on the terminal and on the dashboard side by side.

mod load;
mod upstream;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;
use tripline::clock::HumanDuration;
use tripline::outlier::{ClusterEvent, ClusterEventKind, ClusterSubscription};
use tripline::{Event, EventKind};
use tripline_proxy::Proxy;
use tripline_proxy::config::ProxyConfig;

use crate::CliError;
use load::Tally;
use upstream::{Behaviour, SLOW_ANSWER, Upstream};

/// Name of the demo's route, and so of its route breaker.
const ROUTE: &str = "demo";
/// Name of the demo's cluster; endpoint breakers are named after it.
const CLUSTER: &str = "backends";

/// The longest `--duration`: a demo, not a soak test, and a bound that
/// keeps every deadline computed from the start far from overflowing.
const LONGEST_RUN: Duration = Duration::from_secs(24 * 3600);

/// One step of the script: from `at` (a fraction of the run), A and B
/// behave as given.
struct Phase {
    at: f64,
    a: Behaviour,
    b: Behaviour,
    says: &'static str,
}

const SCRIPT: [Phase; 4] = [
    Phase {
        at: 0.0,
        a: Behaviour::Healthy,
        b: Behaviour::Healthy,
        says: "healthy: A and B answer 200 at once",
    },
    Phase {
        at: 1.0 / 6.0,
        a: Behaviour::Down,
        b: Behaviour::Healthy,
        says: "outage: A answers 503 to everything",
    },
    Phase {
        at: 0.5,
        a: Behaviour::Healthy,
        b: Behaviour::Slow,
        says: "A is back; B turns slow (300 ms answers, slow calls above 150 ms)",
    },
    Phase {
        at: 0.75,
        a: Behaviour::Healthy,
        b: Behaviour::Healthy,
        says: "recovery: A and B healthy again",
    },
];

/// The proxy config, with the script's timings scaled to the run: open
/// durations, ejection times and the outlier interval shrink with a short
/// `--duration`, so even a 6 s run goes through trip, probe and recover.
fn proxy_config(run: Duration, a: &Upstream, b: &Upstream) -> Result<ProxyConfig, CliError> {
    let scaled = |fraction: f64, floor_ms: u64| {
        let ms = (run.as_secs_f64() * fraction * 1000.0) as u64;
        format!("{}ms", ms.max(floor_ms))
    };
    let open = scaled(1.0 / 30.0, 200);
    let ejection = scaled(1.0 / 20.0, 300);
    let interval = scaled(1.0 / 60.0, 100);
    let slow = SLOW_ANSWER.as_millis() / 2;
    let text = format!(
        r#"
[[listeners]]
address = "127.0.0.1:0"

[[routes]]
name = "{ROUTE}"
cluster = "{CLUSTER}"
breaker = {{ name = "{ROUTE}", window = {{ kind = "count", size = 20 }}, minimum_calls = 10, failure_rate_threshold = 0.5, open_duration = "{open}" }}
retry = {{ attempts = 2, budget = {{ ratio = 0.2 }} }}
timeout = {{ per_try = "1s", overall = "2s" }}

[clusters.{CLUSTER}]
endpoints = ["{a}", "{b}"]
breaker = {{ name = "{CLUSTER}", window = {{ kind = "count", size = 10 }}, minimum_calls = 5, failure_rate_threshold = 0.5, slow_call_duration = "{slow}ms", slow_call_rate_threshold = 0.5, open_duration = "{open}" }}
outlier = {{ interval = "{interval}", base_ejection_time = "{ejection}", max_ejection_percent = 50, consecutive_failures = {{ threshold = 5 }} }}

[admin]
address = "127.0.0.1:0"
"#,
        a = a.addr,
        b = b.addr,
    );
    ProxyConfig::from_toml(&text).map_err(|e| CliError::other(format!("demo config: {e}")))
}

/// Runs the live demo for `run`, or until Ctrl-C.
pub(crate) fn run(run: Duration) -> Result<(), CliError> {
    if run.is_zero() || run > LONGEST_RUN {
        return Err(CliError::input(format!(
            "--duration: must be above zero and at most {}, got {}",
            humantime::format_duration(LONGEST_RUN),
            humantime::format_duration(run)
        )));
    }
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| CliError::other(format!("cannot start the runtime: {e}")))?
        .block_on(live(run))
}

async fn live(run: Duration) -> Result<(), CliError> {
    let io = |what: &str| {
        let what = what.to_owned();
        move |e: std::io::Error| CliError::other(format!("{what}: {e}"))
    };
    let a = Upstream::start("A").await.map_err(io("upstream A"))?;
    let b = Upstream::start("B").await.map_err(io("upstream B"))?;
    let proxy = Proxy::try_new(proxy_config(run, &a, &b)?)
        .map_err(|e| CliError::other(format!("demo config: {e}")))?;
    let (lines, mut transitions) = mpsc::unbounded_channel();
    let _subscriptions = subscribe(&proxy, &lines)?;
    // Installed before the URLs are printed: a Ctrl-C from then on drains
    // the proxy rather than killing the process mid-request.
    let mut interrupt = signal(SignalKind::interrupt()).map_err(io("cannot catch Ctrl-C"))?;
    let mut terminate = signal(SignalKind::terminate()).map_err(io("cannot catch SIGTERM"))?;
    let running = proxy.start().await.map_err(io("cannot start the proxy"))?;
    let listener = *running
        .local_addrs()
        .first()
        .ok_or_else(|| CliError::other("the demo proxy has no listener"))?;
    let admin = running
        .admin_addr()
        .ok_or_else(|| CliError::other("the demo proxy has no admin listener"))?;
    println!("dashboard: http://{admin}/");
    println!(
        "proxy:     http://{listener}/   (upstream A {}, B {})",
        a.addr, b.addr
    );
    println!(
        "load: {} requests/s for {}; Ctrl-C stops",
        load::RATE,
        humantime::format_duration(run)
    );

    let tally = Arc::new(Mutex::new(Tally::default()));
    let (stop, stopped) = watch::channel(false);
    let generator = tokio::spawn(load::generate(listener, tally.clone(), stopped));
    let start = Instant::now();
    let script = async {
        for phase in &SCRIPT {
            tokio::time::sleep_until(start + run.mul_f64(phase.at)).await;
            a.set(phase.a);
            b.set(phase.b);
            println!(
                "[{:>6.1}s] phase: {}",
                start.elapsed().as_secs_f64(),
                phase.says
            );
        }
        tokio::time::sleep_until(start + run).await;
    };
    tokio::pin!(script);
    let interrupted = loop {
        tokio::select! {
            () = &mut script => break false,
            Some((at, line)) = transitions.recv() => print_transition(start, at, &line),
            _ = interrupt.recv() => break true,
            _ = terminate.recv() => break true,
        }
    };
    if interrupted {
        println!(
            "[{:>6.1}s] interrupted: stopping the load, draining the proxy",
            start.elapsed().as_secs_f64()
        );
    }
    let _ = stop.send(true);
    let _ = generator.await;
    let drained = running.shutdown().await;
    while let Ok((at, line)) = transitions.try_recv() {
        print_transition(start, at, &line);
    }
    println!(
        "[{:>6.1}s] proxy drained{}",
        start.elapsed().as_secs_f64(),
        if drained.complete {
            ""
        } else {
            " (drain timeout: connections cut)"
        }
    );
    println!("{}", load::lock(&tally).summary());
    Ok(())
}

/// What the demo listens to; dropping it ends the subscriptions.
type Listening = (Vec<tripline::Subscription>, ClusterSubscription);

/// Subscribes to the route breaker, every endpoint breaker and the
/// cluster's ejections; what happens goes to `lines` stamped with when it
/// happened (printing from the callback would run on the proxy's request
/// path).
fn subscribe(
    proxy: &Proxy,
    lines: &mpsc::UnboundedSender<(Instant, String)>,
) -> Result<Listening, CliError> {
    let route = proxy
        .route_breaker(ROUTE)
        .ok_or_else(|| CliError::other("the demo route has no breaker"))?;
    let cluster = proxy
        .cluster(CLUSTER)
        .ok_or_else(|| CliError::other("the demo cluster is missing"))?;
    let breakers =
        std::iter::once(route).chain(cluster.endpoints().into_iter().map(|e| e.breaker().clone()));
    let breakers = breakers
        .map(|breaker| {
            let lines = lines.clone();
            breaker.subscribe(move |e: &Event| {
                if matches!(e.kind, EventKind::Transition(_)) {
                    let _ = lines.send((Instant::now(), e.to_string()));
                }
            })
        })
        .collect();
    let lines = lines.clone();
    let ejections = cluster.subscribe(move |e: &ClusterEvent| {
        if let Some(line) = describe_ejection(e) {
            let _ = lines.send((Instant::now(), line));
        }
    });
    Ok((breakers, ejections))
}

/// Outlier ejections and returns, the other half of what keeps traffic
/// off a failing endpoint; other cluster events are left to the dashboard.
fn describe_ejection(e: &ClusterEvent) -> Option<String> {
    match &e.kind {
        ClusterEventKind::Ejected {
            endpoint,
            detector,
            duration,
            ejected,
            total,
            ..
        } => Some(format!(
            "{}: {} ejected by {detector} for {} ({ejected} of {total} out)",
            e.cluster,
            endpoint.as_str(),
            HumanDuration(*duration)
        )),
        ClusterEventKind::Returned {
            endpoint,
            ejected_for,
        } => Some(format!(
            "{}: {} back in the pool after {}",
            e.cluster,
            endpoint.as_str(),
            HumanDuration(*ejected_for)
        )),
        _ => None,
    }
}

fn print_transition(start: Instant, at: Instant, line: &str) {
    let elapsed = at.saturating_duration_since(start).as_secs_f64();
    println!("[{elapsed:>6.1}s] {line}");
}

//! A small service that exposes its breakers to Prometheus.
//!
//! ```sh
//! cargo run -p tripline-prometheus --example breaker_service -- 127.0.0.1:9464
//! curl -s 127.0.0.1:9464/metrics | grep tripline_breaker_state_code
//! curl -s -XPOST '127.0.0.1:9464/call/payments?fail=1'    # a failed call; 4 of them trip it
//! curl -s -XPOST '127.0.0.1:9464/call/tenant/acme'        # a call on a registry breaker
//! ```
//!
//! It holds one breaker by itself (`payments`, every family), a registry of
//! per-tenant breakers (essential families per tenant, counts by state for
//! the registry), and a retry budget, all registered with one exporter;
//! `/metrics` streams them, `/call/...` drives them. The integration test
//! `tests/prometheus_server.rs` runs this same service (on a manual clock)
//! under a real Prometheus server.

#![allow(dead_code)] // the integration test uses the parts, not main

use std::convert::Infallible;
use std::future::ready;
use std::sync::Arc;
use std::time::Duration;

use http::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tripline::budget::{RetryBudget, RetryBudgetConfig};
use tripline::clock::SharedClock;
use tripline::registry::{BreakerRegistry, RegistryConfig};
use tripline::{CircuitBreaker, CircuitBreakerConfig, HalfOpenPolicy, WindowConfig};
use tripline_prometheus::http::{MetricsBody, MetricsHandler};
use tripline_prometheus::{Detail, Exporter};

/// The service's protected dependencies and its exporter.
pub struct Demo {
    /// Everything below, registered.
    pub exporter: Exporter,
    /// A breaker exported by itself, at full detail.
    pub payments: CircuitBreaker,
    /// Per-tenant breakers, essential detail each.
    pub tenants: BreakerRegistry<String>,
    /// The retry budget of the payment calls.
    pub budget: RetryBudget,
}

/// The breaker config of the demo: trips at half of at least 4 calls,
/// probes once after 5 s.
pub fn config(name: &str) -> CircuitBreakerConfig {
    CircuitBreakerConfig {
        name: name.into(),
        window: WindowConfig::Count { size: 20 },
        minimum_calls: 4,
        failure_rate_threshold: 0.5,
        half_open: HalfOpenPolicy::Consecutive { successes: 1 },
        max_half_open_duration: Some(Duration::from_secs(60)),
        ..Default::default()
    }
}

/// Builds the demo's breakers on `clock` and registers them.
pub fn demo(clock: SharedClock) -> Result<Demo, Box<dyn std::error::Error>> {
    let exporter = Exporter::builder().compat(true).build()?;
    let payments = CircuitBreaker::builder()
        .config(config("payments"))
        .clock(clock.clone())
        .build()?;
    exporter.register_breaker(&payments, Detail::Full)?;
    let tenants = BreakerRegistry::<String>::builder(RegistryConfig {
        breaker: config("tenant"),
        ..Default::default()
    })
    .clock(clock.clone())
    .build()?;
    exporter.register_registry(&tenants, Detail::Essential)?;
    let budget = RetryBudget::with_clock(RetryBudgetConfig::default(), clock)?;
    exporter.register_budget("payments", &budget)?;
    Ok(Demo {
        exporter,
        payments,
        tenants,
        budget,
    })
}

/// One call through the breaker at `path` (`/call/payments` or
/// `/call/tenant/<key>`), failed if the query says `fail=1`.
fn call(demo: &Demo, path: &str, fail: bool) -> Response<MetricsBody> {
    let breaker = match path.strip_prefix("/call/") {
        Some("payments") => demo.payments.clone(),
        Some(p) => match p
            .strip_prefix("tenant/")
            .map(|k| demo.tenants.get(&k.to_string()))
        {
            Some(Ok(b)) => b,
            _ => return text(StatusCode::NOT_FOUND, "no such breaker\n".into()),
        },
        None => return text(StatusCode::NOT_FOUND, "try /metrics or /call/...\n".into()),
    };
    demo.budget.deposit();
    match breaker.call(|| {
        if fail {
            Err("dependency failed")
        } else {
            Ok("ok")
        }
    }) {
        Ok(v) => text(StatusCode::OK, format!("{v}\n")),
        Err(e) => text(StatusCode::SERVICE_UNAVAILABLE, format!("{e}\n")),
    }
}

fn text(status: StatusCode, body: String) -> Response<MetricsBody> {
    let mut r = Response::new(MetricsBody::from(body));
    *r.status_mut() = status;
    r
}

/// Serves the demo on `listener` until the task is dropped.
pub async fn run(listener: TcpListener, demo: Arc<Demo>) {
    let metrics = MetricsHandler::new(&demo.exporter);
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        };
        let (demo, metrics) = (demo.clone(), metrics.clone());
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |req: Request<hyper::body::Incoming>| {
                let path = req.uri().path();
                let resp = if path == "/metrics" {
                    metrics.respond(&req)
                } else {
                    let fail = req.uri().query().is_some_and(|q| q.contains("fail=1"));
                    call(&demo, path, fail)
                };
                ready(Ok::<_, Infallible>(resp))
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let addr = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:9464".into());
    let listener = TcpListener::bind(&addr).await?;
    println!("serving http://{}/metrics", listener.local_addr()?);
    run(listener, Arc::new(demo(SharedClock::default())?)).await;
    Ok(())
}

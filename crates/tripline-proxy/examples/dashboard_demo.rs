//! A proxy with something to show on its dashboard: three routes over
//! in-process upstreams — `checkout` over a payments service that fails
//! most requests (its breaker trips, probes, trips again), `search` with a
//! breaker per tenant over a cluster where one endpoint fails (and is
//! ejected), `catalog` healthy — and a load generator. It prints
//! `dashboard: <url>` and runs for `--seconds` (default 30).
//!
//! ```sh
//! cargo run -p tripline-proxy --example dashboard_demo -- --seconds 120
//! ```
//!
//! `scripts/dashboard-screenshot` runs it to refresh `docs/dashboard.png`.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::net::TcpListener;
use tripline_proxy::Proxy;
use tripline_proxy::config::ProxyConfig;

/// An upstream failing `fail_per_10` requests in every 10.
async fn upstream(fail_per_10: u64) -> std::io::Result<SocketAddr> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let seen = Arc::new(AtomicU64::new(0));
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let seen = seen.clone();
            let service = service_fn(move |_req| {
                let n = seen.fetch_add(1, Ordering::Relaxed);
                let status = if n % 10 < fail_per_10 { 500 } else { 200 };
                async move {
                    let mut r = http::Response::new(Full::new(Bytes::from_static(b"demo")));
                    *r.status_mut() = http::StatusCode::from_u16(status).unwrap_or_default();
                    Ok::<_, Infallible>(r)
                }
            });
            tokio::spawn(http1::Builder::new().serve_connection(TokioIo::new(stream), service));
        }
    });
    Ok(addr)
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let mut seconds = 30u64;
    while let Some(arg) = args.next() {
        match (arg.as_str(), args.next()) {
            ("--seconds", Some(n)) => seconds = n.parse()?,
            _ => return Err("usage: dashboard_demo [--seconds N]".into()),
        }
    }
    let payments = upstream(8).await?;
    let search_ok = upstream(0).await?;
    let search_bad = upstream(10).await?;
    let catalog = upstream(1).await?;
    let breaker = r#"{ window = { kind = "count", size = 20 }, minimum_calls = 10, failure_rate_threshold = 0.5, open_duration = "3s" }"#;
    let text = format!(
        r#"
[[listeners]]
address = "127.0.0.1:0"

[[routes]]
name = "checkout"
cluster = "payments"
match = {{ path_prefix = "/checkout" }}
breaker = {breaker}

[[routes]]
name = "search"
cluster = "search-pool"
match = {{ path_prefix = "/search" }}
breaker = {breaker}
breaker_key = {{ header = "x-tenant", max_breakers = 8 }}

[[routes]]
name = "catalog"
cluster = "catalog"
breaker = {breaker}

[clusters.payments]
endpoints = ["{payments}"]

[clusters.search-pool]
endpoints = ["{search_ok}", "{search_bad}"]
outlier = {{ interval = "1s", base_ejection_time = "30s", max_ejection_percent = 50, consecutive_failures = {{ threshold = 3 }} }}

[clusters.catalog]
endpoints = ["{catalog}"]

[admin]
address = "127.0.0.1:0"
"#
    );
    let running = Proxy::try_new(ProxyConfig::from_toml(&text)?)?
        .start()
        .await?;
    let addr = running.local_addrs()[0];
    let admin = running.admin_addr().ok_or("no admin listener")?;
    println!("dashboard: http://{admin}/");

    let client = Client::builder(TokioExecutor::new()).build_http::<Full<Bytes>>();
    let load = async {
        for n in 0u64.. {
            let (path, tenant) = match n % 4 {
                0 | 1 => ("/checkout", "shop"),
                2 => ("/search", if n % 8 == 2 { "acme" } else { "globex" }),
                _ => ("/catalog", "shop"),
            };
            let req = http::Request::get(format!("http://{addr}{path}"))
                .header("x-tenant", tenant)
                .body(Full::new(Bytes::new()))?;
            if let Ok(response) = client.request(req).await {
                let _ = response.into_body().collect().await;
            }
            tokio::time::sleep(Duration::from_millis(15)).await;
        }
        Ok::<_, http::Error>(())
    };
    tokio::select! {
        done = load => done?,
        _ = tokio::time::sleep(Duration::from_secs(seconds)) => {}
        _ = tokio::signal::ctrl_c() => {}
    }
    running.shutdown().await;
    Ok(())
}

//! A proxy with something to show on its dashboard: three routes over
//! in-process upstreams — `checkout` over a payments service that fails
//! most requests (its breaker trips, probes, trips again), `search` with a
//! breaker per tenant over a cluster where one endpoint fails (and is
//! ejected), `catalog` healthy — and a load generator. Its breakers
//! follow a watched config file (a `[config_source]`): the demo pushes a
//! document at once, a refused one a few seconds later, then a good one.
//! It prints `dashboard: <url>` and runs for `--seconds` (default 30).
//!
//! ```sh
//! cargo run -p tripline-proxy --example dashboard_demo -- --seconds 120
//! ```
//!
//! `--screenshot PATH` (what `scripts/dashboard-screenshot` runs) drives
//! headless Chromium through `chromedriver` instead: it opens the page,
//! waits until its event stream is live, lets the load and the outage run
//! for `--seconds` with the page watching (so the sparklines and the logs
//! fill from live events), then saves a PNG of the page and exits.

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

/// The documents the demo pushes through its config file, in order, with
/// the seconds to wait before each: a looser catalog breaker, a typo the
/// applier refuses (the last good stays), then a stricter checkout.
const PUSHES: [(u64, &str); 3] = [
    (
        0,
        "author = \"ops@example.com\"\ncomment = \"evening peak\"\n\n[[breaker]]\nname = \"catalog\"\nwindow = { kind = \"count\", size = 20 }\nminimum_calls = 10\nfailure_rate_threshold = 0.6\nopen_duration = \"3s\"\n",
    ),
    (
        4,
        "[[breaker]]\nname = \"checkout\"\nfailure_rate_threshold = 1.5\n",
    ),
    (
        3,
        "author = \"ops@example.com\"\n\n[[breaker]]\nname = \"checkout\"\nwindow = { kind = \"count\", size = 20 }\nminimum_calls = 10\nfailure_rate_threshold = 0.4\nopen_duration = \"3s\"\n",
    ),
];

/// Writes `text` to `path` through a rename, as editors do.
fn write_document(path: &std::path::Path, text: &str) -> std::io::Result<()> {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text)?;
    std::fs::rename(&tmp, path)
}

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
    let mut screenshot = None;
    while let Some(arg) = args.next() {
        match (arg.as_str(), args.next()) {
            ("--seconds", Some(n)) => seconds = n.parse()?,
            ("--screenshot", Some(path)) => screenshot = Some(std::path::PathBuf::from(path)),
            _ => return Err("usage: dashboard_demo [--seconds N] [--screenshot PATH]".into()),
        }
    }
    let config_dir = tempfile::tempdir()?;
    let document = config_dir.path().join("breakers.toml");
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
cluster = "catalog-pool"
breaker = {breaker}

[clusters.payments]
endpoints = ["{payments}"]

[clusters.search-pool]
endpoints = ["{search_ok}", "{search_bad}"]
outlier = {{ interval = "1s", base_ejection_time = "30s", max_ejection_percent = 50, consecutive_failures = {{ threshold = 3 }} }}

[clusters.catalog-pool]
endpoints = ["{catalog}"]

[admin]
address = "127.0.0.1:0"

[config_source]
kind = "file"
path = "{document}"
debounce = "50ms"
"#,
        document = document.display()
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
    let pushes = async {
        for (wait, text) in PUSHES {
            tokio::time::sleep(Duration::from_secs(wait)).await;
            write_document(&document, text)?;
        }
        std::future::pending::<std::io::Result<()>>().await
    };
    let admin_url = format!("http://{admin}/");
    let run = async {
        match &screenshot {
            Some(path) => photograph(&admin_url, admin, seconds, path).await,
            None => {
                tokio::time::sleep(Duration::from_secs(seconds)).await;
                Ok(())
            }
        }
    };
    tokio::select! {
        done = load => done?,
        done = pushes => done?,
        done = run => done?,
        _ = tokio::signal::ctrl_c() => {}
    }
    running.shutdown().await;
    Ok(())
}

/// Opens `url` in headless Chromium, waits for the live event stream,
/// forces one keyed breaker open (to show an operator override), watches
/// for `seconds`, and saves the page as a PNG at `path`.
async fn photograph(
    url: &str,
    admin: SocketAddr,
    seconds: u64,
    path: &std::path::Path,
) -> Result<(), Box<dyn std::error::Error>> {
    let port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    let mut driver = std::process::Command::new("chromedriver")
        .arg(format!("--port={port}"))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .map_err(|e| format!("chromedriver (apt-get install chromium-driver): {e}"))?;
    let result = async {
        let mut tries = 0;
        while tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_err()
        {
            tries += 1;
            if tries > 200 {
                return Err("chromedriver did not listen within 10 s".into());
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let mut caps = serde_json::Map::new();
        caps.insert(
            "goog:chromeOptions".into(),
            serde_json::json!({
                "args": ["--headless=new", "--no-sandbox", "--disable-gpu",
                         "--disable-dev-shm-usage", "--hide-scrollbars", "--window-size=1280,1180"],
            }),
        );
        let page = fantoccini::ClientBuilder::new(
            hyper_util::client::legacy::connect::HttpConnector::new(),
        )
        .capabilities(caps)
        .connect(&format!("http://127.0.0.1:{port}"))
        .await?;
        page.goto(url).await?;
        page.wait()
            .at_most(Duration::from_secs(10))
            .for_element(fantoccini::Locator::Css("#live.up"))
            .await?;
        let force = http::Request::post(format!(
            "http://{admin}/api/breakers/search%3Aacme/force-open"
        ))
        .body(Full::new(Bytes::new()))?;
        let client = Client::builder(TokioExecutor::new()).build_http::<Full<Bytes>>();
        client.request(force).await?;
        tokio::time::sleep(Duration::from_secs(seconds)).await;
        let live = page
            .find(fantoccini::Locator::Css("#live"))
            .await?
            .text()
            .await?;
        if live != "live" {
            return Err(format!("the page's event stream is not live: {live:?}").into());
        }
        let png = page.screenshot().await?;
        std::fs::write(path, png)?;
        page.close().await?;
        println!("saved {}", path.display());
        Ok(())
    }
    .await;
    let _ = driver.kill();
    let _ = driver.wait();
    result
}

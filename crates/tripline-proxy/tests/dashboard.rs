//! The live dashboard end to end in headless Chromium (driven through
//! chromedriver with `fantoccini`): a route breaker tripped by traffic
//! through the proxy shows as open on the page within 2 s; the page's
//! reset button — answering the token prompt the 401 brings up — closes
//! it, as the API and the page both say. With a `[config_source]`, a
//! document written to the watched file shows on the page as the new
//! config version within 2 s, with each breaker's managed marker; a
//! refused one shows its error, and an operator override its marker.
//! With an etcd config source, the fleet panel sums the instances' status
//! keys: a breaker forced open on two of three proxies shows as such.
//!
//! Needs the Debian packages `chromium` and `chromium-driver`; without
//! them the test fails naming them (it never skips).

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly

#[allow(dead_code)] // the proxy tests' helpers; this test uses a few
#[path = "proxy/support.rs"]
mod support;

#[path = "../../tripline-config/tests/support/etcd_server.rs"]
mod etcd_server;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use tokio::time::Instant;

use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::{Value, json};

use support::*;

const ROUTE: &str = r#"breaker = { window = { kind = "count", size = 4 }, minimum_calls = 4, failure_rate_threshold = 0.5, open_duration = "60s" }"#;
const TOKEN: &str = "dashboard-token";

/// A program on `PATH`, or a failure naming the package that provides it.
fn required(program: &str, package: &str) -> PathBuf {
    std::env::var_os("PATH")
        .and_then(|paths| {
            std::env::split_paths(&paths)
                .map(|dir| dir.join(program))
                .find(|p| p.is_file())
        })
        .unwrap_or_else(|| {
            panic!("`{program}` is not installed: apt-get install {package} (the dashboard test needs headless Chromium)")
        })
}

/// chromedriver on a free port, killed when dropped.
struct Driver {
    child: Child,
    url: String,
}

impl Driver {
    async fn start() -> Driver {
        required("chromium", "chromium");
        let driver = required("chromedriver", "chromium-driver");
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = Command::new(driver)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("chromedriver starts");
        let deadline = Instant::now() + BOUND;
        while tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_err()
        {
            assert!(
                Instant::now() < deadline,
                "chromedriver listens within {BOUND:?}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Driver {
            child,
            url: format!("http://127.0.0.1:{port}"),
        }
    }

    async fn browser(&self) -> Client {
        let mut caps = serde_json::Map::new();
        caps.insert(
            "goog:chromeOptions".into(),
            json!({
                "binary": required("chromium", "chromium"),
                "args": ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1280,900"],
            }),
        );
        // chromedriver may accept connections before it serves them (a CI
        // run once had the first session request reset): retry until the
        // bound, then fail with the last error.
        let deadline = Instant::now() + BOUND;
        loop {
            let session =
                ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
                    .capabilities(caps.clone())
                    .connect(&self.url)
                    .await;
            match session {
                Ok(client) => return client,
                Err(e) if Instant::now() < deadline => {
                    eprintln!("no Chromium session yet ({e}); retrying");
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
                Err(e) => panic!("a Chromium session within {BOUND:?}: {e:?}"),
            }
        }
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The state the page shows for `breaker` (its card's `data-state`).
async fn page_state(page: &Client, breaker: &str) -> Option<String> {
    let script = "const c = [...document.querySelectorAll('[data-breaker]')].find(e => e.dataset.breaker === arguments[0]); return c ? c.dataset.state : null;";
    match page.execute(script, vec![json!(breaker)]).await.unwrap() {
        Value::String(s) => Some(s),
        _ => None,
    }
}

/// Waits up to `bound` for the page to show `state` for `breaker`;
/// returns how long it took.
async fn until_page_shows(page: &Client, breaker: &str, state: &str, bound: Duration) -> Duration {
    let start = Instant::now();
    loop {
        if page_state(page, breaker).await.as_deref() == Some(state) {
            return start.elapsed();
        }
        assert!(
            start.elapsed() < bound,
            "the page shows {breaker} as {state} within {bound:?} (it shows {:?})",
            page_state(page, breaker).await
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

async fn api_state(admin: SocketAddr, breaker: &str) -> String {
    let body = get(admin, &format!("/api/breakers/{breaker}")).await.body;
    let v: Value = serde_json::from_str(&body).unwrap();
    v["state"].as_str().unwrap().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_shows_a_trip_live_and_its_reset_button_closes_the_breaker() {
    let driver = Driver::start().await;
    let upstream = Upstream::start(|_| respond(500, "boom")).await;
    let text = format!(
        "{}\n[admin]\naddress = \"127.0.0.1:0\"\ntoken = \"{TOKEN}\"\n",
        config(&[upstream.addr], ROUTE, "")
    );
    let (_proxy, running, addr, _clock) = start_proxy(&text).await;
    let admin = running.admin_addr().unwrap();

    let page = driver.browser().await;
    page.goto(&format!("http://{admin}/")).await.unwrap();
    assert_eq!(page.title().await.unwrap(), "tripline proxy");
    until_page_shows(&page, "api", "closed", BOUND).await;
    // The event stream is connected before the trip, so the page hears it.
    page.wait()
        .at_most(BOUND)
        .for_element(Locator::Css("#live.up"))
        .await
        .unwrap();

    for _ in 0..4 {
        assert_eq!(get(addr, "/").await.status, 500);
    }
    assert_eq!(api_state(admin, "api").await, "open");
    let took = until_page_shows(&page, "api", "open", BOUND).await;
    eprintln!("the page showed the trip after {took:?}");
    let log = page
        .find(Locator::Css("#log"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        log.contains("api: closed → open (failure rate"),
        "transition log: {log}"
    );
    let card = page
        .find(Locator::Css("[data-breaker=\"api\"]"))
        .await
        .unwrap();
    let rates = card
        .find(Locator::Css(".rates"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(rates.contains("/ 50%"), "rates against thresholds: {rates}");
    let config_hidden = page
        .execute(
            "return document.getElementById('config-section').hidden;",
            vec![],
        )
        .await
        .unwrap();
    assert_eq!(
        config_hidden,
        json!(true),
        "no [config_source]: no config log on the page"
    );

    // Reset needs the token: the page asks for it and retries.
    card.find(Locator::Css("button.reset"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    let deadline = Instant::now() + BOUND;
    loop {
        match page.send_alert_text(TOKEN).await {
            Ok(()) => break,
            Err(_) if Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(25)).await
            }
            Err(e) => panic!("the page asks for the admin token: {e}"),
        }
    }
    page.accept_alert().await.unwrap();
    until_page_shows(&page, "api", "closed", BOUND).await;
    assert_eq!(api_state(admin, "api").await, "closed");

    page.close().await.unwrap();
    assert!(running.shutdown().await.complete);
}

/// The text of the element `css` on the page, or "" if there is none.
async fn page_text(page: &Client, css: &str) -> String {
    match page.find(Locator::Css(css)).await {
        Ok(e) => e.text().await.unwrap_or_default(),
        Err(_) => String::new(),
    }
}

/// Waits up to `bound` for `css`'s text to contain `wanted`; returns how
/// long it took.
async fn until_text(page: &Client, css: &str, wanted: &str, bound: Duration) -> Duration {
    let start = Instant::now();
    loop {
        let text = page_text(page, css).await;
        if text.contains(wanted) {
            return start.elapsed();
        }
        assert!(
            start.elapsed() < bound,
            "the page's {css} shows {wanted:?} within {bound:?}; it shows {text:?}"
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// Writes `text` to `path` through a rename, as editors do.
fn write_document(path: &std::path::Path, text: &str) {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_shows_pushed_config_versions_refusals_and_overrides_live() {
    let driver = Driver::start().await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("breakers.toml");
    let upstream = Upstream::start(|_| respond(200, "ok")).await;
    let text = format!(
        "{}\n[admin]\naddress = \"127.0.0.1:0\"\n\n[config_source]\nkind = \"file\"\npath = \"{}\"\ndebounce = \"50ms\"\ninstance_id = \"dash-1\"\n",
        config(&[upstream.addr], ROUTE, ""),
        path.display()
    );
    let (_proxy, running, _addr, _clock) = start_proxy(&text).await;
    let admin = running.admin_addr().unwrap();

    let page = driver.browser().await;
    page.goto(&format!("http://{admin}/")).await.unwrap();
    until_page_shows(&page, "api", "closed", BOUND).await;
    page.wait()
        .at_most(BOUND)
        .for_element(Locator::Css("#live.up"))
        .await
        .unwrap();
    // Before any push: managed, on the proxy file's config.
    until_text(&page, "[data-breaker=\"api\"] .marks", "file config", BOUND).await;

    write_document(
        &path,
        "[[breaker]]\nname = \"api\"\nminimum_calls = 6\nfailure_rate_threshold = 0.4\n",
    );
    let took = until_text(&page, "#config", "config v1 (file)", BOUND).await;
    eprintln!("the page showed config v1 after {took:?}");
    let line = page_text(&page, "#config-log li[data-version=\"1\"]").await;
    assert!(
        line.contains("applied") && line.contains("api.minimum_calls 4 → 6"),
        "the config log line names version, source and change: {line}"
    );
    until_text(
        &page,
        "[data-breaker=\"api\"] .marks",
        "pushed v1 (file rev ",
        BOUND,
    )
    .await;
    until_text(&page, "[data-breaker=\"api\"] .rates", "/ 40%", BOUND).await;

    // A refused document: the page shows why, and the version stays.
    write_document(
        &path,
        "[[breaker]]\nname = \"api\"\nfailure_rate_threshold = 7.0\n",
    );
    let took = until_text(
        &page,
        "#config-log li.refused",
        "failure_rate_threshold",
        BOUND,
    )
    .await;
    eprintln!("the page showed the refusal after {took:?}");
    let refused = page_text(&page, "#config-log li.refused").await;
    assert!(refused.contains("last good config kept"), "{refused}");
    let head = page_text(&page, "#config").await;
    assert!(
        head.contains("config v1") && head.contains("last push refused"),
        "header: {head}"
    );

    // An operator override shows on the breaker's card.
    let forced = send(admin, "POST", "/api/breakers/api/force-open", &[]).await;
    assert_eq!(forced.status, 200, "{}", forced.body);
    until_page_shows(&page, "api", "forced_open", BOUND).await;
    until_text(
        &page,
        "[data-breaker=\"api\"] .marks .override",
        "override: forced open",
        BOUND,
    )
    .await;

    page.close().await.unwrap();
    assert!(running.shutdown().await.complete);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_fleet_panel_shows_a_breaker_open_on_two_of_three_instances() {
    let driver = Driver::start().await;
    let etcd = etcd_server::Etcd::start().await;
    let upstream = Upstream::start(|_| respond(200, "ok")).await;
    let mut fleet = Vec::new();
    for i in 1..=3 {
        let text = format!(
            "{}\n[admin]\naddress = \"127.0.0.1:0\"\n\n[config_source]\nkind = \"etcd\"\nendpoint = \"{}\"\nprefix = \"/tripline/dash\"\ninstance_id = \"edge-{i}\"\nstatus_interval = \"100ms\"\nlease_ttl = \"2s\"\n",
            config(&[upstream.addr], ROUTE, ""),
            etcd.endpoint()
        );
        let (proxy, running, _addr, _clock) = start_proxy(&text).await;
        let admin = running.admin_addr().unwrap();
        fleet.push((proxy, running, admin));
    }
    // An operator forces the breaker open on two of them.
    for (_, _, admin) in &fleet[1..] {
        let forced = admin_json(*admin, "POST", "/api/breakers/api/force-open", "").await;
        assert_eq!(forced.status, 200, "{}", forced.body);
    }
    let page = driver.browser().await;
    page.goto(&format!("http://{}/", fleet[0].2)).await.unwrap();
    let took = until_text(
        &page,
        "#fleet tr[data-breaker=\"api\"][data-state=\"forced_open\"]",
        "2 of 3 (edge-2, edge-3)",
        Duration::from_secs(10),
    )
    .await;
    println!("the fleet panel showed 2 of 3 forced open in {took:?}");
    let closed = page_text(
        &page,
        "#fleet tr[data-breaker=\"api\"][data-state=\"closed\"]",
    )
    .await;
    assert!(closed.contains("1 of 3 (edge-1)"), "{closed}");
    // The API the panel reads says the same.
    let api: Value =
        serde_json::from_str(&send(fleet[0].2, "GET", "/api/fleet", &[]).await.body).unwrap();
    assert_eq!(api["instances"], json!(["edge-1", "edge-2", "edge-3"]));
    page.close().await.unwrap();
    for (_, running, _) in fleet {
        running.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_outliers_panel_shows_an_endpoint_out_for_its_failing_health_check() {
    let driver = Driver::start().await;
    let sick = Upstream::start(|req| {
        if req.uri().path() == "/healthz" {
            respond(503, "down")
        } else {
            respond(200, "ok")
        }
    })
    .await;
    let well = Upstream::start(|_| respond(200, "ok")).await;
    let cluster = r#"panic_threshold_percent = 0
health_check = { http = { path = "/healthz", expect = [200] }, interval = "200ms", timeout = "200ms", unhealthy_threshold = 2, healthy_threshold = 1 }"#;
    let text = config(&[sick.addr, well.addr], "", cluster) + ADMIN_SECTION;
    let (_proxy, running, _addr, _clock) = start_proxy(&text).await;
    let admin = running.admin_addr().unwrap();

    let page = driver.browser().await;
    page.goto(&format!("http://{admin}/")).await.unwrap();
    let row = format!("#outliers tr[data-endpoint=\"{}\"]", sick.addr);
    let took = until_text(&page, &row, "out: health check", Duration::from_secs(10)).await;
    println!("the outliers panel showed the endpoint out for its health check in {took:?}");
    let shown = page_text(&page, &row).await;
    assert!(
        shown.contains("unhealthy (last: status 503, expected [200])"),
        "{shown}"
    );
    let other = page_text(
        &page,
        &format!("#outliers tr[data-endpoint=\"{}\"]", well.addr),
    )
    .await;
    assert!(other.contains("in") && other.contains("healthy"), "{other}");
    page.close().await.unwrap();
    running.shutdown().await;
}

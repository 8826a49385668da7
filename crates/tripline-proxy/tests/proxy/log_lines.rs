//! The proxy says what it is doing, one `tracing` line per event: a
//! breaker's trip (route and endpoint breakers), a reload (what changed,
//! or why it was refused), and a failed upstream connection, at most one
//! line per endpoint every 10 s of the proxy's clock.

use std::sync::Mutex;
use std::time::Duration;

use tripline_proxy::config::ProxyConfig;

use crate::support::*;

/// The captured lines that contain `needle`.
fn lines_with(lines: &Mutex<Vec<u8>>, needle: &str) -> Vec<String> {
    logged(lines)
        .lines()
        .filter(|l| l.contains(needle))
        .map(str::to_owned)
        .collect()
}

const ROUTE: &str = r#"breaker = { window = { kind = "count", size = 4 }, minimum_calls = 4, failure_rate_threshold = 0.5, open_duration = "10s" }"#;

#[tokio::test]
async fn a_trip_is_one_line_naming_the_breaker_its_states_and_why() {
    let (lines, _guard) = capture_logs();
    let upstream = Upstream::start(|_| respond(500, "boom")).await;
    // The endpoint's breaker and the route's trip on the same answer.
    let (_proxy, running, addr, _clock) =
        start_proxy(&config(&[upstream.addr], ROUTE, ROUTE)).await;
    for _ in 0..4 {
        get(addr, "/").await;
    }
    let trips = lines_with(&lines, "to=open");
    assert_eq!(trips.len(), 2, "the endpoint's and the route's: {trips:#?}");
    let endpoint = format!("breaker=backend:{}", upstream.addr);
    for (name, line) in [(endpoint.as_str(), &trips[0]), ("breaker=api", &trips[1])] {
        assert!(line.contains(name), "{name} in {line}");
        assert!(line.contains("from=closed"), "{line}");
        assert!(line.contains("reason=failure_rate"), "{line}");
    }
    assert!(running.shutdown().await.complete);
}

#[tokio::test]
async fn a_failed_connection_is_logged_once_per_endpoint_every_ten_seconds() {
    let (lines, _guard) = capture_logs();
    // An address nothing listens on: every connection is refused.
    let dead = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let cluster = r#"breaker = { minimum_calls = 1000 }"#;
    let (_proxy, running, addr, clock) = start_proxy(&config(&[dead], "", cluster)).await;
    for _ in 0..5 {
        assert_eq!(get(addr, "/").await.header("x-tripline-flag"), Some("UF"));
    }
    let logged = lines_with(&lines, "cannot connect to");
    assert_eq!(logged.len(), 1, "{logged:#?}");
    assert!(logged[0].contains("WARN"), "{}", logged[0]);
    assert!(
        logged[0].contains(&format!("cannot connect to {dead} (cluster backend)")),
        "{}",
        logged[0]
    );
    assert!(logged[0].contains("suppressed=0"), "{}", logged[0]);

    clock.advance(Duration::from_secs(9));
    get(addr, "/").await;
    assert_eq!(lines_with(&lines, "cannot connect to").len(), 1);
    clock.advance(Duration::from_secs(1));
    get(addr, "/").await;
    let logged = lines_with(&lines, "cannot connect to");
    assert_eq!(logged.len(), 2, "{logged:#?}");
    assert!(
        logged[1].contains("suppressed=5"),
        "the five left out are counted: {}",
        logged[1]
    );
    assert!(running.shutdown().await.complete);
}

#[tokio::test]
async fn a_reload_is_one_line_saying_what_changed_or_why_it_was_refused() {
    let (lines, _guard) = capture_logs();
    let upstream = Upstream::start(|_| respond(200, "ok")).await;
    let text = format!("{}{ADMIN_SECTION}", config(&[upstream.addr], "", ""));
    let (_proxy, running, _addr, _clock) = start_proxy(&text).await;
    let changed = text.replace("name = \"api\"", "name = \"orders\"");
    running
        .reload(ProxyConfig::from_toml(&changed).unwrap())
        .unwrap();
    let reloaded = lines_with(&lines, "tripline_proxy::reload");
    assert_eq!(reloaded.len(), 1, "{reloaded:#?}");
    assert!(
        reloaded[0].contains("config reloaded: routes added: orders; routes removed: api"),
        "{}",
        reloaded[0]
    );
    assert!(
        lines_with(&lines, "admin audit").is_empty(),
        "one line, not two"
    );

    let mut invalid = ProxyConfig::from_toml(&changed).unwrap();
    invalid.routes[0].cluster = "nowhere".into();
    assert!(running.reload(invalid).is_err());
    let refused = lines_with(&lines, "config reload refused");
    assert_eq!(refused.len(), 1, "{refused:#?}");
    assert!(refused[0].contains("WARN"), "{}", refused[0]);
    assert!(refused[0].contains("nowhere"), "{}", refused[0]);
    assert!(running.shutdown().await.complete);
}

//! Retries wait before they go: an exponential back-off with full jitter
//! (`retry.base`, `retry.max`), or the `Retry-After` the failed answer
//! asked for, never past the request's deadline. Run on paused time, end
//! to end through real sockets.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::time::{Instant, sleep};
use tripline_proxy::config::ProxyConfig;

use crate::support::*;

/// Keeps paused time's jumps small while loopback bytes are in flight
/// (as the default-timeout and parking tests do).
fn pace() -> tokio::task::JoinHandle<()> {
    tokio::spawn(async {
        loop {
            sleep(Duration::from_millis(1)).await;
            for _ in 0..20 {
                std::thread::yield_now();
            }
        }
    })
}

/// An upstream whose odd-numbered requests fail with 503 (and `retry_after`,
/// when given) and whose even-numbered ones succeed.
async fn failing_every_other(retry_after: Option<&'static str>) -> Upstream {
    let seen = Arc::new(AtomicUsize::new(0));
    Upstream::start(move |_| {
        if seen.fetch_add(1, Ordering::SeqCst).is_multiple_of(2) {
            let mut r = respond(503, "busy");
            if let Some(wait) = retry_after {
                r.headers_mut().insert("retry-after", wait.parse().unwrap());
            }
            r
        } else {
            respond(200, "ok")
        }
    })
    .await
}

/// Endpoint breakers that will not trip within a test.
const PATIENT_ENDPOINTS: &str =
    r#"breaker = { window = { kind = "count", size = 1000 }, minimum_calls = 1000 }"#;

/// The status of a GET through the proxy, however long it takes (the
/// support's `get` gives up after its own bound, shorter than these waits).
async fn status_of_get(proxy: std::net::SocketAddr) -> u16 {
    let req = hyper::Request::get(format!("http://{proxy}/"))
        .body(http_body_util::Full::new(bytes::Bytes::new()))
        .unwrap();
    client().request(req).await.unwrap().status().as_u16()
}

#[tokio::test(start_paused = true)]
async fn a_retry_waits_for_the_retry_after_of_the_failed_answer() {
    let _pace = pace();
    // The failing endpoint is parked for its Retry-After, so the retry goes
    // to the other one, after the wait the answer asked for.
    let busy = Upstream::start(|_| {
        let mut r = respond(503, "busy");
        r.headers_mut().insert("retry-after", "30".parse().unwrap());
        r
    })
    .await;
    let good = Upstream::start(|_| respond(200, "ok")).await;
    let route = r#"retry = { attempts = 2 }
timeout = { overall = "60s" }"#;
    let config = config(&[busy.addr, good.addr], route, "");
    let (_proxy, running, addr, _clock) = start_proxy(&config).await;
    let started = Instant::now();
    let status = status_of_get(addr).await;
    let waited = started.elapsed();
    assert_eq!((status, busy.hits(), good.hits()), (200, 1, 1));
    assert!(
        waited >= Duration::from_secs(30) && waited < Duration::from_secs(31),
        "{waited:?}"
    );
    running.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn the_deadline_bounds_the_wait_for_retry_after() {
    let _pace = pace();
    let upstream = failing_every_other(Some("3600")).await;
    let good = Upstream::start(|_| respond(200, "ok")).await;
    let route = r#"retry = { attempts = 2 }
timeout = { overall = "2s" }"#;
    let config = config(&[upstream.addr, good.addr], route, "");
    let (_proxy, running, addr, _clock) = start_proxy(&config).await;
    let started = Instant::now();
    let answer = get(addr, "/").await;
    let waited = started.elapsed();
    // No time is left for the retry: the client gets the failed answer,
    // at the deadline, not an hour later.
    assert_eq!((answer.status, good.hits()), (503, 0));
    assert!(waited <= Duration::from_millis(2100), "{waited:?}");
    running.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn retries_are_spread_by_a_jittered_back_off_within_its_cap() {
    let _pace = pace();
    let upstream = failing_every_other(None).await;
    let route = r#"retry = { attempts = 2, base = "10s", max = "10s", budget = { ratio = 1.0 } }
timeout = { overall = "60s" }"#;
    let config = config(&[upstream.addr], route, PATIENT_ENDPOINTS);
    let (_proxy, running, addr, _clock) = start_proxy(&config).await;
    let mut waits = Vec::new();
    for _ in 0..20 {
        let started = Instant::now();
        assert_eq!(status_of_get(addr).await, 200);
        waits.push(started.elapsed());
    }
    // Full jitter: each wait uniform in [0, 10 s]; twenty of them sum to
    // 100 s on average and below 40 s with a chance under one in a million.
    let cap = Duration::from_millis(10_100);
    assert!(waits.iter().all(|w| *w <= cap), "{waits:?}");
    let total: Duration = waits.iter().sum();
    assert!(total >= Duration::from_secs(40), "{waits:?}");
    let distinct = waits
        .iter()
        .map(|w| w.as_millis() / 100)
        .collect::<std::collections::BTreeSet<_>>();
    assert!(distinct.len() > 10, "retries in step: {waits:?}");
    running.shutdown().await;
}

#[test]
fn a_back_off_base_over_its_max_is_refused_at_load() {
    let text = "[[listeners]]\naddress = \"127.0.0.1:0\"\n\n[clusters.backend]\nendpoints = [\"127.0.0.1:9000\"]\n\n[[routes]]\nname = \"api\"\ncluster = \"backend\"\n[routes.retry]\nattempts = 2\nbase = \"1s\"\nmax = \"100ms\"\n";
    let e = ProxyConfig::from_toml(text).unwrap_err();
    assert_eq!(e.field, "routes[0].retry.base");
    assert_eq!(e.line, Some(12));
    assert!(e.to_string().contains("must be at most retry.max"), "{e}");
}

#[tokio::test]
async fn a_retry_goes_to_an_endpoint_not_yet_tried_whatever_the_balancer() {
    for balancer in ["weighted_random", "p2c", "least_outstanding", "round_robin"] {
        let bad = Upstream::start(|_| respond(502, "bad")).await;
        let good = Upstream::start(|_| respond(200, "good")).await;
        let route = r#"retry = { attempts = 2, base = "0s", budget = { ratio = 1.0 } }"#;
        let cluster = format!("balancer = \"{balancer}\"\n{PATIENT_ENDPOINTS}");
        let (_proxy, running, addr, _clock) =
            start_proxy(&config(&[bad.addr, good.addr], route, &cluster)).await;
        for _ in 0..30 {
            let answer = get(addr, "/").await;
            // A random balancer left to itself picks `bad` twice in a row
            // for about one request in four.
            assert_eq!(
                (answer.status, answer.body.as_str()),
                (200, "good"),
                "{balancer}"
            );
        }
        assert_eq!(good.hits(), 30, "{balancer}");
        assert!(bad.hits() <= 30, "{balancer}: {}", bad.hits());
        running.shutdown().await;
    }
}

/// Hits on an upstream that answers `first` (with `header`, if any) to its
/// first request and 200 after, behind a route retrying once on `retry_on`.
async fn hits_after_one_failure(
    first: u16,
    header: Option<(&'static str, &'static str)>,
    retry_on: &str,
) -> (u16, usize) {
    let seen = Arc::new(AtomicUsize::new(0));
    let upstream = Upstream::start(move |_| {
        if seen.fetch_add(1, Ordering::SeqCst) == 0 {
            let mut r = respond(first, "first");
            if let Some((name, value)) = header {
                r.headers_mut().insert(name, value.parse().unwrap());
            }
            r
        } else {
            respond(200, "ok")
        }
    })
    .await;
    let route = format!("retry = {{ attempts = 2, base = \"0s\", retry_on = {retry_on} }}");
    let (_proxy, running, addr, _clock) =
        start_proxy(&config(&[upstream.addr], &route, PATIENT_ENDPOINTS)).await;
    let status = get(addr, "/").await.status;
    running.shutdown().await;
    (status, upstream.hits())
}

#[tokio::test]
async fn retry_on_retries_exactly_the_listed_conditions() {
    // A 500 is retried under 5xx, not under gateway-error or connect-failure.
    assert_eq!(
        hits_after_one_failure(500, None, r#"["5xx"]"#).await,
        (200, 2)
    );
    assert_eq!(
        hits_after_one_failure(500, None, r#"["gateway-error"]"#).await,
        (500, 1)
    );
    assert_eq!(
        hits_after_one_failure(503, None, r#"["gateway-error"]"#).await,
        (200, 2)
    );
    assert_eq!(
        hits_after_one_failure(503, None, r#"["connect-failure"]"#).await,
        (503, 1)
    );
    // retriable-4xx is 409 only.
    assert_eq!(
        hits_after_one_failure(409, None, r#"["retriable-4xx"]"#).await,
        (200, 2)
    );
    assert_eq!(
        hits_after_one_failure(404, None, r#"["retriable-4xx"]"#).await,
        (404, 1)
    );
    // A 429 only when listed in retriable_status_codes.
    let listed = r#"["retriable-status-codes"], retriable_status_codes = [429]"#;
    assert_eq!(hits_after_one_failure(429, None, listed).await, (200, 2));
    // A trailers-only gRPC answer carrying UNAVAILABLE (14).
    let unavailable = Some(("grpc-status", "14"));
    let grpc = r#"["grpc:unavailable"]"#;
    assert_eq!(
        hits_after_one_failure(200, unavailable, grpc).await,
        (200, 2)
    );
    let exhausted = r#"["grpc:resource-exhausted"]"#;
    assert_eq!(
        hits_after_one_failure(200, unavailable, exhausted).await.1,
        1
    );
}

#[tokio::test]
async fn without_retry_on_a_route_retries_what_it_counts_failed() {
    let defaults = "retry = { attempts = 2, base = \"0s\" }";
    for (first, hits) in [(500, 2), (503, 2), (409, 1), (404, 1)] {
        let seen = Arc::new(AtomicUsize::new(0));
        let upstream = Upstream::start(move |_| {
            let n = seen.fetch_add(1, Ordering::SeqCst);
            respond(if n == 0 { first } else { 200 }, "x")
        })
        .await;
        let (_proxy, running, addr, _clock) =
            start_proxy(&config(&[upstream.addr], defaults, PATIENT_ENDPOINTS)).await;
        get(addr, "/").await;
        assert_eq!(upstream.hits(), hits, "{first}");
        running.shutdown().await;
    }
}

#[test]
fn an_unknown_retry_on_condition_is_refused_at_load_with_the_known_ones() {
    let text = "[[listeners]]\naddress = \"127.0.0.1:0\"\n\n[clusters.backend]\nendpoints = [\"127.0.0.1:9000\"]\n\n[[routes]]\nname = \"api\"\ncluster = \"backend\"\n[routes.retry]\nattempts = 2\nretry_on = [\"5xx\", \"timeouts\"]\n";
    let e = ProxyConfig::from_toml(text).unwrap_err();
    assert_eq!(e.field, "routes[0].retry.retry_on");
    assert_eq!(e.line, Some(12));
    let shown = e.to_string();
    assert!(shown.contains("unknown condition \"timeouts\""), "{shown}");
    assert!(
        shown.contains("gateway-error") && shown.contains("grpc:unavailable"),
        "{shown}"
    );
}

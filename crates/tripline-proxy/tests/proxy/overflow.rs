//! A cluster's overflow limits through real sockets: `max_requests`,
//! `max_connections` with its pending queue, `max_retries`, and an
//! endpoint's `max_concurrent` with its queue. Each refusal is 503
//! `upstream_overflow` (`UO`), counted by cluster and limit, and charged
//! to no breaker.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::Semaphore;

use crate::support::*;

/// An upstream that counts each request's arrival, holds it until the
/// gate lets it through, then answers 503 to the first `failing`
/// arrivals and 200 to the rest.
async fn gated(gate: Arc<Semaphore>, failing: usize) -> (SocketAddr, Arc<AtomicUsize>) {
    let arrivals = Arc::new(AtomicUsize::new(0));
    let counted = arrivals.clone();
    let addr = raw_upstream(move |mut s| {
        let gate = gate.clone();
        let arrivals = counted.clone();
        async move {
            let mut seen = Vec::new();
            while read_request_head(&mut s, &mut seen).await {
                seen.clear();
                let n = arrivals.fetch_add(1, Ordering::SeqCst) + 1;
                if let Ok(permit) = gate.acquire().await {
                    permit.forget();
                }
                let answer: &[u8] = if n <= failing {
                    b"HTTP/1.1 503 Service Unavailable\r\ncontent-length: 4\r\n\r\nbusy"
                } else {
                    b"HTTP/1.1 200 OK\r\ncontent-length: 4\r\n\r\ndone"
                };
                if s.write_all(answer).await.is_err() {
                    return;
                }
            }
            let _ = s.read(&mut [0u8; 1]).await;
        }
    })
    .await;
    (addr, arrivals)
}

/// Waits (bounded) until `check` holds.
async fn until(what: &str, check: impl Fn() -> bool) {
    let start = tokio::time::Instant::now();
    while !check() {
        assert!(start.elapsed() < BOUND, "{what}: not within {BOUND:?}");
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
}

/// Sends `n` GETs at once; their answers, in any order.
fn spawn_gets(addr: SocketAddr, n: usize) -> Vec<tokio::task::JoinHandle<Answer>> {
    (0..n)
        .map(|_| tokio::spawn(async move { get(addr, "/").await }))
        .collect()
}

fn is_overflow(a: &Answer) -> bool {
    a.status == 503
        && a.header("x-tripline-rejected") == Some("upstream_overflow")
        && a.header("x-tripline-flag") == Some("UO")
}

async fn overflow_count(admin: SocketAddr, limit: &str) -> f64 {
    let series =
        format!("tripline_proxy_upstream_overflow_total{{cluster=\"backend\",limit=\"{limit}\"}}");
    metric(admin, &series).await.unwrap_or(-1.0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_requests_of_10_under_50_at_once_answers_40_with_uo_and_charges_no_breaker() {
    let gate = Arc::new(Semaphore::new(0));
    let (upstream, arrivals) = gated(gate.clone(), 0).await;
    let text = config(
        &[upstream],
        "breaker = { window = { kind = \"count\", size = 100 }, minimum_calls = 5 }",
        "limits = { max_requests = 10 }",
    ) + ADMIN_SECTION;
    let (proxy, running, addr, _clock) = start_proxy(&text).await;
    let admin = running.admin_addr().unwrap();
    let answers = spawn_gets(addr, 50);
    until("10 requests at the endpoint", || {
        arrivals.load(Ordering::SeqCst) == 10
    })
    .await;
    until("the 40 others refused", || {
        answers.iter().filter(|a| a.is_finished()).count() == 40
    })
    .await;
    gate.add_permits(10);
    let mut refused = 0;
    let mut served = 0;
    for a in answers {
        let a = a.await.unwrap();
        if is_overflow(&a) {
            refused += 1;
        } else {
            assert_eq!(a.status, 200, "{a:?}");
            served += 1;
        }
    }
    assert_eq!((served, refused), (10, 40));
    assert_eq!(
        arrivals.load(Ordering::SeqCst),
        10,
        "no refused request reached it"
    );
    let endpoint = endpoint_breaker(&proxy, upstream).metrics();
    assert_eq!(endpoint.state, tripline::State::Closed);
    assert_eq!(endpoint.calls.failed, 0, "{endpoint:?}");
    let route = proxy.route_breaker("api").unwrap().metrics();
    assert_eq!(route.calls.failed, 0, "{route:?}");
    assert_eq!(overflow_count(admin, "max_requests").await, 40.0);
    let flagged = metric(
        admin,
        "tripline_proxy_refusals_total{route=\"api\",flag=\"UO\"}",
    )
    .await;
    assert_eq!(flagged, Some(40.0));
    let outliers: serde_json::Value =
        serde_json::from_str(&send(admin, "GET", "/api/outliers", &[]).await.body).unwrap();
    let overflow = &outliers["clusters"][0]["overflow"];
    assert_eq!(overflow["limits"]["max_requests"], 10, "{overflow}");
    assert_eq!(overflow["requests"], 0, "every slot given back: {overflow}");
    assert_eq!(overflow["refused"]["max_requests"], 40, "{overflow}");
    running.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_connections_and_three_pending_serve_five_of_ten_and_refuse_the_rest() {
    let gate = Arc::new(Semaphore::new(0));
    let (upstream, arrivals) = gated(gate.clone(), 0).await;
    let text = config(
        &[upstream],
        "",
        "limits = { max_connections = 2, max_pending_requests = 3 }",
    ) + ADMIN_SECTION;
    let (_proxy, running, addr, _clock) = start_proxy(&text).await;
    let admin = running.admin_addr().unwrap();
    let answers = spawn_gets(addr, 10);
    until("2 at the endpoint", || arrivals.load(Ordering::SeqCst) == 2).await;
    until("5 refused", || {
        answers.iter().filter(|a| a.is_finished()).count() == 5
    })
    .await;
    assert_eq!(arrivals.load(Ordering::SeqCst), 2, "the pending ones wait");
    // What the limits hold, as gauges beside the limits themselves.
    let gauge = |name: &'static str, limit: &'static str| async move {
        let series =
            format!("tripline_proxy_upstream_{name}{{cluster=\"backend\",limit=\"{limit}\"}}");
        metric(admin, &series).await
    };
    assert_eq!(gauge("in_use", "max_connections").await, Some(2.0));
    assert_eq!(gauge("in_use", "max_pending_requests").await, Some(3.0));
    assert_eq!(gauge("limit", "max_connections").await, Some(2.0));
    assert_eq!(gauge("limit", "max_pending_requests").await, Some(3.0));
    assert_eq!(gauge("in_use", "max_requests").await, None, "not limited");
    gate.add_permits(5);
    let answers: Vec<Answer> = futures_join(answers).await;
    let refused = answers.iter().filter(|a| is_overflow(a)).count();
    let served = answers.iter().filter(|a| a.status == 200).count();
    assert_eq!((served, refused), (5, 5), "{answers:?}");
    assert_eq!(arrivals.load(Ordering::SeqCst), 5);
    assert_eq!(overflow_count(admin, "max_pending_requests").await, 5.0);
    assert_eq!(gauge("in_use", "max_connections").await, Some(0.0));
    assert_eq!(gauge("in_use", "max_pending_requests").await, Some(0.0));
    running.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_retries_of_one_keeps_one_retry_in_flight_and_the_other_answers_stand() {
    let gate = Arc::new(Semaphore::new(0));
    let (upstream, arrivals) = gated(gate.clone(), 5).await;
    let text = config(
        &[upstream],
        "retry = { attempts = 2, base = \"0s\", budget = { ratio = 1.0 } }",
        "limits = { max_retries = 1 }\nbreaker = { window = { kind = \"count\", size = 100 }, minimum_calls = 100 }",
    ) + ADMIN_SECTION;
    let (_proxy, running, addr, _clock) = start_proxy(&text).await;
    let admin = running.admin_addr().unwrap();
    let answers = spawn_gets(addr, 5);
    until("5 first tries held", || {
        arrivals.load(Ordering::SeqCst) == 5
    })
    .await;
    // The five fail at once; one retry is sent (and held), four stand.
    gate.add_permits(5);
    until("one retry in flight", || {
        arrivals.load(Ordering::SeqCst) == 6
    })
    .await;
    until("four answers stand", || {
        answers.iter().filter(|a| a.is_finished()).count() == 4
    })
    .await;
    gate.add_permits(1);
    let answers: Vec<Answer> = futures_join(answers).await;
    let stood: Vec<&Answer> = answers.iter().filter(|a| a.status == 503).collect();
    assert_eq!(stood.len(), 4, "{answers:?}");
    for a in stood {
        assert_eq!(a.body, "busy", "the endpoint's own answer stands");
        assert_eq!(
            a.header("x-tripline-retry-refused"),
            Some("upstream_overflow")
        );
    }
    assert_eq!(answers.iter().filter(|a| a.status == 200).count(), 1);
    assert_eq!(arrivals.load(Ordering::SeqCst), 6, "one retry, never two");
    assert_eq!(overflow_count(admin, "max_retries").await, 4.0);
    running.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_endpoint_at_max_concurrent_queues_in_order_and_refuses_past_its_queue() {
    let gate = Arc::new(Semaphore::new(0));
    let (upstream, arrivals) = gated(gate.clone(), 0).await;
    let text = config(
        &[upstream],
        "",
        "endpoint_limits = { max_concurrent = 1, max_queue = 1, queue_timeout = \"10s\" }",
    ) + ADMIN_SECTION;
    let (proxy, running, addr, _clock) = start_proxy(&text).await;
    let admin = running.admin_addr().unwrap();
    let answers = spawn_gets(addr, 3);
    until("one at the endpoint", || {
        arrivals.load(Ordering::SeqCst) == 1
    })
    .await;
    until("one refused past the queue", || {
        answers.iter().filter(|a| a.is_finished()).count() == 1
    })
    .await;
    gate.add_permits(1);
    until("the queued one sent", || {
        arrivals.load(Ordering::SeqCst) == 2
    })
    .await;
    gate.add_permits(1);
    let answers: Vec<Answer> = futures_join(answers).await;
    assert_eq!(answers.iter().filter(|a| a.status == 200).count(), 2);
    assert_eq!(answers.iter().filter(|a| is_overflow(a)).count(), 1);
    assert_eq!(overflow_count(admin, "endpoint").await, 1.0);
    assert_eq!(endpoint_breaker(&proxy, upstream).metrics().calls.failed, 0);
    running.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_try_that_waits_past_its_queue_timeout_is_refused() {
    let gate = Arc::new(Semaphore::new(0));
    let (upstream, arrivals) = gated(gate.clone(), 0).await;
    let text = config(
        &[upstream],
        "",
        "endpoint_limits = { max_concurrent = 1, max_queue = 5, queue_timeout = \"200ms\" }",
    );
    let (_proxy, running, addr, _clock) = start_proxy(&text).await;
    let held = spawn_gets(addr, 1);
    until("one at the endpoint", || {
        arrivals.load(Ordering::SeqCst) == 1
    })
    .await;
    // Waits its 200 ms in the queue behind the held one, then is refused.
    let queued = get(addr, "/").await;
    assert!(is_overflow(&queued), "{queued:?}");
    gate.add_permits(1);
    let held: Vec<Answer> = futures_join(held).await;
    assert_eq!(held[0].status, 200);
    running.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_that_changes_the_limits_keeps_the_cluster_and_applies_them() {
    let gate = Arc::new(Semaphore::new(0));
    let (upstream, arrivals) = gated(gate.clone(), 0).await;
    let with = |max: u32| {
        config(
            &[upstream],
            "",
            &format!("limits = {{ max_requests = {max} }}"),
        ) + ADMIN_SECTION
    };
    let (proxy, running, addr, _clock) = start_proxy(&with(10)).await;
    // An open endpoint breaker: the cluster's state, which a rebuild loses.
    endpoint_breaker(&proxy, upstream).force_open();
    let report = proxy
        .reload(tripline_proxy::config::ProxyConfig::from_toml(&with(1)).unwrap())
        .unwrap();
    assert_eq!(report.clusters_kept, ["backend"]);
    assert_eq!(
        endpoint_breaker(&proxy, upstream).state(),
        tripline::State::ForcedOpen,
        "the kept cluster keeps its breakers"
    );
    endpoint_breaker(&proxy, upstream).reset();
    let answers = spawn_gets(addr, 3);
    until("one at the endpoint", || {
        arrivals.load(Ordering::SeqCst) == 1
    })
    .await;
    until("two refused at the new limit", || {
        answers.iter().filter(|a| a.is_finished()).count() == 2
    })
    .await;
    // One series per cluster, from the limits new requests are admitted by.
    let admin = running.admin_addr().unwrap();
    let scrape = send(admin, "GET", "/metrics", &[]).await.body;
    let series: Vec<&str> = scrape
        .lines()
        .filter(|l| l.starts_with("tripline_proxy_upstream_limit{"))
        .collect();
    assert_eq!(
        series,
        ["tripline_proxy_upstream_limit{cluster=\"backend\",limit=\"max_requests\"} 1"],
        "{scrape}"
    );
    let in_use = "tripline_proxy_upstream_in_use{cluster=\"backend\",limit=\"max_requests\"}";
    assert_eq!(metric(admin, in_use).await, Some(1.0));
    gate.add_permits(1);
    let answers: Vec<Answer> = futures_join(answers).await;
    assert_eq!(answers.iter().filter(|a| is_overflow(a)).count(), 2);
    running.shutdown().await;
}

#[test]
fn limits_of_zero_and_limits_that_cannot_apply_are_refused_naming_the_field() {
    let with = |cluster: &str, protocol: &str| {
        format!(
            "[[listeners]]\naddress = \"127.0.0.1:0\"\n\n[[routes]]\nname = \"api\"\ncluster = \"backend\"\n\n[clusters.backend]\nendpoints = [\"127.0.0.1:9000\"]\n{protocol}{cluster}\n"
        )
    };
    for (cluster, protocol, field, says) in [
        (
            "limits = { max_requests = 0 }",
            "",
            "clusters.backend.limits.max_requests",
            "at least 1",
        ),
        (
            "limits = { max_connections = 0 }",
            "",
            "clusters.backend.limits.max_connections",
            "at least 1",
        ),
        (
            "limits = { max_retries = 0 }",
            "",
            "clusters.backend.limits.max_retries",
            "at least 1",
        ),
        (
            "limits = { max_pending_requests = 5 }",
            "",
            "clusters.backend.limits.max_pending_requests",
            "max_connections",
        ),
        (
            "limits = { max_connections = 5 }",
            "protocol = \"h2c\"\n",
            "clusters.backend.limits.max_connections",
            "max_requests",
        ),
        (
            "endpoint_limits = { max_concurrent = 0 }",
            "",
            "clusters.backend.endpoint_limits.max_concurrent",
            "at least 1",
        ),
        (
            "endpoint_limits = { max_concurrent = 1, max_queue = 3, queue_timeout = \"0s\" }",
            "",
            "clusters.backend.endpoint_limits.queue_timeout",
            "more than 0",
        ),
        (
            "limits = { max_request = 5 }",
            "",
            "max_request",
            "unknown field",
        ),
    ] {
        let error = tripline_proxy::config::ProxyConfig::from_toml(&with(cluster, protocol))
            .unwrap_err()
            .to_string();
        assert!(
            error.contains(field) && error.contains(says),
            "{cluster}: {error}"
        );
    }
}

/// Awaits every answer, in order.
async fn futures_join(handles: Vec<tokio::task::JoinHandle<Answer>>) -> Vec<Answer> {
    let mut out = Vec::with_capacity(handles.len());
    for h in handles {
        out.push(h.await.unwrap());
    }
    out
}

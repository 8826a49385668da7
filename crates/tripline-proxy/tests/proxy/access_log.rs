//! The access log: one line per request (JSON, or text from a template),
//! with every try, hedges included, written by
//! a task of its own and flushed on drain.

use std::net::SocketAddr;

use crate::support::*;

fn log_config(bad: SocketAddr, good: SocketAddr, path: &std::path::Path) -> String {
    format!(
        r#"
[[listeners]]
address = "127.0.0.1:0"

[[routes]]
name = "api"
cluster = "backend"
match = {{ path_prefix = "/api" }}
retry = {{ attempts = 2 }}

[[routes]]
name = "plain"
cluster = "solo"
match = {{ path_prefix = "/plain" }}

[clusters.backend]
endpoints = ["{bad}", "{good}"]

[clusters.solo]
endpoints = ["{good}"]

[access_log]
mode = "full"
path = {path:?}
"#
    )
}

#[tokio::test]
async fn every_request_gets_a_line_with_its_tries_written_by_the_drain() {
    let bad = Upstream::start(|_| respond(502, "bad gateway")).await;
    let good = Upstream::start(|_| respond(200, "good")).await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("access.log");
    let (_proxy, running, addr, _clock) =
        start_proxy(&log_config(bad.addr, good.addr, &path)).await;
    assert_eq!(get(addr, "/api/users?id=7").await.status, 200);
    assert_eq!(get(addr, "/plain").await.status, 200);
    assert_eq!(get(addr, "/elsewhere").await.status, 404);
    assert!(running.shutdown().await.complete);

    let text = std::fs::read_to_string(&path).unwrap();
    let lines: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 3, "{text}");

    let retried = &lines[0];
    assert_eq!(retried["route"], "api");
    assert_eq!(retried["cluster"], "backend");
    assert_eq!(retried["method"], "GET");
    assert_eq!(retried["path"], "/api/users");
    assert_eq!(retried["status"], 200);
    assert_eq!(retried["flag"], serde_json::Value::Null);
    assert_eq!(retried["retries"], 1);
    let attempts = retried["attempts"].as_array().unwrap();
    assert_eq!(attempts.len(), 2);
    assert_eq!(attempts[0]["endpoint"], bad.addr.to_string());
    assert_eq!(attempts[0]["outcome"], "gateway_failure");
    assert_eq!(attempts[1]["endpoint"], good.addr.to_string());
    assert_eq!(attempts[1]["outcome"], "success");
    assert!(attempts[1]["duration_ms"].as_f64().unwrap() >= 0.0);
    assert!(
        retried["duration_ms"].as_f64().unwrap() >= attempts[1]["duration_ms"].as_f64().unwrap()
    );
    let timestamp = retried["timestamp"].as_str().unwrap();
    assert!(
        humantime::parse_rfc3339(timestamp).is_ok(),
        "RFC 3339: {timestamp}"
    );
    assert!(retried["peer"].as_str().unwrap().starts_with("127.0.0.1:"));

    let plain = &lines[1];
    assert_eq!(
        (plain["route"].as_str(), plain["cluster"].as_str()),
        (Some("plain"), Some("solo"))
    );
    assert_eq!(plain["retries"], 0);
    assert_eq!(plain["attempts"].as_array().unwrap().len(), 1);

    let refused = &lines[2];
    assert_eq!(refused["route"], serde_json::Value::Null);
    assert_eq!(refused["status"], 404);
    assert_eq!(refused["flag"], "NR");
    assert_eq!(refused["attempts"].as_array().unwrap().len(), 0);
}

#[tokio::test]
async fn an_unwritable_log_path_fails_the_start() {
    let a = Upstream::start(|_| respond(200, "a")).await;
    let b = Upstream::start(|_| respond(200, "b")).await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("no-such-dir").join("access.log");
    let config =
        tripline_proxy::config::ProxyConfig::from_toml(&log_config(a.addr, b.addr, &path)).unwrap();
    let proxy = tripline_proxy::Proxy::try_new(config).unwrap();
    assert!(proxy.start().await.is_err());
}

#[tokio::test]
async fn a_try_spoiled_by_the_clients_own_body_is_logged_as_such() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    let other = Upstream::start(|_| respond(200, "other")).await;
    let good = Upstream::start(|_| respond(200, "good")).await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("access.log");
    let (_proxy, running, addr, _clock) =
        start_proxy(&log_config(other.addr, good.addr, &path)).await;
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let malformed = b"POST /plain HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\nZZ\r\n";
    stream.write_all(malformed).await.unwrap();
    let mut answer = Vec::new();
    tokio::time::timeout(BOUND, stream.read_to_end(&mut answer))
        .await
        .expect("answered and closed")
        .unwrap();
    assert!(answer.starts_with(b"HTTP/1.1 400"));
    drop(stream);
    assert!(running.shutdown().await.complete);

    let text = std::fs::read_to_string(&path).unwrap();
    let line: serde_json::Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    assert_eq!(line["status"], 400, "{text}");
    assert_eq!(line["flag"], "DPE");
    let attempts = line["attempts"].as_array().unwrap();
    assert_eq!(attempts.len(), 1, "{text}");
    assert_eq!(attempts[0]["endpoint"], good.addr.to_string());
    assert_eq!(attempts[0]["outcome"], "client_body");
}

/// Lines of the log at `path`, parsed.
fn json_lines(path: &std::path::Path) -> Vec<serde_json::Value> {
    let text = std::fs::read_to_string(path).unwrap();
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// `[access_log]` lines appended to a [`config`] text.
fn with_log(config: String, lines: &str) -> String {
    format!("{config}\n[access_log]\n{lines}\n")
}

#[tokio::test]
async fn a_text_log_writes_its_template_with_every_try() {
    let bad = Upstream::start(|_| respond(502, "bad gateway")).await;
    let good = Upstream::start(|_| respond(200, "good")).await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("access.log");
    let template = "%METHOD% %PATH% %RESPONSE_CODE% %RESPONSE_FLAGS% %ROUTE_NAME% \
         %UPSTREAM_CLUSTER% %UPSTREAM_HOST% %RETRIES% %ATTEMPTS% %DURATION%ms";
    let text = log_config(bad.addr, good.addr, &path).replace(
        "mode = \"full\"",
        &format!("mode = \"full\"\nformat = \"text\"\ntemplate = {template:?}"),
    );
    let (_proxy, running, addr, _clock) = start_proxy(&text).await;
    assert_eq!(get(addr, "/api/users?id=7").await.status, 200);
    assert_eq!(get(addr, "/elsewhere").await.status, 404);
    assert!(running.shutdown().await.complete);

    let text = std::fs::read_to_string(&path).unwrap();
    let lines: Vec<Vec<&str>> = text.lines().map(|l| l.split(' ').collect()).collect();
    assert_eq!(lines.len(), 2, "{text}");
    let (bad, good) = (bad.addr.to_string(), good.addr.to_string());
    let retried = &lines[0];
    assert_eq!(
        retried[..8],
        [
            "GET",
            "/api/users",
            "200",
            "-",
            "api",
            "backend",
            &good,
            "1"
        ],
        "{text}"
    );
    // Durations vary: each try is endpoint/outcome/ms.
    let tries: Vec<(&str, &str)> = retried[8]
        .split(',')
        .map(|t| t.rsplit_once('/').unwrap().0.rsplit_once('/').unwrap())
        .collect();
    assert_eq!(
        tries,
        [
            (bad.as_str(), "gateway_failure"),
            (good.as_str(), "success")
        ]
    );
    assert!(
        retried[9]
            .strip_suffix("ms")
            .unwrap()
            .parse::<u64>()
            .is_ok()
    );
    let refused = &lines[1];
    assert_eq!(
        refused[..9],
        ["GET", "/elsewhere", "404", "NR", "-", "-", "-", "0", "-"],
        "{text}"
    );
}

#[tokio::test]
async fn a_text_log_without_a_template_writes_the_default_one() {
    let a = Upstream::start(|_| respond(200, "a")).await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("access.log");
    let text = with_log(
        config(&[a.addr], "", ""),
        &format!("mode = \"full\"\nformat = \"text\"\npath = {path:?}"),
    );
    let (_proxy, running, addr, _clock) = start_proxy(&text).await;
    assert_eq!(get(addr, "/x").await.status, 200);
    assert!(running.shutdown().await.complete);
    let text = std::fs::read_to_string(&path).unwrap();
    let (time, rest) = text.trim_end().split_once(' ').unwrap();
    assert!(
        humantime::parse_rfc3339(time.trim_matches(['[', ']'])).is_ok(),
        "{text}"
    );
    let fields: Vec<&str> = rest.split(' ').collect();
    let a = a.addr.to_string();
    assert_eq!(
        [fields[0], fields[1], fields[2], fields[3]],
        ["\"GET", "/x\"", "200", "-"]
    );
    assert_eq!(fields[5..8], ["api", "backend", &a]);
    assert!(fields[8].starts_with("127.0.0.1:"), "the peer: {text}");
    assert_eq!(fields[9], "0");
    assert!(fields[10].starts_with(&format!("{a}/success/")), "{text}");
}

#[test]
fn a_template_mistake_fails_the_load_naming_the_field_and_operator() {
    let head = config(&["127.0.0.1:9".parse().unwrap()], "", "");
    let load = |lines: &str| {
        tripline_proxy::config::ProxyConfig::from_toml(&with_log(head.clone(), lines)).unwrap_err()
    };
    let e = load("format = \"text\"\ntemplate = \"%METHOD% %STATUS% %PATH%\"");
    assert_eq!(e.field, "access_log.template", "{e}");
    assert!(e.message.contains("unknown operator `%STATUS%`"), "{e}");
    assert_eq!(e.line, Some(head.lines().count() + 4), "{e}");

    let e = load("format = \"text\"\ntemplate = \"%METHOD% %DURATION\"");
    assert_eq!(e.field, "access_log.template", "{e}");
    assert!(
        e.message.contains("unterminated operator `%DURATION`"),
        "{e}"
    );

    let e = load("template = \"%METHOD%\"");
    assert_eq!(e.field, "access_log.template", "{e}");
    assert!(e.message.contains("format = \"text\""), "{e}");
}

#[tokio::test]
async fn a_hedged_request_lists_each_try_with_its_own_endpoint_and_outcome() {
    use std::sync::Arc;
    use tokio::sync::Notify;

    let release = Arc::new(Notify::new());
    let (slow, mut arrivals) = held_upstream(release.clone()).await;
    let fast = Upstream::start(|_| respond(200, "fast")).await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("access.log");
    let hedged = r#"hedge = { delay = "50ms", max_extra = 1 }"#;
    let text = with_log(
        config(&[slow, fast.addr], hedged, ""),
        &format!("mode = \"full\"\npath = {path:?}"),
    );
    let (_proxy, running, addr, _clock) = start_proxy(&text).await;
    // Round robin sends the first try to `slow`, which answers only when
    // released: the hedge to `fast` wins, and the first try is cancelled.
    let answer = get(addr, "/").await;
    assert_eq!((answer.status, answer.body.as_str()), (200, "fast"));
    tokio::time::timeout(BOUND, arrivals.recv())
        .await
        .expect("the first try reached the slow endpoint");
    release.notify_waiters();
    assert!(running.shutdown().await.complete);

    let lines = json_lines(&path);
    assert_eq!(lines.len(), 1);
    let line = &lines[0];
    assert_eq!(line["status"], 200);
    assert_eq!(line["retries"], 0, "a hedge is not a retry");
    assert_eq!(line["flag"], serde_json::Value::Null);
    let tries = line["attempts"].as_array().unwrap();
    let shape: Vec<(&str, &str, bool)> = tries
        .iter()
        .map(|t| {
            (
                t["endpoint"].as_str().unwrap(),
                t["outcome"].as_str().unwrap(),
                t["hedge"].as_bool().unwrap(),
            )
        })
        .collect();
    let (slow, fast) = (slow.to_string(), fast.addr.to_string());
    assert_eq!(
        shape,
        [
            (slow.as_str(), "cancelled", false),
            (fast.as_str(), "success", true)
        ],
        "{line}"
    );
    // The cancelled try ran from its start until the hedge won: at least
    // the hedge's delay, and longer than the hedge itself.
    let took = |i: usize| tries[i]["duration_ms"].as_f64().unwrap();
    assert!(took(0) >= 50.0, "{line}");
    assert!(took(0) > took(1), "{line}");
}

#[tokio::test]
async fn a_retry_refused_by_the_budget_is_flagged_be() {
    let failing = Upstream::start(|_| respond(500, "boom")).await;
    // Nothing listens there: a connect failure the proxy answers itself.
    let dead = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .unwrap()
        .local_addr()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("access.log");
    // One retry per ten requests, no reserve: the first request's retry
    // finds the budget empty.
    let budget = "retry = { attempts = 3, budget = { ratio = 0.1, min_retries_per_second = 0.0 } }";
    let text = format!(
        r#"
[[listeners]]
address = "127.0.0.1:0"

[[routes]]
name = "api"
cluster = "backend"
match = {{ path_prefix = "/api" }}
{budget}

[[routes]]
name = "dead"
cluster = "dead"
match = {{ path_prefix = "/dead" }}
{budget}

[clusters.backend]
endpoints = ["{}"]

[clusters.dead]
endpoints = ["{dead}"]

[access_log]
mode = "full"
path = {path:?}
"#,
        failing.addr
    );
    let (_proxy, running, addr, _clock) = start_proxy(&text).await;
    let answer = get(addr, "/api").await;
    assert_eq!(answer.status, 500);
    assert_eq!(
        answer.header("x-tripline-retry-refused"),
        Some("budget_exhausted")
    );
    let answer = get(addr, "/dead").await;
    assert_eq!(answer.header("x-tripline-flag"), Some("UF"));
    assert!(answer.header("x-tripline-retry-refused").is_some());
    assert!(running.shutdown().await.complete);

    let lines = json_lines(&path);
    assert_eq!(lines.len(), 2);
    let refused = &lines[0];
    assert_eq!(refused["flag"], "BE", "{refused}");
    assert_eq!(refused["status"], 500);
    assert_eq!(refused["retries"], 0);
    let tries = refused["attempts"].as_array().unwrap();
    assert_eq!(tries.len(), 1, "{refused}");
    assert_eq!(tries[0]["endpoint"], failing.addr.to_string());
    assert_eq!(tries[0]["outcome"], "upstream_failure");
    // The proxy's own answer for the failed try keeps its flag too.
    assert_eq!(lines[1]["flag"], "UF,BE", "{}", lines[1]);
    assert_eq!(lines[1]["attempts"][0]["outcome"], "connect_failure");
}

/// How many of `requests` requests a log sampling `percent` wrote.
async fn sampled_lines(percent: f64, requests: usize) -> usize {
    let a = Upstream::start(|_| respond(200, "a")).await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("access.log");
    let text = with_log(
        config(&[a.addr], "", ""),
        &format!("mode = \"sampled\"\nsample_percent = {percent:?}\npath = {path:?}"),
    );
    let (_proxy, running, addr, _clock) = start_proxy(&text).await;
    for _ in 0..requests {
        assert_eq!(get(addr, "/").await.status, 200);
    }
    assert!(running.shutdown().await.complete);
    let lines = json_lines(&path);
    assert!(lines.iter().all(|l| l["route"] == "api"));
    lines.len()
}

#[tokio::test]
async fn a_sampled_log_writes_its_share_of_the_requests() {
    // 400 requests at 50 %: 200 expected, standard deviation 10; outside
    // 140..=260 (six of them) happens about once in 500 million runs.
    let half = sampled_lines(50.0, 400).await;
    assert!((140..=260).contains(&half), "{half} lines of 400 at 50%");
    // The ends never roll the dice.
    assert_eq!(sampled_lines(0.0, 50).await, 0);
    assert_eq!(sampled_lines(100.0, 50).await, 50);
}

/// A writer that cannot write (a FIFO nobody reads) and a queue of one
/// line: requests keep being answered, and every line that found the
/// queue full is counted; none is lost uncounted.
#[cfg(unix)]
#[tokio::test]
async fn a_writer_that_cannot_keep_up_costs_lines_counted_never_a_wait() {
    use std::io::Read;

    let a = Upstream::start(|_| respond(200, "a")).await;
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("access.log");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .expect("mkfifo runs");
    assert!(made.success());
    // Opening a FIFO waits for its other end: the reader opens it on a
    // thread of its own while the proxy's writer opens it to write, then
    // reads nothing until the requests are done. The pipe holds 64 KiB.
    let reader = tokio::task::spawn_blocking({
        let fifo = fifo.clone();
        move || std::fs::File::open(fifo)
    });
    let text = with_log(
        config(&[a.addr], "", ""),
        &format!("mode = \"full\"\nbuffer = 1\npath = {fifo:?}\n{ADMIN_SECTION}"),
    );
    let (_proxy, running, addr, _clock) = start_proxy(&text).await;
    let mut reader = tokio::time::timeout(BOUND, reader)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    // 4 KiB lines: the pipe, the writer's buffers and the queue hold
    // about 20 of them; the rest must be dropped, never waited for.
    let long = format!("/{}", "x".repeat(4000));
    let requests = 200;
    for _ in 0..requests {
        assert_eq!(get(addr, &long).await.status, 200);
    }
    let admin = running.admin_addr().unwrap();
    let dropped = metric(admin, "tripline_proxy_access_log_dropped_total")
        .await
        .unwrap() as usize;
    let read = tokio::task::spawn_blocking(move || {
        let mut text = String::new();
        reader.read_to_string(&mut text).map(|_| text)
    });
    assert!(running.shutdown().await.complete);
    let text = tokio::time::timeout(BOUND, read)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    let written = text.lines().count();
    assert!(dropped >= requests / 2, "{dropped} dropped of {requests}");
    assert_eq!(
        written + dropped,
        requests,
        "every line is written or counted"
    );
}

#[tokio::test]
async fn a_request_dropped_before_its_answer_still_gets_a_line_flagged_dc() {
    let release = std::sync::Arc::new(tokio::sync::Notify::new());
    let (held, mut arrivals) = held_upstream(release).await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("access.log");
    let text = with_log(
        config(&[held], "", "").replace(
            "[[listeners]]",
            "[proxy]\ndrain_timeout = \"200ms\"\n\n[[listeners]]",
        ),
        &format!("mode = \"full\"\npath = {path:?}"),
    );
    let (_proxy, running, addr, _clock) = start_proxy(&text).await;
    let in_flight =
        tokio::spawn(async move { tokio::time::timeout(BOUND, get(addr, "/held")).await });
    arrivals.recv().await.unwrap();
    // The drain's cut drops the request the endpoint never answers.
    assert!(!running.shutdown().await.complete);
    drop(in_flight.await);

    let lines = json_lines(&path);
    assert_eq!(lines.len(), 1, "{lines:?}");
    let line = &lines[0];
    assert_eq!(
        (line["status"].as_u64(), line["flag"].as_str()),
        (Some(0), Some("DC")),
        "{line}"
    );
    assert_eq!(
        (line["route"].as_str(), line["path"].as_str()),
        (Some("api"), Some("/held"))
    );
    let attempts = line["attempts"].as_array().unwrap();
    assert_eq!(attempts.len(), 1, "{line}");
    assert_eq!(attempts[0]["endpoint"], held.to_string());
    assert_eq!(attempts[0]["outcome"], "cancelled");
}

#[tokio::test]
async fn a_fallback_clusters_try_is_listed_after_the_primarys() {
    let primary = Upstream::start(|_| respond(502, "bad gateway")).await;
    let secondary = Upstream::start(|_| respond(200, "from the secondary")).await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("access.log");
    let text = format!(
        r#"[[listeners]]
address = "127.0.0.1:0"

[[routes]]
name = "api"
cluster = "primary"
retry = {{ attempts = 1 }}
fallback = {{ cluster = "secondary", on = ["upstream_failure"] }}

[clusters.primary]
endpoints = ["{}"]

[clusters.secondary]
endpoints = ["{}"]

[access_log]
mode = "full"
path = {path:?}
"#,
        primary.addr, secondary.addr
    );
    let (_proxy, running, addr, _clock) = start_proxy(&text).await;
    let answer = get(addr, "/").await;
    assert_eq!(answer.body, "from the secondary");
    assert_eq!(
        answer.header("x-tripline-degraded"),
        Some("upstream_failure")
    );
    assert!(running.shutdown().await.complete);

    let lines = json_lines(&path);
    assert_eq!(lines.len(), 1);
    let attempts = lines[0]["attempts"].as_array().unwrap();
    let tries: Vec<(&str, &str)> = attempts
        .iter()
        .map(|a| {
            (
                a["endpoint"].as_str().unwrap(),
                a["outcome"].as_str().unwrap(),
            )
        })
        .collect();
    let (primary, secondary) = (primary.addr.to_string(), secondary.addr.to_string());
    assert_eq!(
        tries,
        [
            (primary.as_str(), "gateway_failure"),
            (secondary.as_str(), "success")
        ],
        "{}",
        lines[0]
    );
    assert_eq!(lines[0]["status"], 200);
}

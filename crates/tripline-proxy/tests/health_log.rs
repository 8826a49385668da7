//! Each health transition is one line on stderr. A test binary of its
//! own: `tracing` caches whether a log site is enabled per process, and a
//! site first reached by a parallel test on a thread without the captured
//! subscriber can lose this test's lines.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly

#[allow(dead_code)] // the proxy tests' helpers; this test uses a few
#[path = "proxy/support.rs"]
mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use support::*;

#[tokio::test]
async fn each_health_transition_is_one_line_on_stderr() {
    let (logs, _guard) = capture_logs();
    let up = Arc::new(AtomicBool::new(true));
    let u = up.clone();
    let a = Upstream::start(move |_| {
        if u.load(Ordering::SeqCst) {
            respond(200, "ok")
        } else {
            respond(503, "down")
        }
    })
    .await;
    let b = Upstream::start(|_| respond(200, "ok")).await;
    let cluster = r#"health_check = { http = { path = "/healthz", expect = [200] }, interval = "200ms", timeout = "200ms", unhealthy_threshold = 3, healthy_threshold = 2 }"#;
    let (proxy, running, _addr, _clock) =
        start_proxy(&config(&[a.addr, b.addr], "", cluster)).await;
    let endpoint = proxy
        .cluster("backend")
        .unwrap()
        .endpoint(&a.addr.to_string())
        .unwrap();
    let until = |want: bool| {
        let endpoint = endpoint.clone();
        async move {
            let deadline = tokio::time::Instant::now() + BOUND;
            while endpoint.is_marked_unhealthy() != want {
                assert!(
                    tokio::time::Instant::now() < deadline,
                    "never marked {want}"
                );
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        }
    };
    up.store(false, Ordering::SeqCst);
    until(true).await;
    up.store(true, Ordering::SeqCst);
    until(false).await;
    let shown = logged(&logs);
    let out = format!(
        "endpoint {} of cluster backend unhealthy: 3 checks failed (status 503, expected [200])",
        a.addr
    );
    let back = format!(
        "endpoint {} of cluster backend healthy again: 2 checks passed",
        a.addr
    );
    assert_eq!(shown.matches(&out).count(), 1, "{shown}");
    assert_eq!(shown.matches(&back).count(), 1, "{shown}");
    assert!(!shown.contains(&b.addr.to_string()), "{shown}");
    running.shutdown().await;
}

//! A token-less admin listener answers the machine's own programs and its
//! own dashboard, not other web pages: a foreign `Host` (DNS rebinding),
//! a foreign `Origin` (cross-site requests) and an undeclared or simple
//! content type on a mutating call are refused, naming the rule. With a
//! token, a loopback listener still refuses a foreign `Host`, and the
//! `Bearer` scheme is matched without regard to case.

use bytes::Bytes;
use serde_json::Value;
use tripline::State;

use crate::admin_api::{TOKEN, failing_proxy};
use crate::support::*;

fn json(answer: &Answer) -> Value {
    serde_json::from_str(&answer.body).unwrap_or_else(|e| panic!("not JSON ({e}): {}", answer.body))
}

#[tokio::test]
async fn the_bearer_scheme_is_matched_without_regard_to_case() {
    let (proxy, running, _addr, admin, _upstream) =
        failing_proxy(&format!("token = \"{TOKEN}\"")).await;
    for scheme in ["bearer", "BEARER", "bEaReR"] {
        let value = format!("{scheme} {TOKEN}");
        let answer = send(
            admin,
            "POST",
            "/api/breakers/api/force-open",
            &[("authorization", &value)],
        )
        .await;
        assert_eq!(answer.status, 200, "{scheme}: {}", answer.body);
    }
    assert_eq!(
        proxy.route_breaker("api").unwrap().state(),
        State::ForcedOpen
    );
    let wrong = send(
        admin,
        "POST",
        "/api/breakers/api/reset",
        &[("authorization", "bearer guess")],
    )
    .await;
    assert_eq!(wrong.status, 401);
    assert!(running.shutdown().await.complete);
}

#[tokio::test]
async fn a_foreign_host_is_refused_for_reads_and_calls() {
    let (proxy, running, _addr, admin, _upstream) = failing_proxy("").await;
    for (method, path) in [
        ("GET", "/api/config"),
        ("GET", "/api/breakers"),
        ("POST", "/api/breakers/api/force-open"),
    ] {
        let answer = send(admin, method, path, &[("host", "evil.example:9901")]).await;
        assert_eq!(answer.status, 403, "{method} {path}: {}", answer.body);
        let body = json(&answer);
        assert_eq!(body["rule"], "loopback_host");
        assert!(
            body["error"].as_str().unwrap().contains("evil.example"),
            "{body}"
        );
    }
    assert_eq!(proxy.route_breaker("api").unwrap().state(), State::Closed);
    let port = admin.port();
    for host in [
        format!("localhost:{port}"),
        format!("127.0.0.1:{port}"),
        "127.1.2.3".to_owned(),
        format!("[::1]:{port}"),
    ] {
        let answer = send(admin, "GET", "/api/breakers", &[("host", &host)]).await;
        assert_eq!(answer.status, 200, "Host {host}: {}", answer.body);
    }
    assert!(running.shutdown().await.complete);
}

#[tokio::test]
async fn with_a_token_a_loopback_listener_still_refuses_a_foreign_host() {
    // The token guards the calls; the reads answer without it, so a page
    // rebinding its name to 127.0.0.1 must not read them either.
    let (_proxy, running, _addr, admin, _upstream) =
        failing_proxy(&format!("token = \"{TOKEN}\"")).await;
    let answer = send(admin, "GET", "/api/breakers", &[("host", "evil.example")]).await;
    assert_eq!(answer.status, 403, "{}", answer.body);
    assert_eq!(json(&answer)["rule"], "loopback_host");
    let own = format!("127.0.0.1:{}", admin.port());
    let answer = send(admin, "GET", "/api/breakers", &[("host", &own)]).await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert!(running.shutdown().await.complete);
}

#[tokio::test]
async fn a_foreign_origin_cannot_open_or_reset_a_breaker() {
    let (proxy, running, _addr, admin, _upstream) = failing_proxy("").await;
    let breaker = proxy.route_breaker("api").unwrap();
    // What a page on another site sends: a simple, bodiless POST or a
    // text/plain one (no preflight), naming its origin.
    for headers in [
        vec![("origin", "http://evil.example")],
        vec![("origin", "null")],
        vec![
            ("origin", "http://localhost:3000"),
            ("content-type", "application/json"),
        ],
    ] {
        let answer = send(admin, "POST", "/api/breakers/api/force-open", &headers).await;
        assert_eq!(answer.status, 403, "{headers:?}: {}", answer.body);
        assert_eq!(json(&answer)["rule"], "same_origin");
    }
    assert_eq!(breaker.state(), State::Closed);

    // The dashboard's own call: same origin as the request's host, JSON.
    let own = format!("http://{admin}");
    let answer = send(
        admin,
        "POST",
        "/api/breakers/api/force-open",
        &[("origin", &own), ("content-type", "application/json")],
    )
    .await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert_eq!(breaker.state(), State::ForcedOpen);
    assert!(running.shutdown().await.complete);
}

#[tokio::test]
async fn a_mutating_call_with_a_body_must_declare_json() {
    let (proxy, running, _addr, admin, _upstream) = failing_proxy("").await;
    let fault = r#"{"route": "api", "abort": {"status": 503}, "ttl": "30s"}"#;
    for content_type in [
        None,
        Some("text/plain"),
        Some("application/x-www-form-urlencoded"),
    ] {
        let headers: Vec<(&str, &str)> = content_type
            .map(|c| vec![("content-type", c)])
            .unwrap_or_default();
        let answer = send_body(
            admin,
            "POST",
            "/api/faults",
            &headers,
            Bytes::from_static(fault.as_bytes()),
        )
        .await;
        assert_eq!(answer.status, 415, "{content_type:?}: {}", answer.body);
        assert_eq!(json(&answer)["rule"], "content_type");
        assert!(
            json(&answer)["error"]
                .as_str()
                .unwrap()
                .contains("application/json")
        );
    }
    // A form post declares its type even without a body.
    let form = send(
        admin,
        "POST",
        "/api/breakers/api/reset",
        &[("content-type", "text/plain")],
    )
    .await;
    assert_eq!(form.status, 415);
    assert_eq!(get(admin, "/api/faults").await.body, "{\"faults\":[]}\n");

    let declared = admin_json(admin, "POST", "/api/faults", fault).await;
    assert_eq!(declared.status, 201, "{}", declared.body);
    // A bodiless call without a type (curl -X POST) passes: no page can
    // send one without naming its origin.
    let bare = send(admin, "POST", "/api/breakers/api/force-open", &[]).await;
    assert_eq!(bare.status, 200, "{}", bare.body);
    assert_eq!(
        proxy.route_breaker("api").unwrap().state(),
        State::ForcedOpen
    );
    // The config takes its own formats.
    let as_json = admin_json(admin, "PUT", "/api/config", "").await;
    assert_eq!(as_json.status, 415);
    assert!(
        json(&as_json)["error"]
            .as_str()
            .unwrap()
            .contains("application/toml")
    );
    assert!(running.shutdown().await.complete);
}

#[tokio::test]
async fn put_config_reads_yaml_when_declared() {
    let (proxy, running, _addr, admin, upstream) = failing_proxy("").await;
    let yaml = format!(
        "listeners:\n  - address: 127.0.0.1:0\nroutes:\n  - name: api\n    cluster: backend\n    breaker: {{ failure_rate_threshold: 0.75 }}\nclusters:\n  backend:\n    endpoints: [\"{}\"]\nadmin:\n  address: 127.0.0.1:0\n",
        upstream.addr
    );
    let answer = send_body(
        admin,
        "PUT",
        "/api/config",
        &[("content-type", "application/yaml")],
        Bytes::from(yaml),
    )
    .await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert_eq!(
        proxy
            .route_breaker("api")
            .unwrap()
            .config()
            .failure_rate_threshold,
        0.75
    );
    assert!(running.shutdown().await.complete);
}

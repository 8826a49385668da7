//! The admin API over real sockets: breakers listed, described and
//! overridden, outliers, audit, the token on mutating calls, and the
//! OpenAPI file matching what the listener serves.

use bytes::Bytes;
use serde_json::Value;

use crate::support::*;

pub const ROUTE: &str = r#"breaker = { window = { kind = "count", size = 4 }, minimum_calls = 4, failure_rate_threshold = 0.5, open_duration = "10s", half_open = { policy = "consecutive", successes = 1 } }"#;

pub const TOKEN: &str = "s3cret-admin";

fn json(answer: &Answer) -> Value {
    serde_json::from_str(&answer.body).unwrap_or_else(|e| panic!("not JSON ({e}): {}", answer.body))
}

/// A call carrying the admin token.
pub async fn authorized(
    admin: std::net::SocketAddr,
    method: &str,
    path: &str,
    body: &str,
) -> Answer {
    let bearer = format!("Bearer {TOKEN}");
    send_body(
        admin,
        method,
        path,
        &[("authorization", &bearer)],
        Bytes::from(body.to_owned()),
    )
    .await
}

/// A failing upstream, a proxy with a route breaker and an admin listener.
pub async fn failing_proxy(
    extra_admin: &str,
) -> (
    tripline_proxy::Proxy,
    tripline_proxy::Running,
    std::net::SocketAddr,
    std::net::SocketAddr,
    Upstream,
) {
    let upstream = Upstream::start(|_| respond(500, "boom")).await;
    let text = format!(
        "{}\n[admin]\naddress = \"127.0.0.1:0\"\n{extra_admin}\n",
        config(&[upstream.addr], ROUTE, "")
    );
    let (proxy, running, addr, _clock) = start_proxy(&text).await;
    let admin = running.admin_addr().unwrap();
    (proxy, running, addr, admin, upstream)
}

#[tokio::test]
async fn breakers_are_listed_with_state_window_rates_and_recent_transitions() {
    let (_proxy, running, addr, admin, upstream) = failing_proxy("").await;
    let list = json(&get(admin, "/api/breakers").await);
    let names: Vec<&str> = list["breakers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["name"].as_str().unwrap())
        .collect();
    let endpoint = format!("backend:{}", upstream.addr);
    assert_eq!(names, ["api", endpoint.as_str()]);

    for _ in 0..4 {
        assert_eq!(get(addr, "/").await.status, 500);
    }
    let api = json(&get(admin, "/api/breakers/api").await);
    assert_eq!(api["kind"], "route");
    assert_eq!(api["owner"]["route"], "api");
    assert_eq!(api["state"], "open");
    assert_eq!(api["failure_rate_threshold"], 0.5);
    assert_eq!(api["minimum_calls"], 4);
    let open_until = api["open_until"].as_str().unwrap();
    assert!(
        humantime::parse_rfc3339(open_until).is_ok(),
        "open_until is RFC 3339: {open_until}"
    );
    let t = &api["transitions"][0];
    assert_eq!(t["from"], "closed");
    assert_eq!(t["to"], "open");
    assert_eq!(t["reason"], "failure_rate");
    assert_eq!(t["window"]["calls"], 4);
    assert_eq!(t["window"]["failures"], 4);
    let message = t["message"].as_str().unwrap();
    assert!(message.contains("closed → open"), "{message}");

    // An endpoint's breaker, by its percent-encoded name.
    let encoded = format!("/api/breakers/backend:{}", upstream.addr).replace(':', "%3A");
    let ep = json(&get(admin, &encoded).await);
    assert_eq!(ep["kind"], "endpoint");
    assert_eq!(ep["owner"]["cluster"], "backend");
    assert_eq!(ep["window"]["failures"], 4);
    assert!(running.shutdown().await.complete);
}

#[tokio::test]
async fn operator_overrides_change_the_breaker_and_are_audited() {
    let (proxy, running, addr, admin, _upstream) = failing_proxy("").await;
    let breaker = proxy.route_breaker("api").unwrap();

    let before = json(&get(admin, "/api/breakers/api").await);
    assert_eq!(before["override"], Value::Null, "no override yet");
    assert_eq!(before["managed"], Value::Null, "no [config_source]");
    let forced = json(&admin_json(admin, "POST", "/api/breakers/api/force-open", "").await);
    assert_eq!(forced["state"], "forced_open");
    assert_eq!(forced["override"], "forced_open");
    assert_eq!(breaker.state(), tripline::State::ForcedOpen);
    let refused = get(addr, "/").await;
    assert_eq!(refused.status, 503);
    assert_eq!(refused.header("x-tripline-breaker"), Some("api"));

    let shadow = json(&admin_json(admin, "POST", "/api/breakers/api/metrics-only", "").await);
    assert_eq!(shadow["state"], "metrics_only");
    assert_eq!(shadow["override"], "metrics_only");
    let disabled = json(&admin_json(admin, "POST", "/api/breakers/api/disable", "").await);
    assert_eq!(disabled["state"], "disabled");
    assert_eq!(disabled["override"], "disabled");
    for _ in 0..6 {
        assert_eq!(
            get(addr, "/").await.status,
            500,
            "a disabled breaker never trips"
        );
    }
    let reset = json(&admin_json(admin, "POST", "/api/breakers/api/reset", "").await);
    assert_eq!(reset["state"], "closed");
    assert_eq!(reset["override"], Value::Null, "reset clears the override");
    assert_eq!(reset["window"]["calls"], 0);
    assert_eq!(breaker.state(), tripline::State::Closed);

    let audit = json(&get(admin, "/api/audit").await);
    let actions: Vec<&str> = audit["records"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["action"].as_str().unwrap())
        .collect();
    assert_eq!(actions, ["force_open", "metrics_only", "disable", "reset"]);
    let first = &audit["records"][0];
    assert_eq!(first["source"], "admin-api");
    assert_eq!(first["target"], "api");
    assert_eq!(first["summary"], "api: closed → forced_open");
    assert!(humantime::parse_rfc3339(first["at"].as_str().unwrap()).is_ok());
    assert!(running.shutdown().await.complete);
}

#[tokio::test]
async fn unknown_breakers_and_actions_get_a_clear_404() {
    let (_proxy, running, _addr, admin, _upstream) = failing_proxy("").await;
    let missing = get(admin, "/api/breakers/nope").await;
    assert_eq!(missing.status, 404);
    let body = json(&missing);
    assert_eq!(body["breaker"], "nope");
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .contains("no breaker named \"nope\"")
    );

    let missing = admin_json(admin, "POST", "/api/breakers/nope/reset", "").await;
    assert_eq!(missing.status, 404);
    assert_eq!(json(&missing)["breaker"], "nope");

    let action = admin_json(admin, "POST", "/api/breakers/api/explode", "").await;
    assert_eq!(action.status, 404);
    let body = json(&action);
    assert_eq!(body["action"], "explode");
    assert_eq!(body["actions"][0], "force-open");

    assert_eq!(
        admin_json(admin, "DELETE", "/api/breakers/api", "")
            .await
            .status,
        405
    );
    assert_eq!(
        admin_json(admin, "POST", "/api/breakers", "").await.status,
        405
    );
    assert_eq!(get(admin, "/api/nothing").await.status, 404);
    assert!(running.shutdown().await.complete);
}

#[tokio::test]
async fn outliers_show_each_endpoint_its_ejections_and_the_panic_mode() {
    let bad = Upstream::start(|_| respond(500, "boom")).await;
    let good = Upstream::start(|_| respond(200, "ok")).await;
    let cluster = r#"
panic_threshold_percent = 0
breaker = { window = { kind = "count", size = 1000 }, minimum_calls = 1000 }
outlier = { interval = "1s", base_ejection_time = "30s", max_ejection_percent = 50, consecutive_failures = { threshold = 3 } }
"#;
    let text = format!(
        "{}{ADMIN_SECTION}",
        config(&[bad.addr, good.addr], "", cluster)
    );
    let (_proxy, running, addr, _clock) = start_proxy(&text).await;
    let admin = running.admin_addr().unwrap();
    for _ in 0..6 {
        get(addr, "/").await;
    }
    let outliers = json(&get(admin, "/api/outliers").await);
    let backend = &outliers["clusters"][0];
    assert_eq!(backend["cluster"], "backend");
    assert_eq!(backend["outlier_detection"], true);
    assert_eq!(backend["panic"], false);
    let endpoints = backend["endpoints"].as_array().unwrap();
    let bad_one = endpoints
        .iter()
        .find(|e| e["endpoint"] == bad.addr.to_string())
        .unwrap();
    assert_eq!(bad_one["ejected"], true, "{outliers}");
    assert_eq!(bad_one["ejections"], 1);
    assert!(humantime::parse_rfc3339(bad_one["ejected_until"].as_str().unwrap()).is_ok());
    let good_one = endpoints
        .iter()
        .find(|e| e["endpoint"] == good.addr.to_string())
        .unwrap();
    assert_eq!(good_one["ejected"], false);
    assert!(good_one["ejected_until"].is_null());
    assert!(running.shutdown().await.complete);
}

#[tokio::test]
async fn with_a_token_mutating_calls_need_it_and_reads_do_not() {
    let (proxy, running, _addr, admin, _upstream) =
        failing_proxy(&format!("token = \"{TOKEN}\"")).await;
    for (method, path) in [
        ("POST", "/api/breakers/api/force-open"),
        ("PUT", "/api/config"),
        ("POST", "/api/faults"),
        ("DELETE", "/api/faults"),
    ] {
        let none = admin_json(admin, method, path, "").await;
        assert_eq!(none.status, 401, "{method} {path} without a token");
        assert!(
            none.header("www-authenticate")
                .unwrap()
                .starts_with("Bearer")
        );
        let wrong = send(admin, method, path, &[("authorization", "Bearer guess")]).await;
        assert_eq!(wrong.status, 401, "{method} {path} with a wrong token");
        assert_eq!(json(&wrong)["error"], "wrong admin token");
    }
    assert_eq!(
        proxy.route_breaker("api").unwrap().state(),
        tripline::State::Closed
    );
    for path in [
        "/api/breakers",
        "/api/outliers",
        "/api/config",
        "/api/audit",
        "/metrics",
        "/",
    ] {
        assert_eq!(get(admin, path).await.status, 200, "GET {path} is open");
    }
    let config = json(&get(admin, "/api/config").await);
    assert_eq!(config["admin"]["token"], "<redacted>");

    let forced = authorized(admin, "POST", "/api/breakers/api/force-open", "").await;
    assert_eq!(forced.status, 200);
    assert_eq!(
        proxy.route_breaker("api").unwrap().state(),
        tripline::State::ForcedOpen
    );
    let fault = authorized(
        admin,
        "POST",
        "/api/faults",
        r#"{"route": "api", "abort": {"status": 503, "percent": 100}, "ttl": "30s"}"#,
    )
    .await;
    assert_eq!(fault.status, 201);
    let audit = json(&get(admin, "/api/audit").await);
    let records = audit["records"].as_array().unwrap();
    assert_eq!(records.len(), 2);
    assert_eq!(records[0]["who"], "admin-api");
    assert_eq!(records[1]["action"], "fault");
    assert_eq!(records[1]["summary"], "POST /api/faults → 201");
    assert!(running.shutdown().await.complete);
}

/// The property names of `schema` in `docs/admin-api.yaml`.
fn documented_properties(schema: &str) -> std::collections::BTreeSet<String> {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../docs/admin-api.yaml"
    ))
    .expect("docs/admin-api.yaml");
    let doc: serde_yaml_ng::Value = serde_yaml_ng::from_str(&text).unwrap();
    doc["components"]["schemas"][schema]["properties"]
        .as_mapping()
        .unwrap_or_else(|| panic!("schema {schema} has properties"))
        .keys()
        .map(|k| k.as_str().unwrap().to_owned())
        .collect()
}

/// Every field a breaker description carries is in the `Breaker` schema,
/// and every field the schema names is served.
#[tokio::test]
async fn the_breaker_schema_documents_exactly_the_fields_served() {
    let (_proxy, running, _addr, admin, _upstream) = failing_proxy("").await;
    let list = json(&get(admin, "/api/breakers").await);
    let documented = documented_properties("Breaker");
    for breaker in list["breakers"].as_array().unwrap() {
        let served: std::collections::BTreeSet<String> =
            breaker.as_object().unwrap().keys().cloned().collect();
        assert_eq!(
            served, documented,
            "fields of {} vs docs/admin-api.yaml's Breaker",
            breaker["name"]
        );
    }
    assert!(running.shutdown().await.complete);
}

#[tokio::test]
async fn every_route_of_the_openapi_file_is_served() {
    let (_proxy, running, _addr, admin, _upstream) =
        failing_proxy(&format!("token = \"{TOKEN}\"")).await;
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../docs/admin-api.yaml"
    ))
    .expect("docs/admin-api.yaml");
    let doc: serde_yaml_ng::Value = serde_yaml_ng::from_str(&text).unwrap();
    let paths = doc["paths"].as_mapping().unwrap();
    let mut checked = 0;
    for (path, methods) in paths {
        let template = path.as_str().unwrap();
        let concrete = template.replace("{name}", "api").replace("{id}", "1");
        for (method, _) in methods.as_mapping().unwrap() {
            let method = method.as_str().unwrap().to_ascii_uppercase();
            if template == "/api/events" {
                continue; // an endless stream: its own test reads it
            }
            let body = if method == "PUT" { "not toml [" } else { "" };
            let answer = authorized(admin, &method, &concrete, body).await;
            assert_ne!(answer.status, 405, "{method} {template}: {}", answer.body);
            assert!(
                !answer.body.contains("no admin path"),
                "{method} {template} is not served"
            );
            checked += 1;
        }
    }
    assert_eq!(checked, 22);
    assert!(running.shutdown().await.complete);
}

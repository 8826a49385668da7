//! `GET`/`PUT /api/config` and the admin section's own validation:
//! a PUT is validated like a reload, refused whole with the field and
//! line, applied keeping breaker state, and audited like SIGHUP reloads.

use bytes::Bytes;
use serde_json::Value;
use tripline_proxy::config::ProxyConfig;

use crate::admin_api::{ROUTE, TOKEN, authorized, failing_proxy};
use crate::support::*;

/// `PUT /api/config` with a TOML config, declared as such.
async fn put_toml(admin: std::net::SocketAddr, text: &str) -> Answer {
    let toml = [("content-type", "application/toml")];
    send_body(
        admin,
        "PUT",
        "/api/config",
        &toml,
        Bytes::from(text.to_owned()),
    )
    .await
}

fn json(answer: &Answer) -> Value {
    serde_json::from_str(&answer.body).unwrap_or_else(|e| panic!("not JSON ({e}): {}", answer.body))
}

#[tokio::test]
async fn put_config_refuses_a_bad_config_whole_and_applies_a_good_one_keeping_state() {
    let (proxy, running, addr, admin, upstream) = failing_proxy("").await;
    for _ in 0..4 {
        assert_eq!(get(addr, "/").await.status, 500);
    }
    assert_eq!(
        proxy.route_breaker("api").unwrap().state(),
        tripline::State::Open
    );
    let before = json(&get(admin, "/api/config").await);
    assert_eq!(before["routes"][0]["name"], "api");
    assert_eq!(
        before["routes"][0]["breaker"]["failure_rate_threshold"],
        0.5
    );

    // A typo: refused, naming field and line; nothing changes.
    let good = format!(
        "{}{ADMIN_SECTION}",
        config(&[upstream.addr], &ROUTE.replace("0.5", "0.75"), "")
    );
    let typo = good.replace("cluster = \"backend\"", "clutser = \"backend\"");
    let refused = put_toml(admin, &typo).await;
    assert_eq!(refused.status, 400);
    let body = json(&refused);
    assert!(
        body["error"].as_str().unwrap().contains("clutser"),
        "{body}"
    );
    assert_eq!(body["line"], 6);
    // Valid TOML, invalid config: the field is named.
    let invalid = good.replace("0.75", "1.5");
    let refused = json(&put_toml(admin, &invalid).await);
    assert!(
        refused["field"]
            .as_str()
            .unwrap()
            .contains("failure_rate_threshold"),
        "{refused}"
    );
    assert!(refused["line"].is_number());
    assert_eq!(
        json(&get(admin, "/api/config").await),
        before,
        "the last good config stays"
    );

    let applied = put_toml(admin, &good).await;
    assert_eq!(applied.status, 200, "{}", applied.body);
    let report = json(&applied);
    assert_eq!(report["breakers_kept"][0], "api");
    assert_eq!(report["clusters_kept"][0], "backend");
    assert_eq!(report["clusters_endpoints_changed"], serde_json::json!([]));
    assert_eq!(report["keyed_breakers_kept"], serde_json::json!([]));
    let breaker = proxy.route_breaker("api").unwrap();
    assert_eq!(breaker.config().failure_rate_threshold, 0.75);
    assert_eq!(breaker.state(), tripline::State::Open, "state is kept");
    let after = json(&get(admin, "/api/config").await);
    assert_eq!(
        after["routes"][0]["breaker"]["failure_rate_threshold"],
        0.75
    );
    let api = json(&get(admin, "/api/breakers/api").await);
    assert_eq!(api["config_version"], 1);

    // A reload from elsewhere (SIGHUP in `tripline proxy`) is audited too.
    running
        .reload(ProxyConfig::from_toml(&good).unwrap())
        .unwrap();
    let audit = json(&get(admin, "/api/audit").await);
    let records: Vec<(String, String)> = audit["records"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["source"].as_str().unwrap().to_owned(),
                r["action"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    let expected = [
        ("admin-api", "config_refused"),
        ("admin-api", "config_refused"),
        ("admin-api", "config_applied"),
        ("reload", "config_applied"),
    ]
    .map(|(s, a)| (s.to_owned(), a.to_owned()));
    assert_eq!(records, expected);
    assert_eq!(audit["records"][2]["summary"], "routes changed: api");
    assert_eq!(
        audit["records"][3]["summary"],
        "no route or cluster changed"
    );
    assert!(running.shutdown().await.complete);
}

#[tokio::test]
async fn put_config_refuses_a_body_over_one_mib_and_non_utf8() {
    let (_proxy, running, _addr, admin, _upstream) = failing_proxy("").await;
    let junk = Bytes::from(vec![b'#'; 2 * 1024 * 1024]);
    let toml = [("content-type", "application/toml")];
    let big = send_body(admin, "PUT", "/api/config", &toml, junk).await;
    assert_eq!(big.status, 413);
    assert_eq!(json(&big)["limit"], 1024 * 1024);
    let binary = send_body(
        admin,
        "PUT",
        "/api/config",
        &toml,
        Bytes::from_static(&[0xff, 0xfe, 0x00]),
    )
    .await;
    assert_eq!(binary.status, 400);
    assert!(
        json(&binary)["error"]
            .as_str()
            .unwrap()
            .contains("not UTF-8")
    );
    assert!(running.shutdown().await.complete);
}

#[tokio::test]
async fn put_config_needs_the_token_when_one_is_set() {
    let (_proxy, running, _addr, admin, upstream) =
        failing_proxy(&format!("token = \"{TOKEN}\"")).await;
    let text = format!(
        "{}\n[admin]\naddress = \"127.0.0.1:0\"\ntoken = \"{TOKEN}\"\n",
        config(&[upstream.addr], ROUTE, "")
    );
    assert_eq!(put_toml(admin, &text).await.status, 401);
    let applied = authorized(admin, "PUT", "/api/config", &text).await;
    assert_eq!(applied.status, 200, "{}", applied.body);
    let audit = json(&get(admin, "/api/audit").await);
    assert_eq!(audit["records"][0]["who"], "admin-api");
    assert!(running.shutdown().await.complete);
}

#[test]
fn a_non_loopback_admin_address_needs_a_token() {
    let listener = "[[listeners]]\naddress = \"127.0.0.1:0\"\n";
    let open = format!("{listener}\n[admin]\naddress = \"0.0.0.0:9901\"\n");
    let e = ProxyConfig::from_toml(&open).unwrap_err();
    assert_eq!(e.field, "admin.token");
    assert!(e.message.contains("not loopback"), "{e}");
    assert_eq!(e.line, Some(4));

    let with_token = format!("{open}token = \"t\"\n");
    assert!(ProxyConfig::from_toml(&with_token).is_ok());
    let both = format!("{with_token}token_file = \"/x\"\n");
    assert_eq!(
        ProxyConfig::from_toml(&both).unwrap_err().field,
        "admin.token"
    );
    let loopback = format!("{listener}\n[admin]\naddress = \"127.0.0.1:9901\"\n");
    assert!(ProxyConfig::from_toml(&loopback).is_ok());
}

#[tokio::test]
async fn the_token_can_come_from_a_file_read_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("admin-token");
    std::fs::write(&path, format!("{TOKEN}\n")).unwrap();
    let (_proxy, running, _addr, admin, _upstream) =
        failing_proxy(&format!("token_file = {:?}", path.display().to_string())).await;
    assert_eq!(
        admin_json(admin, "POST", "/api/breakers/api/reset", "")
            .await
            .status,
        401
    );
    assert_eq!(
        authorized(admin, "POST", "/api/breakers/api/reset", "")
            .await
            .status,
        200
    );
    assert!(running.shutdown().await.complete);

    let missing = format!(
        "[[listeners]]\naddress = \"127.0.0.1:0\"\n[admin]\naddress = \"127.0.0.1:0\"\ntoken_file = {:?}\n",
        dir.path().join("absent").display().to_string()
    );
    let e = tripline_proxy::Proxy::try_new(ProxyConfig::from_toml(&missing).unwrap()).unwrap_err();
    assert_eq!(e.field, "admin.token_file");
    assert!(e.message.contains("cannot read"), "{e}");
}

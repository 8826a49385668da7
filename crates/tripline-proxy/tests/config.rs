//! Config parsing and validation: every contradiction names its field.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly

use std::time::Duration;

use tripline_proxy::config::{BalancerName, ProxyConfig, UpstreamProtocol};

const BASE: &str = r#"
[[listeners]]
address = "127.0.0.1:0"

[clusters.backend]
endpoints = ["127.0.0.1:9000"]
"#;

fn with_route(route: &str) -> String {
    format!("{BASE}\n[[routes]]\nname = \"api\"\ncluster = \"backend\"\n{route}\n")
}

fn error_field(text: &str) -> String {
    ProxyConfig::from_toml(text).unwrap_err().field
}

#[test]
fn a_full_config_reads_in_the_library_vocabulary() {
    let text = r#"
[proxy]
drain_timeout = "5s"

[[listeners]]
address = "127.0.0.1:8080"

[[routes]]
name = "users"
cluster = "users"
match = { host = "api.example.com", path_prefix = "/users", method = "GET", headers = { x-tenant = "a" } }
breaker = { window = { kind = "count", size = 20 }, minimum_calls = 10, failure_rate_threshold = 0.5, open_duration = "10s" }
bulkhead = { max_concurrent = 100 }
retry = { attempts = 3, max_buffered_body = 1024, budget = { ratio = 0.1 } }
timeout = { per_try = "250ms", overall = "1s" }
failure_statuses = [500, 502, 503, 504]

[clusters.users]
endpoints = ["127.0.0.1:9001", "127.0.0.1:9002"]
balancer = "p2c"
protocol = "h2c"
panic_threshold_percent = 30
breaker = { minimum_calls = 5 }
outlier = { interval = "1s", consecutive_failures = { threshold = 3 } }
"#;
    let config = ProxyConfig::from_toml(text).unwrap();
    assert_eq!(config.proxy.drain_timeout, Duration::from_secs(5));
    let route = &config.routes[0];
    assert_eq!(route.matches.host.as_deref(), Some("api.example.com"));
    assert_eq!(route.breaker.as_ref().unwrap().minimum_calls, 10);
    assert_eq!(route.retry.budget.ratio, 0.1);
    assert_eq!(route.timeout.per_try, Some(Duration::from_millis(250)));
    assert!(route.failure_statuses.contains(503) && !route.failure_statuses.contains(501));
    let cluster = &config.clusters["users"];
    assert_eq!(cluster.balancer, BalancerName::P2c);
    assert_eq!(cluster.protocol, UpstreamProtocol::H2c);
    let lib = cluster.to_library("users");
    assert_eq!(lib.endpoints[1].id, "127.0.0.1:9002");
    assert_eq!(
        lib.outlier.unwrap().consecutive_failures.unwrap().threshold,
        3
    );
}

#[test]
fn defaults_fail_on_5xx_except_501_and_never_retry() {
    let config = ProxyConfig::from_toml(&with_route("")).unwrap();
    let route = &config.routes[0];
    assert_eq!(route.retry.attempts, 1);
    assert!(route.timeout.honour_incoming);
    for s in [500, 502, 503, 504, 599] {
        assert!(route.failure_statuses.contains(s), "{s}");
    }
    for s in [200, 404, 429, 501] {
        assert!(!route.failure_statuses.contains(s), "{s}");
    }
    assert_eq!(route.upgrades.0, ["websocket"]);
}

#[test]
fn unknown_keys_are_refused() {
    let e = ProxyConfig::from_toml(&with_route("retries = 3")).unwrap_err();
    assert!(e.to_string().contains("retries"), "{e}");
    let e = ProxyConfig::from_toml(&with_route("breaker = { minimum_cals = 3 }")).unwrap_err();
    assert!(e.to_string().contains("minimum_cals"), "{e}");
}

#[test]
fn contradictions_name_their_field() {
    let cases = [
        (
            "timeout = { per_try = \"5s\", overall = \"2s\" }",
            "routes[0].timeout.per_try",
        ),
        (
            "timeout = { per_try = \"0s\" }",
            "routes[0].timeout.per_try",
        ),
        ("retry = { attempts = 0 }", "routes[0].retry.attempts"),
        (
            "retry = { budget = { ratio = -1.0 } }",
            "routes[0].retry.budget.ratio",
        ),
        (
            "breaker = { failure_rate_threshold = 1.5 }",
            "routes[0].breaker.failure_rate_threshold",
        ),
        (
            "breaker = { slow_call_duration = \"2s\" }\ntimeout = { per_try = \"1s\" }",
            "routes[0].breaker.slow_call_duration",
        ),
        ("failure_statuses = [700]", "routes[0].failure_statuses"),
        (
            "failure_statuses = [200]\nretry = { attempts = 2 }",
            "routes[0].failure_statuses",
        ),
        ("match = { method = \"G T\" }", "routes[0].match.method"),
        (
            "match = { path_prefix = \"api\" }",
            "routes[0].match.path_prefix",
        ),
        (
            "bulkhead = { max_concurrent = 0 }",
            "routes[0].bulkhead.max_concurrent",
        ),
        (
            "upgrades = [\"websocket\", \"h2c\"]",
            "routes[0].upgrades[1]",
        ),
        ("upgrades = [\"web socket\"]", "routes[0].upgrades[0]"),
        ("upgrades = [\"\"]", "routes[0].upgrades[0]"),
    ];
    for (route, field) in cases {
        assert_eq!(error_field(&with_route(route)), field, "{route}");
    }
}

#[test]
fn references_and_addresses_are_checked() {
    let text = with_route("").replace("cluster = \"backend\"\n\n", "cluster = \"nope\"\n\n");
    assert_eq!(error_field(&text), "routes[0].cluster");
    let text = with_route("").replace("127.0.0.1:0", "localhost");
    assert_eq!(error_field(&text), "listeners[0].address");
    let text = with_route("").replace("\"127.0.0.1:9000\"", "\"no-port\"");
    assert_eq!(error_field(&text), "clusters.backend.endpoints[0]");
    let text = with_route("").replace("[\"127.0.0.1:9000\"]", "[]");
    assert_eq!(error_field(&text), "clusters.backend.endpoints");
    let twice = format!(
        "{}\n[[routes]]\nname = \"api\"\ncluster = \"backend\"\n",
        with_route("")
    );
    assert_eq!(error_field(&twice), "routes[1].name");
    let none = BASE.replace("[[listeners]]\naddress = \"127.0.0.1:0\"", "");
    assert_eq!(error_field(&none), "listeners");
}

#[test]
fn errors_from_a_file_name_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("proxy.toml");
    std::fs::write(&path, with_route("retry = { attempts = 0 }")).unwrap();
    let e = ProxyConfig::load(&path).unwrap_err();
    let shown = e.to_string();
    assert!(
        shown.starts_with(&format!(
            "{}:11: routes[0].retry.attempts: ",
            path.display()
        )),
        "{shown}"
    );
    let e = ProxyConfig::load(&dir.path().join("missing.toml")).unwrap_err();
    assert!(e.to_string().contains("missing.toml: cannot read"), "{e}");
}

#[test]
fn proxy_configs_are_told_from_breaker_configs() {
    assert!(ProxyConfig::looks_like_proxy_config(&with_route("")));
    assert!(!ProxyConfig::looks_like_proxy_config(
        "name = \"payments\"\nminimum_calls = 5\n"
    ));
}

#[test]
fn yaml_proxy_configs_are_told_from_yaml_breaker_configs() {
    let proxy = "listeners:\n  - address: 127.0.0.1:0\nclusters:\n  backend:\n    endpoints: [127.0.0.1:9000]\n";
    assert!(ProxyConfig::looks_like_proxy_config(proxy));
    // Not yet valid (a bad value) but a proxy config all the same, so its
    // errors are the proxy's, naming the field.
    assert!(ProxyConfig::looks_like_proxy_config(
        "routes:\n  - name: api\n    retry: { attempts: x }\n"
    ));
    // A syntax error after the first section: still the proxy's to report.
    assert!(ProxyConfig::looks_like_proxy_config(
        "listeners:\n  - address: 127.0.0.1:0\nroutes:\n  - name: api\n      cluster: backend\n"
    ));
    assert!(!ProxyConfig::looks_like_proxy_config(
        "name: payments\nminimum_calls: 5\n"
    ));
    assert!(!ProxyConfig::looks_like_proxy_config(
        "- routes\n- clusters\n"
    ));
}

#[test]
fn two_route_breakers_of_one_name_are_refused() {
    let twice = format!(
        "{}\n[[routes]]\nname = \"other\"\ncluster = \"backend\"\nbreaker = {{ name = \"api\" }}\n",
        with_route("breaker = {}")
    );
    assert_eq!(error_field(&twice), "routes[1].breaker.name");
    let distinct = twice.replace("{ name = \"api\" }", "{}");
    assert!(ProxyConfig::from_toml(&distinct).is_ok());
}

#[test]
fn connection_timeouts_default_in_proxy_and_are_overridden_per_listener() {
    let text = BASE.replace(
        "address = \"127.0.0.1:0\"",
        "address = \"127.0.0.1:0\"\nkeep_alive_timeout = \"5s\"\n\n[[listeners]]\naddress = \"127.0.0.1:1\"",
    );
    let text = format!("[proxy]\nheader_read_timeout = \"3s\"\n{text}");
    let config = ProxyConfig::from_toml(&text).unwrap();
    let (own, inherits) = (&config.listeners[0], &config.listeners[1]);
    assert_eq!(
        own.keep_alive_timeout(&config.proxy),
        Duration::from_secs(5)
    );
    assert_eq!(
        inherits.keep_alive_timeout(&config.proxy),
        Duration::from_secs(60),
        "the default"
    );
    assert_eq!(
        own.header_read_timeout(&config.proxy),
        Duration::from_secs(3)
    );
}

#[test]
fn zero_or_unreadable_connection_timeouts_name_their_field() {
    let in_proxy = |line: &str| format!("[proxy]\n{line}\n{BASE}");
    let in_listener = |line: &str| {
        BASE.replace(
            "address = \"127.0.0.1:0\"",
            &format!("address = \"127.0.0.1:0\"\n{line}"),
        )
    };
    let cases = [
        (
            in_proxy("keep_alive_timeout = \"0s\""),
            "proxy.keep_alive_timeout",
            "more than zero",
        ),
        (
            in_proxy("header_read_timeout = \"0ms\""),
            "proxy.header_read_timeout",
            "more than zero",
        ),
        (
            in_proxy("tunnel_idle_timeout = \"0s\""),
            "proxy.tunnel_idle_timeout",
            "more than zero",
        ),
        (
            in_proxy("upstream_stall_timeout = \"0s\""),
            "proxy.upstream_stall_timeout",
            "at least 1ms",
        ),
        (
            in_proxy("upstream_stall_timeout = \"500us\""),
            "proxy.upstream_stall_timeout",
            "at least 1ms",
        ),
        (
            in_proxy("keep_alive_timeout = \"soon\""),
            "proxy.keep_alive_timeout",
            "is not a duration",
        ),
        (
            in_listener("keep_alive_timeout = \"0s\""),
            "listeners[0].keep_alive_timeout",
            "more than zero",
        ),
        (
            in_listener("header_read_timeout = \"0s\""),
            "listeners[0].header_read_timeout",
            "more than zero",
        ),
        (
            in_listener("header_read_timeout = \"-1s\""),
            "listeners[0].header_read_timeout",
            "cannot be negative",
        ),
        (
            in_listener("keep_alive_timeout = 5"),
            "listeners[0].keep_alive_timeout",
            "invalid type",
        ),
    ];
    for (text, field, says) in cases {
        let e = ProxyConfig::from_toml(&text).unwrap_err();
        assert_eq!(e.field, field, "{text}");
        let shown = e.to_string();
        assert!(shown.contains(&format!("{field}: ")), "{shown}");
        assert!(shown.contains(says), "{shown}");
        assert!(e.line.is_some(), "{shown}");
    }
}

//! Bad rate limit, keyed breaker, hedge, fallback and gRPC settings are
//! refused before start, naming the field.

use tripline_proxy::config::ProxyConfig;

/// The error for a config whose route `api` (cluster `backend`, plus a
/// cluster `other`) carries `route`.
fn refused(route: &str) -> (String, String) {
    let text = format!(
        "[[listeners]]\naddress = \"127.0.0.1:0\"\n\n[[routes]]\nname = \"api\"\ncluster = \"backend\"\n{route}\n\n[clusters.backend]\nendpoints = [\"127.0.0.1:1\"]\n\n[clusters.other]\nendpoints = [\"127.0.0.1:2\"]\n"
    );
    let e = ProxyConfig::from_toml(&text).expect_err(route);
    (e.field, e.message)
}

#[test]
fn each_contradiction_names_its_field() {
    let table: &[(&str, &str, &str)] = &[
        (
            "rate_limit = { per_second = 0, burst = 1 }",
            "routes[0].rate_limit.per_second",
            "at least 1",
        ),
        (
            "rate_limit = { per_second = 5, burst = 0 }",
            "routes[0].rate_limit.burst",
            "at least 1",
        ),
        (
            "rate_limit = { per_second = 5, burst = 5, key = \"client_ip\", max_keys = 0 }",
            "routes[0].rate_limit.max_keys",
            "at least 1",
        ),
        (
            "breaker_key = { header = \"x-tenant\" }",
            "routes[0].breaker_key",
            "needs a `breaker`",
        ),
        (
            "breaker = {}\nbreaker_key = { header = \"x-tenant\", max_breakers = 0 }",
            "routes[0].breaker_key.max_breakers",
            "at least 1",
        ),
        (
            "breaker = {}\nbreaker_key = { header = \"bad header\" }",
            "routes[0].breaker_key.header",
            "not a header name",
        ),
        (
            "hedge = { delay = \"0s\" }",
            "routes[0].hedge.delay",
            "more than zero",
        ),
        (
            "hedge = { delay = \"10ms\", max_extra = 11 }",
            "routes[0].hedge.max_extra",
            "between 1 and 10",
        ),
        (
            "hedge = { delay = \"2s\" }\ntimeout = { per_try = \"1s\" }",
            "routes[0].hedge.delay",
            "below timeout.per_try",
        ),
        (
            "hedge = { delay = \"10ms\" }\nmatch = { method = \"POST\" }",
            "routes[0].hedge",
            "not idempotent",
        ),
        (
            "hedge = { delay = \"10ms\" }\nretry = { retryable = true, max_buffered_body = 0 }",
            "routes[0].hedge",
            "max_buffered_body",
        ),
        (
            "fallback = { status = 200, cluster = \"other\" }",
            "routes[0].fallback",
            "exactly one",
        ),
        (
            "fallback = { body = \"x\" }",
            "routes[0].fallback",
            "exactly one",
        ),
        (
            "fallback = { status = 700 }",
            "routes[0].fallback.status",
            "not an HTTP status",
        ),
        (
            "fallback = { cluster = \"nowhere\" }",
            "routes[0].fallback.cluster",
            "names no cluster",
        ),
        (
            "fallback = { cluster = \"backend\" }",
            "routes[0].fallback.cluster",
            "own cluster",
        ),
        (
            "fallback = { cluster = \"other\", body = \"x\" }",
            "routes[0].fallback.body",
            "fixed answer",
        ),
        (
            "fallback = { status = 200, on = [] }",
            "routes[0].fallback.on",
            "at least one",
        ),
        (
            "fallback = { status = 200, on = [\"circuit_opn\"] }",
            "routes[0].fallback.on",
            "not a cause",
        ),
        (
            "grpc_failure_codes = [14, 0]",
            "routes[0].grpc_failure_codes",
            "0 is OK",
        ),
    ];
    for (route, field, message) in table {
        let (f, m) = refused(route);
        assert_eq!(f, *field, "{route}: {m}");
        assert!(m.contains(message), "{route}: {m:?} should say {message:?}");
    }
}

#[test]
fn a_bad_rate_limit_key_is_a_parse_error_naming_the_choices() {
    let text = "[[listeners]]\naddress = \"127.0.0.1:0\"\n[[routes]]\nname = \"api\"\ncluster = \"b\"\nrate_limit = { per_second = 1, burst = 1, key = \"tenant\" }\n[clusters.b]\nendpoints = [\"127.0.0.1:1\"]\n";
    let e = ProxyConfig::from_toml(text).unwrap_err();
    assert!(e.message.contains("\"header:<name>\""), "{e}");
    assert!(e.message.contains("rate_limit"), "{e}");
}

#[test]
fn the_new_sections_parse_in_the_documented_shapes() {
    let text = r#"
        [proxy]
        envoy_compat = true

        [[listeners]]
        address = "127.0.0.1:0"

        [[routes]]
        name = "api"
        cluster = "backend"
        rate_limit = { per_second = 100, burst = 20, key = "header:X-Tenant" }
        breaker = { minimum_calls = 10 }
        breaker_key = { header = "x-tenant", max_breakers = 500, overflow = "reject", idle_ttl = "5m" }
        hedge = { delay = "50ms", max_extra = 2 }
        fallback = { cluster = "secondary", on = ["circuit_open", "upstream_failure"] }
        grpc_failure_codes = [14]

        [clusters.backend]
        endpoints = ["127.0.0.1:1"]

        [clusters.secondary]
        endpoints = ["127.0.0.1:2"]
    "#;
    let config = ProxyConfig::from_toml(text).unwrap();
    let route = &config.routes[0];
    assert_eq!(
        route.rate_limit.as_ref().unwrap().key,
        tripline_proxy::config::RateLimitKey::Header("x-tenant".into())
    );
    assert_eq!(route.hedge.as_ref().unwrap().max_extra, 2);
    assert_eq!(route.grpc_failure_codes.0, vec![14]);
    assert!(config.proxy.envoy_compat);
    // And the proxy builds from it.
    tripline_proxy::Proxy::try_new(config).unwrap();
}

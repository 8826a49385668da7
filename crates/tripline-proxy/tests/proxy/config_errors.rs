//! Config errors name the file, the line and the field to fix, in TOML
//! and in YAML; a YAML config serves as its TOML twin does.

use std::net::SocketAddr;

use tripline::ManualClock;
use tripline_proxy::Proxy;
use tripline_proxy::config::{ConfigFile, ProxyConfig};

use crate::support::*;

const HEAD: &str = "[[listeners]]\naddress = \"127.0.0.1:0\"\n\n[clusters.backend]\nendpoints = [\"127.0.0.1:9000\"]\n\n";

#[test]
fn a_validation_error_names_the_line_of_its_key() {
    let text = format!(
        "{HEAD}[[routes]]\nname = \"a\"\ncluster = \"backend\"\n\n[[routes]]\nname = \"b\"\ncluster = \"backend\"\n[routes.timeout]\noverall = \"1s\"\nper_try = \"5s\"\n"
    );
    let e = ProxyConfig::from_toml(&text).unwrap_err();
    assert_eq!(e.field, "routes[1].timeout.per_try");
    assert_eq!((e.line, e.column), (Some(16), Some(1)));
    assert!(
        e.to_string()
            .starts_with("line 16: routes[1].timeout.per_try: must not exceed"),
        "{e}"
    );

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("proxy.toml");
    std::fs::write(&path, &text).unwrap();
    let e = ProxyConfig::load(&path).unwrap_err();
    let shown = e.to_string();
    assert!(
        shown.starts_with(&format!(
            "{}:16: routes[1].timeout.per_try: ",
            path.display()
        )),
        "{shown}"
    );
}

#[test]
fn a_key_inside_an_inline_table_or_array_is_placed_exactly() {
    let text = "[[listeners]]\naddress = \"127.0.0.1:0\"\n\n[clusters.backend]\nendpoints = [\"127.0.0.1:9000\", \"nowhere\"]\n";
    let e = ProxyConfig::from_toml(text).unwrap_err();
    assert_eq!(e.field, "clusters.backend.endpoints[1]");
    assert_eq!((e.line, e.column), (Some(5), Some(32)));

    let text = format!(
        "{HEAD}[[routes]]\nname = \"a\"\ncluster = \"backend\"\nretry = {{ attempts = 0 }}\n"
    );
    let e = ProxyConfig::from_toml(&text).unwrap_err();
    assert_eq!(e.field, "routes[0].retry.attempts");
    assert_eq!((e.line, e.column), (Some(10), Some(11)));
}

#[test]
fn a_parse_error_names_its_line_and_key() {
    let text = format!("{HEAD}[[routes]]\nname = \"a\"\ncluster = \"backend\"\nretries = 3\n");
    let e = ProxyConfig::from_toml(&text).unwrap_err();
    assert_eq!(e.line, Some(10), "{e}");
    assert_eq!(e.field, "routes[0].retries", "{e}");
    assert!(e.message.contains("unknown field `retries`"), "{e}");
    assert!(
        e.to_string()
            .starts_with("line 10: routes[0].retries: unknown field"),
        "{e}"
    );

    // A misspelt key inside an inline table, and a value of the wrong type.
    let text = format!(
        "{HEAD}[[routes]]\nname = \"a\"\ncluster = \"backend\"\nretry = {{ attempts = 2, retryabel = true }}\n"
    );
    let e = ProxyConfig::from_toml(&text).unwrap_err();
    assert_eq!(e.field, "routes[0].retry.retryabel", "{e}");
    let text = format!(
        "{HEAD}[[routes]]\nname = \"a\"\ncluster = \"backend\"\nretry = {{ attempts = \"x\" }}\n"
    );
    let e = ProxyConfig::from_toml(&text).unwrap_err();
    assert_eq!(e.field, "routes[0].retry.attempts", "{e}");
    assert!(
        e.to_string()
            .starts_with("line 10: routes[0].retry.attempts: invalid type"),
        "{e}"
    );

    let e = ProxyConfig::from_toml("[[listeners]]\naddress = \n").unwrap_err();
    assert_eq!(e.line, Some(2), "{e}");
}

#[test]
fn a_key_never_written_is_placed_at_its_nearest_written_ancestor() {
    // A route without a name: the route's table is where the name goes.
    let text = format!("{HEAD}[[routes]]\ncluster = \"backend\"\n");
    let e = ProxyConfig::from_toml(&text).unwrap_err();
    assert_eq!(e.field, "routes[0].name");
    let line = e.line.expect("a line");
    assert!((7..=8).contains(&line), "{e}");
    // No listener at all: nothing to point at, so no line rather than a wrong one.
    let e = ProxyConfig::from_toml("[clusters.backend]\nendpoints = [\"127.0.0.1:9000\"]\n")
        .unwrap_err();
    assert_eq!((e.field.as_str(), e.line), ("listeners", None));
}

#[test]
fn fault_and_access_log_mistakes_name_their_field_and_line() {
    let text = format!(
        "{HEAD}[[routes]]\nname = \"a\"\ncluster = \"backend\"\nfault = {{ abort = {{ status = 503, percent = 150.0 }} }}\n"
    );
    let e = ProxyConfig::from_toml(&text).unwrap_err();
    assert_eq!(e.field, "routes[0].fault.abort.percent");
    assert_eq!(e.line, Some(10));

    let text = format!(
        "{HEAD}[[routes]]\nname = \"a\"\ncluster = \"backend\"\nfault = {{ abort = {{ status = 503 }}, endpoint = \"127.0.0.1:1\" }}\n"
    );
    let e = ProxyConfig::from_toml(&text).unwrap_err();
    assert_eq!(e.field, "routes[0].fault.endpoint");
    assert!(
        e.message.contains("not an endpoint of the route's cluster"),
        "{e}"
    );

    let text = format!("{HEAD}[access_log]\nmode = \"sampled\"\nsample_percent = -1.0\n");
    let e = ProxyConfig::from_toml(&text).unwrap_err();
    assert_eq!(
        (e.field.as_str(), e.line),
        ("access_log.sample_percent", Some(9))
    );
}

/// A route `api` over cluster `backend` with a breaker, retries and
/// timeouts, in TOML.
fn toml_twin(endpoint: SocketAddr) -> String {
    format!(
        r#"[proxy]
drain_timeout = "1s"

[[listeners]]
address = "127.0.0.1:0"

[[routes]]
name = "api"
cluster = "backend"
match = {{ path_prefix = "/api", headers = {{ x-tenant = "a" }} }}
breaker = {{ window = {{ kind = "count", size = 10 }}, minimum_calls = 10, open_duration = "5s" }}
retry = {{ attempts = 2, budget = {{ ratio = 0.2 }} }}
timeout = {{ per_try = "1s", overall = "3s" }}
failure_statuses = [502, 503]

[clusters.backend]
endpoints = ["{endpoint}"]
balancer = "p2c"
outlier = {{ interval = "1s", consecutive_failures = {{ threshold = 3 }} }}
"#
    )
}

/// [`toml_twin`] in YAML, block and flow style mixed.
fn yaml_twin(endpoint: SocketAddr) -> String {
    format!(
        r#"proxy:
  drain_timeout: 1s

listeners:
  - address: 127.0.0.1:0

routes:
  - name: api
    cluster: backend
    match:
      path_prefix: /api
      headers: {{ x-tenant: a }}
    breaker:
      window: {{ kind: count, size: 10 }}
      minimum_calls: 10
      open_duration: 5s
    retry:
      attempts: 2
      budget: {{ ratio: 0.2 }}
    timeout: {{ per_try: 1s, overall: 3s }}
    failure_statuses: [502, 503]

clusters:
  backend:
    endpoints: ["{endpoint}"]
    balancer: p2c
    outlier:
      interval: 1s
      consecutive_failures: {{ threshold: 3 }}
"#
    )
}

#[tokio::test]
async fn a_yaml_config_reads_as_its_toml_twin_and_serves() {
    let upstream = Upstream::start(|_| respond(200, "from yaml")).await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("proxy.yaml");
    std::fs::write(&path, yaml_twin(upstream.addr)).unwrap();
    let config = ProxyConfig::load(&path).unwrap();
    assert_eq!(
        config,
        ProxyConfig::from_toml(&toml_twin(upstream.addr)).unwrap()
    );

    let proxy = Proxy::builder(config)
        .clock(ManualClock::new())
        .build()
        .unwrap();
    let running = proxy.start().await.unwrap();
    let addr = running.local_addrs()[0];
    let answer = send(addr, "GET", "/api/orders", &[("x-tenant", "a")]).await;
    assert_eq!((answer.status, answer.body.as_str()), (200, "from yaml"));
    assert_eq!(upstream.hits(), 1);
    // The route's breaker is the file's.
    let breaker = proxy.route_breaker("api").unwrap();
    assert_eq!(breaker.metrics().calls.successful, 1);
    running.shutdown().await;
}

#[test]
fn a_yaml_validation_error_names_the_file_the_line_and_the_field() {
    let dir = tempfile::tempdir().unwrap();
    for (name, bad, line, field) in [
        (
            "proxy.yaml",
            yaml_twin(([127, 0, 0, 1], 9000).into()).replace("attempts: 2", "attempts: 0"),
            18,
            "routes[0].retry.attempts",
        ),
        (
            "proxy.yml",
            yaml_twin(([127, 0, 0, 1], 9000).into()).replace("per_try: 1s", "per_try: 5s"),
            20,
            "routes[0].timeout.per_try",
        ),
        (
            "cluster.yaml",
            yaml_twin(([127, 0, 0, 1], 9000).into())
                .replace("cluster: backend", "cluster: nowhere"),
            9,
            "routes[0].cluster",
        ),
    ] {
        let path = dir.path().join(name);
        std::fs::write(&path, &bad).unwrap();
        let e = ProxyConfig::load(&path).unwrap_err();
        assert_eq!((e.field.as_str(), e.line), (field, Some(line)), "{e}");
        let shown = e.to_string();
        assert!(
            shown.starts_with(&format!("{}:{line}: {field}: ", path.display())),
            "{shown}"
        );
    }
}

#[test]
fn a_yaml_parse_error_names_its_line_and_key() {
    let twin = yaml_twin(([127, 0, 0, 1], 9000).into());
    let cases = [
        (
            twin.replace("attempts: 2", "attempts: two"),
            18,
            "routes[0].retry.attempts",
            "invalid type",
        ),
        (
            twin.replace("attempts: 2", "attempts: 2\n      retryabel: true"),
            19,
            "routes[0].retry.retryabel",
            "unknown field `retryabel`",
        ),
        (
            twin.replace("open_duration: 5s", "open_duration: soon"),
            16,
            "routes[0].breaker.open_duration",
            "(breaker \"api\")",
        ),
        (
            twin.replace("  drain_timeout: 1s", "  drain_timeout: 1s\n  drain: 2s"),
            3,
            "proxy.drain",
            "unknown field `drain`",
        ),
    ];
    for (text, line, field, says) in cases {
        let e = ProxyConfig::from_yaml(&text).unwrap_err();
        assert_eq!((e.field.as_str(), e.line), (field, Some(line)), "{e}");
        assert!(e.message.contains(says), "{e}");
        assert!(!e.message.contains("at line"), "the line is said once: {e}");
    }
}

#[test]
fn a_yaml_syntax_error_names_the_file_and_the_line() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("proxy.yaml");
    // `cluster` indented deeper than `name`: not a mapping YAML can read.
    let text =
        "listeners:\n  - address: 127.0.0.1:0\nroutes:\n  - name: api\n      cluster: backend\n";
    std::fs::write(&path, text).unwrap();
    let e = ProxyConfig::load(&path).unwrap_err();
    assert_eq!(e.line, Some(5), "{e}");
    let shown = e.to_string();
    assert!(
        shown.starts_with(&format!(
            "{}:5: mapping values are not allowed",
            path.display()
        )),
        "{shown}"
    );
}

#[test]
fn a_file_not_named_yaml_is_read_as_toml() {
    let dir = tempfile::tempdir().unwrap();
    let twin = toml_twin(([127, 0, 0, 1], 9000).into());
    let conf = dir.path().join("proxy.conf");
    std::fs::write(&conf, &twin).unwrap();
    assert_eq!(
        ProxyConfig::load(&conf).unwrap(),
        ProxyConfig::from_toml(&twin).unwrap()
    );
    let upper = dir.path().join("PROXY.YML");
    std::fs::write(&upper, yaml_twin(([127, 0, 0, 1], 9000).into())).unwrap();
    assert_eq!(
        ProxyConfig::load(&upper).unwrap(),
        ProxyConfig::from_toml(&twin).unwrap()
    );
}

#[test]
fn an_error_only_the_build_finds_is_placed_in_its_file() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.pem");
    let cases = [
        (
            "proxy.yaml",
            format!(
                "listeners:\n  - address: 127.0.0.1:0\n    tls:\n      cert: {missing:?}\n      key: {missing:?}\nclusters:\n  backend:\n    endpoints: [127.0.0.1:1]\n"
            ),
            4,
        ),
        (
            "proxy.toml",
            format!(
                "[[listeners]]\naddress = \"127.0.0.1:0\"\ntls = {{ cert = {missing:?}, key = {missing:?} }}\n\n[clusters.backend]\nendpoints = [\"127.0.0.1:1\"]\n"
            ),
            3,
        ),
    ];
    for (name, text, line) in cases {
        let path = dir.path().join(name);
        std::fs::write(&path, &text).unwrap();
        let source = ConfigFile::read(&path).unwrap();
        let config = source.parse().unwrap();
        let e = source.place(Proxy::try_new(config).unwrap_err());
        let shown = e.to_string();
        assert!(
            shown.starts_with(&format!(
                "{}:{line}: listeners[0].tls.cert: cannot read {}",
                path.display(),
                missing.display()
            )),
            "{shown}"
        );
    }
}

//! `[config_source]` mistakes are refused naming the field.

use tripline_proxy::config::ProxyConfig;

use crate::proxy_config;

fn refusal(source: &str) -> String {
    let text = proxy_config("127.0.0.1:9".parse().unwrap(), source);
    ProxyConfig::from_toml(&text).unwrap_err().to_string()
}

#[test]
fn each_kind_needs_its_own_fields_and_refuses_the_others() {
    let e = refusal("kind = \"file\"");
    assert!(
        e.contains("config_source.path") && e.contains("required"),
        "{e}"
    );
    let e = refusal("kind = \"etcd\"\nendpoint = \"http://127.0.0.1:2379\"");
    assert!(e.contains("config_source.prefix"), "{e}");
    let e = refusal("kind = \"file\"\npath = \"b.toml\"\nendpoint = \"http://127.0.0.1:2379\"");
    assert!(
        e.contains("config_source.endpoint") && e.contains("does not apply"),
        "{e}"
    );
    let e = refusal("kind = \"etcd\"\nendpoint = \"127.0.0.1:2379\"\nprefix = \"/t\"");
    assert!(
        e.contains("config_source.endpoint") && e.contains("http://"),
        "{e}"
    );
    let e = refusal("kind = \"zookeeper\"");
    assert!(e.contains("zookeeper"), "{e}");
    let e = refusal("kind = \"file\"\npath = \"b.toml\"\npoll = \"1s\"");
    assert!(e.contains("poll"), "{e}");
}

#[test]
fn a_route_breaker_and_a_cluster_family_may_not_share_a_name() {
    let text = proxy_config(
        "127.0.0.1:9".parse().unwrap(),
        "kind = \"file\"\npath = \"b.toml\"",
    )
    .replace(
        "breaker = { minimum_calls = 1000 }",
        "breaker = { name = \"api\", minimum_calls = 1000 }",
    );
    let e = ProxyConfig::from_toml(&text).unwrap_err().to_string();
    assert!(e.contains("clusters.backend.breaker.name"), "{e}");
    // Without a source the same config is fine: nothing is looked up by name.
    let plain = text.split("[config_source]").next().unwrap();
    ProxyConfig::from_toml(plain).unwrap();
}

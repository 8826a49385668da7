//! Config errors name the file, the line and the field to fix.

use tripline_proxy::config::ProxyConfig;

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

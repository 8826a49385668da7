//! Every error about a breaker config names the breaker, whichever command
//! reads it: `simulate` and `sweep` (a scenario's `[[breaker]]`), `check`
//! (a breaker file in TOML, YAML or JSON, or a proxy config's route and
//! cluster breakers) and `run --config`.

#[path = "support/run.rs"]
mod support;

use support::{Dir, tripline};

/// Runs `tripline ARGS…`, expects a refusal (status 2) and returns stderr.
fn refused(args: &[&str]) -> String {
    let out = tripline(args);
    assert_eq!(out.status, 2, "{args:?}: {}", out.stderr);
    assert!(out.stdout.is_empty());
    out.stderr
}

const SCENARIO_HEAD: &str = r#"
duration = "60s"
[traffic]
rate = 5.0
[[fault]]
name = "down"
start = "10s"
end = "20s"
[[breaker]]
name = "orders"
"#;

#[test]
fn scenario_breaker_errors_name_the_breaker_for_parse_and_validation_alike() {
    let dir = Dir::new();
    let cases = [
        // Validation (the library's), a bad value the parser refused with
        // the name written after it, an unknown key, and a duplicate name.
        (
            "name = \"payments\"\nfailure_rate_threshold = 1.5\n",
            "failure_rate_threshold",
            "must be a fraction in (0, 1], got 1.5",
        ),
        (
            "open_duration = \"-5s\"\nname = \"payments\"\n",
            "open_duration",
            "cannot be negative",
        ),
        (
            "name = \"payments\"\nminimum_calls = \"x\"\n",
            "minimum_calls",
            "invalid type",
        ),
        (
            "name = \"payments\"\nfailure_rate_thresh = 0.5\n",
            "failure_rate_thresh",
            "unknown field",
        ),
        (
            "name = \"payments\"\nwindow = { kind = \"count\", size = 0 }\n",
            "window.size",
            "must be between 1 and",
        ),
    ];
    for (i, (body, field, what)) in cases.iter().enumerate() {
        let src = format!("{SCENARIO_HEAD}[[breaker]]\n{body}");
        let path = dir.write(&format!("s{i}.toml"), &src);
        let err = refused(&["simulate", path.to_str().expect("path")]);
        assert!(
            err.contains(&format!("in [[breaker]] #2 \"payments\", field `{field}`")),
            "{body}: {err}"
        );
        assert!(err.contains(what), "{body}: {err}");
    }
    let dup = dir.write(
        "dup.toml",
        &format!("{SCENARIO_HEAD}[[breaker]]\nname = \"orders\"\n"),
    );
    let err = refused(&["simulate", dup.to_str().expect("path")]);
    assert!(
        err.contains("in [[breaker]] #2 \"orders\", field `name`"),
        "{err}"
    );
}

#[test]
fn sweep_errors_name_the_swept_breaker() {
    let dir = Dir::new();
    let src = format!("{SCENARIO_HEAD}[[breaker]]\nname = \"payments\"\n");
    let path = dir.write("s.toml", &src);
    let file = path.to_str().expect("path");
    for (grid, what) in [
        (
            "failure_rate_threshold=0.5,1.5",
            "must be a fraction in (0, 1], got 1.5",
        ),
        ("minimum_calls=x", "invalid type"),
        ("bogus=1", "unknown field `bogus`"),
    ] {
        let err = refused(&["sweep", file, "--breaker", "payments", "--grid", grid]);
        assert!(
            err.contains("in [[breaker]] #2 \"payments\""),
            "{grid}: {err}"
        );
        assert!(err.contains(what), "{grid}: {err}");
    }
}

#[test]
fn check_names_the_breaker_of_a_breaker_file_in_every_format() {
    let dir = Dir::new();
    let cases = [
        (
            "a.toml",
            "name = \"payments\"\nfailure_rate_threshold = 1.5\n",
            "`failure_rate_threshold` must be a fraction",
        ),
        (
            "b.toml",
            "name = \"payments\"\nminimum_calls = \"x\"\n",
            "`minimum_calls` invalid type",
        ),
        (
            "c.toml",
            "name = \"payments\"\nfailure_rate_thresh = 0.5\n",
            "unknown field `failure_rate_thresh`",
        ),
        (
            "d.yaml",
            "name: payments\nfailure_rate_threshold: 1.5\n",
            "`failure_rate_threshold` must be a fraction",
        ),
        (
            "e.yml",
            "name: payments\nopen_duration: -5s\n",
            "cannot be negative",
        ),
        (
            "f.json",
            r#"{"name": "payments", "window": {"kind": "count", "size": 0}}"#,
            "`window.size` must be between 1 and",
        ),
        (
            "g.json",
            r#"{"name": "payments", "minimum_calls": -1}"#,
            "invalid value",
        ),
    ];
    for (name, text, what) in cases {
        let path = dir.write(name, text);
        let err = refused(&["check", path.to_str().expect("path")]);
        assert!(err.contains("breaker \"payments\": "), "{name}: {err}");
        assert!(err.contains(what), "{name}: {err}");
        assert!(err.contains(name), "{name}: the file too: {err}");
    }
}

const PROXY_HEAD: &str = r#"
[[listeners]]
address = "127.0.0.1:0"

[[routes]]
name = "api"
cluster = "backend"
"#;

#[test]
fn check_names_the_breaker_of_a_proxy_route_or_cluster() {
    let dir = Dir::new();
    let cluster = "\n[clusters.backend]\nendpoints = [\"127.0.0.1:9\"]\n";
    let cases = [
        // A route breaker with its own name, without one (it runs under
        // the route's), a value of the wrong type, and a cluster's
        // endpoint breaker template.
        (
            format!(
                "{PROXY_HEAD}[routes.breaker]\nname = \"payments\"\nfailure_rate_threshold = 1.5\n{cluster}"
            ),
            "routes[0].breaker.failure_rate_threshold: must be a fraction in (0, 1], got 1.5 (breaker \"payments\")",
        ),
        (
            format!("{PROXY_HEAD}breaker = {{ failure_rate_threshold = 1.5 }}\n{cluster}"),
            "routes[0].breaker.failure_rate_threshold: must be a fraction in (0, 1], got 1.5 (breaker \"api\")",
        ),
        (
            format!(
                "{PROXY_HEAD}[routes.breaker]\nname = \"payments\"\nminimum_calls = \"x\"\n{cluster}"
            ),
            "routes[0].breaker.minimum_calls: invalid type: string \"x\", expected u32 (breaker \"payments\")",
        ),
        (
            format!(
                "{PROXY_HEAD}{cluster}[clusters.backend.breaker]\nfailure_rate_threshold = 2.0\n"
            ),
            "(breaker \"backend\")",
        ),
    ];
    for (i, (text, what)) in cases.iter().enumerate() {
        let path = dir.write(&format!("p{i}.toml"), text);
        let err = refused(&["check", path.to_str().expect("path")]);
        assert!(err.contains(what), "{text}\n→ {err}");
    }
}

#[test]
fn run_names_the_breaker_it_runs_whatever_the_file_calls_it() {
    let dir = Dir::new();
    let state = dir.path("state");
    let state = state.to_str().expect("state dir");
    let unnamed = dir.write("unnamed.toml", "failure_rate_threshold = 1.5\n");
    let named = dir.write("named.yaml", "name: payments\nminimum_calls: x\n");
    let cases = [
        (
            unnamed,
            "breaker \"deploy\": `failure_rate_threshold` must be a fraction",
        ),
        (named, "breaker \"payments\": "),
    ];
    for (config, what) in cases {
        let err = refused(&[
            "run",
            "--breaker",
            "deploy",
            "--state-dir",
            state,
            "--config",
            config.to_str().expect("path"),
            "--",
            "true",
        ]);
        assert!(err.contains(what), "{}: {err}", config.display());
    }
}

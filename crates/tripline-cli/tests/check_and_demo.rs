//! `check` and `demo` through the real binary: a valid config passes with
//! its warnings, a bad one fails with status 2 naming the field, and the
//! demo prints every transition with its reason.

#[path = "support/run.rs"]
mod support;

use support::{Dir, tripline};

#[test]
fn check_accepts_a_valid_config_and_prints_its_warnings() {
    let dir = Dir::new();
    let file = dir.write(
        "ok.toml",
        r#"
        name = "payments"
        window = { kind = "count", size = 10 }
        minimum_calls = 20
        "#,
    );
    let out = tripline(["check", file.to_str().expect("path")]);
    assert_eq!(out.status, 0, "{}", out.stderr);
    let text = out.text();
    assert!(text.contains("warning: `minimum_calls`"), "{text}");
    assert!(
        text.contains("valid breaker config `payments` (1 warning)"),
        "{text}"
    );
}

#[test]
fn check_refuses_bad_input_with_status_2_naming_the_field() {
    let dir = Dir::new();
    for (src, needle) in [
        (
            "failure_rate_threshold = 1.5",
            "`failure_rate_threshold` must be a fraction in (0, 1], got 1.5",
        ),
        ("minimum_call = 3", "unknown field `minimum_call`"),
        (
            "window = { kind = \"time\", length = \"10s\", buckets = 0 }",
            "`window.buckets`",
        ),
    ] {
        let file = dir.write("bad.toml", src);
        let out = tripline(["check", file.to_str().expect("path")]);
        assert_eq!(out.status, 2, "{src}");
        assert!(out.stdout.is_empty(), "{src}: nothing on stdout");
        assert!(
            out.stderr.contains(needle) && out.stderr.contains("bad.toml"),
            "{src}: {}",
            out.stderr
        );
    }
    let out = tripline(["check", "/no/such/file.toml"]);
    assert_eq!(out.status, 2);
}

#[test]
fn demo_prints_each_transition_with_its_reason_and_window() {
    let out = tripline(["demo"]);
    assert_eq!(out.status, 0, "{}", out.stderr);
    let text = out.text();
    for needle in [
        "closed    → open      reason=failure_rate",
        "open      → half_open reason=open_duration_elapsed",
        "half_open → open      reason=probe_failed",
        "half_open → closed    reason=probes_succeeded",
        "window: 100 calls, 50 failed (50%)",
        "final state closed",
    ] {
        assert!(text.contains(needle), "missing {needle:?} in\n{text}");
    }
}

#[test]
fn check_reads_yaml_and_json_by_extension_with_line_numbers() {
    let dir = Dir::new();
    let yaml = dir.write(
        "ok.yaml",
        "name: payments\nwindow: { kind: count, size: 10 }\nminimum_calls: 5\nopen_duration: 5s\n",
    );
    let out = tripline(["check", yaml.to_str().expect("path")]);
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert!(out.text().contains("valid breaker config `payments`"));
    let json = dir.write("ok.json", r#"{ "name": "payments", "minimum_calls": 5 }"#);
    let out = tripline(["check", json.to_str().expect("path")]);
    assert_eq!(out.status, 0, "{}", out.stderr);
    let bad = dir.write(
        "bad.json",
        "{ \"name\": \"p\",\n  \"minimum_calls\": \"x\" }",
    );
    let out = tripline(["check", bad.to_str().expect("path")]);
    assert_eq!(out.status, 2);
    assert!(out.stderr.contains("bad.json:2:"), "{}", out.stderr);
    let bad = dir.write("bad.yml", "name: p\nfailure_rate_threshold: 2.0\n");
    let out = tripline(["check", bad.to_str().expect("path")]);
    assert_eq!(out.status, 2);
    assert!(
        out.stderr.contains("bad.yml") && out.stderr.contains("`failure_rate_threshold`"),
        "{}",
        out.stderr
    );
    let bad = dir.write("bad.toml", "name = \"p\"\nminimum_calls = \"ten\"\n");
    let out = tripline(["check", bad.to_str().expect("path")]);
    assert!(out.stderr.contains("bad.toml:2:"), "{}", out.stderr);
}

#[test]
fn a_file_of_the_other_kind_is_named_with_the_command_that_reads_it() {
    let dir = Dir::new();
    let breaker = dir.write(
        "payments.toml",
        "name = \"payments\"\nminimum_calls = 10\nfailure_rate_threshold = 0.5\n",
    );
    let out = tripline(["simulate", breaker.to_str().expect("path")]);
    assert_eq!(out.status, 2);
    assert!(
        out.stderr.contains("looks like a breaker config") && out.stderr.contains("tripline check"),
        "{}",
        out.stderr
    );
    let scenario = support::bundled("low-traffic.toml");
    let out = tripline(["check", scenario.to_str().expect("path")]);
    assert_eq!(out.status, 2);
    assert!(
        out.stderr.contains("looks like a fault scenario")
            && out.stderr.contains("tripline simulate"),
        "{}",
        out.stderr
    );
    // A config document of `[[breaker]]` tables alone is a document, not a
    // scenario (a scenario has its `[traffic]`).
    let document = dir.write(
        "fleet.toml",
        "author = \"ops\"\n\n[[breaker]]\nname = \"payments\"\nminimum_calls = 10\n",
    );
    let out = tripline(["check", document.to_str().expect("path")]);
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert!(
        out.text().contains("valid config document"),
        "{}",
        out.text()
    );
}

#[test]
fn bytes_that_are_not_utf8_are_located_by_every_reader() {
    use std::io::Write;
    use std::process::{Command, Stdio};

    let dir = Dir::new();
    let bytes: &[u8] = b"duration = \"10s\"\nname = \"caf\xe9\"\n";
    let latin1 = dir.path("latin1.toml");
    std::fs::write(&latin1, bytes).expect("write");
    let file = latin1.to_str().expect("path");
    // Line 2, column 12 (after `name = "caf`), byte 28: the same position
    // from simulate, sweep, check and stdin.
    for args in [
        vec!["simulate", file],
        vec!["sweep", file, "--grid", "minimum_calls=1,2"],
    ] {
        let out = tripline(&args);
        assert_eq!(out.status, 2, "{args:?}");
        assert!(
            out.stderr.contains(&format!(
                "{file}:2:12: invalid UTF-8 at byte offset 28; a scenario is UTF-8 text"
            )),
            "{args:?}: {}",
            out.stderr
        );
    }
    let out = tripline(["check", file]);
    assert_eq!(out.status, 2);
    assert!(
        out.stderr.contains(&format!(
            "{file}:2:12: invalid UTF-8 at byte offset 28 (line 2, column 12); a config is UTF-8 text"
        )),
        "{}",
        out.stderr
    );
    let yaml = dir.path("latin1.yaml");
    std::fs::write(&yaml, b"name: caf\xe9\n").expect("write");
    let out = tripline(["check", yaml.to_str().expect("path")]);
    assert!(
        out.stderr
            .contains("invalid UTF-8 at byte offset 9 (line 1, column 10)"),
        "{}",
        out.stderr
    );
    let mut child = Command::new(env!("CARGO_BIN_EXE_tripline"))
        .args(["simulate", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(bytes)
        .expect("write stdin");
    let out = child.wait_with_output().expect("wait");
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("<stdin>:2:12: invalid UTF-8 at byte offset 28; a scenario is UTF-8 text"),
        "{stderr}"
    );
}

#[test]
fn demo_takes_its_run_time_in_seconds_or_as_a_duration() {
    for arg in ["5", "5s"] {
        let out = tripline(["demo", "--seconds", arg]);
        assert_eq!(out.status, 0, "{arg}: {}", out.stderr);
        assert!(out.text().contains("50 calls"), "{arg}: {}", out.text());
    }
    let out = tripline(["demo", "--seconds", "5x"]);
    assert_eq!(out.status, 2);
    assert!(out.stderr.contains("neither seconds"), "{}", out.stderr);
}

#[test]
fn simulate_reads_the_scenario_from_stdin_given_a_dash() {
    use std::io::Write;
    use std::process::{Command, Stdio};
    let src = std::fs::read(support::bundled("low-traffic.toml")).expect("bundled");
    let mut child = Command::new(env!("CARGO_BIN_EXE_tripline"))
        .args(["simulate", "-", "--format", "json"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run tripline");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(&src)
        .expect("write stdin");
    let out = child.wait_with_output().expect("wait");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(json["runs"].as_array().map(Vec::len), Some(2));
}

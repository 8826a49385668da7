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

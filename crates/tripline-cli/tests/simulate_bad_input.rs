//! Bad scenarios: one clear error naming the file, the table and the field
//! (with line and column where the parser gives them), exit status 2 and
//! nothing on stdout — for `simulate` and `sweep` alike.

#[path = "support/run.rs"]
mod support;

use support::{Dir, tripline};

const TRAFFIC: &str = "duration = \"60s\"\n[traffic]\nrate = 2.0\n";
const BREAKER: &str = "[[breaker]]\nname = \"b\"\n";

/// Runs `simulate` and `sweep` on `src` and checks both fail with an error
/// containing every one of `expect`.
fn rejects(name: &str, src: &str, expect: &[&str]) {
    let dir = Dir::new();
    let file = dir.write(&format!("{name}.toml"), src);
    let path = file.to_str().expect("utf-8 path");
    for args in [
        vec!["simulate", path],
        vec!["simulate", path, "--format", "json"],
        vec!["sweep", path, "--grid", "minimum_calls=5,10"],
    ] {
        let out = tripline(&args);
        assert_eq!(out.status, 2, "{args:?}: stderr {}", out.stderr);
        assert!(out.stdout.is_empty(), "{args:?}: stdout {:?}", out.text());
        assert_eq!(out.stderr.lines().count(), 1, "one line: {}", out.stderr);
        assert!(
            out.stderr.starts_with(&format!("tripline: {path}")),
            "{}",
            out.stderr
        );
        for e in expect {
            assert!(
                out.stderr.contains(e),
                "{args:?}: {:?} not in {}",
                e,
                out.stderr
            );
        }
    }
}

#[test]
fn unknown_key_names_table_field_line_and_column() {
    let src = format!("{TRAFFIC}burst = 3\n{BREAKER}");
    rejects(
        "unknown",
        &src,
        &[":4:1:", "in [traffic]", "field `burst`", "unknown field"],
    );
}

#[test]
fn unknown_key_inside_an_inline_breaker_table() {
    let src = format!("{TRAFFIC}{BREAKER}window = {{ kind = \"count\", sise = 10 }}\n");
    rejects(
        "inline",
        &src,
        &[":6:", "in [[breaker]] #1", "field `window.sise`"],
    );
}

#[test]
fn fault_ending_before_it_starts() {
    let src = format!(
        "{TRAFFIC}[[fault]]\nname = \"a\"\nstart = \"10s\"\nend = \"20s\"\n\
         [[fault]]\nname = \"late\"\nstart = \"30s\"\nend = \"25s\"\n{BREAKER}"
    );
    rejects(
        "ends",
        &src,
        &[
            ":11:7:",
            "in [[fault]] #2 \"late\"",
            "field `end`",
            "after `start`",
        ],
    );
}

#[test]
fn at_list_out_of_order_or_repeated() {
    let src = format!("{TRAFFIC}[[fault]]\nname = \"blips\"\nat = [\"12s\", \"11s\"]\n{BREAKER}");
    rejects(
        "order",
        &src,
        &[
            ":6:14:",
            "in [[fault]] #1 \"blips\"",
            "field `at`",
            "increasing",
        ],
    );
    let src = format!("{TRAFFIC}[[fault]]\nname = \"blips\"\nat = [\"12s\", \"12s\"]\n{BREAKER}");
    rejects("repeat", &src, &["field `at`", "without repeats"]);
}

#[test]
fn rates_at_or_below_zero() {
    let src = format!("duration = \"60s\"\n[traffic]\nrate = 0\n{BREAKER}");
    rejects(
        "zero",
        &src,
        &[":3:8:", "in [traffic]", "field `rate`", "above 0"],
    );
    let src = format!("duration = \"60s\"\n[traffic]\nrate = -1.5\n{BREAKER}");
    rejects(
        "negative",
        &src,
        &["in [traffic]", "field `rate`", "got -1.5"],
    );
    let src = format!(
        "{TRAFFIC}[[fault]]\nname = \"f\"\nstart = \"1s\"\nend = \"2s\"\nrate = 0.0\n{BREAKER}"
    );
    rejects(
        "fault-rate",
        &src,
        &[":8:8:", "in [[fault]] #1 \"f\"", "field `rate`"],
    );
}

#[test]
fn zero_duration() {
    let src = format!("duration = \"0s\"\n[traffic]\nrate = 2.0\n{BREAKER}");
    rejects(
        "duration",
        &src,
        &[":1:12:", "at top level", "field `duration`", "above 0s"],
    );
}

#[test]
fn invalid_breaker_config_is_refused_by_the_library_validation() {
    let src = format!(
        "{TRAFFIC}{BREAKER}[[breaker]]\nname = \"c\"\n\
         half_open = {{ policy = \"permits\", calls = 0, failure_rate_threshold = 0.2 }}\n"
    );
    rejects(
        "half-open",
        &src,
        &[
            ":8:35:",
            "in [[breaker]] #2 \"c\"",
            "field `half_open.calls`",
        ],
    );
    let src = format!("{TRAFFIC}{BREAKER}failure_rate_threshold = 1.5\n");
    rejects(
        "threshold",
        &src,
        &[":6:1:", "field `failure_rate_threshold`", "(0, 1]"],
    );
}

#[test]
fn toml_syntax_error_missing_table_and_unreadable_file() {
    rejects(
        "syntax",
        "duration = \"60s\"\n[traffic\nrate = 2.0\n",
        &[":2:9:", "unclosed table"],
    );
    rejects(
        "no-traffic",
        &format!("duration = \"60s\"\n{BREAKER}"),
        &["missing field `traffic`"],
    );
    rejects(
        "no-breaker",
        TRAFFIC,
        &["field `breaker`", "at least one [[breaker]]"],
    );
    let out = tripline(["simulate", "/nonexistent/scenario.toml"]);
    assert_eq!(out.status, 2);
    assert!(out.stdout.is_empty());
    assert!(
        out.stderr
            .contains("/nonexistent/scenario.toml: cannot read the file")
    );
}

#[test]
fn bad_sweep_grids_name_the_key() {
    let dir = Dir::new();
    let file = dir.write("ok.toml", &format!("{TRAFFIC}{BREAKER}"));
    let path = file.to_str().expect("utf-8 path");
    for (grid, expect) in [
        ("minimum_calls", "expected KEY=V1,V2"),
        ("bogus_key=1,2", "field `bogus_key`"),
        ("minimum_calls=0,5", "field `minimum_calls`"),
        (
            "failure_rate_threshold=0.5,2",
            "--grid point failure_rate_threshold=2",
        ),
    ] {
        let out = tripline(["sweep", path, "--grid", grid]);
        assert_eq!(out.status, 2, "{grid}: {}", out.stderr);
        assert!(out.stdout.is_empty(), "{grid}");
        assert!(
            out.stderr.contains(expect),
            "{grid}: {expect:?} not in {}",
            out.stderr
        );
        assert!(
            out.stderr.contains(path),
            "{grid}: file not named in {}",
            out.stderr
        );
    }
}

/// A grid of more points than any sweep could run is refused with its
/// size, not a crash (13 axes of 50 values overflowed the point count).
#[test]
fn an_absurd_grid_is_refused_with_its_size() {
    let dir = Dir::new();
    let file = dir.write("ok.toml", &format!("{TRAFFIC}{BREAKER}"));
    let path = file.to_str().expect("utf-8 path");
    let values: Vec<String> = (1..=50).map(|v| v.to_string()).collect();
    let values = values.join(",");
    let mut args = vec!["sweep".to_owned(), path.to_owned()];
    for key in [
        "a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l", "m",
    ] {
        args.push("--grid".to_owned());
        args.push(format!("{key}={values}"));
    }
    let out = tripline(&args);
    assert_eq!(out.status, 2, "{}", out.stderr);
    assert!(out.stdout.is_empty());
    assert!(
        out.stderr
            .contains("points is more than a sweep takes (at most 1000000)"),
        "{}",
        out.stderr
    );
}

#[test]
fn a_negative_duration_is_called_one() {
    let src = format!("duration = \"-5s\"\n[traffic]\nrate = 2.0\n{BREAKER}");
    rejects(
        "negative",
        &src,
        &[":1:", "field `duration`", "cannot be negative", "\"5s\""],
    );
    let src = format!("{TRAFFIC}{BREAKER}open_duration = \"5 parsecs\"\n");
    rejects("parsecs", &src, &["is not a duration", "\"250ms\""]);
}

#[test]
fn a_misspelt_table_is_named_as_a_table_with_the_likely_one() {
    let src = format!("{TRAFFIC}[[faults]]\nname = \"x\"\n{BREAKER}");
    rejects(
        "faults",
        &src,
        &[
            ":4:1:",
            "unknown table `[[faults]]`",
            "did you mean `[[fault]]`?",
        ],
    );
}

#[test]
fn a_value_of_the_wrong_type_says_a_number_is_expected_not_a_rust_type() {
    let src = format!("duration = \"60s\"\n[traffic]\nrate = \"fast\"\n{BREAKER}");
    rejects(
        "typed",
        &src,
        &[
            ":3:8:",
            "in [traffic], field `rate`",
            "invalid type: string \"fast\", expected a number",
        ],
    );
}

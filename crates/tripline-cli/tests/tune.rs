//! `tripline tune` through the real binary, on the bundled example log (a
//! proxy access log with one outage, 08:05:00–08:06:00 UTC).

#[path = "support/run.rs"]
mod support;

use std::path::PathBuf;

use support::{Dir, tripline};

fn example() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples/tune/access.log")
}

fn example_text() -> String {
    std::fs::read_to_string(example()).expect("the bundled example log")
}

#[test]
fn recommends_a_config_that_check_accepts() {
    let dir = Dir::new();
    let out_file = dir.path("breaker.toml");
    let log = example();
    let out = tripline([
        "tune",
        "--access-log",
        log.to_str().expect("path"),
        "--out",
        out_file.to_str().expect("path"),
    ]);
    assert_eq!(out.status, 0, "{}", out.stderr);
    let text = out.text();
    assert!(text.contains("08:05:00–08:06:00"), "{text}");
    for word in [
        "sensitive",
        "balanced",
        "conservative",
        "minimum_calls = ",
        "failure_rate_threshold = ",
    ] {
        assert!(text.contains(word), "{word}: {text}");
    }
    let check = tripline(["check", out_file.to_str().expect("path")]);
    assert_eq!(check.status, 0, "{}\n{}", check.text(), check.stderr);
}

#[test]
fn current_says_what_the_recommendation_would_have_changed() {
    let dir = Dir::new();
    let current = dir.write(
        "current.toml",
        "name = \"api\"\nwindow = { kind = \"count\", size = 200 }\nminimum_calls = 100\nfailure_rate_threshold = 0.5\n",
    );
    let log = example();
    let out = tripline([
        "tune",
        "--access-log",
        log.to_str().expect("path"),
        "--current",
        current.to_str().expect("path"),
    ]);
    assert_eq!(out.status, 0, "{}", out.stderr);
    let text = out.text();
    assert!(text.contains("current "), "{text}");
    assert!(
        text.contains("would have caught the 08:05:00 outage"),
        "{text}"
    );
    assert!(text.contains("false trip(s)"), "{text}");
}

#[test]
fn labelled_outages_replace_the_detected_ones() {
    let log = example();
    let out = tripline([
        "tune",
        "--access-log",
        log.to_str().expect("path"),
        "--outage",
        "08:05..08:06",
    ]);
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert!(
        out.text().contains("08:05:00–08:06:00 (60 s, labelled)"),
        "{}",
        out.text()
    );
}

#[test]
fn a_malformed_line_is_refused_at_its_line_unless_skipped() {
    let dir = Dir::new();
    let mut log = example_text();
    log.insert_str(0, "{\"timestamp\": oops}\n");
    let path = dir.write("access.log", &log);
    let p = path.to_str().expect("path");
    let out = tripline(["tune", "--access-log", p]);
    assert_eq!(out.status, 2, "{}", out.stderr);
    assert!(
        out.stderr.contains("line 1:") && out.stderr.contains("1 malformed line(s)"),
        "{}",
        out.stderr
    );
    let out = tripline(["tune", "--access-log", p, "--skip-bad-lines"]);
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert!(
        out.stderr.contains("skipped 1 malformed line(s)"),
        "{}",
        out.stderr
    );
}

#[test]
fn an_unknown_route_and_an_unusable_log_are_refused() {
    let log = example();
    let out = tripline([
        "tune",
        "--access-log",
        log.to_str().expect("path"),
        "--route",
        "payments",
    ]);
    assert_eq!(out.status, 2);
    assert!(
        out.stderr.contains("unknown route `payments`") && out.stderr.contains("api"),
        "{}",
        out.stderr
    );
    let dir = Dir::new();
    let short: String = example_text()
        .lines()
        .take(50)
        .map(|l| format!("{l}\n"))
        .collect();
    let path = dir.write("short.log", &short);
    let out = tripline(["tune", "--access-log", path.to_str().expect("path")]);
    assert_eq!(out.status, 2);
    assert!(out.stderr.contains("too few calls"), "{}", out.stderr);
}

#[test]
fn the_emitted_scenario_runs_under_simulate() {
    let dir = Dir::new();
    let scenario = dir.path("recorded.toml");
    let log = example();
    let out = tripline([
        "tune",
        "--access-log",
        log.to_str().expect("path"),
        "--emit-scenario",
        scenario.to_str().expect("path"),
    ]);
    assert_eq!(out.status, 0, "{}", out.stderr);
    let sim = tripline(["simulate", scenario.to_str().expect("path")]);
    assert_eq!(sim.status, 0, "{}", sim.stderr);
    assert!(sim.text().contains("outage 1"), "{}", sim.text());
}

#[test]
fn chart_marks_each_objectives_trips() {
    let dir = Dir::new();
    let chart = dir.path("tune.svg");
    let log = example();
    let out = tripline([
        "tune",
        "--access-log",
        log.to_str().expect("path"),
        "--chart",
        chart.to_str().expect("path"),
    ]);
    assert_eq!(out.status, 0, "{}", out.stderr);
    let svg = std::fs::read_to_string(&chart).expect("chart written");
    let doc = roxmltree::Document::parse(&svg).expect("well-formed SVG");
    let trips = doc
        .descendants()
        .filter(|n| n.has_tag_name("circle"))
        .count();
    assert!(trips >= 3, "one trip per objective at least: {trips}");
    assert!(svg.contains("balanced") && svg.contains("failed share"));
}

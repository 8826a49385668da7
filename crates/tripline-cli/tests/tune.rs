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

#[test]
fn traffic_that_differs_by_hour_is_written_as_a_document_with_a_peak_profile() {
    use tripline_sim::tune::synth::{Spec, write};
    // 07:00–08:00 UTC at 2 requests/s, 08:00–09:00 at 20, on route `api`.
    let spec = Spec {
        start: 1_796_108_400,
        seconds: 7200,
        rate: 2,
        busy: Some((3600, 7200, 20)),
        ..Spec::default()
    };
    let mut bytes = Vec::new();
    write(&spec, &mut bytes).expect("in memory");
    let dir = Dir::new();
    let log = dir.path("access.log");
    std::fs::write(&log, bytes).expect("write the log");
    let document = dir.path("tuned.toml");
    let out = tripline([
        "tune",
        "--access-log",
        log.to_str().expect("path"),
        "--out",
        document.to_str().expect("path"),
    ]);
    assert_eq!(out.status, 0, "{}", out.stderr);
    let text = std::fs::read_to_string(&document).expect("--out written");
    for part in [
        "[[breaker]]\nname = \"api\"",
        "[[profile]]\nname = \"peak-08h\"",
        "from = \"08:00\", to = \"09:00\", tz = \"UTC\"",
        "[[profile.breaker]]\nname = \"api\"",
    ] {
        assert!(text.contains(part), "{part:?} in:\n{text}");
    }
    // A document `config push` takes, whose profile holds at the peak.
    let at = |instant: &str| {
        tripline([
            "config",
            "check",
            document.to_str().expect("path"),
            "--at",
            instant,
        ])
    };
    let peak = at("2026-12-01T08:30:00Z");
    assert_eq!(peak.status, 0, "{}\n{}", peak.text(), peak.stderr);
    assert!(
        peak.text().contains("profile \"peak-08h\" holds"),
        "{}",
        peak.text()
    );
    let quiet = at("2026-12-01T07:30:00Z");
    assert_eq!(quiet.status, 0, "{}\n{}", quiet.text(), quiet.stderr);
    assert!(
        quiet.text().contains("no profile holds"),
        "{}",
        quiet.text()
    );
}

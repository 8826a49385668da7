//! `simulate` output: determinism, the JSON schema, the text report and the
//! SVG chart, through the real binary.

#[path = "support/run.rs"]
mod support;

use std::collections::BTreeSet;

use serde_json::Value;
use support::{Dir, bundled, tripline};

/// The simulator's reference scenario, verbatim.
const REFERENCE: &str = r#"
name = "payments: database failover"
duration = "120s"
seed = 7

[traffic]
rate = 2.0
latency = "20ms"
timeout = "1s"
replicas = 1

[[fault]]
name = "primary down"
start = "30s"
end = "70s"
kind = "error"
expect_trip = true

[[fault]]
name = "slow disk"
start = "80s"
end = "95s"
kind = "latency"
latency = "700ms"

[[fault]]
name = "flaky"
start = "100s"
end = "110s"
kind = "error"
rate = 0.3

[[fault]]
name = "network blips"
at = ["112s", "115s"]
expect_trip = false

[[breaker]]
name = "balanced"
window = { kind = "count", size = 10 }
minimum_calls = 5
failure_rate_threshold = 0.5
open_duration = "5s"
half_open = { policy = "consecutive", successes = 2 }
"#;

fn keys(v: &Value) -> BTreeSet<String> {
    v.as_object().expect("object").keys().cloned().collect()
}

fn set(names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|s| s.to_string()).collect()
}

#[test]
fn same_file_and_seed_give_byte_identical_text_json_and_svg() {
    let dir = Dir::new();
    let reference = dir.write("reference.toml", REFERENCE);
    for file in [reference, bundled("replica-resonance.toml")] {
        let path = file.to_str().expect("utf-8 path");
        let mut outputs = Vec::new();
        for i in 0..2 {
            let svg = dir.path(&format!("chart{i}.svg"));
            let text = tripline(["simulate", path, "--chart", svg.to_str().expect("path")]);
            let json = tripline(["simulate", path, "--format", "json"]);
            assert_eq!((text.status, json.status), (0, 0), "{}", text.stderr);
            outputs.push((
                text.stdout,
                json.stdout,
                std::fs::read(&svg).expect("svg written"),
            ));
        }
        assert!(!outputs[0].0.is_empty() && !outputs[0].2.is_empty());
        assert!(
            outputs[0] == outputs[1],
            "{path}: outputs differ between runs"
        );
    }
}

#[test]
fn the_seed_drives_probabilistic_faults() {
    let dir = Dir::new();
    let a = dir.write("a.toml", REFERENCE);
    let b = dir.write("b.toml", &REFERENCE.replace("seed = 7", "seed = 8"));
    let flaky = |f: &std::path::Path| {
        let r = tripline(["simulate", f.to_str().expect("path"), "--format", "json"]).json();
        r["runs"][0]["faults"][2]["failed"]
            .as_u64()
            .expect("failed")
    };
    // 30 % of the 20 calls in [100 s, 110 s) fail, as drawn from the seed.
    let (fa, fb) = (flaky(&a), flaky(&b));
    assert!(
        (1..=12).contains(&fa) && (1..=12).contains(&fb),
        "{fa} {fb}"
    );
    assert_ne!(fa, fb, "another seed draws other failures");
}

#[test]
fn json_schema_is_stable() {
    let dir = Dir::new();
    let file = dir.write("reference.toml", REFERENCE);
    let r = tripline(["simulate", file.to_str().expect("path"), "--format", "json"]).json();
    assert_eq!(
        keys(&r),
        set(&[
            "schema_version",
            "scenario",
            "seed",
            "duration",
            "replicas",
            "calls_per_replica",
            "runs"
        ])
    );
    assert_eq!(r["schema_version"], 1);
    assert_eq!(r["scenario"], "payments: database failover");
    let run = &r["runs"][0];
    assert_eq!(
        keys(run),
        set(&[
            "breaker",
            "warnings",
            "totals",
            "transitions",
            "faults",
            "false_trips",
            "collateral_rejected",
            "downstream",
            "score",
            "series",
        ])
    );
    assert_eq!(
        keys(&run["totals"]),
        set(&["calls", "succeeded", "failed", "rejected"])
    );
    let t = &run["transitions"][0];
    assert_eq!(
        keys(t),
        set(&["at", "replica", "from", "to", "reason", "window"])
    );
    assert_eq!(keys(&t["window"]), set(&["calls", "failures", "slow"]));
    assert_eq!(
        (t["at"].as_f64(), t["from"].as_str(), t["to"].as_str()),
        (Some(32.02), Some("closed"), Some("open"))
    );
    assert_eq!(t["reason"], "failure_rate");
    let f = &run["faults"][0];
    assert_eq!(
        keys(f),
        set(&[
            "name",
            "start",
            "expect_trip",
            "trips",
            "detection_delay",
            "recovered_at",
            "probe_peak_per_second",
            "sent_after_trip",
            "rejected",
            "failed",
            "succeeded",
        ])
    );
    assert_eq!(
        (f["start"].as_f64(), f["detection_delay"].as_f64()),
        (Some(30.0), Some(2.02))
    );
    assert!(
        run["faults"][1]["detection_delay"].is_null(),
        "no slow-call detection configured"
    );
    assert_eq!(
        keys(&run["downstream"]),
        set(&["peak_per_second", "mean_per_second"])
    );
    assert_eq!(
        keys(&run["score"]),
        set(&[
            "value",
            "detection",
            "missed",
            "false_trips",
            "collateral",
            "load",
            "lockstep"
        ])
    );
}

#[test]
fn text_report_has_timeline_fault_table_and_one_comparison_row_per_breaker() {
    let out = tripline([
        "simulate",
        bundled("ride-hailing-eta.toml").to_str().expect("path"),
    ]);
    assert_eq!(out.status, 0, "{}", out.stderr);
    let text = out.text();
    for breaker in ["sensitive", "balanced", "conservative"] {
        assert!(
            text.contains(&format!("== breaker \"{breaker}\" ==")),
            "{breaker}"
        );
    }
    assert!(
        text.contains("40.08s        0  closed → open"),
        "sensitive trips at 40.08 s:\n{text}"
    );
    assert!(
        text.lines()
            .nth(2)
            .is_some_and(|l| l.starts_with("verdict: \"balanced\" handled this scenario best")),
        "the verdict comes right after the scenario line:\n{text}"
    );
    let comparison = text.split("\ncomparison").nth(1).expect("comparison table");
    let rows: Vec<&str> = comparison
        .lines()
        .skip(2)
        .take_while(|l| !l.is_empty())
        .collect();
    assert_eq!(rows.len(), 3, "{comparison}");
    assert!(rows[0].starts_with("sensitive") && rows[2].starts_with("conservative"));
    assert!(
        text.find("\ncomparison") < text.find("== breaker"),
        "the comparison comes before the detail"
    );
    assert!(
        text.contains("open → half_open → open  probe_failed ×19"),
        "nineteen failed probe rounds are one row:\n{text}"
    );
    let singular_with_plural = |noun: &str| {
        text.match_indices(&format!("1 {noun}")).any(|(i, _)| {
            !text[..i]
                .chars()
                .next_back()
                .is_some_and(|c| c.is_ascii_digit())
        })
    };
    assert!(
        !singular_with_plural("calls") && !singular_with_plural("trips"),
        "plural agreement:\n{text}"
    );
    assert!(text.contains("1 call, 0 failed") && text.contains("1 trip, 0 false"));
    let verbose = tripline([
        "simulate",
        bundled("ride-hailing-eta.toml").to_str().expect("path"),
        "--verbose",
    ])
    .text();
    assert!(!verbose.contains("×19"), "--verbose lists every round");
    assert!(
        verbose
            .lines()
            .any(|l| l.trim_start().starts_with("43.13s") && l.contains("half_open → open")),
        "{verbose}"
    );
}

#[test]
fn chart_is_well_formed_svg_with_a_panel_per_breaker() {
    let dir = Dir::new();
    let svg_path = dir.path("eta.svg");
    let out = tripline([
        "simulate",
        bundled("ride-hailing-eta.toml").to_str().expect("path"),
        "--chart",
        svg_path.to_str().expect("path"),
    ]);
    assert_eq!(out.status, 0, "{}", out.stderr);
    let svg = std::fs::read_to_string(&svg_path).expect("chart written");
    let doc = roxmltree::Document::parse(&svg).expect("well-formed XML");
    let root = doc.root_element();
    assert_eq!(root.tag_name().name(), "svg");
    assert_eq!(
        root.tag_name().namespace(),
        Some("http://www.w3.org/2000/svg")
    );
    let texts: Vec<&str> = root.descendants().filter_map(|n| n.text()).collect();
    for label in [
        "sensitive — trips",
        "balanced — trips",
        "conservative — trips",
        "eta service down",
        "downstream",
    ] {
        assert!(texts.iter().any(|t| t.contains(label)), "{label} missing");
    }
    let polylines = root
        .descendants()
        .filter(|n| n.has_tag_name("polyline"))
        .count();
    assert_eq!(polylines, 3, "one downstream line per breaker");
}

#[test]
fn an_unwritable_chart_fails_with_status_1_and_no_stdout() {
    let out = tripline([
        "simulate",
        bundled("low-traffic.toml").to_str().expect("path"),
        "--chart",
        "/nonexistent/dir/x.svg",
    ]);
    assert_eq!(out.status, 1);
    assert!(out.stdout.is_empty());
    assert!(
        out.stderr
            .contains("cannot write the chart to /nonexistent/dir/x.svg")
    );
}

#[test]
fn the_per_second_series_adds_up_to_the_totals_in_json_and_csv() {
    let path = bundled("replica-resonance.toml");
    let file = path.to_str().expect("path");
    let json = tripline(["simulate", file, "--format", "json"]).json();
    let csv = tripline(["simulate", file, "--format", "csv"]);
    assert_eq!(csv.status, 0, "{}", csv.stderr);
    let csv = csv.text();
    let mut lines = csv.lines();
    assert_eq!(
        lines.next(),
        Some("breaker,t,succeeded,failed,rejected,sent,open,half_open")
    );
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    for run in json["runs"].as_array().expect("runs") {
        let series = run["series"].as_array().expect("series");
        assert_eq!(series.len(), 150, "one row per second of the scenario");
        let sum = |k: &str| series.iter().map(|s| s[k].as_u64().expect(k)).sum::<u64>();
        let totals = &run["totals"];
        assert_eq!(sum("succeeded"), totals["succeeded"].as_u64().expect("n"));
        assert_eq!(sum("failed"), totals["failed"].as_u64().expect("n"));
        assert_eq!(sum("rejected"), totals["rejected"].as_u64().expect("n"));
        let peak = series
            .iter()
            .map(|s| s["sent"].as_u64().expect("sent"))
            .max();
        assert_eq!(peak, run["downstream"]["peak_per_second"].as_u64());
        // During the outage (20 s – 90 s) every replica is open at some
        // second; before it, none.
        assert_eq!(series[10]["open"], 0);
        assert!(series[20..90].iter().any(|s| s["open"] == 200));
        let name = run["breaker"].as_str().expect("name");
        let own = rows.iter().filter(|r| r[0] == name).count();
        assert_eq!(own, 150, "{name}: one CSV row per second");
    }
}

#[test]
fn a_chart_path_that_is_neither_svg_nor_png_is_refused_before_any_work() {
    let dir = Dir::new();
    let jpg = dir.path("chart.jpg");
    let scenario = bundled("low-traffic.toml");
    for args in [
        vec![
            "simulate",
            scenario.to_str().expect("path"),
            "--chart",
            jpg.to_str().expect("path"),
        ],
        vec![
            "sweep",
            scenario.to_str().expect("path"),
            "--grid",
            "minimum_calls=1,2",
            "--chart",
            jpg.to_str().expect("path"),
        ],
    ] {
        let out = tripline(&args);
        assert_eq!(out.status, 2, "{args:?}");
        assert!(out.stdout.is_empty());
        assert!(
            out.stderr.contains("charts are written as SVG or PNG"),
            "{}",
            out.stderr
        );
        assert!(!jpg.exists(), "nothing written");
    }
}

#[test]
fn a_png_chart_is_the_svg_drawn_at_twice_its_size_with_its_text() {
    let dir = Dir::new();
    let scenario = bundled("low-traffic.toml");
    let file = scenario.to_str().expect("path");
    let (svg, png) = (dir.path("c.svg"), dir.path("c.png"));
    for out in [&svg, &png] {
        let run = tripline(["simulate", file, "--chart", out.to_str().expect("path")]);
        assert_eq!(run.status, 0, "{}", run.stderr);
    }
    let svg = std::fs::read_to_string(&svg).expect("svg");
    let doc = roxmltree::Document::parse(&svg).expect("XML");
    let size = |a: &str| -> u32 {
        let v: f64 = doc.root_element().attribute(a).expect(a).parse().expect(a);
        (v * 2.0).round() as u32
    };
    let bytes = std::fs::read(&png).expect("png written");
    let pixmap = resvg::tiny_skia::Pixmap::decode_png(&bytes).expect("a real PNG");
    assert_eq!(
        (pixmap.width(), pixmap.height()),
        (size("width"), size("height"))
    );
    let count = |f: &dyn Fn(u8, u8, u8) -> bool| {
        pixmap
            .pixels()
            .iter()
            .filter(|p| f(p.red(), p.green(), p.blue()))
            .count()
    };
    // The half-open marks (#8e24aa) and the dark text, not a blank image
    // or one drawn without a font.
    assert!(count(&|r, g, b| (r, g, b) == (0x8e, 0x24, 0xaa)) > 100);
    assert!(count(&|r, g, b| r < 0x40 && g < 0x40 && b < 0x40) > 2000);
    // The red warning text that says the rate-based breaker cannot trip.
    assert!(count(&|r, g, b| (r, g, b) == (0xb7, 0x1c, 0x1c)) > 200);
}

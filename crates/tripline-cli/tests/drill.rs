//! `tripline drill` through the real binary, against in-process proxies
//! on 127.0.0.1: every bundled drill passes, a failed expectation exits 1
//! naming its row, an abort rule exits 2, a drill that cannot run exits 3
//! naming the field (or the unreachable target), and the JUnit report has
//! one testcase per expectation.
//!
//! Drills run in real time (they drive real sockets); each is a few
//! seconds long and stops by itself, and the bundled ones run in parallel.

#[path = "support/run.rs"]
mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use support::{Dir, bundled, tripline};

fn drills_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../drills")
}

/// The testcases of a JUnit report: (name, failed).
fn junit_cases(xml: &str) -> Vec<(String, bool)> {
    let doc = roxmltree::Document::parse(xml).expect("JUnit report is XML");
    doc.descendants()
        .filter(|n| n.has_tag_name("testcase"))
        .map(|n| {
            (
                n.attribute("name").unwrap_or_default().to_owned(),
                n.children().any(|c| c.has_tag_name("failure")),
            )
        })
        .collect()
}

/// How many expectations the drill file writes in `[expect]`.
fn expectation_count(drill: &str) -> usize {
    let value: toml::Value = toml::from_str(drill).expect("drill is TOML");
    value["expect"].as_table().expect("[expect]").len()
}

#[test]
fn every_bundled_drill_passes_against_an_in_process_proxy() {
    let dir = Dir::new();
    let mut drills: Vec<PathBuf> = std::fs::read_dir(drills_dir())
        .expect("drills/")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .collect();
    drills.sort();
    assert_eq!(
        drills.len(),
        4,
        "one drill per bundled scenario: {drills:?}"
    );
    // In parallel: each drill is mostly waiting on its own schedule.
    let running: Vec<_> = drills
        .iter()
        .map(|drill| {
            let junit = dir.path(&format!(
                "{}.xml",
                drill.file_stem().unwrap().to_string_lossy()
            ));
            let child = Command::new(env!("CARGO_BIN_EXE_tripline"))
                .arg("drill")
                .arg(drill)
                .arg("--junit")
                .arg(&junit)
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("start tripline");
            (drill.clone(), junit, child)
        })
        .collect();
    for (drill, junit, out) in running {
        let out = out.wait_with_output().expect("run tripline");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}:\n{stdout}\n{}",
            drill.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(stdout.contains("PASS:"), "{stdout}");
        let cases = junit_cases(&std::fs::read_to_string(&junit).expect("JUnit written"));
        let text = std::fs::read_to_string(&drill).expect("drill");
        assert_eq!(cases.len(), expectation_count(&text), "{cases:?}");
        assert!(cases.iter().all(|(_, failed)| !failed), "{cases:?}");
    }
}

/// A drill over an in-process proxy with upstreams `a` and `b` and route
/// `api`; `breaker` is the route's breaker, `rest` the phases, abort rule
/// and expectations.
fn small_drill(breaker: &str, duration: &str, rest: &str) -> String {
    format!(
        r#"
name = "small"
watch = ["api"]
[target]
upstreams = {{ a = {{}}, b = {{}} }}
proxy = """
[[listeners]]
address = "127.0.0.1:0"
[[routes]]
name = "api"
cluster = "backend"
breaker = {breaker}
[clusters.backend]
endpoints = ["${{a}}", "${{b}}"]
"""
[load]
rate = 40.0
duration = "{duration}"
{rest}
"#
    )
}

const NEVER_TRIPS: &str = r#"{ window = { kind = "count", size = 1000 }, minimum_calls = 1000, failure_rate_threshold = 0.5 }"#;

#[test]
fn a_failed_expectation_exits_1_with_its_row_in_text_json_and_junit() {
    let dir = Dir::new();
    // Endpoint b fails every try, but the route breaker (the one watched)
    // needs 1000 calls: it never trips, so trip_within fails while false_trips holds.
    let drill = small_drill(
        NEVER_TRIPS,
        "2s",
        r#"
[[phase]]
name = "b down"
from = "0.5s"
to = "1.5s"
route = "api"
endpoint = "b"
abort = { status = 503 }

[expect]
trip_within = "1s"
false_trips = 0
"#,
    );
    let file = dir.write("fails.toml", &drill);
    let junit = dir.path("fails.xml");
    let out = tripline([
        "drill".as_ref(),
        file.as_os_str(),
        "--junit".as_ref(),
        junit.as_os_str(),
        "--compare-sim".as_ref(),
        bundled("ride-hailing-eta.toml").as_os_str(),
    ]);
    assert_eq!(out.status, 1, "{}\n{}", out.text(), out.stderr);
    let text = out.text();
    let row = text
        .lines()
        .find(|l| l.starts_with("trip_within"))
        .unwrap_or_else(|| panic!("no trip_within row:\n{text}"));
    assert!(
        row.contains("no trip in \"b down\"") && row.ends_with("FAIL"),
        "{row}"
    );
    assert!(
        text.lines()
            .any(|l| l.starts_with("false_trips") && l.ends_with("pass")),
        "{text}"
    );
    assert!(
        out.stderr.contains("1 of 2 expectations failed"),
        "{}",
        out.stderr
    );
    let cases = junit_cases(&std::fs::read_to_string(&junit).expect("JUnit written"));
    assert_eq!(
        cases,
        vec![
            ("trip_within".to_owned(), true),
            ("false_trips".to_owned(), false)
        ]
    );

    let out = tripline([
        "drill".as_ref(),
        file.as_os_str(),
        "--format".as_ref(),
        "json".as_ref(),
        "--compare-sim".as_ref(),
        bundled("ride-hailing-eta.toml").as_os_str(),
    ]);
    assert_eq!(out.status, 1, "{}", out.stderr);
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(json["rows"][0]["key"], "trip_within");
    assert_eq!(json["rows"][0]["pass"], false);
    assert_eq!(json["measured"]["phases"][0]["trips"], 0);
    assert_eq!(json["compare_sim"]["breaker"], "sensitive");
    assert_eq!(json["compare_sim"]["rows"][1]["key"], "false_trips");
    assert!(
        json["summary"]["errors"].as_u64().unwrap() > 0,
        "b's aborts were answered: {json}"
    );
}

#[test]
fn an_abort_rule_stops_the_drill_with_exit_2() {
    let dir = Dir::new();
    // Every try fails and nothing trips: errors stay at 100 %, and the
    // rule (above 50 % for 1 s, fault phases included) stops a 30 s drill.
    let drill = small_drill(
        NEVER_TRIPS,
        "30s",
        r#"
[[phase]]
from = "0s"
to = "29s"
route = "api"
abort = { status = 500 }

[abort]
error_rate_above = 0.5
for = "1s"
during = "any"

[expect]
false_trips = 0
"#,
    );
    let file = dir.write("aborts.toml", &drill);
    let junit = dir.path("aborts.xml");
    let out = tripline([
        "drill".as_ref(),
        file.as_os_str(),
        "--junit".as_ref(),
        junit.as_os_str(),
    ]);
    assert_eq!(out.status, 2, "{}\n{}", out.text(), out.stderr);
    assert!(
        out.text()
            .contains("ABORTED by the abort rule: error rate above 0.5 for 1s"),
        "{}",
        out.text()
    );
    assert!(out.stderr.contains("drill aborted"), "{}", out.stderr);
    let cases = junit_cases(&std::fs::read_to_string(&junit).expect("JUnit written"));
    assert!(
        cases.contains(&("abort_rule".to_owned(), true)),
        "{cases:?}"
    );
}

#[test]
fn a_drill_that_cannot_run_exits_3_naming_the_field_and_line() {
    let dir = Dir::new();
    let base = small_drill(NEVER_TRIPS, "2s", "");
    for (rest, needles) in [
        (
            "[expect]\ntrip_witin = \"1s\"\n",
            vec!["unknown field `trip_witin`", "line 21"],
        ),
        (
            "[[phase]]\nfrom = \"1s\"\nto = \"0.5s\"\nroute = \"api\"\nabort = { status = 503 }\n[expect]\nfalse_trips = 0\n",
            vec!["phase[1].to: must be after from", ":20:"],
        ),
        (
            "[[phase]]\nfrom = \"0s\"\nto = \"1s\"\nroute = \"api\"\nendpoint = \"c\"\nabort = { status = 503 }\n[expect]\nfalse_trips = 0\n",
            vec!["phase[1].endpoint", "names no in-process upstream"],
        ),
        (
            "[[phase]]\nfrom = \"0s\"\nto = \"1s\"\nroute = \"api\"\n[expect]\nfalse_trips = 0\n",
            vec!["phase[1].abort", "needs an abort or a delay"],
        ),
        ("[expect]\n", vec!["expect: needs at least one expectation"]),
    ] {
        let file = dir.write("bad.toml", &format!("{base}{rest}"));
        let out = tripline(["drill".as_ref(), file.as_os_str()]);
        assert_eq!(out.status, 3, "{rest}: {}", out.stderr);
        assert!(out.stdout.is_empty(), "nothing printed on a bad file");
        for needle in needles {
            assert!(
                out.stderr.contains(needle),
                "{rest}: {needle:?} not in {}",
                out.stderr
            );
        }
    }
}

#[test]
fn a_scenario_to_compare_with_is_checked_before_any_load() {
    let dir = Dir::new();
    let drill = format!(
        "compare_breaker = \"nope\"\n{}",
        small_drill(NEVER_TRIPS, "30s", "[expect]\nfalse_trips = 0\n")
    );
    let file = dir.write("compare.toml", &drill);
    let out = tripline([
        "drill".as_ref(),
        file.as_os_str(),
        "--compare-sim".as_ref(),
        bundled("ride-hailing-eta.toml").as_os_str(),
    ]);
    assert_eq!(out.status, 3, "{}", out.stderr);
    assert!(out.stdout.is_empty(), "the 30 s drill never ran");
    assert!(
        out.stderr
            .contains("compare_breaker: the scenario has no [[breaker]] named \"nope\""),
        "{}",
        out.stderr
    );
}

#[test]
fn an_unreachable_target_exits_3_at_once() {
    let dir = Dir::new();
    // A port that was free a moment ago: nothing listens on it.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("free port")
        .port();
    let file = dir.write(
        "remote.toml",
        &format!(
            "[target]\nadmin = \"http://127.0.0.1:{port}\"\nurl = \"http://127.0.0.1:{port}\"\n[load]\nrate = 10.0\nduration = \"60s\"\n[expect]\nfalse_trips = 0\n"
        ),
    );
    let out = tripline(["drill".as_ref(), file.as_os_str()]);
    assert_eq!(out.status, 3, "{}", out.stderr);
    assert!(out.stderr.contains("target not usable"), "{}", out.stderr);
    assert!(
        out.stderr.contains(&format!("127.0.0.1:{port}/api/faults")),
        "{}",
        out.stderr
    );
}

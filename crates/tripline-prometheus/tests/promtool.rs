//! Checks with Prometheus' own tool, `promtool` (Debian package
//! `prometheus`): the exposition of every family lints clean, every alert
//! rule passes its unit tests, and every dashboard query is valid PromQL
//! over names the exporter really writes.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly

#[path = "support/bin.rs"]
mod bin;
#[path = "support/fixture.rs"]
mod fixture;

use std::collections::BTreeSet;
use std::io::Write;
use std::process::{Command, Stdio};

use tripline_prometheus::Exporter;
use tripline_prometheus::http::Format;

fn promtool(args: &[&str], stdin: Option<&str>) -> String {
    let mut child = Command::new(bin::binary("promtool"))
        .args(args)
        .current_dir(bin::repo_root())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("promtool starts");
    let mut input = child.stdin.take().unwrap();
    input.write_all(stdin.unwrap_or("").as_bytes()).unwrap();
    drop(input);
    let out = child.wait_with_output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "promtool {args:?} failed:\n{text}");
    text
}

#[test]
fn every_family_passes_promtool_check_metrics() {
    let f = fixture::everything(Exporter::builder().compat(true).build().unwrap());
    let text = f.exporter.render(Format::PrometheusText).unwrap();
    let report = promtool(&["check", "metrics"], Some(&text));
    assert!(report.trim().is_empty(), "lint findings:\n{report}");
}

fn alert_names(text: &str, key: &str) -> BTreeSet<String> {
    text.lines()
        .filter_map(|l| l.trim().trim_start_matches("- ").strip_prefix(key))
        .map(|n| n.trim().to_string())
        .collect()
}

#[test]
fn every_alert_rule_passes_its_unit_tests() {
    let root = bin::repo_root().join("deploy/prometheus");
    promtool(
        &["check", "rules", "deploy/prometheus/tripline-alerts.yml"],
        None,
    );
    let mut tests: Vec<String> = std::fs::read_dir(root.join("tests"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "yml"))
        .map(|p| {
            p.strip_prefix(bin::repo_root())
                .unwrap()
                .display()
                .to_string()
        })
        .collect();
    tests.sort();
    let mut args = vec!["test", "rules"];
    args.extend(tests.iter().map(String::as_str));
    promtool(&args, None);

    let rules = std::fs::read_to_string(root.join("tripline-alerts.yml")).unwrap();
    let alerts = alert_names(&rules, "alert:");
    assert_eq!(alerts.len(), 11, "{alerts:?}");
    let mut tested = BTreeSet::new();
    for t in &tests {
        let text = std::fs::read_to_string(bin::repo_root().join(t)).unwrap();
        tested.extend(alert_names(&text, "alertname:"));
    }
    assert_eq!(alerts, tested, "every alert has a unit test");
}

/// Every PromQL expression of the dashboard, with Grafana's variables
/// replaced by values PromQL accepts.
fn dashboard_queries() -> Vec<String> {
    let path = bin::repo_root().join("deploy/grafana/tripline.json");
    let dash: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).expect("valid JSON");
    let mut exprs = Vec::new();
    for panel in dash["panels"].as_array().unwrap() {
        for t in panel["targets"].as_array().into_iter().flatten() {
            exprs.push(t["expr"].as_str().expect("every target has an expr"));
        }
    }
    for a in dash["annotations"]["list"].as_array().unwrap() {
        exprs.extend(a["expr"].as_str());
    }
    assert!(exprs.len() >= 10, "{exprs:?}");
    exprs
        .into_iter()
        .map(|e| {
            e.replace("$__rate_interval", "5m")
                .replace("$__range", "1h")
                .replace("$__interval", "1m")
        })
        .collect()
}

/// Names the dashboard reads that other tripline programs write: the
/// proxy's own families, `tripline run`'s textfile and the config
/// appliers'. The proxy's tests hold its scrape to the `tripline_proxy_`
/// ones; the run and config tests write the others.
const WRITTEN_ELSEWHERE: &[&str] = &[
    "tripline_proxy_request_duration_seconds",
    "tripline_proxy_upstream_duration_seconds",
    "tripline_proxy_refusals_total",
    "tripline_proxy_upstream_overflow_total",
    "tripline_proxy_upstream_in_use",
    "tripline_proxy_upstream_limit",
    "tripline_proxy_endpoint_healthy",
    "tripline_proxy_health_checks_total",
    "tripline_run_total",
    "tripline_run_store_errors_total",
    "tripline_config_applied_total",
    "tripline_config_rejected_total",
    "tripline_config_version",
];

#[test]
fn dashboard_queries_are_valid_promql_over_exported_names() {
    let queries = dashboard_queries();
    let exporter = Exporter::default();
    let mut names: BTreeSet<String> = exporter.metric_names().into_iter().collect();
    names.extend(WRITTEN_ELSEWHERE.iter().map(|n| (*n).to_owned()));
    for q in &queries {
        let mut rest = q.as_str();
        while let Some(i) = rest.find("tripline_") {
            let id: String = rest[i..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            let base = ["_bucket", "_sum", "_count"]
                .iter()
                .find_map(|s| id.strip_suffix(s).filter(|b| names.contains(*b)))
                .unwrap_or(&id);
            assert!(
                names.contains(base),
                "`{id}` in `{q}` is not written by the exporter"
            );
            rest = &rest[i + id.len()..];
        }
    }
    // promtool has no query checker; a recording rule per query makes
    // `check rules` parse each one.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("dashboard.yml");
    let mut yaml = String::from("groups:\n  - name: dashboard\n    rules:\n");
    for (i, q) in queries.iter().enumerate() {
        yaml += &format!("      - record: dashboard:query{i}\n        expr: {q:?}\n");
    }
    std::fs::write(&file, yaml).unwrap();
    let report = promtool(&["check", "rules", file.to_str().unwrap()], None);
    assert!(
        report.contains(&format!("SUCCESS: {} rules found", queries.len())),
        "{report}"
    );
}

#[test]
fn the_template_variable_queries_an_exported_label() {
    let path = bin::repo_root().join("deploy/grafana/tripline.json");
    let dash: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let var = dash["templating"]["list"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == "breaker")
        .unwrap();
    assert_eq!(
        var["definition"],
        "label_values(tripline_breaker_state_code, name)"
    );
    assert!(
        Exporter::default()
            .metric_names()
            .contains(&"tripline_breaker_state_code".to_string())
    );
}

//! `sweep`: the grid's product, ranking by score, CSV/JSON/text outputs and
//! the trade-off chart, through the real binary.

#[path = "support/run.rs"]
mod support;

use serde_json::Value;
use support::{Dir, bundled, tripline};

const GRID: [&str; 4] = [
    "--grid",
    "minimum_calls=5,10,20",
    "--grid",
    "failure_rate_threshold=0.2,0.5,0.8",
];

fn sweep(format: &str) -> support::Output {
    let path = bundled("ride-hailing-eta.toml");
    let mut args = vec!["sweep", path.to_str().expect("path"), "--format", format];
    args.extend(GRID);
    let out = tripline(&args);
    assert_eq!(out.status, 0, "{}", out.stderr);
    out
}

#[test]
fn every_point_of_the_product_is_ranked_by_score() {
    let r = sweep("json").json();
    assert_eq!(r["schema_version"], 1);
    assert_eq!(
        r["breaker"], "sensitive",
        "the first [[breaker]] is the base"
    );
    assert_eq!(
        r["grid"],
        serde_json::json!(["minimum_calls", "failure_rate_threshold"])
    );
    let results = r["results"].as_array().expect("results");
    assert_eq!(results.len(), 9);
    let mut points: Vec<(String, String)> = results
        .iter()
        .map(|x| {
            let p = &x["params"];
            (
                p["minimum_calls"].as_str().expect("mc").to_owned(),
                p["failure_rate_threshold"]
                    .as_str()
                    .expect("frt")
                    .to_owned(),
            )
        })
        .collect();
    points.sort();
    points.dedup();
    assert_eq!(points.len(), 9, "all 3 × 3 combinations, once each");
    for (i, x) in results.iter().enumerate() {
        let tied_with_previous = i > 0 && x["tie"] == true && results[i - 1]["tie"] == true;
        if !tied_with_previous {
            assert_eq!(x["rank"], i + 1, "a rank counts every config above it");
        }
        let score = x["score"].as_f64().expect("score");
        let parts = x["detection"].as_f64().expect("d")
            + 5.0 * x["false_trips"].as_f64().expect("f")
            + x["collateral_rejected"].as_f64().expect("c") / 20.0
            + x["load"].as_f64().expect("load")
            + x["lockstep"].as_f64().expect("lockstep");
        assert!((score - parts).abs() < 1e-9, "score = documented formula");
        if i > 0 {
            assert!(
                results[i - 1]["score"].as_f64().expect("prev") <= score,
                "ascending"
            );
        }
    }
    // A window of 10 calls can never hold minimum_calls = 20: the outage is
    // missed (60 s), last; its warning comes with it.
    let last = &results[8];
    assert_eq!(
        (last["missed"].as_u64(), last["detection"].as_f64()),
        (Some(1), Some(60.0))
    );
    assert!(
        last["warnings"][0]
            .as_str()
            .expect("warning")
            .contains("can never trip")
    );
    // The 20 % threshold false-trips on the blips; 50 % does not.
    let best = &results[0];
    assert_eq!(best["params"]["failure_rate_threshold"], "0.5");
    assert_eq!(best["false_trips"], 0);
}

#[test]
fn a_sweep_point_scores_exactly_as_simulate_scores_that_config() {
    let r = sweep("json").json();
    let best = &r["results"][0];
    // The same config written out as its own breaker.
    let src = std::fs::read_to_string(bundled("ride-hailing-eta.toml")).expect("scenario");
    let base = src.split("[[breaker]]").next().expect("head");
    let mc = best["params"]["minimum_calls"].as_str().expect("mc");
    let dir = Dir::new();
    let file = dir.write(
        "one.toml",
        &format!(
            "{base}[[breaker]]\nname = \"sensitive\"\nwindow = {{ kind = \"count\", size = 10 }}\n\
             minimum_calls = {mc}\nfailure_rate_threshold = 0.5\nopen_duration = \"3s\"\n\
             half_open = {{ policy = \"consecutive\", successes = 1 }}\n"
        ),
    );
    let sim = tripline(["simulate", file.to_str().expect("path"), "--format", "json"]).json();
    let run = &sim["runs"][0];
    assert_eq!(run["score"]["value"], best["score"]);
    assert_eq!(run["collateral_rejected"], best["collateral_rejected"]);
    assert_eq!(run["totals"]["rejected"], best["rejected"]);
}

#[test]
fn csv_has_a_header_and_one_row_per_config_in_rank_order() {
    let csv = sweep("csv").text();
    let json: Value = sweep("json").json();
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(
        lines[0],
        "rank,score,detection,missed,false_trips,collateral_rejected,trips,rejected,failed,load,lockstep,tie,minimum_calls,failure_rate_threshold"
    );
    assert_eq!(lines.len(), 10);
    for (line, r) in lines[1..]
        .iter()
        .zip(json["results"].as_array().expect("results"))
    {
        let cells: Vec<&str> = line.split(',').collect();
        assert_eq!(cells.len(), 14, "{line}");
        assert_eq!(cells[0], r["rank"].to_string());
        assert_eq!(cells[11], r["tie"].to_string());
        assert_eq!(
            cells[12],
            r["params"]["minimum_calls"].as_str().expect("mc")
        );
        assert_eq!(
            cells[13],
            r["params"]["failure_rate_threshold"].as_str().expect("frt")
        );
        let score: f64 = cells[1].parse().expect("number");
        assert!((score - r["score"].as_f64().expect("score")).abs() < 5e-4);
    }
}

#[test]
fn values_with_commas_are_quoted_in_csv_and_outputs_are_deterministic() {
    let path = bundled("ride-hailing-eta.toml");
    let args = [
        "sweep",
        path.to_str().expect("path"),
        "--grid",
        r#"open_duration=3s,{ initial = "1s", max = "8s", jitter = "full" }"#,
        "--format",
        "csv",
    ];
    let a = tripline(args);
    let b = tripline(args);
    assert_eq!(a.status, 0, "{}", a.stderr);
    assert_eq!(a.stdout, b.stdout, "parallel runs, identical bytes");
    assert!(
        a.text()
            .contains(r#","{ initial = ""1s"", max = ""8s"", jitter = ""full"" }""#)
    );
    assert!(
        a.stderr.is_empty(),
        "no progress bar when stderr is not a terminal"
    );
}

#[test]
fn text_lists_the_ranking_and_the_score_formula() {
    let text = sweep("text").text();
    assert!(text.starts_with("sweep of breaker \"sensitive\""));
    assert!(text.contains("score = detection + 5s × false_trips"));
    let header = text
        .lines()
        .find(|l| l.starts_with("rank"))
        .expect("table header");
    assert!(header.ends_with("minimum_calls  failure_rate_threshold"));
    assert_eq!(
        text.lines()
            .filter(|l| l.trim_start().starts_with(char::is_numeric))
            .count(),
        9
    );
}

#[test]
fn chart_plots_detection_delay_against_false_trips_and_collateral() {
    let dir = Dir::new();
    let svg_path = dir.path("sweep.svg");
    let path = bundled("ride-hailing-eta.toml");
    let mut args = vec![
        "sweep",
        path.to_str().expect("path"),
        "--chart",
        svg_path.to_str().expect("svg"),
    ];
    args.extend(GRID);
    assert_eq!(tripline(&args).status, 0);
    let svg = std::fs::read_to_string(&svg_path).expect("chart");
    let doc = roxmltree::Document::parse(&svg).expect("well-formed XML");
    let points = doc
        .descendants()
        .filter(|n| n.has_tag_name("circle") && n.attribute("fill") != Some("none"))
        .count();
    assert_eq!(points, 18, "each of 9 configs in both panels");
    let texts: Vec<&str> = doc.descendants().filter_map(|n| n.text()).collect();
    assert!(texts.iter().any(|t| t.contains("false trips")));
    assert!(texts.iter().any(|t| t.contains("collateral rejections")));
    assert!(texts.iter().any(|t| t.starts_with("detection delay")));
}

#[test]
fn ties_share_a_rank_and_text_shows_the_warnings_that_explain_a_missed_row() {
    let text = sweep("text").text();
    let json = sweep("json").json();
    let results = json["results"].as_array().expect("results");
    let ranks: Vec<u64> = results
        .iter()
        .map(|r| r["rank"].as_u64().expect("rank"))
        .collect();
    assert!(
        results.iter().any(|r| r["tie"] == true),
        "this grid has equal scores"
    );
    // Standard competition ranking: a tie shares the first one's rank, and
    // the next rank counts every config above it ("1, 1, 3").
    for (i, r) in results.iter().enumerate() {
        let score = |r: &serde_json::Value| r["score"].as_f64().expect("score");
        let expected = if i > 0 && (score(r) - score(&results[i - 1])).abs() < 0.0005 {
            ranks[i - 1]
        } else {
            i as u64 + 1
        };
        assert_eq!(ranks[i], expected, "rank of row {i}: {ranks:?}");
    }
    let tied = ranks.windows(2).find(|w| w[0] == w[1]).expect("a tie")[0];
    let rows_with_rank = text
        .lines()
        .filter(|l| l.trim_start().starts_with(&format!("{tied} ")))
        .count();
    assert!(rows_with_rank >= 2, "tied rank {tied} twice:\n{text}");
    assert!(!text.contains(&format!("{tied}=")), "{text}");
    assert!(text.contains("equal ranks are tied"), "{text}");
    let missed = results.last().expect("a result");
    assert!(
        text.contains(&format!(
            "rank {}: {}",
            missed["rank"],
            missed["warnings"][0].as_str().expect("warning")
        )),
        "the missed row's warning is in the text:\n{text}"
    );
}

#[test]
fn breaker_chooses_which_breaker_is_swept_and_an_unknown_name_lists_the_known_ones() {
    let path = bundled("ride-hailing-eta.toml");
    let file = path.to_str().expect("path");
    let out = tripline([
        "sweep",
        file,
        "--breaker",
        "conservative",
        "--format",
        "json",
        "--grid",
        "minimum_calls=5,10",
    ]);
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert_eq!(out.json()["breaker"], "conservative");
    let out = tripline([
        "sweep",
        file,
        "--breaker",
        "conservativ",
        "--grid",
        "minimum_calls=5,10",
    ]);
    assert_eq!(out.status, 2);
    assert!(out.stdout.is_empty());
    assert!(
        out.stderr.contains("--breaker")
            && out.stderr.contains("\"conservativ\"")
            && out
                .stderr
                .contains("\"sensitive\", \"balanced\", \"conservative\""),
        "{}",
        out.stderr
    );
}

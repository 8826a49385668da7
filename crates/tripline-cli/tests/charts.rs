//! The SVG charts of `simulate --chart` and `sweep --chart`, read back as
//! XML: what a person sees in the static image, checked element by element.

#[path = "support/run.rs"]
mod support;

use std::collections::BTreeSet;

use roxmltree::{Document, Node};
use support::{Dir, bundled, tripline};

/// Runs `tripline ARGS… --chart DIR/out.svg` and returns the chart.
fn chart(args: &[&str]) -> String {
    let dir = Dir::new();
    let path = dir.path("out.svg");
    let mut all = args.to_vec();
    all.extend(["--chart", path.to_str().expect("path")]);
    let out = tripline(&all);
    assert_eq!(out.status, 0, "{}", out.stderr);
    std::fs::read_to_string(&path).expect("chart written")
}

/// Elements `<g class="CLASS">`.
fn groups<'a>(doc: &'a Document<'a>, class: &str) -> Vec<Node<'a, 'a>> {
    doc.descendants()
        .filter(|n| n.has_tag_name("g") && n.attribute("class") == Some(class))
        .collect()
}

fn texts<'a>(node: Node<'a, 'a>) -> Vec<Node<'a, 'a>> {
    node.descendants()
        .filter(|n| n.has_tag_name("text"))
        .collect()
}

fn num(n: Node, attr: &str) -> f64 {
    n.attribute(attr)
        .unwrap_or_else(|| panic!("{attr} missing"))
        .parse()
        .expect("number")
}

/// The horizontal extent of a text element, with the renderer's own
/// conservative estimate of 0.6 em a character.
fn extent(t: Node) -> (f64, f64) {
    let x = num(t, "x");
    let w = t.text().unwrap_or("").chars().count() as f64 * num(t, "font-size") * 0.6;
    match t.attribute("text-anchor") {
        Some("end") => (x - w, x),
        Some("middle") => (x - w / 2.0, x + w / 2.0),
        _ => (x, x + w),
    }
}

const LONG: &str = "payments ledger primary database in eu-west-1 unreachable after a \
                    botched failover, replica promoted late and connection pools \
                    exhausted on every application node";

#[test]
fn fault_labels_are_shown_whole_and_inside_the_chart() {
    let dir = Dir::new();
    let src = format!(
        r#"
        name = "{LONG}"
        duration = "100s"
        [traffic]
        rate = 5.0
        [[fault]]
        name = "{LONG}"
        start = "20s"
        end = "60s"
        [[fault]]
        name = "dns resolver flapping right at the very end of the run"
        start = "97s"
        end = "99s"
        expect_trip = false
        [[breaker]]
        name = "b"
        window = {{ kind = "count", size = 10 }}
        minimum_calls = 5
        "#
    );
    let path = dir.write("long.toml", &src);
    let svg = chart(&["simulate", path.to_str().expect("path")]);
    let doc = Document::parse(&svg).expect("well-formed XML");
    let width = num(doc.root_element(), "width");
    let labels = groups(&doc, "fault-label");
    assert_eq!(labels.len(), 2, "one label per fault");
    let names = [
        LONG,
        "dns resolver flapping right at the very end of the run",
    ];
    for (group, name) in labels.iter().zip(names) {
        let lines: Vec<&str> = texts(*group).iter().filter_map(|t| t.text()).collect();
        let expected: Vec<&str> = name.split_whitespace().collect();
        let shown: Vec<&str> = lines.iter().flat_map(|l| l.split_whitespace()).collect();
        assert_eq!(shown, expected, "the whole name, every word, in order");
        for t in texts(*group) {
            let (a, b) = extent(t);
            assert!(
                a >= 0.0 && b <= width,
                "{:?} spans {a}–{b} of {width}",
                t.text()
            );
        }
    }
    assert!(
        texts(labels[0]).len() > 1,
        "a name wider than the plot wraps onto more lines"
    );
    assert!(!svg.contains('…'), "nothing is truncated with an ellipsis");
    every_text_fits(&doc);
}

/// Every text element of the chart, titles, margins and legend included,
/// lies inside its width.
fn every_text_fits(doc: &Document) {
    let width = num(doc.root_element(), "width");
    for t in texts(doc.root_element()) {
        let (a, b) = extent(t);
        assert!(
            a >= 0.0 && b <= width,
            "{:?} spans {a}–{b} of {width}",
            t.text()
        );
    }
}

#[test]
fn half_open_has_a_visible_lane_per_breaker_and_a_legend_entry() {
    let path = bundled("ride-hailing-eta.toml");
    let svg = chart(&["simulate", path.to_str().expect("path")]);
    let doc = Document::parse(&svg).expect("XML");
    let legend = &groups(&doc, "legend")[0];
    let entry = texts(*legend)
        .into_iter()
        .find(|t| t.text() == Some("half-open (any replica)"))
        .expect("legend entry");
    // The swatch is the rect just before the entry's text.
    let swatch = entry
        .prev_sibling_element()
        .expect("swatch")
        .attribute("fill")
        .expect("fill");
    let lanes = groups(&doc, "half-open");
    assert_eq!(lanes.len(), 3, "one lane per breaker");
    for lane in lanes {
        let marks: Vec<Node> = lane.children().filter(|n| n.has_tag_name("rect")).collect();
        assert!(!marks.is_empty(), "every breaker probed the outage");
        for m in marks {
            assert_eq!(m.attribute("fill"), Some(swatch), "the legend's colour");
            assert!(num(m, "width") >= 2.0, "at least two pixels wide");
            assert!(num(m, "height") >= 6.0);
        }
    }
}

#[test]
fn low_traffic_says_on_the_chart_why_it_cannot_trip_and_uses_wider_bars() {
    let path = bundled("low-traffic.toml");
    let svg = chart(&["simulate", path.to_str().expect("path")]);
    let doc = Document::parse(&svg).expect("XML");
    let width = num(doc.root_element(), "width");
    let warnings: Vec<String> = groups(&doc, "warning")
        .into_iter()
        .flat_map(texts)
        .filter_map(|t| t.text().map(str::to_owned))
        .collect();
    let all = warnings.join(" ");
    assert!(all.contains("the breaker can never trip"), "{all}");
    assert!(all.contains("minimum_calls = 20"), "{all}");
    assert!(
        all.contains("never tripped during \"ledger down\""),
        "{all}"
    );
    for t in groups(&doc, "warning").into_iter().flat_map(texts) {
        let (a, b) = extent(t);
        assert!(a >= 0.0 && b <= width, "{:?} fits", t.text());
    }
    // One call every 5 s: bars of 30 s hold about six calls each.
    let all_texts: Vec<&str> = texts(doc.root_element())
        .into_iter()
        .filter_map(|n| n.text())
        .collect();
    assert_eq!(
        all_texts.iter().filter(|t| **t == "calls / 30s").count(),
        2,
        "both panels"
    );
    assert!(!all_texts.contains(&"calls/s"));
    // 20 calls/s keeps per-second bars and has no warnings.
    let path = bundled("ride-hailing-eta.toml");
    let busy = chart(&["simulate", path.to_str().expect("path")]);
    let doc = Document::parse(&busy).expect("XML");
    assert!(
        texts(doc.root_element())
            .iter()
            .any(|n| n.text() == Some("calls/s"))
    );
    assert!(groups(&doc, "warning").is_empty());
}

/// A grid whose detection delays span about three decades (0.08 s to
/// 60 s), with the JSON of the same sweep.
fn wide_sweep() -> (String, serde_json::Value) {
    let path = bundled("ride-hailing-eta.toml");
    let args = [
        "sweep",
        path.to_str().expect("path"),
        "--grid",
        "minimum_calls=5,10,20,50",
        "--grid",
        "open_duration=1s,5s,30s",
    ];
    let svg = chart(&args);
    let mut json_args = args.to_vec();
    json_args.extend(["--format", "json"]);
    (svg, tripline(&json_args).json())
}

#[test]
fn sweep_points_carry_their_rank_and_the_key_their_parameter_values() {
    let (svg, json) = wide_sweep();
    let doc = Document::parse(&svg).expect("XML");
    let results = json["results"].as_array().expect("results");
    assert_eq!(results.len(), 12);
    let labels = groups(&doc, "point-label");
    assert_eq!(labels.len(), 2, "both panels");
    for panel in labels {
        // `#1, #2` or `#5–#10`.
        let mut ranks = BTreeSet::new();
        for part in texts(panel)
            .iter()
            .filter_map(|t| t.text())
            .flat_map(|t| t.split(','))
        {
            let rank =
                |r: &str| -> usize { r.trim().trim_start_matches('#').parse().expect("rank") };
            match part.split_once('–') {
                Some((a, b)) => ranks.extend(rank(a)..=rank(b)),
                None => {
                    ranks.insert(rank(part));
                }
            }
        }
        let expected: BTreeSet<usize> = results
            .iter()
            .map(|r| r["rank"].as_u64().expect("rank") as usize)
            .collect();
        assert_eq!(
            ranks, expected,
            "every point, once (tied configs share a rank)"
        );
    }
    let key: Vec<String> = groups(&doc, "key")
        .into_iter()
        .flat_map(texts)
        .filter_map(|t| t.text().map(str::to_owned))
        .collect();
    every_text_fits(&doc);
    for r in results {
        let kvs: Vec<String> = r["params"]
            .as_object()
            .expect("params")
            .iter()
            .map(|(k, v)| format!("{k}={}", v.as_str().expect("value")))
            .collect();
        assert!(
            key.iter()
                .any(|l| l.starts_with(&format!("#{} ", r["rank"]))
                    && kvs.iter().all(|kv| l.contains(kv))),
            "rank {} with {kvs:?} in the key: {key:?}",
            r["rank"]
        );
    }
}

#[test]
fn sweep_rings_the_three_best_and_uses_a_log_axis_past_one_decade() {
    let (svg, json) = wide_sweep();
    let doc = Document::parse(&svg).expect("XML");
    let results = json["results"].as_array().expect("results");
    let top = groups(&doc, "top");
    assert_eq!(top.len(), 2);
    for panel in &top {
        let rings: Vec<Node> = panel
            .children()
            .filter(|n| n.has_tag_name("circle"))
            .collect();
        assert_eq!(rings.len(), 3, "the three best");
        assert!(rings.iter().all(|r| r.attribute("fill") == Some("none")));
    }
    // The key sets the three best apart by colour.
    // The key lists the configs by rank (ties share one): the first three
    // lines are the ringed ones.
    let key = &groups(&doc, "key")[0];
    let fill_of_line = |params: &str| {
        texts(*key)
            .into_iter()
            .find(|t| {
                t.text()
                    .is_some_and(|s| s.starts_with('#') && s.contains(params))
            })
            .and_then(|t| t.attribute("fill"))
            .expect("key line")
            .to_owned()
    };
    let params_of = |i: usize| {
        results[i]["params"]
            .as_object()
            .expect("params")
            .iter()
            .map(|(k, v)| format!("{k}={}", v.as_str().expect("value")))
            .collect::<Vec<_>>()
            .join(" ")
    };
    let best = fill_of_line(&params_of(0));
    assert_eq!(fill_of_line(&params_of(2)), best);
    assert_ne!(fill_of_line(&params_of(3)), best);
    // Detection spans 0.08 s … 60 s: a log axis labelled at powers of ten.
    let delays: Vec<f64> = results
        .iter()
        .map(|r| r["detection"].as_f64().expect("detection"))
        .collect();
    let (lo, hi) = delays
        .iter()
        .fold((f64::INFINITY, 0f64), |(a, b), d| (a.min(*d), b.max(*d)));
    assert!(hi / lo > 100.0, "this grid spans decades: {lo}–{hi}");
    let axes = groups(&doc, "x-axis log");
    assert_eq!(axes.len(), 2, "both panels");
    let ticks: Vec<f64> = texts(axes[0])
        .iter()
        .filter_map(|t| t.text())
        .map(|t| t.trim_end_matches('s').parse().expect("tick"))
        .collect();
    assert!(ticks.len() >= 3, "{ticks:?}");
    for pair in ticks.windows(2) {
        assert!((pair[1] / pair[0] - 10.0).abs() < 1e-9, "{ticks:?}");
    }
    assert!(
        ticks[0] <= lo && *ticks.last().expect("tick") >= hi,
        "{ticks:?} covers {lo}–{hi}"
    );
    assert!(groups(&doc, "x-axis linear").is_empty());
}

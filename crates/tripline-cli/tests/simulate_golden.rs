//! Golden expectations computed by hand for small scenarios, checked
//! against the real binary's JSON. The derivations are in the comments.

#[path = "support/run.rs"]
mod support;

use serde_json::{Value, json};
use support::{Dir, tripline};

/// One call per second, each taking 100 ms, t = 0 … 39 s.
///
/// Breaker: the last 4 calls, 2 needed, trips at 50 %, open 3 s, one
/// successful probe closes.
///
/// * calls 0–9 succeed (window S S S S);
/// * outage [10 s, 20 s): call 10 fails at 10.1 (S S S F, 25 %), call 11
///   fails at 11.1 (S S F F, 50 %) → **trip at 11.1** (delay 1.1 s), open
///   until 14.1; calls 12–14 rejected; call 15 probes at 15.0 and fails at
///   15.1 → open until 18.1; 16–18 rejected; call 19 probes and fails at
///   19.1 → open until 22.1; 20–22 rejected (the outage is over: healthy
///   calls, collateral); call 23 probes at 23.0 and succeeds at 23.1 →
///   **closed at 23.1**; call 24 succeeds;
/// * blip at 25 s (ride out): the fresh window holds S(24) F(25): 2 calls,
///   50 % → **false trip at 25.1**; 26–28 rejected (collateral); 29 probes
///   and closes at 29.1;
/// * blips at 30 s and 31 s (ride out): F(30) is 1 call < 2; F(31) makes
///   2 of 2 → **false trip at 31.1**; 32–34 rejected (collateral); 35
///   closes at 35.1; 36–39 succeed.
const GOLDEN: &str = r#"
name = "golden"
duration = "40s"
seed = 1

[traffic]
rate = 1.0
latency = "100ms"
replicas = REPLICAS

[[fault]]
name = "outage"
start = "10s"
end = "20s"

[[fault]]
name = "blip"
at = ["25s"]
expect_trip = false

[[fault]]
name = "double blip"
at = ["30s", "31s"]
expect_trip = false

[[breaker]]
name = "b"
window = { kind = "count", size = 4 }
minimum_calls = 2
failure_rate_threshold = 0.5
open_duration = "3s"
half_open = { policy = "consecutive", successes = 1 }
"#;

fn run(replicas: u32) -> Value {
    let dir = Dir::new();
    let src = GOLDEN.replace("REPLICAS", &replicas.to_string());
    let file = dir.write("golden.toml", &src);
    tripline([
        "simulate",
        file.to_str().expect("utf-8 path"),
        "--format",
        "json",
    ])
    .json()
}

#[test]
fn detection_recovery_attribution_false_trips_and_load_match_the_hand_computation() {
    let report = run(1);
    let r = &report["runs"][0];
    assert_eq!(
        r["totals"],
        json!({"calls": 40, "succeeded": 18, "failed": 7, "rejected": 15})
    );
    assert_eq!(
        r["faults"],
        json!([
            {"name": "outage", "start": 10.0, "expect_trip": true, "trips": 1,
             "detection_delay": 1.1, "recovered_at": 23.1, "probe_peak_per_second": 1,
             "sent_after_trip": 2, "rejected": 9, "failed": 4, "succeeded": 2},
            {"name": "blip", "start": 25.0, "expect_trip": false, "trips": 1,
             "detection_delay": 0.1, "recovered_at": 29.1, "probe_peak_per_second": null,
             "sent_after_trip": null, "rejected": 3, "failed": 1, "succeeded": 1},
            {"name": "double blip", "start": 30.0, "expect_trip": false, "trips": 1,
             "detection_delay": 1.1, "recovered_at": 35.1, "probe_peak_per_second": null,
             "sent_after_trip": null, "rejected": 3, "failed": 2, "succeeded": 5},
        ])
    );
    assert_eq!(r["false_trips"], 2);
    assert_eq!(r["collateral_rejected"], 9);
    assert_eq!(
        r["downstream"],
        json!({"peak_per_second": 1, "mean_per_second": 0.625})
    );
    // score = detection 1.1 + 5 × 2 false trips + 9 collateral calls ÷ 1 call/s
    //       + the 2 probes (15 s, 19 s) sent into the outage after the trip ÷ 1 call/s;
    // one replica cannot probe in lock-step with another.
    assert!((r["score"]["value"].as_f64().expect("number") - 22.1).abs() < 1e-9);
    assert_eq!(r["score"]["load"], 2.0);
    assert_eq!(r["score"]["lockstep"], 0.0);
}

#[test]
fn the_timeline_lists_every_transition_with_reason_and_window() {
    let report = run(1);
    let got: Vec<(f64, String, String, String, u64, u64)> = report["runs"][0]["transitions"]
        .as_array()
        .expect("array")
        .iter()
        .map(|t| {
            (
                t["at"].as_f64().expect("at"),
                t["from"].as_str().expect("from").to_owned(),
                t["to"].as_str().expect("to").to_owned(),
                t["reason"].as_str().expect("reason").to_owned(),
                t["window"]["calls"].as_u64().expect("calls"),
                t["window"]["failures"].as_u64().expect("failures"),
            )
        })
        .collect();
    let s = |x: &str| x.to_owned();
    let want = vec![
        (11.1, s("closed"), s("open"), s("failure_rate"), 4, 2),
        (
            15.0,
            s("open"),
            s("half_open"),
            s("open_duration_elapsed"),
            0,
            0,
        ),
        (15.1, s("half_open"), s("open"), s("probe_failed"), 1, 1),
        (
            19.0,
            s("open"),
            s("half_open"),
            s("open_duration_elapsed"),
            0,
            0,
        ),
        (19.1, s("half_open"), s("open"), s("probe_failed"), 1, 1),
        (
            23.0,
            s("open"),
            s("half_open"),
            s("open_duration_elapsed"),
            0,
            0,
        ),
        (
            23.1,
            s("half_open"),
            s("closed"),
            s("probes_succeeded"),
            1,
            0,
        ),
        (25.1, s("closed"), s("open"), s("failure_rate"), 2, 1),
        (
            29.0,
            s("open"),
            s("half_open"),
            s("open_duration_elapsed"),
            0,
            0,
        ),
        (
            29.1,
            s("half_open"),
            s("closed"),
            s("probes_succeeded"),
            1,
            0,
        ),
        (31.1, s("closed"), s("open"), s("failure_rate"), 2, 2),
        (
            35.0,
            s("open"),
            s("half_open"),
            s("open_duration_elapsed"),
            0,
            0,
        ),
        (
            35.1,
            s("half_open"),
            s("closed"),
            s("probes_succeeded"),
            1,
            0,
        ),
    ];
    assert_eq!(got, want);
}

#[test]
fn replicas_each_run_their_own_breaker_and_load_adds_up() {
    let report = run(2);
    let r = &report["runs"][0];
    assert_eq!(
        r["totals"],
        json!({"calls": 80, "succeeded": 36, "failed": 14, "rejected": 30})
    );
    assert_eq!(r["false_trips"], 4);
    assert_eq!(r["faults"][0]["trips"], 2);
    assert_eq!(
        r["downstream"],
        json!({"peak_per_second": 2, "mean_per_second": 1.25})
    );
    let replicas: Vec<u64> = r["transitions"]
        .as_array()
        .expect("array")
        .iter()
        .take(2)
        .map(|t| t["replica"].as_u64().expect("replica"))
        .collect();
    assert_eq!(
        replicas,
        [0, 1],
        "both replicas trip at 11.1, in replica order"
    );
}

/// Slow calls overlap, a timeout is a failure at the timeout, and a
/// completion due at the same instant as a start is recorded first.
///
/// One call per second, healthy calls instant. From 5 s to 8 s calls take
/// 2.5 s, over the 2 s timeout: calls 5 and 6 are in flight together and
/// fail at 7.0 and 8.0. Window: the last 2 calls, 2 needed, 50 %. At 7.0
/// call 5's failure is recorded before call 7 starts → S(4) F(5) trips at
/// 7.0 and call 7 is rejected. Call 6's failure at 8.0 is late (admitted
/// before the trip) and moves nothing. Open 10 s: calls 8–16 rejected
/// (healthy: collateral); call 17 probes and closes at 17.0.
#[test]
fn overlapping_slow_calls_timeouts_and_same_instant_ordering() {
    let dir = Dir::new();
    let file = dir.write(
        "slow.toml",
        r#"
        duration = "20s"
        [traffic]
        rate = 1.0
        timeout = "2s"
        [[fault]]
        name = "slow"
        start = "5s"
        end = "8s"
        kind = "latency"
        latency = "2.5s"
        [[breaker]]
        name = "b"
        window = { kind = "count", size = 2 }
        minimum_calls = 2
        open_duration = "10s"
        half_open = { policy = "consecutive", successes = 1 }
        "#,
    );
    let report = tripline([
        "simulate",
        file.to_str().expect("utf-8 path"),
        "--format",
        "json",
    ])
    .json();
    let r = &report["runs"][0];
    assert_eq!(
        r["totals"],
        json!({"calls": 20, "succeeded": 8, "failed": 2, "rejected": 10})
    );
    let f = &r["faults"][0];
    assert_eq!(
        (f["trips"].as_u64(), f["detection_delay"].as_f64()),
        (Some(1), Some(2.0))
    );
    assert_eq!(f["recovered_at"].as_f64(), Some(17.0));
    assert_eq!(r["collateral_rejected"], 9);
    let times: Vec<f64> = r["transitions"]
        .as_array()
        .expect("array")
        .iter()
        .map(|t| t["at"].as_f64().expect("at"))
        .collect();
    assert_eq!(times, [7.0, 17.0, 17.0]);
}

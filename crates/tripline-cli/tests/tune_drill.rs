//! `tune` on a log the proxy itself wrote: a drill drives real load through
//! an in-process proxy whose access log is on, with a known outage (every
//! try answered 503 from 4 s to 12 s); the tuning must find that outage and
//! recommend a config that trips within the drill's `trip_within`, with no
//! false trip on the healthy phases; and that recommendation, written by
//! `tripline tune --out` and put on the route, must pass the same drill
//! with `trip_within` and `false_trips = 0` judged. Runs in real time
//! (~34 s).

#[path = "support/run.rs"]
mod support;

use std::fs::File;
use std::io::BufReader;

use support::{Dir, tripline};
use tripline_sim::tune::read::{ReadOptions, read};
use tripline_sim::tune::recommend::{Objective, tune};

/// The drill's expectation on how fast the breaker opens: half the
/// outage (the picks detect it in 1.1–2.2 s here, idle or busy).
const TRIP_WITHIN: f64 = 4.0;

/// The drill: real load through an in-process proxy over two upstreams,
/// every try answered 503 from 4 s to 12 s, and endpoint breakers that
/// never trip. Eight seconds of outage: a miss is scored at the outage's
/// length, so it must cost clearly more than a trip's collateral (the
/// rejections of an open duration that outlasts the outage: 0.4–2.4 s
/// measured) for the picks to catch it, however a busy machine spaced the
/// recorded calls (a 3 s outage once made "never trip" the balanced pick). `breaker` is the route's
/// breaker table (TOML lines under `[routes.breaker]`), `expect` the
/// lines of `[expect]`.
fn drill(log: &std::path::Path, breaker: &str, expect: &str) -> String {
    format!(
        r#"
name = "tune"
watch = ["api"]
[target]
upstreams = {{ a = {{}}, b = {{}} }}
proxy = """
[[listeners]]
address = "127.0.0.1:0"
[access_log]
mode = "full"
path = "{log}"
[clusters.backend]
endpoints = ["${{a}}", "${{b}}"]
# The route's breaker is the one judged: the endpoints' own never trip.
breaker = {{ window = {{ kind = "count", size = 1000 }}, minimum_calls = 1000 }}
[[routes]]
name = "api"
cluster = "backend"
[routes.breaker]
{breaker}
"""
[load]
rate = 40.0
duration = "16s"

[[phase]]
name = "down"
from = "4s"
to = "12s"
route = "api"
abort = {{ status = 503 }}

[expect]
{expect}
"#,
        log = log.display()
    )
}

#[test]
fn tune_finds_the_drills_outage_in_the_proxys_own_access_log() {
    let dir = Dir::new();
    let log = dir.path("access.log");
    // A breaker that never trips: the log records the outage unchecked.
    let never = "window = { kind = \"count\", size = 1000 }\nminimum_calls = 1000";
    let file = dir.write("tune.toml", &drill(&log, never, "false_trips = 0"));
    let out = tripline(["drill".as_ref(), file.as_os_str()]);
    assert_eq!(out.status, 0, "{}\n{}", out.text(), out.stderr);
    let traffic = read(
        BufReader::new(File::open(&log).expect("the proxy wrote its access log")),
        &ReadOptions::default(),
    )
    .expect("the proxy's own format reads");
    let t = tune(&traffic, None, None, &|| {}).expect("usable");
    assert_eq!(t.outages.len(), 1, "{:?}", t.outages);
    let o = &t.outages[0];
    // The load starts within a second of the log's first line.
    assert!(
        (3..=6).contains(&o.from) && (11..=14).contains(&o.to),
        "{o:?}"
    );
    // The trade-off table, shown if an assertion below fails.
    let shown = tripline(["tune".as_ref(), "--access-log".as_ref(), log.as_os_str()]);
    eprintln!("{}", shown.text());
    let (config, r) = t.pick(Objective::Balanced);
    let d = r.detection[0].unwrap_or_else(|| {
        panic!(
            "the recommended config does not trip on the outage {o:?}: {config:?}, {r:?}; {} calls read",
            traffic.calls()
        )
    });
    assert!(d <= TRIP_WITHIN, "{d} s with {config:?}");
    assert_eq!(r.false_trips, 0, "{config:?}: trips at {:?}", r.trips);

    // The recommendation, as `tune --out` writes it, on the route: the same
    // drill now judges how fast it opens and that it never trips falsely.
    let recommended = dir.path("breaker.toml");
    let out = tripline([
        "tune".as_ref(),
        "--access-log".as_ref(),
        log.as_os_str(),
        "--out".as_ref(),
        recommended.as_os_str(),
    ]);
    assert_eq!(out.status, 0, "{}\n{}", out.text(), out.stderr);
    let table = std::fs::read_to_string(&recommended).expect("tune wrote --out");
    let again = dir.path("again.log");
    let expect = format!("trip_within = \"{TRIP_WITHIN}s\"\nfalse_trips = 0");
    let file = dir.write("again.toml", &drill(&again, &table, &expect));
    let out = tripline(["drill".as_ref(), file.as_os_str()]);
    assert_eq!(
        out.status,
        0,
        "the recommendation failed the drill:\n{table}\n{}\n{}",
        out.text(),
        out.stderr
    );
}

//! Reading logs: the three formats, and every kind of bad input reported
//! at its line without a panic.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly

use tripline_sim::tune::read::{ReadOptions, read};
use tripline_sim::tune::synth::{Spec, write};

fn proxy_log(seconds: u64) -> String {
    let mut out = Vec::new();
    write(
        &Spec {
            seconds,
            rate: 2,
            ..Spec::default()
        },
        &mut out,
    )
    .unwrap();
    String::from_utf8(out).unwrap()
}

#[test]
fn reads_each_try_of_a_proxy_line_as_a_call() {
    let line = r#"{"timestamp":"2026-12-01T06:30:00.123Z","route":"api","cluster":"backend","method":"GET","path":"/users/7","status":200,"flag":null,"retries":1,"duration_ms":12.5,"peer":"10.0.0.9:51234","attempts":[{"endpoint":"10.0.0.2:8080","outcome":"gateway_failure","duration_ms":3.1,"hedge":false},{"endpoint":"10.0.0.3:8080","outcome":"success","duration_ms":9.0,"hedge":false},{"endpoint":null,"outcome":"cancelled","duration_ms":1.0,"hedge":true}]}"#;
    let t = read(line.as_bytes(), &ReadOptions::default()).unwrap();
    assert_eq!((t.calls(), t.failures()), (2, 1));
    assert_eq!(t.start, 1_796_106_600);
}

#[test]
fn reads_csv_and_plain_json_lines() {
    let csv = "timestamp,outcome,duration,key\n1796106600.5,ok,12,db\n1796106601,error,1.5s,db\n";
    let t = read(csv.as_bytes(), &ReadOptions::default()).unwrap();
    assert_eq!((t.calls(), t.failures(), t.seconds.len()), (2, 1, 2));
    let json = "{\"timestamp\":\"2026-12-01T06:30:00Z\",\"outcome\":\"failure\",\"duration_ms\":4}\n{\"timestamp\":1796106601,\"outcome\":\"success\",\"duration_ms\":4}\n";
    let t = read(json.as_bytes(), &ReadOptions::default()).unwrap();
    assert_eq!((t.calls(), t.failures()), (2, 1));
}

#[test]
fn malformed_lines_are_counted_quoted_and_refused_unless_skipped() {
    let mut log = proxy_log(10);
    log.insert_str(0, "not a log line\n");
    log.push_str("{\"timestamp\": 12\n");
    let e = read(log.as_bytes(), &ReadOptions::default()).unwrap_err();
    assert_eq!(e.line, Some(1));
    let m = e.to_string();
    assert!(
        m.contains("2 malformed line(s)")
            && m.contains("line 22:")
            && m.contains("--skip-bad-lines"),
        "{m}"
    );
    let t = read(
        log.as_bytes(),
        &ReadOptions {
            skip_bad_lines: true,
            ..ReadOptions::default()
        },
    )
    .unwrap();
    assert_eq!((t.bad_lines, t.calls()), (2, 20));
}

#[test]
fn timestamps_out_of_order_are_refused_at_their_line() {
    let csv = "1796106600,ok,1\n1796106700,ok,1\n1796106601,ok,1\n";
    let e = read(csv.as_bytes(), &ReadOptions::default()).unwrap_err();
    assert_eq!(e.line, Some(3), "{e}");
    assert!(e.message.contains("out of order"), "{e}");
    // A line behind by less than the slack (a slow request's line) is fine.
    let csv = "1796106610,ok,1\n1796106600,ok,1\n";
    let t = read(csv.as_bytes(), &ReadOptions::default()).unwrap();
    assert_eq!((t.start, t.seconds.len()), (1_796_106_600, 11));
}

#[test]
fn an_unknown_route_names_the_routes_the_log_has() {
    let e = read(
        proxy_log(3).as_bytes(),
        &ReadOptions {
            route: Some("nope".into()),
            ..ReadOptions::default()
        },
    )
    .unwrap_err();
    assert!(
        e.message.contains("unknown route `nope`") && e.message.contains("api"),
        "{e}"
    );
}

#[test]
fn a_log_of_several_routes_asks_for_one() {
    let csv = "1796106600,ok,1,a\n1796106601,ok,1,b\n";
    let e = read(csv.as_bytes(), &ReadOptions::default()).unwrap_err();
    assert!(
        e.message.contains("--route") && e.message.contains("a, b"),
        "{e}"
    );
    let t = read(
        csv.as_bytes(),
        &ReadOptions {
            route: Some("b".into()),
            ..ReadOptions::default()
        },
    )
    .unwrap();
    assert_eq!(t.calls(), 1);
}

#[test]
fn bad_fields_say_what_is_wrong() {
    for (line, want) in [
        ("1796106600,maybe,1", "outcome `maybe`"),
        ("1796106600,ok,-3", "must be a finite number"),
        ("yesterday,ok,1", "neither RFC 3339 nor Unix seconds"),
        (
            "1796106600,ok",
            "expected `timestamp,outcome,duration[,key]`",
        ),
        (
            "{\"timestamp\":\"2026-12-01T06:30:00Z\",\"attempts\":[{\"outcome\":\"boom\",\"duration_ms\":1}]}",
            "unknown attempt outcome `boom`",
        ),
    ] {
        let e = read(line.as_bytes(), &ReadOptions::default()).unwrap_err();
        assert!(e.message.contains(want), "{line}: {e}");
        assert_eq!(e.line, Some(1));
    }
}

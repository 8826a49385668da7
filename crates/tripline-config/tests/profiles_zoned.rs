//! Scheduled profiles in a named time zone: the window follows the zone's
//! daylight saving. On the spring-forward day a window 01:30–02:30 whose
//! end the clocks skip lasts one real hour (to 03:30 local); on the
//! fall-back day it ends at the first 02:30; the applier switches at those
//! instants on a manual clock. Unknown zone names are refused naming
//! `when.tz`.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tripline::ManualClock;
use tripline_config::{Applier, Document, DocumentError, Origin};

/// Sunday 2026-03-29 00:00 UTC: Europe/Berlin springs forward at 01:00
/// UTC (02:00 CET becomes 03:00 CEST).
const SPRING: u64 = 1_774_742_400;
/// Sunday 2026-10-25 00:00 UTC: Europe/Berlin falls back at 01:00 UTC
/// (03:00 CEST becomes 02:00 CET).
const FALL: u64 = SPRING + 210 * 86_400;
const HOUR: u64 = 3600;

const NIGHT: &str = r#"
[[breaker]]
name = "batch"
minimum_calls = 10

[[profile]]
name = "night"
when = { days = ["sun"], from = "01:30", to = "02:30", tz = "Europe/Berlin" }

[[profile.breaker]]
name = "batch"
minimum_calls = 50
"#;

fn at(secs: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(secs)
}

fn held(doc: &Document, secs: u64) -> Option<String> {
    doc.profile_at(at(secs)).map(|p| p.name.clone())
}

#[test]
fn a_berlin_window_across_spring_forward_switches_on_the_manual_clock() {
    let clock = ManualClock::new();
    // 00:29 UTC = 01:29 CET, a minute before the window.
    let applier = Applier::builder()
        .clock(clock.clone())
        .wall_epoch(at(SPRING + 29 * 60))
        .build();
    applier
        .apply(NIGHT.as_bytes(), Origin::new("etcd", None))
        .unwrap();
    let batch = applier.breaker("batch").unwrap();
    assert_eq!(applier.active_profile(), None);
    assert_eq!(applier.until_next_change(), Some(Duration::from_secs(60)));
    clock.advance(Duration::from_secs(60));
    applier.tick();
    assert_eq!(applier.active_profile().as_deref(), Some("night"));
    assert_eq!(batch.config().minimum_calls, 50);
    // 02:30 local never comes that day; the window ends at 03:30 CEST =
    // 01:30 UTC: one real hour, as on any other Sunday.
    assert_eq!(applier.until_next_change(), Some(Duration::from_secs(HOUR)));
    clock.advance(Duration::from_secs(HOUR - 1));
    applier.tick();
    assert_eq!(applier.active_profile().as_deref(), Some("night"));
    clock.advance(Duration::from_secs(1));
    applier.tick();
    assert_eq!(applier.active_profile(), None);
    assert_eq!(batch.config().minimum_calls, 10);
    // Next Sunday is summer time: 01:30 CEST is 23:30 UTC on Saturday.
    assert_eq!(
        applier.until_next_change(),
        Some(Duration::from_secs(6 * 86_400 + 22 * HOUR))
    );
}

#[test]
fn the_window_follows_the_offset_through_the_year() {
    let doc = Document::parse_and_validate(NIGHT.as_bytes()).unwrap().0;
    // A winter Sunday (CET, +01:00): 00:30–01:30 UTC.
    let winter = SPRING - 7 * 86_400;
    assert_eq!(held(&doc, winter + 30 * 60 - 1), None);
    assert_eq!(held(&doc, winter + 30 * 60).as_deref(), Some("night"));
    assert_eq!(held(&doc, winter + 90 * 60), None);
    // A summer Sunday (CEST, +02:00): 23:30 UTC Saturday – 00:30 UTC.
    let summer = SPRING + 7 * 86_400;
    assert_eq!(held(&doc, summer - 30 * 60).as_deref(), Some("night"));
    assert_eq!(held(&doc, summer + 30 * 60), None);
    // Fall back: 02:30 comes twice; the window ends at the first one
    // (00:30 UTC) and does not hold again in the repeated hour.
    assert_eq!(held(&doc, FALL - 30 * 60).as_deref(), Some("night"));
    assert_eq!(held(&doc, FALL + 29 * 60).as_deref(), Some("night"));
    assert_eq!(held(&doc, FALL + 30 * 60), None);
    assert_eq!(held(&doc, FALL + HOUR + 15 * 60), None, "02:15 CET, again");
}

#[test]
fn a_zone_without_daylight_saving_is_its_fixed_offset() {
    let shanghai = NIGHT.replace("Europe/Berlin", "Asia/Shanghai");
    let fixed = NIGHT.replace("Europe/Berlin", "+08:00");
    let (a, b) = (
        Document::parse_and_validate(shanghai.as_bytes()).unwrap().0,
        Document::parse_and_validate(fixed.as_bytes()).unwrap().0,
    );
    for t in (SPRING - 2 * 86_400..SPRING + 2 * 86_400).step_by(15 * 60) {
        assert_eq!(held(&a, t), held(&b, t), "at {t}");
    }
    // Sunday 01:30 at +08:00 is Saturday 17:30 UTC.
    assert_eq!(
        held(&a, SPRING - 6 * HOUR - 30 * 60).as_deref(),
        Some("night")
    );
}

fn refusal(text: &str) -> (String, String) {
    match Document::parse_and_validate(text.as_bytes()).unwrap_err() {
        DocumentError::Profile {
            field, constraint, ..
        } => (field, constraint),
        other => panic!("unexpected {other:?}"),
    }
}

#[test]
fn unknown_zones_and_summer_only_overlaps_are_refused() {
    for name in ["Europe/Berlinn", "Mars/Olympus", "CEST"] {
        let (field, constraint) = refusal(&NIGHT.replace("Europe/Berlin", name));
        assert_eq!(field, "when.tz", "{name}");
        assert!(constraint.contains("Europe/Berlin"), "{constraint}");
    }
    // Saturday 23:00–23:45 UTC meets the Berlin window only in summer
    // (01:30 CEST is 23:30 UTC): still an overlap, found by checking a
    // whole year of the zone's offsets.
    let summer_only = format!(
        "{NIGHT}\n[[profile]]\nname = \"late\"\nwhen = {{ days = [\"sat\"], from = \"23:00\", to = \"23:45\" }}\n"
    );
    let (field, constraint) = refusal(&summer_only);
    assert_eq!(field, "when");
    assert!(constraint.contains("night"), "{constraint}");
    // 22:00–23:00 UTC never meets it.
    let apart = summer_only
        .replace("\"23:45\"", "\"23:30\"")
        .replace("\"23:00\"", "\"22:00\"");
    Document::parse_and_validate(apart.as_bytes()).unwrap();
}

//! Scheduled profiles (`[[profile]]`): at a boundary of its window the
//! applier lays the profile's tables over the document's, keeping the
//! breakers' state, and records the switch; overlapping profiles are
//! refused naming both.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tripline::{ManualClock, State};
use tripline_config::{Applier, AuditAction, Document, DocumentError, Origin};

/// Monday 2026-12-07 00:00 UTC.
const MONDAY: u64 = 1_796_601_600;

/// Monday 17:59 at +08:00 (09:59 UTC): a minute before the evening peak.
fn before_peak() -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(MONDAY + 9 * 3600 + 59 * 60)
}

const DOC: &str = r#"
author = "ops@example.com"

[[breaker]]
name = "payments"
window = { kind = "count", size = 10 }
minimum_calls = 4

[[profile]]
name = "evening-peak"
when = { days = ["mon", "tue", "wed", "thu", "fri"], from = "18:00", to = "22:00", tz = "+08:00" }

[[profile.breaker]]
name = "payments"
slow_call_duration = "2s"
slow_call_rate_threshold = 0.9

[[profile]]
name = "sale"
when = { from = "2026-12-26T00:00:00Z", until = "2026-12-28T00:00:00Z" }

[[profile.breaker]]
name = "payments"
failure_rate_threshold = 0.2
"#;

#[test]
fn a_profile_switches_in_at_its_boundary_keeping_state_and_out_again() {
    let clock = ManualClock::new();
    let applier = Applier::builder()
        .clock(clock.clone())
        .wall_epoch(before_peak())
        .build();
    applier
        .apply(DOC.as_bytes(), Origin::new("etcd", None))
        .unwrap();
    let payments = applier.breaker("payments").unwrap();
    assert_eq!(applier.active_profile(), None);
    assert_eq!(payments.config().slow_call_duration, None);
    for _ in 0..4 {
        let _ = payments.call(|| Err::<(), _>("down"));
    }
    assert_eq!(payments.state(), State::Open);
    assert_eq!(applier.until_next_change(), Some(Duration::from_secs(60)));

    clock.advance(Duration::from_secs(59));
    applier.tick();
    assert_eq!(applier.active_profile(), None, "not a second early");
    clock.advance(Duration::from_secs(1));
    applier.tick();
    assert_eq!(applier.active_profile().as_deref(), Some("evening-peak"));
    let config = payments.config();
    assert_eq!(config.slow_call_duration, Some(Duration::from_secs(2)));
    assert_eq!(config.slow_call_rate_threshold, 0.9);
    assert_eq!(config.minimum_calls, 4, "the document's own fields stay");
    assert_eq!(payments.state(), State::Open, "state kept");
    let switched = applier.audit().last().cloned().unwrap();
    assert_eq!(
        switched.action,
        AuditAction::ProfileSwitched {
            from: None,
            to: Some("evening-peak".into())
        }
    );
    assert_eq!(switched.source, "schedule");
    let fields: Vec<_> = switched.changes.iter().map(|c| c.field.as_str()).collect();
    assert_eq!(fields, ["slow_call_duration", "slow_call_rate_threshold"]);
    assert_eq!(applier.version(), 1, "the same document");

    // 22:00: out again, to the document's own config.
    assert_eq!(
        applier.until_next_change(),
        Some(Duration::from_secs(4 * 3600))
    );
    clock.advance(Duration::from_secs(4 * 3600));
    applier.tick();
    assert_eq!(applier.active_profile(), None);
    assert_eq!(payments.config().slow_call_duration, None);
    assert_eq!(payments.config().slow_call_rate_threshold, 1.0);
    assert!(matches!(
        applier.audit().last().unwrap().action,
        AuditAction::ProfileSwitched { to: None, .. }
    ));

    // The one-off weekend sale holds on its dates; a restart mid-sale
    // starts in it.
    let christmas = UNIX_EPOCH + Duration::from_secs(MONDAY + 19 * 86_400 + 12 * 3600);
    let doc = Document::parse(DOC.as_bytes()).unwrap();
    assert_eq!(doc.profile_at(christmas).unwrap().name, "sale");
    let restarted = Applier::builder()
        .clock(ManualClock::new())
        .wall_epoch(christmas)
        .build();
    restarted
        .apply(DOC.as_bytes(), Origin::new("etcd", None))
        .unwrap();
    assert_eq!(
        restarted
            .breaker("payments")
            .unwrap()
            .config()
            .failure_rate_threshold,
        0.2
    );
}

#[tokio::test(start_paused = true)]
async fn the_timer_switches_at_the_boundary_with_no_new_document() {
    let clock = ManualClock::new();
    let applier = Applier::builder()
        .clock(clock.clone())
        .wall_epoch(before_peak())
        .build();
    let timer = tokio::spawn(applier.clone().run_override_timer());
    applier
        .apply(DOC.as_bytes(), Origin::new("etcd", None))
        .unwrap();
    clock.advance(Duration::from_secs(60));
    tokio::time::advance(Duration::from_secs(60)).await;
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
    assert_eq!(applier.active_profile().as_deref(), Some("evening-peak"));
    timer.abort();
}

fn refusal(text: &str) -> (String, String, String) {
    match Document::parse_and_validate(text.as_bytes()).unwrap_err() {
        DocumentError::Profile {
            profile,
            field,
            constraint,
        } => (profile, field, constraint),
        other => panic!("unexpected {other:?}"),
    }
}

#[test]
fn overlapping_or_malformed_profiles_are_refused_naming_the_field() {
    // 21:00–01:00 on Friday runs into Saturday 00:00–02:00 of the other.
    let late = r#"
[[profile]]
name = "late"
when = { days = ["fri"], from = "21:00", to = "01:00" }
[[profile]]
name = "night"
when = { days = ["sat"], from = "00:00", to = "02:00" }
"#;
    let (profile, field, constraint) = refusal(late);
    assert_eq!((profile.as_str(), field.as_str()), ("night", "when"));
    assert!(constraint.contains("\"late\""), "{constraint}");

    // The same hours in different offsets are different instants: fine.
    let apart = r#"
[[profile]]
name = "asia"
when = { days = ["mon"], from = "18:00", to = "22:00", tz = "+08:00" }
[[profile]]
name = "europe"
when = { days = ["mon"], from = "18:00", to = "22:00", tz = "+01:00" }
"#;
    assert!(Document::parse_and_validate(apart.as_bytes()).is_ok());

    // A one-off stretch over a weekly window.
    let sale = r#"
[[profile]]
name = "peak"
when = { days = ["thu"], from = "18:00", to = "22:00" }
[[profile]]
name = "sale"
when = { from = "2026-12-24T00:00:00Z", until = "2026-12-25T00:00:00Z" }
"#;
    assert_eq!(refusal(sale).1, "when");

    let zone = r#"
[[profile]]
name = "peak"
when = { days = ["mon"], from = "18:00", to = "22:00", tz = "Mars/Olympus" }
"#;
    let (_, field, constraint) = refusal(zone);
    assert_eq!(field, "when.tz");
    assert!(constraint.contains("+08:00"), "{constraint}");
    let day = zone
        .replace("\"mon\"", "\"someday\"")
        .replace(", tz = \"Mars/Olympus\"", "");
    assert_eq!(refusal(&day).1, "when.days");
    let hour = zone
        .replace("22:00", "25:00")
        .replace(", tz = \"Mars/Olympus\"", "");
    assert_eq!(refusal(&hour).1, "when.to");

    let bad_table = r#"
[[profile]]
name = "peak"
when = { days = ["mon"], from = "18:00", to = "22:00" }
[[profile.breaker]]
name = "payments"
failure_rate_threshold = 1.5
"#;
    let (profile, field, _) = refusal(bad_table);
    assert_eq!(
        (profile.as_str(), field.as_str()),
        ("peak", "breaker.failure_rate_threshold")
    );
}

//! Fleet-wide overrides (`[[override]]`): held while `until` is ahead on
//! the applier's clock, ended by themselves at `until` with no new
//! document, audited with author and reason, and a local override holds
//! over them while it lasts.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tripline::{ManualClock, State};
use tripline_config::{
    Applier, AuditAction, Document, DocumentError, Origin, OverrideHolder, OverrideState,
};

/// The wall-clock instant the test's ManualClock reads zero at.
fn epoch() -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(1_800_000_000)
}

fn at(secs: u64) -> String {
    humantime::format_rfc3339_seconds(epoch() + Duration::from_secs(secs)).to_string()
}

fn held(until_secs: u64) -> String {
    format!(
        "author = \"ops@example.com\"\n\
         [[breaker]]\nname = \"payments\"\nminimum_calls = 4\n\n\
         [[override]]\nbreaker = \"payments\"\nstate = \"forced_open\"\nuntil = \"{}\"\n\
         reason = \"bank maintenance\"\nauthor = \"alice@example.com\"\n",
        at(until_secs)
    )
}

fn applier(clock: &ManualClock) -> Applier {
    Applier::builder()
        .clock(clock.clone())
        .wall_epoch(epoch())
        .build()
}

fn etcd() -> Origin {
    Origin::new("etcd", Some("7".into()))
}

#[test]
fn a_fleet_override_holds_until_its_until_then_ends_by_itself_audited() {
    let clock = ManualClock::new();
    let applier = applier(&clock);
    applier.apply(held(600).as_bytes(), etcd()).unwrap();
    let payments = applier.breaker("payments").unwrap();
    assert_eq!(payments.state(), State::ForcedOpen);
    let status = applier.managed_status("payments").unwrap();
    assert_eq!(status.holds, Some(OverrideHolder::Fleet));
    assert_eq!(status.fleet_override.unwrap().reason, "bank maintenance");

    let started = applier.audit().last().cloned().unwrap();
    assert_eq!(
        started.action,
        AuditAction::OverrideStarted {
            breaker: "payments".into(),
            state: OverrideState::ForcedOpen,
            until: at(600),
        }
    );
    assert_eq!(started.author.as_deref(), Some("alice@example.com"));
    assert_eq!(started.comment.as_deref(), Some("bank maintenance"));
    assert_eq!(applier.until_next_change(), Some(Duration::from_secs(600)));

    clock.advance(Duration::from_secs(599));
    applier.tick();
    assert_eq!(payments.state(), State::ForcedOpen);
    clock.advance(Duration::from_secs(1));
    applier.tick();
    assert_eq!(payments.state(), State::Closed, "ended at until");
    let ended = applier.audit().last().cloned().unwrap();
    assert_eq!(
        ended.action,
        AuditAction::OverrideEnded {
            breaker: "payments".into(),
            state: OverrideState::ForcedOpen,
            why: "expired".into(),
        }
    );
    assert_eq!(ended.author.as_deref(), Some("alice@example.com"));
    assert_eq!(applier.managed_status("payments").unwrap().holds, None);
    assert_eq!(applier.until_next_change(), None);

    // The document is unchanged and still in force: a restart (a new
    // applier reading it) does not hold the breaker again.
    let restarted = self::applier(&clock);
    restarted.apply(held(600).as_bytes(), etcd()).unwrap();
    assert_eq!(
        restarted.breaker("payments").unwrap().state(),
        State::Closed
    );
}

#[tokio::test(start_paused = true)]
async fn the_override_timer_acts_at_until_with_no_new_document() {
    let clock = ManualClock::new();
    let applier = applier(&clock);
    let timer = tokio::spawn(applier.clone().run_override_timer());
    applier.apply(held(30).as_bytes(), etcd()).unwrap();
    let payments = applier.breaker("payments").unwrap();
    assert_eq!(payments.state(), State::ForcedOpen);

    // Time passes on both clocks; nobody calls tick.
    for _ in 0..29 {
        clock.advance(Duration::from_secs(1));
        tokio::time::advance(Duration::from_secs(1)).await;
    }
    assert_eq!(payments.state(), State::ForcedOpen);
    clock.advance(Duration::from_secs(1));
    tokio::time::advance(Duration::from_secs(1)).await;
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
    assert_eq!(
        payments.state(),
        State::Closed,
        "the timer ended it at until"
    );
    timer.abort();
}

#[test]
fn a_local_override_holds_over_the_fleets_and_hands_back_when_cleared() {
    let clock = ManualClock::new();
    let applier = applier(&clock);
    applier.apply(held(600).as_bytes(), etcd()).unwrap();
    let payments = applier.breaker("payments").unwrap();

    applier
        .hold_locally("payments", OverrideState::Disabled)
        .unwrap();
    assert_eq!(payments.state(), State::Disabled);
    let status = applier.managed_status("payments").unwrap();
    assert_eq!(status.holds, Some(OverrideHolder::Local));
    assert!(
        status.fleet_override.is_some(),
        "the fleet's is still there"
    );
    // A push does not take it back from the local operator.
    applier.apply(held(600).as_bytes(), etcd()).unwrap();
    assert_eq!(payments.state(), State::Disabled);

    applier.clear_override("payments").unwrap();
    assert_eq!(payments.state(), State::ForcedOpen, "back to the fleet's");
    assert_eq!(
        applier.managed_status("payments").unwrap().holds,
        Some(OverrideHolder::Fleet)
    );

    // A document that drops the override lifts it.
    applier
        .apply(
            b"[[breaker]]\nname = \"payments\"\nminimum_calls = 4\n",
            etcd(),
        )
        .unwrap();
    assert_eq!(payments.state(), State::Closed);
    assert!(matches!(
        &applier.audit().last().unwrap().action,
        AuditAction::OverrideEnded { why, .. } if why == "lifted"
    ));
}

#[test]
fn bad_overrides_are_refused_naming_the_field() {
    let clock = ManualClock::new();
    let applier = applier(&clock);
    let twice = format!(
        "{}\n[[override]]\nbreaker = \"payments\"\nstate = \"disabled\"\nuntil = \"{}\"\nreason = \"again\"\n",
        held(600),
        at(900)
    );
    let err = applier.apply(twice.as_bytes(), etcd()).unwrap_err();
    assert!(err.to_string().contains("`override[1].breaker`"), "{err}");
    let no_reason = held(600).replace("bank maintenance", " ");
    let err = applier.apply(no_reason.as_bytes(), etcd()).unwrap_err();
    assert!(err.to_string().contains("`override[0].reason`"), "{err}");
    let bad_state = held(600).replace("forced_open", "open");
    let err = applier.apply(bad_state.as_bytes(), etcd()).unwrap_err();
    assert!(err.to_string().contains("forced_open"), "{err}");
    let bad_time = held(600).replace(&at(600), "tomorrow");
    let err = applier.apply(bad_time.as_bytes(), etcd()).unwrap_err();
    assert!(err.to_string().contains("RFC 3339"), "{err}");
    assert_eq!(applier.version(), 0, "nothing applied");

    // What a writer checks: the future, and a breaker someone has.
    let doc = Document::parse(held(600).as_bytes()).unwrap();
    let later = epoch() + Duration::from_secs(601);
    assert!(matches!(
        doc.check_overrides(later, &[]),
        Err(DocumentError::Override {
            index: 0,
            field: "until",
            ..
        })
    ));
    let elsewhere = Document::parse(
        held(600)
            .replace("[[breaker]]\nname = \"payments\"\nminimum_calls = 4\n", "")
            .as_bytes(),
    )
    .unwrap();
    assert!(matches!(
        elsewhere.check_overrides(epoch(), &["inventory".into()]),
        Err(DocumentError::Override {
            index: 0,
            field: "breaker",
            ..
        })
    ));
    assert!(
        elsewhere
            .check_overrides(epoch(), &["payments".into()])
            .is_ok()
    );
}

#[test]
fn a_breaker_its_owner_rebuilds_is_held_by_the_fleet_override_before_traffic() {
    let clock = ManualClock::new();
    let applier = applier(&clock);
    applier.apply(held(600).as_bytes(), etcd()).unwrap();
    let rebuilt = tripline::CircuitBreaker::builder()
        .config(tripline::CircuitBreakerConfig {
            name: "payments".into(),
            ..Default::default()
        })
        .clock(clock.clone())
        .build()
        .unwrap();
    applier.adopt_breaker(rebuilt.clone()).unwrap();
    assert_eq!(rebuilt.state(), State::ForcedOpen);
    assert_eq!(rebuilt.config().minimum_calls, 4, "the pushed table too");
}

//! Rollout on a ManualClock: shadow twins report what the new rules would
//! have done, canaries are picked by a stable hash, and a canary worse than
//! the fleet during its bake rolls itself back.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly

#[path = "support/common.rs"]
mod common;

use std::time::Duration;

use common::doc;
use tripline::{ManualClock, State};
use tripline_config::{Applier, AuditAction, Origin, RolloutPhase, TrafficSample, canary_bucket};

fn etcd() -> Origin {
    Origin::new("etcd", Some("7".into()))
}

/// An applier on `clock` whose `a` runs at a lax 0.9 over 10 calls.
fn lax(clock: &ManualClock, instance: &str) -> Applier {
    let applier = Applier::builder()
        .instance_id(instance)
        .clock(clock.clone())
        .build();
    applier
        .apply(doc("", "a", 10, 0.9).as_bytes(), etcd())
        .unwrap();
    applier
}

fn feed(applier: &Applier, failures: usize, successes: usize) {
    let breaker = applier.breaker("a").unwrap();
    for _ in 0..failures {
        let _ = applier.call(&breaker, || Err::<(), _>("boom"));
    }
    for _ in 0..successes {
        let _ = applier.call(&breaker, || Ok::<_, ()>(()));
    }
}

fn last_action(applier: &Applier) -> AuditAction {
    applier.audit().last().unwrap().action.clone()
}

#[test]
fn a_shadow_twin_reports_would_be_trips_before_anything_changes() {
    let clock = ManualClock::new();
    let applier = lax(&clock, "web-1");
    let strict = "rollout = { percent = 100, shadow = \"60s\", bake = \"5m\" }";
    applier
        .apply(doc(strict, "a", 4, 0.3).as_bytes(), etcd())
        .unwrap();
    assert!(matches!(
        applier.rollout_phase(),
        Some(RolloutPhase::Shadow { .. })
    ));
    assert_eq!(last_action(&applier), AuditAction::ShadowStarted);

    // 2 of 4 failing: the live breaker (0.9 over 10) holds, the twin (0.3 over 4) would trip.
    feed(&applier, 2, 2);
    let live = applier.breaker("a").unwrap();
    assert_eq!(live.state(), State::Closed);
    assert_eq!(
        live.config().minimum_calls,
        10,
        "nothing applied while shadowing"
    );

    clock.advance(Duration::from_secs(59));
    assert!(matches!(applier.tick(), Some(RolloutPhase::Shadow { .. })));
    clock.advance(Duration::from_secs(1));
    assert!(matches!(applier.tick(), Some(RolloutPhase::Bake { .. })));

    let audit = applier.audit();
    let report = audit
        .iter()
        .find_map(|r| match &r.action {
            AuditAction::ShadowReport {
                would_trip,
                not_judged,
                ..
            } => Some((would_trip.clone(), not_judged.clone())),
            _ => None,
        })
        .unwrap();
    assert_eq!(report.0, [("a".to_owned(), 1)]);
    assert!(report.1.is_empty(), "every changed breaker was judged");
    assert_eq!(live.config().minimum_calls, 4, "applied on a 100 % canary");
    assert!(applier.status().canary);
}

#[test]
fn an_instance_outside_the_percentage_keeps_its_config() {
    let clock = ManualClock::new();
    // Find an id above 10 %: the hash is stable, so this is too.
    let id = (0..)
        .map(|i| format!("web-{i}"))
        .find(|id| canary_bucket(id) >= 10.0)
        .unwrap();
    let applier = lax(&clock, &id);
    let plan = "rollout = { percent = 10, shadow = \"0s\", bake = \"5m\" }";
    applier
        .apply(doc(plan, "a", 4, 0.3).as_bytes(), etcd())
        .unwrap();
    assert_eq!(applier.rollout_phase(), None);
    assert!(matches!(last_action(&applier), AuditAction::NotSelected { bucket } if bucket >= 10.0));
    assert_eq!(applier.breaker("a").unwrap().config().minimum_calls, 10);
    assert_eq!(applier.version(), 1);
}

#[test]
fn ten_percent_selects_about_ten_percent_of_two_hundred_ids() {
    let plan = tripline_config::Rollout {
        percent: 10.0,
        shadow: Duration::ZERO,
        bake: Duration::from_secs(60),
        margin: 0.05,
    };
    let selected = (0..200)
        .filter(|i| plan.selects(&format!("instance-{i}")))
        .count();
    assert!((10..=30).contains(&selected), "{selected} of 200");
    assert_eq!(selected, 20, "pinned by the stable hash");
}

#[test]
fn a_canary_rejecting_more_than_the_fleet_rolls_itself_back() {
    let clock = ManualClock::new();
    let applier = lax(&clock, "web-1");
    applier.set_fleet_sample(TrafficSample {
        requests: 1000,
        rejected: 10,
        trips: 0,
    });
    let plan = "rollout = { percent = 100, shadow = \"0s\", bake = \"5m\", margin = 0.1 }";
    applier
        .apply(doc(plan, "a", 4, 0.3).as_bytes(), etcd())
        .unwrap();
    assert!(matches!(
        applier.rollout_phase(),
        Some(RolloutPhase::Bake { .. })
    ));
    assert!(applier.needs_fleet_sample());
    let breaker = applier.breaker("a").unwrap();
    assert_eq!(breaker.config().minimum_calls, 4);

    // The strict rules trip the canary; the rest of the fleet sails on.
    feed(&applier, 4, 20);
    assert_eq!(breaker.state(), State::Open);
    clock.advance(Duration::from_secs(30));
    applier.set_fleet_sample(TrafficSample {
        requests: 2000,
        rejected: 20,
        trips: 0,
    });

    let record = applier.audit().into_iter().last().unwrap();
    let AuditAction::AutoRolledBack { to, reason } = &record.action else {
        panic!("expected an automatic rollback, got {:?}", record.action);
    };
    assert_eq!(*to, 1);
    assert!(reason.contains("rejection rate"), "{reason}");
    assert_eq!(
        breaker.config().minimum_calls,
        10,
        "the previous config is back"
    );
    assert_eq!(
        breaker.state(),
        State::Open,
        "state is kept through the rollback"
    );
    assert_eq!(applier.rollout_phase(), None);
    assert!(!applier.status().canary);
}

#[test]
fn a_canary_no_worse_than_the_fleet_completes_its_bake() {
    let clock = ManualClock::new();
    let applier = lax(&clock, "web-1");
    applier.set_fleet_sample(TrafficSample::default());
    let plan = "rollout = { percent = 100, shadow = \"0s\", bake = \"5m\" }";
    applier
        .apply(doc(plan, "a", 4, 0.3).as_bytes(), etcd())
        .unwrap();
    feed(&applier, 0, 50);
    applier.set_fleet_sample(TrafficSample {
        requests: 500,
        rejected: 0,
        trips: 0,
    });
    clock.advance(Duration::from_secs(299));
    assert!(applier.tick().is_some());
    clock.advance(Duration::from_secs(1));
    assert_eq!(applier.tick(), None);
    assert_eq!(last_action(&applier), AuditAction::BakeCompleted);
    assert_eq!(applier.breaker("a").unwrap().config().minimum_calls, 4);
}

#[test]
fn a_new_document_supersedes_a_rollout_in_progress() {
    let clock = ManualClock::new();
    let applier = lax(&clock, "web-1");
    let plan = "rollout = { percent = 100, shadow = \"60s\", bake = \"5m\" }";
    applier
        .apply(doc(plan, "a", 4, 0.3).as_bytes(), etcd())
        .unwrap();
    applier
        .apply(doc("", "a", 6, 0.9).as_bytes(), etcd())
        .unwrap();
    assert_eq!(applier.rollout_phase(), None);
    clock.advance(Duration::from_secs(120));
    assert_eq!(applier.tick(), None);
    assert_eq!(applier.breaker("a").unwrap().config().minimum_calls, 6);
}

#[test]
fn a_bad_rollout_plan_is_refused_naming_its_field() {
    let applier = lax(&ManualClock::new(), "web-1");
    let plan = "rollout = { percent = 120, bake = \"5m\" }";
    let err = applier
        .apply(doc(plan, "a", 4, 0.3).as_bytes(), etcd())
        .unwrap_err();
    assert!(err.to_string().contains("rollout.percent"), "{err}");
    assert_eq!(applier.version(), 1);
}

#[test]
fn the_canary_hash_is_pinned_so_every_version_picks_the_same_instances() {
    // Computed independently from the documented FNV-1a + fmix64 recipe.
    assert_eq!(canary_bucket("web-1"), 95.72);
    assert_eq!(canary_bucket("instance-000"), 61.7);
    assert_eq!(canary_bucket(""), 43.42);
}

#[test]
fn rolling_back_during_a_shadow_restores_the_config_in_force_not_the_trial() {
    let clock = ManualClock::new();
    let applier = lax(&clock, "web-1");
    let plan = "rollout = { percent = 100, shadow = \"60s\", bake = \"5m\" }";
    applier
        .apply(doc(plan, "a", 4, 0.3).as_bytes(), etcd())
        .unwrap();
    let record = applier.rollback(1).unwrap();
    assert_eq!(record.action, AuditAction::RolledBack { to: 1 });
    assert_eq!(applier.rollout_phase(), None, "the rollback ends the trial");
    assert_eq!(applier.breaker("a").unwrap().config().minimum_calls, 10);
    clock.advance(Duration::from_secs(120));
    assert_eq!(applier.tick(), None);
    assert_eq!(applier.breaker("a").unwrap().config().minimum_calls, 10);
}

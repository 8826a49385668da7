//! A hold on a whole family: every breaker, present and future, the
//! overflow breaker and per-key overrides included, held in an operator
//! state; lifting it resets what it held and nothing else; creations
//! racing holds and lifts never leave a breaker out of step.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::Duration;

use tripline::clock::ManualClock;
use tripline::registry::{BreakerRegistry, OverflowPolicy, RegistryConfig};
use tripline::{CircuitBreakerConfig, State};

fn registry(max_breakers: usize) -> BreakerRegistry<u32> {
    registry_on(max_breakers, ManualClock::new())
}

fn registry_on(max_breakers: usize, clock: ManualClock) -> BreakerRegistry<u32> {
    BreakerRegistry::builder(RegistryConfig {
        max_breakers,
        overflow: OverflowPolicy::SharedOverflow,
        breaker: CircuitBreakerConfig {
            name: "tenants".into(),
            ..Default::default()
        },
        ..Default::default()
    })
    .override_key(
        7,
        CircuitBreakerConfig {
            minimum_calls: 3,
            ..Default::default()
        },
    )
    .clock(clock)
    .build()
    .unwrap()
}

#[test]
fn a_hold_covers_every_breaker_present_and_future_and_the_overflow() {
    let r = registry(3);
    let (one, seven) = (r.get(&1).unwrap(), r.get(&7).unwrap());
    for state in [State::ForcedOpen, State::Disabled, State::MetricsOnly] {
        r.hold_family(Some(state)).unwrap();
        assert_eq!(r.family_hold(), Some(state));
        assert_eq!((one.state(), seven.state()), (state, state), "present");
    }
    r.hold_family(Some(State::ForcedOpen)).unwrap();
    let two = r.get(&2).unwrap();
    assert_eq!(two.state(), State::ForcedOpen, "made during the hold");
    assert!(two.try_acquire().is_err(), "and refuses its first call");
    let overflow = r.get(&99).unwrap(); // the fourth key: the shared overflow breaker
    assert_eq!(overflow.name(), "tenants:overflow");
    assert_eq!(overflow.state(), State::ForcedOpen);

    r.hold_family(None).unwrap();
    assert_eq!(r.family_hold(), None);
    for b in [&one, &seven, &two, &overflow] {
        assert_eq!(b.state(), State::Closed, "{}", b.name());
    }
    r.remove(&2);
    assert_eq!(
        r.get(&2).unwrap().state(),
        State::Closed,
        "made after the lift"
    );
}

#[test]
fn a_hold_says_since_when_and_holding_again_in_the_same_state_keeps_it() {
    let clock = ManualClock::new();
    let r = registry_on(10, clock.clone());
    assert_eq!(r.family_held_since(), None);
    clock.advance(Duration::from_secs(3));
    r.hold_family(Some(State::ForcedOpen)).unwrap();
    let since = r.family_held_since().unwrap();
    assert_eq!(since.as_duration(), Duration::from_secs(3));
    clock.advance(Duration::from_secs(5));
    r.hold_family(Some(State::ForcedOpen)).unwrap();
    assert_eq!(r.family_held_since(), Some(since), "the same hold");
    r.hold_family(Some(State::Disabled)).unwrap();
    assert_eq!(
        r.family_held_since().unwrap().as_duration(),
        Duration::from_secs(8)
    );
    r.hold_family(None).unwrap();
    assert_eq!(r.family_held_since(), None);
}

#[test]
fn lifting_a_hold_leaves_a_breaker_an_operator_has_since_moved() {
    let r = registry(10);
    let (one, two) = (r.get(&1).unwrap(), r.get(&2).unwrap());
    r.hold_family(Some(State::ForcedOpen)).unwrap();
    two.disable(); // an operator's own action on one key
    r.hold_family(None).unwrap();
    assert_eq!((one.state(), two.state()), (State::Closed, State::Disabled));
}

#[test]
fn a_state_the_breaker_enters_by_itself_is_refused_and_nothing_changes() {
    let r = registry(10);
    let one = r.get(&1).unwrap();
    for state in [State::Closed, State::Open, State::HalfOpen] {
        let e = r.hold_family(Some(state)).unwrap_err();
        assert_eq!(e.field, "state");
        assert!(e.constraint.contains("operator state"), "{e}");
        assert!(e.constraint.contains(state.as_str()), "{e}");
    }
    assert_eq!((r.family_hold(), one.state()), (None, State::Closed));
}

/// Threads creating (and removing) breakers while the main thread holds
/// and lifts: once the last hold returns, every breaker is in its state,
/// however the creations interleaved with the holds.
#[test]
fn creations_racing_holds_and_lifts_end_in_step_with_the_last() {
    let r = registry(100_000);
    let stop = AtomicBool::new(false);
    let next = AtomicU32::new(0);
    std::thread::scope(|s| {
        for _ in 0..3 {
            s.spawn(|| {
                while !stop.load(Ordering::Relaxed) {
                    // A thousand keys, made, removed and made again.
                    let key = next.fetch_add(1, Ordering::Relaxed) % 1_000;
                    r.get(&key).unwrap();
                    r.remove(&((key * 7) % 1_000));
                }
            });
        }
        let states = [Some(State::ForcedOpen), None, Some(State::Disabled), None];
        for round in 0..200 {
            r.hold_family(states[round % states.len()]).unwrap();
            std::thread::yield_now();
        }
        r.hold_family(Some(State::MetricsOnly)).unwrap();
        stop.store(true, Ordering::Relaxed);
    });
    let mut seen = 0;
    r.for_each_breaker(|_, b| {
        seen += 1;
        assert_eq!(b.state(), State::MetricsOnly, "{}", b.name());
    });
    assert!(seen > 0, "the threads made breakers");
    r.hold_family(None).unwrap();
    r.for_each_breaker(|_, b| assert_eq!(b.state(), State::Closed, "{}", b.name()));
}

//! The keyed registry through its public API, on a `ManualClock`: one
//! breaker per key, named after it; family config and per-key overrides;
//! `max_breakers` with both overflow policies; idle eviction that never
//! touches a breaker that is not `Closed`; removal that drops subscribers
//! and metrics; registry-level events and bounded-cardinality stats.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tripline::clock::ManualClock;
use tripline::registry::{BreakerRegistry, OverflowPolicy, RegistryConfig, RegistryError};
use tripline::{CircuitBreakerConfig, EventKind, State, WindowConfig};

const TTL: Duration = Duration::from_secs(60);

/// Transitions seen by a registry-level subscriber: (key, breaker, to).
type Seen = Arc<Mutex<Vec<(Option<String>, String, State)>>>;

fn family() -> CircuitBreakerConfig {
    CircuitBreakerConfig {
        name: "inventory".into(),
        window: WindowConfig::Count { size: 10 },
        minimum_calls: 4,
        open_duration: tripline::breaker::OpenDuration::Fixed(Duration::from_secs(5)),
        half_open: tripline::HalfOpenPolicy::Consecutive { successes: 1 },
        ..Default::default()
    }
}

fn config(max_breakers: usize, overflow: OverflowPolicy) -> RegistryConfig {
    RegistryConfig {
        max_breakers,
        overflow,
        idle_ttl: Some(TTL),
        breaker: family(),
    }
}

fn registry(clock: &ManualClock, config: RegistryConfig) -> BreakerRegistry<String> {
    BreakerRegistry::builder(config)
        .clock(clock.clone())
        .build()
        .unwrap()
}

fn key(s: &str) -> String {
    s.to_owned()
}

fn trip(b: &tripline::CircuitBreaker) {
    for _ in 0..4 {
        let _ = b.call(|| Err::<(), _>("boom"));
    }
    assert_eq!(b.state(), State::Open);
}

#[test]
fn one_breaker_per_key_named_after_it() {
    let clock = ManualClock::new();
    let r = registry(&clock, config(100, OverflowPolicy::Reject));
    let a = r.get(&key("eu/search")).unwrap();
    let again = r.get(&key("eu/search")).unwrap();
    let b = r.get(&key("us/search")).unwrap();
    assert!(
        a.ptr_eq(&again),
        "an existing key gets its own breaker back"
    );
    assert!(!a.ptr_eq(&b));
    assert_eq!(a.name(), "inventory:eu/search");
    assert_eq!(b.name(), "inventory:us/search");
    assert_eq!(r.len(), 2);
    assert_eq!(r.family(), "inventory");
    // Breakers are independent: tripping one leaves the other closed.
    trip(&a);
    assert_eq!(b.state(), State::Closed);
    // `with` lends the same breaker; `peek` never creates.
    assert_eq!(
        r.with(&key("eu/search"), |b| b.state()).unwrap(),
        State::Open
    );
    assert!(r.peek(&key("asia/search")).is_none());
    assert_eq!(r.len(), 2);
    // The family config reaches every breaker, named after the key.
    assert_eq!(
        a.config(),
        CircuitBreakerConfig {
            name: a.name().into(),
            ..family()
        }
    );
    // Breakers run on the registry's clock.
    clock.advance(Duration::from_secs(5));
    assert!(a.try_acquire().unwrap().is_probe());
}

#[test]
fn per_key_overrides_take_precedence_and_bad_ones_fail_that_key_only() {
    let clock = ManualClock::new();
    let strict = CircuitBreakerConfig {
        minimum_calls: 2,
        ..family()
    };
    let r = BreakerRegistry::<String>::builder(config(100, OverflowPolicy::Reject))
        .override_key(
            key("payments"),
            CircuitBreakerConfig {
                minimum_calls: 50,
                ..family()
            },
        )
        .override_with(move |k: &String| match k.as_str() {
            "payments" | "checkout" => Some(strict.clone()),
            "broken" => Some(CircuitBreakerConfig {
                failure_rate_threshold: 2.0,
                ..family()
            }),
            _ => None,
        })
        .clock(clock.clone())
        .build()
        .unwrap();
    // The map wins over the closure, the closure over the family.
    assert_eq!(r.get(&key("payments")).unwrap().config().minimum_calls, 50);
    assert_eq!(r.get(&key("checkout")).unwrap().config().minimum_calls, 2);
    assert_eq!(r.get(&key("search")).unwrap().config().minimum_calls, 4);
    // Names still come from the key, whatever the override says.
    assert_eq!(
        r.get(&key("checkout")).unwrap().name(),
        "inventory:checkout"
    );
    // An invalid computed override fails that lookup, naming the field,
    // and takes no slot.
    let err = r.get(&key("broken")).unwrap_err();
    match &err {
        RegistryError::InvalidConfig { breaker, source } => {
            assert_eq!(breaker, "inventory:broken");
            assert_eq!(source.field, "failure_rate_threshold");
        }
        other => panic!("{other:?}"),
    }
    assert!(err.to_string().contains("failure_rate_threshold"), "{err}");
    assert_eq!(r.len(), 3);
    assert_eq!(r.stats().live, 3);
}

#[test]
fn a_full_registry_shares_one_overflow_breaker() {
    let clock = ManualClock::new();
    let r = registry(&clock, config(2, OverflowPolicy::SharedOverflow));
    let a = r.get(&key("a")).unwrap();
    let _b = r.get(&key("b")).unwrap();
    assert!(r.overflow_breaker().is_none(), "created on first need");
    let c = r.get(&key("c")).unwrap();
    let d = r.get(&key("d")).unwrap();
    assert_eq!(c.name(), "inventory:overflow");
    assert!(c.ptr_eq(&d), "new keys share the overflow breaker");
    assert!(r.overflow_breaker().unwrap().ptr_eq(&c));
    assert_eq!(c.config().minimum_calls, family().minimum_calls);
    // Existing keys keep their own breakers.
    assert!(r.get(&key("a")).unwrap().ptr_eq(&a));
    assert_eq!(r.len(), 2);
    let s = r.stats();
    assert_eq!(
        (s.live, s.max_breakers, s.created, s.overflowed, s.refused),
        (2, 2, 2, 2, 0)
    );
    // Keys that share it trip together (the price of the coarser grain).
    trip(&c);
    assert_eq!(r.get(&key("e")).unwrap().state(), State::Open);
    // Removing a key frees a slot: the next new key gets its own breaker.
    r.remove(&key("a")).unwrap();
    assert_eq!(r.get(&key("f")).unwrap().name(), "inventory:f");
}

#[test]
fn a_full_registry_with_reject_refuses_new_keys() {
    let clock = ManualClock::new();
    let r = registry(&clock, config(1, OverflowPolicy::Reject));
    r.get(&key("a")).unwrap();
    let err = r.get(&key("b")).unwrap_err();
    assert_eq!(err, RegistryError::Full { max_breakers: 1 });
    assert_eq!(
        err.to_string(),
        "breaker registry is full (max_breakers = 1): new keys are refused"
    );
    assert!(r.with(&key("b"), |_| ()).is_err());
    assert!(r.get(&key("a")).is_ok(), "existing keys still resolve");
    assert!(r.overflow_breaker().is_none());
    let s = r.stats();
    assert_eq!((s.live, s.refused, s.overflowed), (1, 2, 0));
}

#[test]
fn idle_closed_breakers_are_evicted_and_others_never() {
    let clock = ManualClock::new();
    let r = registry(&clock, config(100, OverflowPolicy::Reject));
    let names = [
        "busy",
        "idle",
        "open",
        "half_open",
        "forced",
        "disabled",
        "shadow",
    ];
    let b: Vec<_> = names.iter().map(|n| r.get(&key(n)).unwrap()).collect();
    trip(&b[2]);
    trip(&b[3]);
    b[4].force_open();
    b[5].disable();
    b[6].metrics_only();
    // Half-open: its open duration elapses and one probe is in flight.
    clock.advance(Duration::from_secs(5));
    let probe = b[3].try_acquire_owned().unwrap();
    assert_eq!(b[3].state(), State::HalfOpen);

    // Ten minutes of passes every 30 s; only "busy" sees calls.
    for _ in 0..20 {
        let _ = b[0].call(|| Ok::<_, ()>(()));
        r.evict_idle();
        clock.advance(Duration::from_secs(30));
    }
    let left: Vec<String> = {
        let mut v: Vec<String> = r.metrics().into_iter().map(|(k, _)| k).collect();
        v.sort();
        v
    };
    assert_eq!(
        left,
        ["busy", "disabled", "forced", "half_open", "open", "shadow"]
    );
    assert_eq!(r.stats().evicted, 1);
    assert_eq!(r.stats().by_state.operator, 3);
    // An open breaker stays Open (lazily) while idle and is still kept.
    assert_eq!(r.peek(&key("open")).unwrap().state(), State::Open);

    // Once they are Closed and idle again, they go too.
    drop(probe);
    for b in &b[2..] {
        b.reset();
    }
    for _ in 0..3 {
        let _ = b[0].call(|| Ok::<_, ()>(()));
        r.evict_idle();
        clock.advance(TTL);
    }
    assert_eq!(
        r.len(),
        1,
        "{:?}",
        r.metrics().into_iter().map(|(k, _)| k).collect::<Vec<_>>()
    );
    assert!(r.peek(&key("busy")).is_some());
    // A new lookup after eviction gets a fresh breaker.
    let fresh = r.get(&key("idle")).unwrap();
    assert!(!fresh.ptr_eq(&b[1]));
}

#[test]
fn idleness_is_measured_from_the_last_observed_call() {
    let clock = ManualClock::new();
    let r = registry(&clock, config(10, OverflowPolicy::Reject));
    let b = r.get(&key("k")).unwrap();
    // Created and never called: idle from creation.
    clock.advance(TTL - Duration::from_secs(1));
    assert_eq!(r.evict_idle(), 0, "not yet idle for a full TTL");
    let _ = b.call(|| Ok::<_, ()>(()));
    clock.advance(Duration::from_secs(2));
    assert_eq!(
        r.evict_idle(),
        0,
        "the pass sees the call and restarts the clock"
    );
    clock.advance(TTL - Duration::from_secs(1));
    assert_eq!(r.evict_idle(), 0);
    // A rejected or cancelled call is activity too.
    drop(b.try_acquire().unwrap());
    clock.advance(Duration::from_secs(2));
    assert_eq!(r.evict_idle(), 0);
    clock.advance(TTL);
    assert_eq!(r.evict_idle(), 1);
    assert!(r.is_empty());
}

#[test]
fn no_idle_ttl_never_evicts() {
    let clock = ManualClock::new();
    let r = registry(
        &clock,
        RegistryConfig {
            idle_ttl: None,
            ..config(10, OverflowPolicy::Reject)
        },
    );
    r.get(&key("k")).unwrap();
    clock.advance(Duration::from_secs(86_400 * 365));
    assert_eq!(r.evict_idle(), 0);
    assert_eq!(r.len(), 1);
}

#[test]
fn removal_drops_subscribers_and_metrics() {
    let clock = ManualClock::new();
    let r = registry(&clock, config(10, OverflowPolicy::Reject));
    let seen: Seen = Arc::default();
    let sink = seen.clone();
    let sub = r.subscribe(move |k, e| {
        if let EventKind::Transition(t) = &e.kind {
            sink.lock()
                .unwrap()
                .push((k.cloned(), e.breaker.to_string(), t.to));
        }
    });
    let direct = Arc::new(Mutex::new(0));
    let d = direct.clone();
    let b = r.get(&key("gone")).unwrap();
    b.subscribe(move |_| *d.lock().unwrap() += 1).detach();
    trip(&b);
    assert_eq!(
        *seen.lock().unwrap(),
        [(Some(key("gone")), "inventory:gone".to_owned(), State::Open)]
    );
    assert_eq!(*direct.lock().unwrap(), 1);

    let removed = r.remove(&key("gone")).unwrap();
    assert!(removed.ptr_eq(&b));
    assert!(r.remove(&key("gone")).is_none());
    assert!(r.metrics().is_empty(), "its metrics are gone");
    assert_eq!(r.stats().removed, 1);
    // The detached handle still works but nobody hears from it any more.
    b.reset();
    trip(&b);
    assert_eq!(seen.lock().unwrap().len(), 1);
    assert_eq!(*direct.lock().unwrap(), 1);
    // A new breaker for the key starts from scratch, and is heard.
    let again = r.get(&key("gone")).unwrap();
    assert_eq!(again.state(), State::Closed);
    trip(&again);
    assert_eq!(seen.lock().unwrap().len(), 2);
    // Dropping the subscription stops the registry-level callback.
    drop(sub);
    again.reset();
    assert_eq!(seen.lock().unwrap().len(), 2);
}

#[test]
fn registry_events_name_the_key_and_the_overflow_breaker() {
    let clock = ManualClock::new();
    let r = registry(&clock, config(1, OverflowPolicy::SharedOverflow));
    let seen: Seen = Arc::default();
    let sink = seen.clone();
    r.subscribe(move |k, e| {
        if let EventKind::Transition(t) = &e.kind {
            sink.lock()
                .unwrap()
                .push((k.cloned(), e.breaker.to_string(), t.to));
        }
    })
    .detach();
    trip(&r.get(&key("own")).unwrap());
    trip(&r.get(&key("spill")).unwrap());
    assert_eq!(
        *seen.lock().unwrap(),
        [
            (Some(key("own")), "inventory:own".to_owned(), State::Open),
            (None, "inventory:overflow".to_owned(), State::Open),
        ]
    );
}

#[test]
fn metrics_list_every_key_and_stats_stay_bounded() {
    let clock = ManualClock::new();
    let r = registry(&clock, config(1_000, OverflowPolicy::Reject));
    for i in 0..500 {
        let b = r.get(&format!("tenant-{i}")).unwrap();
        if i % 100 == 0 {
            trip(&b);
        } else {
            let _ = b.call(|| Ok::<_, ()>(()));
        }
    }
    let metrics = r.metrics();
    assert_eq!(metrics.len(), 500);
    let (k, m) = metrics.iter().find(|(k, _)| k == "tenant-100").unwrap();
    assert_eq!(m.name, format!("inventory:{k}"));
    assert_eq!((m.state, m.calls.failed), (State::Open, 4));
    let s = r.stats();
    assert_eq!(s.family, "inventory");
    assert_eq!((s.live, s.created), (500, 500));
    assert_eq!((s.by_state.closed, s.by_state.open), (495, 5));
}

#[test]
fn seeded_registries_are_reproducible_whatever_the_key_order() {
    use tripline::breaker::{Backoff, Jitter, OpenDuration};
    let jittered = RegistryConfig {
        breaker: CircuitBreakerConfig {
            open_duration: OpenDuration::Backoff(Backoff {
                initial: Duration::from_secs(10),
                multiplier: 2.0,
                max: Duration::from_secs(60),
                jitter: Jitter::Full,
            }),
            ..family()
        },
        ..config(10, OverflowPolicy::Reject)
    };
    let open_for = |order: &[&str], seed: u64| {
        let clock = ManualClock::new();
        let r = BreakerRegistry::<String>::builder(jittered.clone())
            .clock(clock.clone())
            .seed(seed)
            .build()
            .unwrap();
        for k in order {
            trip(&r.get(&key(k)).unwrap());
        }
        let mut v: Vec<_> = r
            .metrics()
            .into_iter()
            .map(|(k, m)| (k, m.open_until.unwrap()))
            .collect();
        v.sort();
        v
    };
    let a = open_for(&["x", "y", "z"], 9);
    assert_eq!(a, open_for(&["z", "x", "y"], 9), "same seed, any order");
    assert_ne!(a, open_for(&["x", "y", "z"], 10), "another seed");
    assert_ne!(a[0].1, a[1].1, "keys draw different jitter");
}

#[test]
fn family_reconfiguration_reaches_present_and_future_breakers_but_not_overrides() {
    let clock = ManualClock::new();
    let r = BreakerRegistry::<String>::builder(config(3, OverflowPolicy::SharedOverflow))
        .override_key(
            key("vip"),
            CircuitBreakerConfig {
                minimum_calls: 9,
                ..family()
            },
        )
        .clock(clock.clone())
        .build()
        .unwrap();
    let plain = r.get(&key("plain")).unwrap();
    let vip = r.get(&key("vip")).unwrap();
    r.get(&key("third")).unwrap();
    let overflow = r.get(&key("spill")).unwrap();
    // Some state to keep: two failures in the window.
    for _ in 0..2 {
        let _ = plain.call(|| Err::<(), _>("boom"));
    }
    let changes: Arc<Mutex<Vec<String>>> = Arc::default();
    let sink = changes.clone();
    r.subscribe(move |_, e| {
        if let EventKind::ConfigChanged { .. } = &e.kind {
            sink.lock().unwrap().push(e.breaker.to_string());
        }
    })
    .detach();

    let warnings = r
        .reconfigure_family(CircuitBreakerConfig {
            minimum_calls: 3,
            ..family()
        })
        .unwrap();
    assert!(warnings.is_empty(), "{warnings:?}");
    assert_eq!(plain.config().minimum_calls, 3);
    assert_eq!(plain.name(), "inventory:plain", "names stay");
    assert_eq!(
        overflow.config().minimum_calls,
        3,
        "the overflow breaker follows the family"
    );
    assert_eq!(
        vip.config().minimum_calls,
        9,
        "an override keeps its own config"
    );
    assert_eq!(r.family_config().minimum_calls, 3);
    let mut changed = changes.lock().unwrap().clone();
    changed.sort();
    assert_eq!(
        changed,
        ["inventory:overflow", "inventory:plain", "inventory:third"]
    );
    // State survived: one more failure trips at the new minimum of 3.
    let _ = plain.call(|| Err::<(), _>("boom"));
    assert_eq!(plain.state(), State::Open);
    // Breakers created later get the new config.
    r.remove(&key("third"));
    assert_eq!(r.get(&key("fourth")).unwrap().config().minimum_calls, 3);

    // Refused: an invalid value or a new name, naming the field; nothing changes.
    let err = r
        .reconfigure_family(CircuitBreakerConfig {
            failure_rate_threshold: 0.0,
            ..family()
        })
        .unwrap_err();
    assert_eq!(err.field, "failure_rate_threshold");
    let err = r
        .reconfigure_family(CircuitBreakerConfig {
            name: "stock".into(),
            ..family()
        })
        .unwrap_err();
    assert_eq!(err.field, "name");
    assert!(err.to_string().contains("cannot change"), "{err}");
    assert_eq!(plain.config().minimum_calls, 3);
    assert_eq!(r.family_config().minimum_calls, 3);
    assert_eq!(r.family(), "inventory");
    assert_eq!(changes.lock().unwrap().len(), 3);
}

#[test]
fn a_late_subscriber_hears_existing_and_new_breakers_once_each() {
    let clock = ManualClock::new();
    let r = registry(&clock, config(10, OverflowPolicy::SharedOverflow));
    let before = r.get(&key("before")).unwrap();
    let seen: Seen = Arc::default();
    let (a, b) = (seen.clone(), seen.clone());
    // Two subscribers: each hears each transition once.
    let _s1 = r.subscribe(move |k, e| {
        if let EventKind::Transition(t) = &e.kind {
            a.lock().unwrap().push((k.cloned(), "first".into(), t.to));
        }
    });
    let _s2 = r.subscribe(move |k, e| {
        if let EventKind::Transition(t) = &e.kind {
            b.lock().unwrap().push((k.cloned(), "second".into(), t.to));
        }
    });
    trip(&before);
    trip(&r.get(&key("after")).unwrap());
    let mut got = seen.lock().unwrap().clone();
    got.sort();
    let open = |k: &str, who: &str| (Some(key(k)), who.to_owned(), State::Open);
    assert_eq!(
        got,
        [
            open("after", "first"),
            open("after", "second"),
            open("before", "first"),
            open("before", "second")
        ]
    );
}

#[test]
fn family_breakers_share_one_config_but_keep_their_names() {
    let registry = BreakerRegistry::<u32>::try_new(RegistryConfig::default()).unwrap();
    let a = registry.get(&1).unwrap();
    let b = registry.get(&2).unwrap();
    assert_ne!(
        a.config().name,
        b.config().name,
        "each config carries its breaker's name"
    );
    registry
        .reconfigure_family(CircuitBreakerConfig {
            minimum_calls: 42,
            ..registry.family_config()
        })
        .unwrap();
    assert_eq!(
        (a.config().minimum_calls, b.config().minimum_calls),
        (42, 42)
    );
    assert_eq!(a.config_version(), b.config_version());
    // A breaker reconfigured on its own leaves the family's settings alone.
    a.reconfigure(CircuitBreakerConfig {
        minimum_calls: 7,
        ..a.config()
    })
    .unwrap();
    assert_eq!(
        (a.config().minimum_calls, b.config().minimum_calls),
        (7, 42)
    );
    assert!(a.activity() == 0 && b.activity() == 0);
    let _ = a.call(|| Ok::<_, ()>(()));
    assert_eq!(a.activity(), 1);
}

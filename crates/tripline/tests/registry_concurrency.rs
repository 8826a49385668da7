//! The registry under threads: concurrent first lookups of a key agree on
//! one breaker, concurrent creation never exceeds `max_breakers`, and
//! eviction passes racing lookups and calls never drop an open breaker.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tripline::clock::ManualClock;
use tripline::registry::{BreakerRegistry, OverflowPolicy, RegistryConfig};
use tripline::{CircuitBreaker, CircuitBreakerConfig, State, WindowConfig};

fn config(max_breakers: usize) -> RegistryConfig {
    RegistryConfig {
        max_breakers,
        overflow: OverflowPolicy::SharedOverflow,
        idle_ttl: Some(Duration::from_secs(1)),
        breaker: CircuitBreakerConfig {
            name: "c".into(),
            window: WindowConfig::Count { size: 10 },
            minimum_calls: 5,
            ..Default::default()
        },
    }
}

#[test]
fn concurrent_first_lookups_agree_on_one_breaker_per_key() {
    let r = BreakerRegistry::<u32>::builder(config(10_000))
        .clock(ManualClock::new())
        .build()
        .unwrap();
    let seen: Vec<Vec<CircuitBreaker>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..4u32)
            .map(|t| {
                let r = &r;
                s.spawn(move || {
                    // Each thread walks the keys in its own order (a
                    // multiplier coprime to 2 000 permutes them).
                    let step = [1u32, 3, 7, 9][t as usize];
                    let mut got: Vec<(u32, CircuitBreaker)> = (0..2_000u32)
                        .map(|i| (i * step) % 2_000)
                        .map(|k| (k, r.get(&k).unwrap()))
                        .collect();
                    got.sort_by_key(|(k, _)| *k);
                    got.into_iter().map(|(_, b)| b).collect()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for (t, other) in seen.iter().enumerate().skip(1) {
        for (k, (a, b)) in seen[0].iter().zip(other).enumerate() {
            assert!(a.ptr_eq(b), "key {k}: threads 0 and {t} differ");
        }
    }
    let s = r.stats();
    assert_eq!((s.live, s.created, s.overflowed), (2_000, 2_000, 0));
}

#[test]
fn concurrent_creation_never_exceeds_max_breakers() {
    const MAX: usize = 100;
    let r = BreakerRegistry::<u32>::builder(config(MAX))
        .clock(ManualClock::new())
        .build()
        .unwrap();
    let done = AtomicBool::new(false);
    let max_seen = std::thread::scope(|s| {
        let watcher = s.spawn(|| {
            let mut max_seen = 0;
            while !done.load(Ordering::Acquire) {
                max_seen = max_seen.max(r.len()).max(r.stats().live);
                std::hint::spin_loop();
            }
            max_seen
        });
        let workers: Vec<_> = (0..3u32)
            .map(|t| {
                let r = &r;
                s.spawn(move || {
                    for i in 0..2_000u32 {
                        let b = r.get(&(t * 1_000_000 + i)).unwrap();
                        let _ = b.call(|| Ok::<_, ()>(()));
                        if i % 50 == 0 {
                            r.remove(&(t * 1_000_000 + i / 2));
                        }
                    }
                })
            })
            .collect();
        for w in workers {
            w.join().unwrap();
        }
        done.store(true, Ordering::Release);
        watcher.join().unwrap()
    });
    assert!(max_seen <= MAX, "saw {max_seen} breakers");
    let s = r.stats();
    assert!(s.live <= MAX);
    assert_eq!(s.live as u64, s.created - s.removed);
    assert_eq!(
        s.created + s.overflowed,
        6_000,
        "every lookup got its own or the overflow breaker"
    );
}

#[test]
fn eviction_racing_lookups_never_drops_an_open_breaker() {
    let clock = ManualClock::new();
    let r = BreakerRegistry::<u32>::builder(config(1_000))
        .clock(clock.clone())
        .build()
        .unwrap();
    let done = AtomicBool::new(false);
    std::thread::scope(|s| {
        s.spawn(|| {
            while !done.load(Ordering::Acquire) {
                clock.advance(Duration::from_millis(700));
                r.evict_idle();
            }
        });
        let workers: Vec<_> = (0..2u32)
            .map(|t| {
                let r = &r;
                s.spawn(move || {
                    for round in 0..300u32 {
                        for k in 0..20u32 {
                            let key = t * 100 + k;
                            let b = r.get(&key).unwrap();
                            if k < 5 {
                                // Keys 0..5 of each thread fail: they trip.
                                let _ = b.call(|| Err::<(), _>(()));
                            } else if round % 7 == 0 {
                                let _ = b.call(|| Ok::<_, ()>(()));
                            }
                        }
                    }
                })
            })
            .collect();
        for w in workers {
            w.join().unwrap();
        }
        done.store(true, Ordering::Release);
    });
    // However many passes raced the workers, two more after they stop
    // evict everything idle and Closed.
    for _ in 0..2 {
        clock.advance(Duration::from_secs(2));
        r.evict_idle();
    }
    // Whatever the interleaving, every breaker that left the registry was
    // Closed; the failing keys hold open (or half-open) breakers now.
    for t in 0..2 {
        for k in 0..5 {
            let b = r
                .peek(&(t * 100 + k))
                .expect("a tripped breaker is never evicted");
            assert_ne!(b.state(), State::Closed, "key {k} of thread {t}");
        }
    }
    let s = r.stats();
    assert!(s.evicted >= 30, "the passes did evict idle breakers: {s:?}");
    assert_eq!(s.by_state.closed, 0, "{s:?}");
    assert_eq!(s.live as u64, s.created - s.evicted);
}

#[test]
fn a_subscription_racing_creations_hears_every_breaker_exactly_once() {
    use std::sync::Mutex;
    use tripline::EventKind;
    for _ in 0..20 {
        let r = BreakerRegistry::<u32>::builder(config(10_000))
            .clock(ManualClock::new())
            .build()
            .unwrap();
        let heard = std::sync::Arc::new(Mutex::new(Vec::new()));
        let sink = heard.clone();
        std::thread::scope(|s| {
            let creators: Vec<_> = (0..2u32)
                .map(|t| {
                    let r = &r;
                    s.spawn(move || {
                        for i in 0..200u32 {
                            r.get(&(t * 1_000 + i)).unwrap();
                        }
                    })
                })
                .collect();
            r.subscribe(move |k, e| {
                if let EventKind::Transition(_) = &e.kind {
                    sink.lock().unwrap().push(*k.unwrap());
                }
            })
            .detach();
            for c in creators {
                c.join().unwrap();
            }
        });
        for (k, b) in r.metrics() {
            let breaker = r.peek(&k).unwrap();
            assert_eq!(b.name, breaker.name());
            breaker.force_open();
        }
        let mut heard = heard.lock().unwrap().clone();
        heard.sort_unstable();
        let expected: Vec<u32> = (0..2u32)
            .flat_map(|t| (0..200u32).map(move |i| t * 1_000 + i))
            .collect();
        assert_eq!(heard, expected, "each breaker heard once");
    }
}

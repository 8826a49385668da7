//! Property tests: whatever the sequence of lookups, calls, removals,
//! operator actions and eviction passes, the registry never holds more
//! than `max_breakers`, an existing key always gets its own breaker back,
//! a full registry follows its overflow policy, and an eviction pass never
//! drops a breaker that is not `Closed` (nor one that saw a call within
//! `idle_ttl`).
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly

use std::collections::HashMap;
use std::time::Duration;

use proptest::prelude::*;
use tripline::clock::ManualClock;
use tripline::registry::{BreakerRegistry, OverflowPolicy, RegistryConfig, RegistryError};
use tripline::{CircuitBreaker, CircuitBreakerConfig, State, WindowConfig};

#[derive(Clone, Debug)]
enum Op {
    Get(u8),
    Fail(u8),
    Succeed(u8),
    Remove(u8),
    ForceOpen(u8),
    Reset(u8),
    Evict,
    Advance(u64),
}

fn arb_op() -> impl Strategy<Value = Op> {
    let key = 0u8..12;
    prop_oneof![
        4 => key.clone().prop_map(Op::Get),
        3 => key.clone().prop_map(Op::Fail),
        2 => key.clone().prop_map(Op::Succeed),
        1 => key.clone().prop_map(Op::Remove),
        1 => key.clone().prop_map(Op::ForceOpen),
        1 => key.prop_map(Op::Reset),
        2 => Just(Op::Evict),
        2 => (1u64..90).prop_map(Op::Advance),
    ]
}

const TTL: Duration = Duration::from_secs(60);

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn bounds_identity_overflow_and_eviction_hold(
        max in 1usize..6,
        reject in any::<bool>(),
        ops in prop::collection::vec(arb_op(), 1..120),
    ) {
        let clock = ManualClock::new();
        let overflow = if reject { OverflowPolicy::Reject } else { OverflowPolicy::SharedOverflow };
        let r = BreakerRegistry::<u8>::builder(RegistryConfig {
            max_breakers: max,
            overflow,
            idle_ttl: Some(TTL),
            breaker: CircuitBreakerConfig {
                name: "p".into(),
                window: WindowConfig::Count { size: 4 },
                minimum_calls: 2,
                ..Default::default()
            },
        })
        .clock(clock.clone())
        .build()
        .unwrap();
        // The model: the breaker each key holds, and when it last saw a call.
        let mut held: HashMap<u8, (CircuitBreaker, Duration)> = HashMap::new();
        let now = |c: &ManualClock| {
            use tripline::Clock;
            c.now().as_duration()
        };
        for op in ops {
            match op {
                Op::Get(k) | Op::Fail(k) | Op::Succeed(k) | Op::ForceOpen(k) | Op::Reset(k) => {
                    let was_full = r.len() == max;
                    match r.get(&k) {
                        Ok(b) if b.name() == "p:overflow" => {
                            prop_assert!(!reject && was_full && !held.contains_key(&k));
                        }
                        Ok(b) => {
                            if let Some((old, _)) = held.get(&k) {
                                prop_assert!(old.ptr_eq(&b), "key {} got another breaker", k);
                            } else {
                                prop_assert!(!was_full);
                                held.insert(k, (b.clone(), now(&clock)));
                            }
                            let active = &mut held.get_mut(&k).unwrap().1;
                            match op {
                                Op::Fail(_) => { let _ = b.call(|| Err::<(), _>(())); *active = now(&clock); }
                                Op::Succeed(_) => { let _ = b.call(|| Ok::<_, ()>(())); *active = now(&clock); }
                                Op::ForceOpen(_) => b.force_open(),
                                Op::Reset(_) => b.reset(),
                                _ => {}
                            }
                        }
                        Err(RegistryError::Full { max_breakers }) => {
                            prop_assert!(reject && was_full && max_breakers == max);
                        }
                        Err(e) => prop_assert!(false, "{e}"),
                    }
                }
                Op::Remove(k) => {
                    let removed = r.remove(&k);
                    prop_assert_eq!(removed.is_some(), held.remove(&k).is_some());
                }
                Op::Evict => {
                    let before: Vec<(u8, State)> =
                        held.iter().map(|(k, (b, _))| (*k, b.state())).collect();
                    let evicted = r.evict_idle();
                    let mut gone = 0;
                    for (k, state) in before {
                        if r.peek(&k).is_none() {
                            gone += 1;
                            let (_, active) = held.remove(&k).unwrap();
                            prop_assert_eq!(state, State::Closed, "evicted a {:?} breaker", state);
                            prop_assert!(now(&clock) - active >= TTL, "evicted a breaker used {:?} ago", now(&clock) - active);
                        }
                    }
                    prop_assert_eq!(evicted, gone);
                }
                Op::Advance(s) => { clock.advance(Duration::from_secs(s)); }
            }
            prop_assert!(r.len() <= max);
            prop_assert_eq!(r.len(), held.len());
            let stats = r.stats();
            prop_assert!(stats.live <= max);
            prop_assert_eq!(stats.created - stats.evicted - stats.removed, held.len() as u64);
        }
    }
}

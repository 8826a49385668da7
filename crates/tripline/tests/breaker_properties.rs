//! Property tests: the windows agree with a naive model of the outcomes
//! they hold, and half-open never admits more probes than its quota.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly

use std::collections::VecDeque;
use std::time::Duration;

use proptest::prelude::*;
use tripline::clock::ManualClock;
use tripline::{
    CircuitBreaker, CircuitBreakerConfig, HalfOpenPolicy, Outcome, Permit, State, WindowConfig,
};

const SLOW_MS: u64 = 100;

/// (failure, slow) of one recorded call.
type Rec = (bool, bool);

fn arb_call() -> impl Strategy<Value = (Outcome, u64)> {
    (
        prop_oneof![
            4 => Just(Outcome::Success),
            3 => Just(Outcome::Failure),
            1 => Just(Outcome::Ignored)
        ],
        prop_oneof![
            Just(0u64),
            Just(SLOW_MS - 1),
            Just(SLOW_MS),
            Just(5 * SLOW_MS)
        ],
    )
}

fn disabled_breaker(window: WindowConfig, clock: &ManualClock) -> CircuitBreaker {
    let b = CircuitBreaker::builder()
        .config(CircuitBreakerConfig {
            window,
            slow_call_duration: Some(Duration::from_millis(SLOW_MS)),
            ..Default::default()
        })
        .clock(clock.clone())
        .build()
        .unwrap();
    // Disabled: records every call, never trips, so the window only slides.
    b.disable();
    b
}

fn totals(recs: impl Iterator<Item = Rec>) -> (u64, u64, u64, u64) {
    recs.fold((0, 0, 0, 0), |(c, f, s, sf), (fail, slow)| {
        (
            c + 1,
            f + u64::from(fail),
            s + u64::from(slow),
            sf + u64::from(fail && slow),
        )
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn count_window_matches_the_last_n_outcomes(
        size in 1u32..40,
        calls in prop::collection::vec(arb_call(), 0..300),
    ) {
        let clock = ManualClock::new();
        let b = disabled_breaker(WindowConfig::Count { size }, &clock);
        let mut model: VecDeque<Rec> = VecDeque::new();
        for (outcome, ms) in calls {
            b.try_acquire().unwrap().record(outcome, Duration::from_millis(ms));
            if outcome != Outcome::Ignored {
                model.push_back((outcome == Outcome::Failure, ms >= SLOW_MS));
                if model.len() > size as usize {
                    model.pop_front();
                }
            }
            let w = b.window();
            prop_assert_eq!(
                (w.calls, w.failures, w.slow, w.slow_failures),
                totals(model.iter().copied())
            );
        }
    }

    #[test]
    fn time_window_matches_the_live_buckets(
        buckets in 1u32..12,
        length_s in 1u64..30,
        steps in prop::collection::vec((0u64..3_000, arb_call()), 0..200),
    ) {
        let clock = ManualClock::new();
        let length = Duration::from_secs(length_s);
        let b = disabled_breaker(WindowConfig::Time { length, buckets }, &clock);
        let width = length.as_nanos() as u64 / u64::from(buckets);
        let mut model: Vec<(u64, Rec)> = Vec::new();
        for (advance_ms, (outcome, ms)) in steps {
            let now = clock.advance(Duration::from_millis(advance_ms)).as_nanos();
            b.try_acquire().unwrap().record(outcome, Duration::from_millis(ms));
            if outcome != Outcome::Ignored {
                model.push((now / width, (outcome == Outcome::Failure, ms >= SLOW_MS)));
            }
            let epoch = now / width;
            let live = model
                .iter()
                .filter(|(e, _)| e + u64::from(buckets) > epoch)
                .map(|(_, r)| *r);
            let w = b.window();
            prop_assert_eq!((w.calls, w.failures, w.slow, w.slow_failures), totals(live));
        }
    }

    #[test]
    fn half_open_never_exceeds_its_quota(
        consecutive in any::<bool>(),
        quota in 1u32..6,
        ops in prop::collection::vec(0u8..5, 1..120),
    ) {
        let clock = ManualClock::new();
        let half_open = if consecutive {
            HalfOpenPolicy::Consecutive { successes: quota }
        } else {
            HalfOpenPolicy::Permits { calls: quota, failure_rate_threshold: 0.5 }
        };
        let b = CircuitBreaker::builder()
            .config(CircuitBreakerConfig {
                window: WindowConfig::Count { size: 2 },
                minimum_calls: 1,
                half_open,
                max_half_open_duration: None,
                ..Default::default()
            })
            .clock(clock.clone())
            .build()
            .unwrap();
        b.try_acquire().unwrap().record(Outcome::Failure, Duration::ZERO);
        let mut held: Vec<Permit<'_>> = Vec::new();
        // Probes of the current round that finished with a verdict;
        // cancelled ones return their slot (cancellation is not evidence).
        let mut judged_this_round = 0usize;
        let mut generation = None;
        for op in ops {
            if b.state() == State::Open {
                clock.advance(Duration::from_secs(5));
            }
            match op {
                0 | 1 => {
                    if let Ok(p) = b.try_acquire() {
                        if p.is_probe() && generation != Some(p.generation()) {
                            generation = Some(p.generation());
                            judged_this_round = 0;
                        }
                        held.push(p);
                    }
                }
                2 | 3 => {
                    if let Some(p) = held.pop() {
                        if p.is_probe() && Some(p.generation()) == generation {
                            judged_this_round += 1;
                        }
                        let outcome = if op == 2 { Outcome::Success } else { Outcome::Failure };
                        p.record(outcome, Duration::ZERO);
                    }
                }
                _ => {
                    held.pop();
                }
            }
            let in_flight = held.iter().filter(|p| p.is_probe() && Some(p.generation()) == generation).count();
            if consecutive {
                prop_assert!(in_flight <= 1, "consecutive admits one probe at a time");
            }
            prop_assert!(
                in_flight + judged_this_round <= quota as usize,
                "{in_flight} in flight + {judged_this_round} judged > quota {quota}"
            );
            prop_assert_eq!(
                b.metrics().probes_in_flight,
                if b.state() == State::HalfOpen { in_flight as u64 } else { 0 }
            );
        }
    }
}

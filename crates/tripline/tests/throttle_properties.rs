//! Property tests: the throttle's rejection probability is the SRE formula
//! over a naive model of the window, capped, and zero below the minimum
//! request rate; the shed requests never show up as accepts.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly

use std::time::Duration;

use proptest::prelude::*;
use tripline::clock::{Clock, ManualClock};
use tripline::throttle::{AdaptiveThrottle, AdaptiveThrottleConfig, ThrottleWindow};

/// One step of a run: what happens to the next request, then how far the
/// clock moves.
#[derive(Clone, Copy, Debug)]
enum Step {
    Accepted,
    RejectedByBackend,
    Dropped,
}

fn arb_step() -> impl Strategy<Value = (Step, u64)> {
    (
        prop_oneof![
            3 => Just(Step::Accepted),
            4 => Just(Step::RejectedByBackend),
            1 => Just(Step::Dropped),
        ],
        prop_oneof![4 => Just(0u64), 2 => 1u64..400, 1 => 400u64..5_000],
    )
}

fn arb_config() -> impl Strategy<Value = AdaptiveThrottleConfig> {
    (
        1.0f64..4.0,
        0.0f64..=1.0,
        0.0f64..20.0,
        1u64..=20,
        1u32..=12,
    )
        .prop_map(|(k, cap, min_rps, secs, buckets)| AdaptiveThrottleConfig {
            window: ThrottleWindow {
                length: Duration::from_secs(secs),
                buckets,
            },
            k,
            max_rejection_probability: cap,
            minimum_requests_per_second: min_rps,
            ..Default::default()
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn probability_is_the_capped_formula_over_the_window(
        config in arb_config(),
        steps in prop::collection::vec(arb_step(), 1..400),
    ) {
        let clock = ManualClock::new();
        let t = AdaptiveThrottle::builder()
            .config(config.clone())
            .clock(clock.clone())
            .seed(3)
            .build()
            .unwrap();
        let width = config.window.length.as_nanos() as u64 / u64::from(config.window.buckets);
        // The naive model: (epoch, counts as request, counts as accept).
        let mut log: Vec<(u64, bool, bool)> = Vec::new();
        for (step, advance_ms) in steps {
            let epoch = clock.now().as_nanos() / width;
            match t.try_acquire() {
                Err(e) => {
                    prop_assert!(e.rejection_probability > 0.0);
                    prop_assert!(e.rejection_probability <= config.max_rejection_probability);
                    log.push((epoch, true, false));
                }
                Ok(p) => match step {
                    Step::Accepted => { p.accepted(); log.push((epoch, true, true)); }
                    Step::RejectedByBackend => { p.rejected_by_backend(); log.push((epoch, true, false)); }
                    Step::Dropped => drop(p),
                },
            }
            clock.advance(Duration::from_millis(advance_ms));

            let now = clock.now().as_nanos() / width;
            let live = |e: u64| e + u64::from(config.window.buckets) > now;
            let requests = log.iter().filter(|(e, r, _)| *r && live(*e)).count() as f64;
            let accepts = log.iter().filter(|(e, _, a)| *a && live(*e)).count() as f64;
            let min = config.minimum_requests_per_second * config.window.length.as_secs_f64();
            let expected = if requests < min {
                0.0
            } else {
                ((requests - config.k * accepts) / (requests + 1.0))
                    .clamp(0.0, config.max_rejection_probability)
            };
            let p = t.rejection_probability();
            prop_assert!((p - expected).abs() < 1e-9, "p = {p}, expected {expected}");
            prop_assert!((0.0..=config.max_rejection_probability).contains(&p));
            let m = t.metrics();
            prop_assert_eq!(m.window.requests, requests as u64);
            prop_assert_eq!(m.window.accepts, accepts as u64);
            prop_assert_eq!(m.totals.accepts, log.iter().filter(|(_, _, a)| *a).count() as u64);
            prop_assert_eq!(m.active, requests >= min);
        }
    }
}

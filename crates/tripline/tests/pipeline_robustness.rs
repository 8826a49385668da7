//! No policy config and no sequence of outcomes panics or hangs the sync
//! pipeline: hostile retry, budget, timeout and bulkhead configs (zero,
//! negative, NaN, infinite, absurd durations) are refused with an error or
//! built; a built pipeline survives any script of attempt outcomes,
//! latencies and clock jumps, never makes more attempts than configured,
//! and never reports success for a call whose last attempt failed. The
//! deadline header parsers take any text.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly

mod support {
    pub mod hostile;
}

use std::cell::Cell;
use std::time::Duration;

use proptest::prelude::*;
use support::hostile::pick;
use tripline::budget::{RetryBudget, RetryBudgetConfig};
use tripline::bulkhead::{Bulkhead, BulkheadConfig};
use tripline::clock::ManualClock;
use tripline::pipeline::Pipeline;
use tripline::retry::RetryConfig;
use tripline::timeout::{TimeoutConfig, parse_grpc_timeout, parse_timeout_ms};
use tripline::{CircuitBreaker, CircuitBreakerConfig, WindowConfig};

const HOSTILE_DURATIONS: &[&str] = &["\"0s\"", "\"1ns\"", "\"100000000h\"", "\"-1s\"", "3"];

fn duration(h: bool) -> BoxedStrategy<&'static str> {
    pick(
        h,
        &["\"1ms\"", "\"50ms\"", "\"1s\"", "\"10s\""],
        HOSTILE_DURATIONS,
    )
}

fn ratio(h: bool) -> BoxedStrategy<&'static str> {
    pick(
        h,
        &["0.0", "0.1", "0.5", "2.0"],
        &["-0.5", "nan", "inf", "1e300"],
    )
}

fn multiplier(h: bool) -> BoxedStrategy<&'static str> {
    pick(
        h,
        &["1.0", "1.5", "2.0"],
        &["0.0", "0.5", "-1.0", "nan", "inf"],
    )
}

fn window(h: bool) -> BoxedStrategy<&'static str> {
    pick(h, &["\"1s\"", "\"10s\"", "\"60s\""], HOSTILE_DURATIONS)
}

fn count(h: bool) -> BoxedStrategy<&'static str> {
    pick(h, &["1", "2", "3", "5"], &["0", "-1", "101", "4294967295"])
}

fn retry(h: bool) -> impl Strategy<Value = String> {
    let backoff = prop_oneof![
        Just("{ kind = \"none\" }".to_owned()),
        duration(h).prop_map(|d| format!("{{ kind = \"constant\", delay = {d} }}")),
        (duration(h), multiplier(h), duration(h)).prop_map(move |(i, m, x)| {
            // A sane config has initial ≤ max.
            let (i, x) = if h { (i, x) } else { ("\"50ms\"", "\"10s\"") };
            format!("{{ kind = \"exponential\", initial = {i}, multiplier = {m}, max = {x} }}")
        }),
        (duration(h), duration(h)).prop_map(move |(b, x)| {
            let (b, x) = if h { (b, x) } else { ("\"50ms\"", "\"1s\"") };
            format!("{{ kind = \"decorrelated_jitter\", base = {b}, max = {x} }}")
        }),
    ];
    (count(h), backoff, any::<bool>(), any::<bool>()).prop_map(|(n, b, idem, on_timeout)| {
        format!(
            "max_attempts = {n}\nbackoff = {b}\nidempotent = {idem}\nretry_on_timeout = {on_timeout}\n"
        )
    })
}

fn budget(h: bool) -> impl Strategy<Value = String> {
    (window(h), count(h), ratio(h), ratio(h)).prop_map(|(w, b, r, m)| {
        format!("window = {w}\nbuckets = {b}\nratio = {r}\nmin_retries_per_second = {m}\n")
    })
}

fn timeouts(h: bool) -> impl Strategy<Value = String> {
    (
        prop::option::of(duration(h)),
        prop::option::of(duration(h)),
        duration(h),
    )
        .prop_map(|(per, overall, floor)| {
            let mut t = format!("min_remaining = {floor}\n");
            if let Some(p) = per {
                t += &format!("per_attempt = {p}\n");
            }
            if let Some(o) = overall {
                t += &format!("overall = {o}\n");
            }
            t
        })
}

fn bulkhead(h: bool) -> impl Strategy<Value = String> {
    (count(h), count(h), duration(h))
        .prop_map(|(c, q, w)| format!("max_concurrent = {c}\nmax_queue = {q}\nmax_wait = {w}\n"))
}

/// The texts of the four configs, each present or not.
type Configs = (String, Option<String>, Option<String>, Option<String>);

fn configs(h: bool) -> impl Strategy<Value = Configs> {
    (
        retry(h),
        prop::option::of(budget(h)),
        prop::option::of(timeouts(h)),
        prop::option::of(bulkhead(h)),
    )
}

/// What one attempt does: how long it takes (ms) and whether it succeeds.
type Step = (u64, bool);

fn pipeline(
    clock: &ManualClock,
    (retry, budget, timeouts, bulkhead): &Configs,
) -> Result<Pipeline, String> {
    let breaker = CircuitBreaker::builder()
        .config(CircuitBreakerConfig {
            window: WindowConfig::Count { size: 10 },
            minimum_calls: 5,
            ..Default::default()
        })
        .clock(clock.clone())
        .build()
        .unwrap();
    let retry: RetryConfig = toml::from_str(retry).map_err(|e| e.to_string())?;
    let mut b = Pipeline::builder()
        .circuit_breaker(breaker)
        .retry(retry)
        .clock(clock.clone())
        .seed(3);
    if let Some(t) = budget {
        let config: RetryBudgetConfig = toml::from_str(t).map_err(|e| e.to_string())?;
        b = b.budget(RetryBudget::with_clock(config, clock.clone()).map_err(|e| e.to_string())?);
    }
    if let Some(t) = timeouts {
        let config: TimeoutConfig = toml::from_str(t).map_err(|e| e.to_string())?;
        b = b.timeouts(config);
    }
    if let Some(t) = bulkhead {
        let config: BulkheadConfig = toml::from_str(t).map_err(|e| e.to_string())?;
        b = b.bulkhead(Bulkhead::try_new(config).map_err(|e| e.to_string())?);
    }
    b.build().map_err(|e| e.to_string())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn no_policy_config_and_no_outcome_script_panics(
        configs in prop_oneof![configs(false), configs(true)],
        calls in prop::collection::vec(
            (prop::collection::vec((0..3_000u64, any::<bool>()), 1..6), 0..20_000u64),
            0..40,
        ),
    ) {
        let clock = ManualClock::new();
        let built = pipeline(&clock, &configs);
        if std::env::var_os("ROBUSTNESS_STATS").is_some() {
            match &built {
                Ok(_) => eprintln!("BUILT"),
                Err(e) => eprintln!("REFUSED {}", e.lines().next().unwrap_or_default()),
            }
        }
        let Ok(p) = built else {
            return Ok(());
        };
        let max_attempts = toml::from_str::<RetryConfig>(&configs.0).unwrap().max_attempts;
        for (script, pause) in &calls {
            let made = Cell::new(0usize);
            let last_ok = Cell::new(false);
            let result = p.call(|_| {
                let (latency, ok): Step = script[made.get() % script.len()];
                made.set(made.get() + 1);
                clock.advance(Duration::from_millis(latency));
                last_ok.set(ok);
                if ok { Ok(()) } else { Err("down") }
            });
            prop_assert!(made.get() <= max_attempts as usize, "{} attempts", made.get());
            if result.is_ok() {
                prop_assert!(last_ok.get(), "success reported for a failed attempt");
            }
            clock.advance(Duration::from_millis(*pause));
        }
    }

    #[test]
    fn deadline_headers_take_any_text(text in ".{0,24}") {
        let _ = parse_timeout_ms(&text);
        let _ = parse_grpc_timeout(&text);
    }
}

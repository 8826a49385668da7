//! The breaker agrees with a plain sequential model of its documented
//! behaviour (`support/breaker_model.rs`) after every step of random
//! operation sequences on one thread: calls with every outcome and
//! latency, probes held and finished late or dropped, clock advances,
//! operator actions, and live reconfigurations that reshape the window and
//! change the half-open policy. State, generation, window, cumulative
//! counts, the open deadline and `probe_due` must all match.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly

mod support {
    pub mod breaker_model;
}

use std::time::Duration;

use proptest::prelude::*;
use support::breaker_model::{Model, OPEN, Params, SLOW, Ticket};
use tripline::breaker::OpenDuration;
use tripline::clock::{Clock, ManualClock};
use tripline::{
    CircuitBreaker, CircuitBreakerConfig, HalfOpenPolicy, Outcome, OwnedPermit, State, WindowConfig,
};

#[derive(Clone, Debug)]
enum Op {
    /// A call recorded at once: outcome (0 success, 1 failure, 2 ignored)
    /// and latency.
    Call(u8, Duration),
    /// A call admitted and kept open.
    Hold,
    /// The `i`-th held call finishes.
    Finish(usize, u8, Duration),
    /// The `i`-th held call is dropped unrecorded.
    Cancel(usize),
    Advance(Duration),
    ForceOpen,
    Disable,
    MetricsOnly,
    Reset,
    OpenFor(Duration),
    Reconfigure(Params),
}

fn rate() -> impl Strategy<Value = f64> {
    (1u32..=6, 1u32..=6).prop_map(|(a, b)| f64::from(a.min(b)) / f64::from(a.max(b)))
}

fn policy() -> impl Strategy<Value = HalfOpenPolicy> {
    prop_oneof![
        (1u32..=3).prop_map(|successes| HalfOpenPolicy::Consecutive { successes }),
        (1u32..=4, rate()).prop_map(|(calls, t)| HalfOpenPolicy::Permits {
            calls,
            failure_rate_threshold: t,
        }),
        (prop::bool::ANY, rate(), 1u32..=2).prop_map(|(two, t, min)| HalfOpenPolicy::Ramp {
            steps: if two { vec![0.5, 1.0] } else { vec![1.0] },
            step_duration: Duration::from_secs(2),
            failure_rate_threshold: t,
            minimum_calls_per_step: min,
        }),
    ]
}

fn params() -> impl Strategy<Value = Params> {
    (
        prop::sample::select(vec![3usize, 5, 8]),
        1u64..=6,
        rate(),
        rate(),
        policy(),
        prop::option::of(Just(Duration::from_secs(8))),
        prop::option::of(Just(Duration::from_secs(3))),
    )
        .prop_map(
            |(size, minimum_calls, failure_rate, slow_rate, half_open, max, min)| Params {
                size,
                minimum_calls,
                failure_rate,
                slow_rate,
                half_open,
                max_half_open: max,
                min_state: min,
            },
        )
}

fn latency() -> impl Strategy<Value = Duration> {
    prop::sample::select(vec![1u64, 120, 200]).prop_map(Duration::from_millis)
}

/// Weighted towards what reaches half-open: calls and holds, advances past
/// the open duration, `open_for`; operator states that never probe are
/// rarer.
fn op() -> impl Strategy<Value = Op> {
    let advance = prop::sample::select(vec![0u64, 100, 500, 1_000, 2_000, 3_000, 5_000, 9_000]);
    prop_oneof![
        10 => (0u8..3, latency()).prop_map(|(o, d)| Op::Call(o, d)),
        3 => Just(Op::Hold),
        3 => (0usize..8, 0u8..3, latency()).prop_map(|(i, o, d)| Op::Finish(i, o, d)),
        1 => (0usize..8).prop_map(Op::Cancel),
        6 => advance.prop_map(|ms| Op::Advance(Duration::from_millis(ms))),
        2 => (1u64..10).prop_map(|s| Op::OpenFor(Duration::from_secs(s))),
        1 => prop_oneof![Just(Op::ForceOpen), Just(Op::Disable), Just(Op::MetricsOnly)],
        1 => Just(Op::Reset),
        1 => params().prop_map(Op::Reconfigure),
    ]
}

fn config(p: &Params) -> CircuitBreakerConfig {
    CircuitBreakerConfig {
        name: "model".into(),
        window: WindowConfig::Count {
            size: p.size as u32,
        },
        minimum_calls: p.minimum_calls as u32,
        failure_rate_threshold: p.failure_rate,
        slow_call_duration: Some(SLOW),
        slow_call_rate_threshold: p.slow_rate,
        open_duration: OpenDuration::Fixed(OPEN),
        half_open: p.half_open.clone(),
        max_half_open_duration: p.max_half_open,
        min_state_duration: p.min_state,
        ..Default::default()
    }
}

fn outcome(o: u8) -> (Outcome, Option<bool>) {
    match o {
        0 => (Outcome::Success, Some(false)),
        1 => (Outcome::Failure, Some(true)),
        _ => (Outcome::Ignored, None),
    }
}

/// Compares everything the model predicts with what the breaker reports.
fn agree(b: &CircuitBreaker, m: &Model, now: Duration, step: usize) -> Result<(), TestCaseError> {
    let real = b.metrics();
    let at = format!("after step {step}: {real:?}\nmodel: {m:?}");
    prop_assert_eq!(real.state, m.state, "state {}", at);
    prop_assert_eq!(real.generation, m.generation, "generation {}", at);
    let w = (real.window.calls, real.window.failures, real.window.slow);
    prop_assert_eq!(w, m.window(), "window {}", at);
    let c = &real.calls;
    let counts = (
        c.successful,
        c.failed,
        c.ignored,
        c.rejected,
        c.cancelled,
        c.late,
        c.probes_succeeded,
        c.probes_failed,
    );
    let k = &m.counts;
    let expected = (
        k.successful,
        k.failed,
        k.ignored,
        k.rejected,
        k.cancelled,
        k.late,
        k.probes_succeeded,
        k.probes_failed,
    );
    prop_assert_eq!(counts, expected, "counts {}", at);
    prop_assert_eq!(real.probe_due, m.probe_due(now), "probe_due {}", at);
    prop_assert_eq!(
        real.state_since.as_duration(),
        m.entered_at,
        "state_since {}",
        at
    );
    if m.state == State::Open {
        let until = real.open_until.map(|t| t.as_duration());
        prop_assert_eq!(until, Some(m.open_until), "open_until {}", at);
    }
    Ok(())
}

fn ticket(p: &OwnedPermit) -> Ticket {
    Ticket {
        probe: p.is_probe(),
        generation: p.generation(),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(600))]

    #[test]
    fn the_breaker_agrees_with_the_reference_model(
        first in params(),
        ops in prop::collection::vec(op(), 1..80),
    ) {
        let clock = ManualClock::new();
        let b = CircuitBreaker::builder()
            .config(config(&first))
            .clock(clock.clone())
            .build()
            .unwrap();
        let mut model = Model::new(first.clone());
        let mut held: Vec<(OwnedPermit, Ticket)> = Vec::new();
        for (step, op) in ops.into_iter().enumerate() {
            let now = clock.now().as_duration();
            let op = match op {
                Op::Finish(_, o, d) if held.is_empty() => Op::Call(o, d),
                other => other,
            };
            match op {
                Op::Call(o, d) => {
                    let (real, expected) = (b.try_acquire_owned().ok(), model.acquire(now));
                    prop_assert_eq!(real.as_ref().map(ticket), expected, "admission at step {}", step);
                    if let (Some(p), Some(t)) = (real, expected) {
                        let (o, modelled) = outcome(o);
                        p.record(o, d);
                        model.record(t, modelled, d, now);
                    }
                }
                Op::Hold => {
                    let (real, expected) = (b.try_acquire_owned().ok(), model.acquire(now));
                    prop_assert_eq!(real.as_ref().map(ticket), expected, "admission at step {}", step);
                    if let (Some(p), Some(t)) = (real, expected) {
                        held.push((p, t));
                    }
                }
                Op::Finish(i, o, d) => {
                    let (p, t) = held.remove(i % held.len());
                    let (o, modelled) = outcome(o);
                    p.record(o, d);
                    model.record(t, modelled, d, now);
                }
                Op::Cancel(i) => {
                    if !held.is_empty() {
                        let (p, t) = held.remove(i % held.len());
                        drop(p);
                        model.cancel(t, now);
                    }
                }
                Op::Advance(d) => {
                    clock.advance(d);
                }
                Op::ForceOpen => {
                    b.force_open();
                    model.force(State::ForcedOpen, None, now);
                }
                Op::Disable => {
                    b.disable();
                    model.force(State::Disabled, None, now);
                }
                Op::MetricsOnly => {
                    b.metrics_only();
                    model.force(State::MetricsOnly, None, now);
                }
                Op::Reset => {
                    b.reset();
                    model.force(State::Closed, None, now);
                }
                Op::OpenFor(d) => {
                    b.open_for(d);
                    model.force(State::Open, Some(now + d), now);
                }
                Op::Reconfigure(p) => {
                    b.reconfigure(config(&p)).unwrap();
                    model.reconfigure(p, now);
                }
            }
            agree(&b, &model, clock.now().as_duration(), step)?;
        }
    }
}

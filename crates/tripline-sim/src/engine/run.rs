//! One run: one breaker config, every replica, the whole scenario.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tripline::{
    CircuitBreaker, CircuitBreakerConfig, ConfigError, ConfigWarning, EventKind, ManualClock,
    Outcome, Permit, Reason, State, Subscription, Timestamp, WindowSnapshot,
};

use super::queue::Completions;
use super::{Plan, draw};
use crate::scenario::Scenario;

/// Calls by how they ended.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    /// Sent and succeeded (slow or not).
    pub succeeded: u64,
    /// Sent and failed (an error, or a timeout).
    pub failed: u64,
    /// Refused by the breaker, never sent.
    pub rejected: u64,
}

impl Counts {
    /// Calls that reached the dependency.
    pub fn sent(&self) -> u64 {
        self.succeeded + self.failed
    }

    /// Every call attempted.
    pub fn calls(&self) -> u64 {
        self.sent() + self.rejected
    }
}

/// One state change of one replica's breaker, as its event reported it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TransitionRecord {
    /// Virtual time, nanoseconds from the scenario start.
    pub at: u64,
    /// Which replica's breaker.
    pub replica: u32,
    /// State before.
    pub from: State,
    /// State after.
    pub to: State,
    /// Why, as the breaker said.
    pub reason: Reason,
    /// The window (or probe round) the decision was taken on.
    pub window: WindowSnapshot,
}

/// Everything one run observed, before attribution and summary.
#[derive(Clone, Debug)]
pub struct Trace {
    /// Every transition of every replica, in the order they happened.
    pub transitions: Vec<TransitionRecord>,
    /// Calls by attribution slot (0: before any fault; `i + 1`: fault `i`).
    pub slots: Vec<Counts>,
    /// Calls by the second they started in, all replicas together.
    pub per_second: Vec<Counts>,
    /// Calls rejected while no fault was acting on the dependency.
    pub collateral_rejected: u64,
    /// The config's validation warnings.
    pub warnings: Vec<ConfigWarning>,
}

struct InFlight<'a> {
    permit: Permit<'a>,
    elapsed: u64,
    failed: bool,
    slot: u32,
    second: u32,
}

/// Runs `config` on every replica of `scenario` (compiled as `plan`).
///
/// ```
/// use tripline::State;
/// use tripline_sim::{Plan, Scenario, engine};
///
/// let scenario = Scenario::from_toml("doc.toml", r#"
///     duration = "10s"
///     [traffic]
///     rate = 2.0
///     [[fault]]
///     name = "down"
///     start = "4s"
///     [[breaker]]
///     name = "b"
///     window = { kind = "count", size = 4 }
///     minimum_calls = 4
/// "#).unwrap();
/// let plan = Plan::new(&scenario);
/// let trace = engine::run(&scenario, &plan, &scenario.breakers[0].config).unwrap();
/// // From 4 s every call fails: at 4.5 s the window of 4 holds 2 failures,
/// // 50 %, and trips; the default 5 s later a probe at 9.5 s fails too.
/// let trip = &trace.transitions[0];
/// assert_eq!((trip.at, trip.to), (4_500_000_000, State::Open));
/// assert_eq!((trace.slots[1].failed, trace.slots[1].rejected), (3, 9));
/// ```
///
/// Each replica gets its own breaker built with
/// `.seed(scenario.seed).instance_id(replica)`, all sharing one
/// [`ManualClock`]. Fails only if the config is invalid.
pub fn run(
    scenario: &Scenario,
    plan: &Plan,
    config: &CircuitBreakerConfig,
) -> Result<Trace, ConfigError> {
    let clock = ManualClock::new();
    let replicas = scenario.traffic.replicas;
    let log: Arc<Mutex<Vec<TransitionRecord>>> = Arc::default();
    let mut breakers = Vec::with_capacity(replicas as usize);
    let mut subscriptions: Vec<Subscription> = Vec::with_capacity(replicas as usize);
    let mut warnings = Vec::new();
    for r in 0..replicas {
        let (b, w) = CircuitBreaker::builder()
            .config(config.clone())
            .clock(clock.clone())
            .seed(scenario.seed)
            .instance_id(u64::from(r))
            .build_with_warnings()?;
        if r == 0 {
            warnings = w;
        }
        let sink = log.clone();
        subscriptions.push(b.subscribe(move |e| {
            if let EventKind::Transition(t) = &e.kind {
                sink.lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .push(TransitionRecord {
                        at: e.at.as_nanos(),
                        replica: r,
                        from: t.from,
                        to: t.to,
                        reason: t.reason,
                        window: t.window,
                    });
            }
        }));
        breakers.push(b);
    }

    let mut slots = vec![Counts::default(); scenario.faults.len() + 1];
    let mut per_second = vec![Counts::default(); plan.seconds.max(1)];
    let mut collateral = 0u64;
    let settle = |e: InFlight<'_>, slots: &mut [Counts], per_second: &mut [Counts]| {
        let outcome = if e.failed {
            Outcome::Failure
        } else {
            Outcome::Success
        };
        e.permit.record(outcome, Duration::from_nanos(e.elapsed));
        let (s, p) = (
            &mut slots[e.slot as usize],
            &mut per_second[e.second as usize],
        );
        if e.failed {
            s.failed += 1;
            p.failed += 1;
        } else {
            s.succeeded += 1;
            p.succeeded += 1;
        }
    };

    let mut queue: Completions<InFlight<'_>> = Completions::new();
    let mut active: Vec<usize> = Vec::new();
    let mut next_episode = 0usize;
    let mut next_change = plan.episodes.first().map_or(u64::MAX, |e| e.from);
    let mut next_segment = 0usize;
    let mut slot = 0u32;
    let base = base_effect(plan.base_latency, plan.timeout);
    for k in 0..plan.calls {
        let t = plan.times.at(k);
        while let Some(e) = queue.pop_due(t) {
            clock.set(Timestamp::from_nanos(e.end));
            settle(e.item, &mut slots, &mut per_second);
        }
        clock.set(Timestamp::from_nanos(t));
        if k >= next_change {
            active.retain(|&i| plan.episodes[i].to > k);
            while next_episode < plan.episodes.len() && plan.episodes[next_episode].from <= k {
                if plan.episodes[next_episode].to > k {
                    active.push(next_episode);
                }
                next_episode += 1;
            }
            let next_start = plan.episodes.get(next_episode).map_or(u64::MAX, |e| e.from);
            let next_end = active.iter().map(|&i| plan.episodes[i].to).min();
            next_change = next_start.min(next_end.unwrap_or(u64::MAX));
        }
        while next_segment < plan.segments.len() && plan.segments[next_segment].1 <= k {
            slot = plan.segments[next_segment].2 as u32;
            next_segment += 1;
        }
        let second = ((t / 1_000_000_000) as usize).min(per_second.len() - 1) as u32;
        for (r, breaker) in breakers.iter().enumerate() {
            let Ok(permit) = breaker.try_acquire() else {
                slots[slot as usize].rejected += 1;
                per_second[second as usize].rejected += 1;
                collateral += u64::from(active.is_empty());
                continue;
            };
            let (failed, elapsed) = if active.is_empty() {
                base
            } else {
                effect(plan, scenario.seed, &active, k, r as u32)
            };
            let call = InFlight {
                permit,
                elapsed,
                failed,
                slot,
                second,
            };
            if elapsed == 0 {
                settle(call, &mut slots, &mut per_second);
            } else {
                queue.push(t + elapsed, call);
            }
        }
    }
    while let Some(e) = queue.pop_due(u64::MAX) {
        clock.set(Timestamp::from_nanos(e.end));
        settle(e.item, &mut slots, &mut per_second);
    }
    drop(queue);
    drop(subscriptions);
    let transitions = std::mem::take(&mut *log.lock().unwrap_or_else(PoisonError::into_inner));
    Ok(Trace {
        transitions,
        slots,
        per_second,
        collateral_rejected: collateral,
        warnings,
    })
}

/// `(failed, elapsed)` of a call no fault touches.
fn base_effect(latency: u64, timeout: Option<u64>) -> (bool, u64) {
    match timeout {
        Some(to) if latency > to => (true, to),
        _ => (false, latency),
    }
}

/// `(failed, elapsed)` of call `k` of replica `r` under the active episodes.
#[inline]
fn effect(plan: &Plan, seed: u64, active: &[usize], k: u64, r: u32) -> (bool, u64) {
    let mut failed = false;
    let mut latency: Option<u64> = None;
    for &i in active {
        let fault = plan.episodes[i].fault;
        let fx = &plan.effects[fault];
        if let Some(threshold) = fx.threshold
            && draw(seed, fault, k, r) >= threshold
        {
            continue;
        }
        failed |= fx.error;
        if let Some(l) = fx.latency {
            latency = Some(latency.map_or(l, |m: u64| m.max(l)));
        }
    }
    let (timed_out, elapsed) = base_effect(latency.unwrap_or(plan.base_latency), plan.timeout);
    (failed || timed_out, elapsed)
}

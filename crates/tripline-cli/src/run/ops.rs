//! The operations: run a command under the breaker, show it, reset it,
//! force it open. Each read–decide–write happens under the lock; the
//! command runs outside it.

use std::time::Duration;

use tripline::{CircuitBreakerConfig, State, WindowSnapshot};

use super::clock::WallClock;
use super::exec::{self, Spec};
use super::export::Exports;
use super::owner::Owner;
use super::rebuild::{self, apply, rebuild, settle};
use super::state::{Checkpoint, Operator, ProbeEvent, Verdict};
use super::store::Store;
use crate::CliError;
use crate::words::count;

/// How long a probe's lease lasts without `--timeout`.
const DEFAULT_LEASE: Duration = Duration::from_secs(3600);
/// Added to `--timeout` for the lease: the kill grace and the bookkeeping.
const LEASE_GRACE: Duration = Duration::from_secs(60);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Op {
    Run,
    Status,
    Reset,
    ForceOpen,
}

pub(crate) struct Context<'a> {
    pub(crate) name: &'a str,
    pub(crate) config: CircuitBreakerConfig,
    pub(crate) store: Store,
    pub(crate) clock: WallClock,
    pub(crate) exports: Exports,
}

/// What the run was admitted as.
enum Ticket {
    Closed { epoch: u64 },
    Probe { epoch: u64, lease: u64 },
}

pub(crate) fn run_command(
    ctx: &Context<'_>,
    spec: &Spec<'_>,
    open_exit: u8,
) -> Result<u8, CliError> {
    let started = ctx.clock.now()?;
    let ticket = {
        let lock = ctx.store.lock()?;
        let mut state = ctx.store.read(&lock);
        let before = state.clone();
        let rebuilt = rebuild(&mut state, &ctx.config, started)?;
        let ticket = match rebuilt.breaker.try_acquire_owned() {
            Err(rejected) => {
                state.counters.rejected += 1;
                settle(&mut state, &rebuilt, started, String::new);
                ctx.store
                    .write(&lock, &state, before.decision_differs(&state))?;
                drop(lock);
                ctx.exports.publish(&rebuilt.breaker, &state.counters);
                let wait = rejected
                    .retry_after()
                    .map_or_else(String::new, |d| format!("; next probe in {}", secs(d)));
                eprintln!(
                    "tripline: breaker {:?} is {}{wait}",
                    ctx.name,
                    describe_open(&state.checkpoint)
                );
                return Ok(open_exit);
            }
            Ok(permit) if permit.is_probe() => {
                let lease = state.next_lease;
                state.next_lease += 1;
                let ttl = spec.timeout.map_or(DEFAULT_LEASE, |t| t + LEASE_GRACE);
                state.log.push(ProbeEvent::Admit {
                    lease,
                    at: started,
                    pid: std::process::id(),
                    expires_at: started
                        .saturating_add(u64::try_from(ttl.as_nanos()).unwrap_or(u64::MAX)),
                    owner: Owner::current(),
                });
                drop(permit);
                Ticket::Probe {
                    epoch: state.epoch,
                    lease,
                }
            }
            Ok(permit) => {
                drop(permit);
                // Admitted freely from a round that closed just now (a
                // decision parked by `min_state_duration` came due): the
                // close is this run's to write, and the run belongs to the
                // new epoch.
                if !matches!(state.checkpoint, Checkpoint::Closed { .. }) {
                    settle(&mut state, &rebuilt, started, String::new);
                }
                Ticket::Closed { epoch: state.epoch }
            }
        };
        if state != before {
            ctx.store
                .write(&lock, &state, before.decision_differs(&state))?;
        }
        ticket
    };
    let clock = &ctx.clock;
    let ran = exec::execute(spec, || {
        let end = clock.now().unwrap_or(started);
        Duration::from_nanos(end.saturating_sub(started))
    });
    let finished = ctx.clock.now()?.max(started);
    let lock = ctx.store.lock()?;
    let mut state = ctx.store.read(&lock);
    let before = state.clone();
    let mut rebuilt = rebuild(&mut state, &ctx.config, finished)?;
    let window_before = rebuilt.breaker.window();
    let current = match ticket {
        Ticket::Closed { epoch } => {
            epoch == state.epoch && rebuilt.breaker.state() == State::Closed
        }
        Ticket::Probe { epoch, lease } => {
            epoch == state.epoch && rebuilt.leases.contains_key(&lease)
        }
    };
    if current {
        state.counters.count(ran.verdict);
        match ticket {
            Ticket::Closed { .. } => {
                if let Ok(p) = rebuilt.breaker.try_acquire_owned() {
                    apply(p, ran.verdict, ran.elapsed);
                }
            }
            Ticket::Probe { lease, .. } => {
                state.log.push(ProbeEvent::Finish {
                    lease,
                    at: finished,
                    verdict: ran.verdict,
                    elapsed_nanos: u64::try_from(ran.elapsed.as_nanos()).unwrap_or(u64::MAX),
                });
                if let Some(p) = rebuilt.leases.remove(&lease) {
                    apply(p, ran.verdict, ran.elapsed);
                }
            }
        }
    } else {
        state.counters.stale += 1;
    }
    let probe = matches!(ticket, Ticket::Probe { .. });
    settle(&mut state, &rebuilt, finished, || {
        trip_reason(probe, window_before, ran.verdict)
    });
    ctx.store
        .write(&lock, &state, before.decision_differs(&state))?;
    drop(lock);
    ctx.exports.publish(&rebuilt.breaker, &state.counters);
    Ok(ran.exit)
}

fn trip_reason(probe: bool, before: tripline::WindowSnapshot, verdict: Verdict) -> String {
    if probe {
        return "a probe failed".into();
    }
    let calls = before.calls + 1;
    let failures = before.failures + u64::from(matches!(verdict, Verdict::Failure));
    format!(
        "failure rate {:.0}% over {}",
        100.0 * failures as f64 / calls as f64,
        count(calls, "run")
    )
}

fn describe_open(c: &Checkpoint) -> String {
    match c {
        Checkpoint::Open { reason, .. } if !reason.is_empty() => format!("open ({reason})"),
        Checkpoint::ForcedOpen { .. } => {
            "forced open by an operator (tripline run --reset NAME)".into()
        }
        _ => "open".into(),
    }
}

fn secs(d: Duration) -> String {
    format!("{}s", d.as_secs() + u64::from(d.subsec_nanos() > 0))
}

/// `--status`: read-only; prints one line and the window.
pub(crate) fn status(ctx: &Context<'_>) -> Result<u8, CliError> {
    let now = ctx.clock.now()?;
    let lock = ctx.store.lock()?;
    let mut state = ctx.store.read(&lock);
    drop(lock);
    let rebuilt = rebuild(&mut state, &ctx.config, now)?;
    let b = &rebuilt.breaker;
    let w = b.window();
    let line = match b.state() {
        State::Open => {
            let left = b
                .open_until_time()
                .map_or(0, |t| t.as_nanos().saturating_sub(now));
            format!(
                "{}; next probe in {}",
                describe_open(&state.checkpoint),
                secs(Duration::from_nanos(left))
            )
        }
        State::HalfOpen => format!(
            "half-open ({} in flight)",
            count(rebuilt.leases.len() as u64, "probe")
        ),
        State::ForcedOpen => describe_open(&state.checkpoint),
        _ => describe_closed(&ctx.config, &w),
    };
    println!("breaker {:?}: {line}", ctx.name);
    println!("state file: {}", ctx.store.state_path().display());
    let c = &state.counters;
    println!(
        "runs: {} succeeded, {} failed, {} ignored, {} rejected, {} cancelled, {}, {}",
        c.succeeded,
        c.failed,
        c.ignored,
        c.rejected,
        c.cancelled,
        count(c.reclaimed, "reclaimed probe"),
        count(c.abandoned, "abandoned probe")
    );
    Ok(0)
}

/// Why a closed breaker is still closed: too few runs in the window to
/// judge, or rates below their thresholds (a 100% failure rate over too
/// few runs reads like a bug otherwise).
fn describe_closed(config: &CircuitBreakerConfig, w: &WindowSnapshot) -> String {
    let rate = format!(
        "failure rate {:.0}% over {}",
        100.0 * w.failure_rate(),
        count(w.calls, "run")
    );
    if w.calls < u64::from(config.minimum_calls) {
        format!(
            "closed ({rate}): needs {} in the window before it can trip; {} so far",
            count(u64::from(config.minimum_calls), "run"),
            w.calls
        )
    } else {
        format!(
            "closed ({rate}, below the {:.0}% threshold)",
            100.0 * config.failure_rate_threshold
        )
    }
}

/// `--reset` / `--force-open`.
pub(crate) fn operator(ctx: &Context<'_>, op: Operator) -> Result<u8, CliError> {
    let now = ctx.clock.now()?;
    let lock = ctx.store.lock()?;
    let mut state = ctx.store.read(&lock);
    let rebuilt = rebuild::rebuild(&mut state, &ctx.config, now)?;
    match op {
        Operator::Reset => rebuilt.breaker.reset(),
        Operator::ForceOpen => rebuilt.breaker.force_open(),
    }
    // An operator's move always starts a new epoch: runs in flight report
    // into the old one.
    state.checkpoint = match op {
        Operator::Reset => Checkpoint::Closed { window: None },
        Operator::ForceOpen => Checkpoint::ForcedOpen { since: now },
    };
    state.times = Some(rebuilt.breaker.state_times());
    state.epoch += 1;
    state.counters.transitions += 1;
    state.log.clear();
    ctx.store.write(&lock, &state, true)?;
    drop(lock);
    ctx.exports.publish(&rebuilt.breaker, &state.counters);
    let what = match op {
        Operator::Reset => "reset: closed, empty window",
        Operator::ForceOpen => "forced open until --reset",
    };
    eprintln!("tripline: breaker {:?} {what}", ctx.name);
    Ok(0)
}

//! The operations: run a command under the breaker, show it, reset it,
//! force it open. Each read–decide–write happens under the lock; the
//! command runs outside it.

use std::cell::Cell;
use std::time::Duration;

use tripline::{CircuitBreakerConfig, State};

use super::backend::{Backend, StoreError};
use super::clock::WallClock;
use super::exec::{self, Ran, Spec};
use super::export::Exports;
use super::rebuild::{Holders, Rebuilt, apply, rebuild, settle};
use super::state::{Checkpoint, Counters, ProbeEvent, StateFile, Verdict};
use super::store_spec::{OnStoreError, STORE_REFUSED_EXIT};
use crate::CliError;
use crate::words::count;

mod admin;

pub(crate) use admin::{operator, status};

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
    pub(crate) store: Backend,
    pub(crate) clock: WallClock,
    pub(crate) exports: Exports,
    pub(crate) on_store_error: OnStoreError,
    /// Whether this run already warned of an unreachable store (once).
    pub(crate) warned: Cell<bool>,
}

impl Context<'_> {
    /// The store could not be reached before the command: refuse, or warn
    /// once, count it, and run the command without the breaker.
    fn store_down(&self, why: &str) -> Result<(), CliError> {
        if self.on_store_error == OnStoreError::Refuse {
            return Err(CliError {
                message: format!(
                    "breaker {:?}: store unreachable ({why}); on_store_error = \"refuse\": the command was not run",
                    self.name
                ),
                status: STORE_REFUSED_EXIT,
            });
        }
        self.store_lost(why, "running the command without the breaker");
        Ok(())
    }

    /// Warns once and counts an unreachable store.
    fn store_lost(&self, why: &str, consequence: &str) {
        if !self.warned.replace(true) {
            eprintln!(
                "tripline: warning: breaker {:?}: store unreachable ({why}); {consequence}",
                self.name
            );
        }
        if let Some(n) = self.store.count_store_error() {
            self.exports.publish_store_errors(n);
        }
    }

    fn publish(&self, breaker: &tripline::CircuitBreaker, counters: &Counters) {
        self.exports
            .publish(breaker, counters, self.store.store_errors());
    }
}

/// What the run was admitted as.
#[derive(Clone, Copy)]
enum Ticket {
    Closed { epoch: u64 },
    Probe { epoch: u64, lease: u64 },
}

/// The first step's decision.
enum Admission {
    Refused {
        message: String,
        rebuilt: Rebuilt,
        counters: Counters,
    },
    Admitted(Ticket),
}

/// An operator's or `--status`'s store error: nothing to act on.
fn unreachable(name: &str, what: &str, e: StoreError) -> CliError {
    match e {
        StoreError::Fatal(e) => e,
        StoreError::Unreachable(why) => CliError {
            message: format!("breaker {name:?}: store unreachable ({why}); {what}"),
            status: STORE_REFUSED_EXIT,
        },
    }
}

pub(crate) fn run_command(
    ctx: &Context<'_>,
    spec: &Spec<'_>,
    open_exit: u8,
) -> Result<u8, CliError> {
    let started = ctx.clock.now()?;
    let owner = ctx.store.lease_owner();
    let admission = ctx.store.update(|state, holders| {
        let rebuilt = rebuild(state, &ctx.config, started, holders)?;
        let admitted = rebuilt.breaker.try_acquire_owned();
        Ok(match admitted {
            Err(rejected) => {
                state.counters.rejected += 1;
                settle(state, &rebuilt, started, String::new);
                let wait = rejected
                    .retry_after()
                    .map_or_else(String::new, |d| format!("; next probe in {}", secs(d)));
                Admission::Refused {
                    message: format!(
                        "tripline: breaker {:?} is {}{wait}",
                        ctx.name,
                        describe_open(&state.checkpoint)
                    ),
                    counters: state.counters.clone(),
                    rebuilt,
                }
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
                    owner: owner.clone(),
                });
                drop(permit);
                Admission::Admitted(Ticket::Probe {
                    epoch: state.epoch,
                    lease,
                })
            }
            Ok(permit) => {
                drop(permit);
                // Admitted freely from a round that closed just now (a
                // decision parked by `min_state_duration` came due): the
                // close is this run's to write, and the run belongs to the
                // new epoch.
                if !matches!(state.checkpoint, Checkpoint::Closed { .. }) {
                    settle(state, &rebuilt, started, String::new);
                }
                Admission::Admitted(Ticket::Closed { epoch: state.epoch })
            }
        })
    });
    let ticket = match admission {
        Ok(Admission::Refused {
            message,
            rebuilt,
            counters,
        }) => {
            ctx.publish(&rebuilt.breaker, &counters);
            eprintln!("{message}");
            return Ok(open_exit);
        }
        Ok(Admission::Admitted(ticket)) => Some(ticket),
        Err(StoreError::Fatal(e)) => return Err(e),
        Err(StoreError::Unreachable(why)) => {
            ctx.store_down(&why)?;
            None
        }
    };
    let clock = &ctx.clock;
    let ran = exec::execute(spec, || {
        let end = clock.now().unwrap_or(started);
        Duration::from_nanos(end.saturating_sub(started))
    });
    let Some(ticket) = ticket else {
        return Ok(ran.exit);
    };
    let finished = ctx.clock.now()?.max(started);
    let recorded = ctx
        .store
        .update(|state, holders| record(ctx, state, holders, ticket, &ran, finished));
    ctx.store.release();
    match recorded {
        Ok((rebuilt, counters)) => ctx.publish(&rebuilt.breaker, &counters),
        Err(StoreError::Fatal(e)) => return Err(e),
        Err(StoreError::Unreachable(why)) => {
            ctx.store_lost(&why, "this run's outcome was not recorded");
        }
    }
    Ok(ran.exit)
}

/// The second step: the outcome into the breaker, unless it moved on.
fn record(
    ctx: &Context<'_>,
    state: &mut StateFile,
    holders: Holders<'_>,
    ticket: Ticket,
    ran: &Ran,
    finished: u64,
) -> Result<(Rebuilt, Counters), CliError> {
    let mut rebuilt = rebuild(state, &ctx.config, finished, holders)?;
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
    settle(state, &rebuilt, finished, || {
        trip_reason(probe, window_before, ran.verdict)
    });
    Ok((rebuilt, state.counters.clone()))
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

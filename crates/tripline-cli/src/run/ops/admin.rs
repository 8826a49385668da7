//! The operator's side of `tripline run`: `--status`, `--reset`,
//! `--force-open`, on whichever store holds the breaker.

use std::time::Duration;

use tripline::{CircuitBreakerConfig, State, WindowSnapshot};

use super::{Context, describe_open, secs, unreachable};
use crate::CliError;
use crate::run::rebuild::{Holders, rebuild};
use crate::run::state::{Checkpoint, Operator};
use crate::words::count;

/// `--status`: read-only; prints one line and the window.
pub(crate) fn status(ctx: &Context<'_>) -> Result<u8, CliError> {
    let now = ctx.clock.now()?;
    let (mut state, live) = ctx
        .store
        .read()
        .map_err(|e| unreachable(ctx.name, "cannot show the breaker", e))?;
    let holders = live.as_ref().map_or(Holders::Processes, Holders::EtcdKeys);
    let rebuilt = rebuild(&mut state, &ctx.config, now, holders)?;
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
    println!("{}", ctx.store.location());
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
    let (rebuilt, counters) = ctx
        .store
        .update(|state, holders| {
            let rebuilt = rebuild(state, &ctx.config, now, holders)?;
            match op {
                Operator::Reset => rebuilt.breaker.reset(),
                Operator::ForceOpen => rebuilt.breaker.force_open(),
            }
            // An operator's move always starts a new epoch: runs in flight
            // report into the old one.
            state.checkpoint = match op {
                Operator::Reset => Checkpoint::Closed { window: None },
                Operator::ForceOpen => Checkpoint::ForcedOpen { since: now },
            };
            state.times = Some(rebuilt.breaker.state_times());
            state.epoch += 1;
            state.counters.transitions += 1;
            state.log.clear();
            Ok((rebuilt, state.counters.clone()))
        })
        .map_err(|e| unreachable(ctx.name, "nothing was changed", e))?;
    ctx.publish(&rebuilt.breaker, &counters);
    let what = match op {
        Operator::Reset => "reset: closed, empty window",
        Operator::ForceOpen => "forced open until --reset",
    };
    eprintln!("tripline: breaker {:?} {what}", ctx.name);
    Ok(0)
}

//! Rebuilding the breaker from the state file, and writing it back.
//!
//! The breaker runs on a `ManualClock` whose readings are wall-clock
//! nanoseconds since the Unix epoch: a checkpoint is restored at its own
//! time, the probe log is replayed at the times it was written, and the
//! clock then moves to "now". See the `run` module docs for why each
//! checkpoint is exact.

use std::collections::HashMap;
use std::time::Duration;

use tripline::breaker::Snapshot;
use tripline::clock::ManualClock;
use tripline::{CircuitBreaker, CircuitBreakerConfig, Outcome, OwnedPermit, State, Timestamp};

use super::owner::{Here, Liveness};
use super::state::{Checkpoint, ProbeEvent, StateFile, Verdict};
use crate::CliError;

/// Jitter is drawn from a fixed seed so that a replay draws what the run
/// that wrote the log drew.
const SEED: u64 = 0x7472_6970_6c69_6e65;

/// A breaker rebuilt at "now", with the permits of the probes in flight.
pub(crate) struct Rebuilt {
    pub(crate) breaker: CircuitBreaker,
    pub(crate) clock: ManualClock,
    /// Held permits of unfinished probe leases, by lease id.
    pub(crate) leases: HashMap<u64, OwnedPermit>,
}

/// Who can say that a probe lease's process is gone.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Holders<'a> {
    /// The state dir: the lease's owner, judged through `/proc` (see
    /// `owner`).
    Processes,
    /// etcd: the leases whose probe key still exists. A key vanishes with
    /// its etcd lease when its process stops renewing it, on any host.
    EtcdKeys(&'a std::collections::HashSet<u64>),
}

pub(crate) fn rebuild(
    state: &mut StateFile,
    config: &CircuitBreakerConfig,
    now: u64,
    holders: Holders<'_>,
) -> Result<Rebuilt, CliError> {
    let start = match &state.checkpoint {
        Checkpoint::Open { opened_at, .. } => (*opened_at).min(now),
        Checkpoint::ForcedOpen { .. } | Checkpoint::Closed { .. } => now,
    };
    let clock = ManualClock::starting_at(Timestamp::from_nanos(start));
    let mut builder = CircuitBreaker::builder()
        .config(config.clone())
        .clock(clock.clone())
        .seed(SEED)
        .instance_id(0)
        .stripes(1);
    if let Checkpoint::Closed { window: Some(w) } = &state.checkpoint {
        builder = builder.restore_window(w.clone());
    }
    if let Some(times) = state.times {
        builder = builder.restore_times(times);
    }
    if let Checkpoint::Open { backoff_round, .. } = &state.checkpoint {
        builder = builder.restore(Snapshot {
            name: config.name.clone(),
            state: State::Closed,
            window: Default::default(),
            open_until: None,
            backoff_round: *backoff_round,
            config_version: 0,
            learned_slow_call: None,
        });
    }
    let breaker = builder
        .build()
        .map_err(|e| CliError::input(format!("breaker config: {e}")))?;
    match &state.checkpoint {
        Checkpoint::Open { until, .. } => breaker.open_until(Timestamp::from_nanos(*until)),
        Checkpoint::ForcedOpen { .. } => breaker.force_open(),
        Checkpoint::Closed { .. } => {}
    }
    let mut rebuilt = Rebuilt {
        breaker,
        clock,
        leases: HashMap::new(),
    };
    for event in &state.log {
        rebuilt.replay(event);
    }
    rebuilt.reclaim(state, now, holders);
    rebuilt.clock.set(Timestamp::from_nanos(now));
    Ok(rebuilt)
}

impl Rebuilt {
    fn replay(&mut self, event: &ProbeEvent) {
        match *event {
            ProbeEvent::Admit { lease, at, .. } => {
                self.clock.set(Timestamp::from_nanos(at));
                // The same breaker at the same time admits again; should it
                // not (a log from another config), the lease is void.
                if let Ok(p) = self.breaker.try_acquire_owned() {
                    self.leases.insert(lease, p);
                }
            }
            ProbeEvent::Finish {
                lease,
                at,
                verdict,
                elapsed_nanos,
            } => {
                self.clock.set(Timestamp::from_nanos(at));
                if let Some(p) = self.leases.remove(&lease) {
                    apply(p, verdict, Duration::from_nanos(elapsed_nanos));
                }
            }
        }
    }

    /// Ends the leases nobody will report back for. A lease whose time
    /// ran out is a failed probe: a probe that never reported back in time
    /// proves nothing good. A lease whose process is known dead (see
    /// `owner`) is abandoned: the probe was killed, which says nothing of
    /// the dependency, so its slot is freed at once for the next run.
    fn reclaim(&mut self, state: &mut StateFile, now: u64, holders: Holders<'_>) {
        let own = std::process::id();
        // Read once, and only when a live lease of another process needs it.
        let mut here: Option<Option<Here>> = None;
        let mut ended: Vec<(u64, Verdict)> = Vec::new();
        for event in &state.log {
            let ProbeEvent::Admit {
                lease,
                pid,
                expires_at,
                ref owner,
                ..
            } = *event
            else {
                continue;
            };
            if !self.leases.contains_key(&lease) {
                continue;
            }
            if now >= expires_at {
                ended.push((lease, Verdict::Reclaimed));
            } else if let Holders::EtcdKeys(live) = holders {
                if !live.contains(&lease) {
                    ended.push((lease, Verdict::Abandoned));
                }
            } else if let Some(owner) = owner
                && pid != own
                && owner.liveness(pid, here.get_or_insert_with(Here::read).as_ref())
                    == Liveness::Dead
            {
                ended.push((lease, Verdict::Abandoned));
            }
        }
        self.clock.set(Timestamp::from_nanos(now));
        for (lease, verdict) in ended {
            state.log.push(ProbeEvent::Finish {
                lease,
                at: now,
                verdict,
                elapsed_nanos: 0,
            });
            state.counters.count(verdict);
            if let Some(p) = self.leases.remove(&lease) {
                apply(p, verdict, Duration::ZERO);
            }
        }
    }
}

/// Records `verdict` on a permit (a cancelled run releases it).
pub(crate) fn apply(permit: OwnedPermit, verdict: Verdict, elapsed: Duration) {
    match verdict {
        Verdict::Success => permit.record(Outcome::Success, elapsed),
        Verdict::Failure | Verdict::Reclaimed => permit.record(Outcome::Failure, elapsed),
        Verdict::Ignored => permit.record(Outcome::Ignored, elapsed),
        Verdict::Cancelled | Verdict::Abandoned => drop(permit),
    }
}

/// Writes the breaker's state back as a checkpoint after a decision: a new
/// epoch and an empty log whenever it changed state; the probe log kept
/// while a round is under way.
pub(crate) fn settle(
    state: &mut StateFile,
    rebuilt: &Rebuilt,
    now: u64,
    reason: impl FnOnce() -> String,
) {
    let b = &rebuilt.breaker;
    state.times = Some(b.state_times());
    let next = match b.state() {
        State::Closed | State::Disabled | State::MetricsOnly => {
            let window = b.window_contents();
            let empty = match &window {
                tripline::breaker::WindowContents::Count { outcomes } => outcomes.is_empty(),
                tripline::breaker::WindowContents::Time { buckets } => buckets.is_empty(),
            };
            Checkpoint::Closed {
                window: (!empty).then_some(window),
            }
        }
        State::Open => {
            let until = b.open_until_time().map_or(now, Timestamp::as_nanos);
            match &state.checkpoint {
                Checkpoint::Open { until: u, .. } if *u == until && state.log.is_empty() => {
                    return;
                }
                _ => Checkpoint::Open {
                    opened_at: now,
                    until,
                    backoff_round: b.snapshot().backoff_round,
                    reason: reason(),
                },
            }
        }
        // A round under way: the Open checkpoint and the log describe it.
        State::HalfOpen => return,
        State::ForcedOpen => match state.checkpoint {
            Checkpoint::ForcedOpen { .. } => return,
            _ => Checkpoint::ForcedOpen { since: now },
        },
    };
    let same_phase = matches!(
        (&state.checkpoint, &next),
        (Checkpoint::Closed { .. }, Checkpoint::Closed { .. })
    );
    if !same_phase {
        state.epoch += 1;
        state.counters.transitions += 1;
        state.log.clear();
    }
    state.checkpoint = next;
}

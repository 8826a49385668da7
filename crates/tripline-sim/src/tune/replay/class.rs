//! Replaying a class of configs that decide alike until their first trip.
//!
//! Configs that differ only in what happens once a breaker has opened —
//! the open duration, the half-open policy and its limits — make the same
//! decisions until the first trip: their breakers see the same calls and
//! hold the same windows. A grid has several such configs per set of
//! closed-state parameters, and a day of traffic is mostly that shared
//! stretch. So a class replays its leader, checkpointing its breaker (the
//! snapshot, the exact window and the state times, as `tripline run`
//! carries a breaker between processes) with the figures so far every
//! [`CHECKPOINT_SECONDS`] while it has not tripped. Every other member
//! starts from the last checkpoint before the leader's first trip, its own
//! config restored over that state, instead of from the start; a class
//! whose leader never trips gives every member the leader's figures. The
//! tests hold each member's figures to its replay from the start.

use rayon::prelude::*;
use tripline::breaker::{Snapshot, StateTimes, WindowContents};
use tripline::{CircuitBreakerConfig, ConfigError, Timestamp};

use super::{Outcome, Replay};
use crate::tune::bound::Bound;
use crate::tune::outage::Outage;
use crate::tune::read::Traffic;

/// Seconds between a leader's checkpoints: a member replays at most this
/// much of the leader's stretch again.
pub const CHECKPOINT_SECONDS: u64 = 60;

/// A leader's breaker and figures at the start of a recorded second.
pub(super) struct Checkpoint {
    /// The second the members go on from.
    pub(super) second: u64,
    /// The clock then (the last call's start).
    pub(super) at: Timestamp,
    /// The breaker's state, its window left empty.
    pub(super) snapshot: Snapshot,
    pub(super) window: WindowContents,
    pub(super) times: StateTimes,
    pub(super) out: Outcome,
    pub(super) closed: bool,
    pub(super) cursor: usize,
}

/// What a config decides with while closed: the config with everything
/// that matters only after a trip set to one value. Configs with equal
/// keys form a class.
pub fn closed_behaviour(config: &CircuitBreakerConfig) -> CircuitBreakerConfig {
    let plain = CircuitBreakerConfig::default();
    CircuitBreakerConfig {
        name: String::new(),
        open_duration: plain.open_duration,
        half_open: plain.half_open,
        max_half_open_duration: plain.max_half_open_duration,
        slow_probe_factor: plain.slow_probe_factor,
        ..config.clone()
    }
}

/// Replays a class (configs with one [`closed_behaviour`], leader first),
/// giving their outcomes in the same order.
pub fn run_class(
    traffic: &Traffic,
    outages: &[Outage],
    configs: &[&CircuitBreakerConfig],
    healthy_rate: f64,
    bound: &Bound,
) -> Result<Vec<Outcome>, ConfigError> {
    let Some((leader, members)) = configs.split_first() else {
        return Ok(Vec::new());
    };
    let mut replay = Replay::new(leader, outages, healthy_rate, None)?;
    let mut last: Option<Checkpoint> = None;
    replay.seconds(traffic, 0, bound, |r, second| {
        let due = last
            .as_ref()
            .is_none_or(|c| second >= c.second + CHECKPOINT_SECONDS);
        if due && r.out.trips.is_empty() {
            last = Some(Checkpoint {
                second,
                at: r.clock_now(),
                // The window goes exactly, by its contents; the
                // snapshot's aggregate of it would be counted twice.
                snapshot: Snapshot {
                    window: Default::default(),
                    ..r.breaker.snapshot()
                },
                window: r.breaker.window_contents(),
                times: r.breaker.state_times(),
                out: r.out.clone(),
                closed: r.closed,
                cursor: r.cursor,
            });
        }
    });
    let lead = replay.finish(bound);
    let tripped = !lead.trips.is_empty();
    let rest: Vec<Outcome> = members
        .par_iter()
        .map(|config| match (&last, tripped) {
            // Never tripped: nothing set the members apart.
            (_, false) => Ok(lead.clone()),
            (Some(from), true) => {
                let mut r = Replay::new(config, outages, healthy_rate, Some(from))?;
                r.seconds(traffic, from.second, bound, |_, _| {});
                Ok(r.finish(bound))
            }
            (None, true) => super::run_within(traffic, outages, config, healthy_rate, bound),
        })
        .collect::<Result<_, _>>()?;
    let mut all = Vec::with_capacity(configs.len());
    all.push(lead);
    all.extend(rest);
    Ok(all)
}

//! Ranking the candidates per objective, and saying why.
//!
//! The three objectives weigh a false trip differently against seconds of
//! detection delay, collateral and load (the simulator's score parts):
//! `sensitive` at 1 s, `balanced` at the simulator's own
//! [`FALSE_TRIP_SECONDS`], `conservative` at 60 s. Ties keep grid order.

mod render;

use rayon::prelude::*;
use tripline::{CircuitBreakerConfig, ConfigError};

use super::bound::Bound;
use super::grid::{self, Candidates};
use super::outage::{self, Baseline, Outage};
use super::read::Traffic;
use super::replay::{self, Outcome};
use crate::score::FALSE_TRIP_SECONDS;

pub use render::{config_toml, reasons, text};

/// Where to stand on the trade-off between catching outages early and
/// tripping on noise.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Objective {
    /// Catch outages earliest; a false trip weighs 1 s.
    Sensitive,
    /// The simulator's score: a false trip weighs 5 s.
    Balanced,
    /// Avoid false trips; one weighs 60 s.
    Conservative,
}

impl Objective {
    /// Every objective, in trade-off order.
    pub const ALL: [Objective; 3] = [
        Objective::Sensitive,
        Objective::Balanced,
        Objective::Conservative,
    ];

    /// Seconds one false trip costs under this objective.
    pub fn false_trip_seconds(self) -> f64 {
        match self {
            Objective::Sensitive => 1.0,
            Objective::Balanced => FALSE_TRIP_SECONDS,
            Objective::Conservative => 60.0,
        }
    }

    /// The objective's name, as on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Objective::Sensitive => "sensitive",
            Objective::Balanced => "balanced",
            Objective::Conservative => "conservative",
        }
    }

    /// What `outcome` costs under this objective, seconds.
    pub fn cost(self, outcome: &Outcome) -> f64 {
        let s = &outcome.score;
        s.detection + self.false_trip_seconds() * s.false_trips as f64 + s.collateral + s.load
    }
}

/// The best config for one objective.
#[derive(Clone, Debug)]
pub struct Recommendation {
    /// Which objective.
    pub objective: Objective,
    /// Index into [`Tuning::results`].
    pub index: usize,
}

/// Everything `tripline tune` found and decided.
#[derive(Clone, Debug)]
pub struct Tuning {
    /// The traffic's span, calls and failures.
    pub traffic: Summary,
    /// The healthy behaviour.
    pub baseline: Baseline,
    /// Outages, detected or labelled.
    pub outages: Vec<Outage>,
    /// The grid and its facts.
    pub candidates: Candidates,
    /// Every candidate's replay, in grid order.
    pub results: Vec<Outcome>,
    /// One per objective, in [`Objective::ALL`] order.
    pub picks: Vec<Recommendation>,
    /// The config in force, replayed on the same traffic.
    pub current: Option<(CircuitBreakerConfig, Outcome)>,
}

/// The log's headline figures.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Summary {
    /// Unix second of the first recorded second.
    pub start: u64,
    /// Seconds covered.
    pub seconds: u64,
    /// Calls.
    pub calls: u64,
    /// Failed calls.
    pub failures: u64,
}

/// Fewest calls a log needs before it can be tuned on.
pub const MIN_CALLS: u64 = 200;

/// Refuses a log nothing sound can be derived from, saying what is missing.
pub fn check_usable(traffic: &Traffic) -> Result<(), String> {
    let (calls, failures) = (traffic.calls(), traffic.failures());
    if calls < MIN_CALLS {
        return Err(format!(
            "too few calls to tune on: the log holds {calls} call(s) in {} line(s); at least {MIN_CALLS} are needed to estimate a failure rate and a latency distribution",
            traffic.lines
        ));
    }
    if failures == 0 {
        return Err(format!(
            "one outcome only: all {calls} calls succeeded, so the log says nothing about how this dependency fails; record a period that includes its normal errors (or an outage)"
        ));
    }
    if failures == calls {
        return Err(format!(
            "one outcome only: all {calls} calls failed, so there is no healthy baseline to tell an outage from; record a period in which the dependency worked"
        ));
    }
    Ok(())
}

/// Tunes on `traffic`: detects outages unless `labelled` are given,
/// derives the grid, replays every candidate (and `current`) in parallel
/// and picks one per objective. `tick` is called once per config run.
pub fn tune(
    traffic: &Traffic,
    labelled: Option<Vec<(u64, u64)>>,
    current: Option<CircuitBreakerConfig>,
    tick: &(dyn Fn() + Sync),
) -> Result<Tuning, String> {
    check_usable(traffic)?;
    let (baseline, detected) = outage::detect(traffic);
    let outages = match labelled {
        Some(ranges) => ranges
            .into_iter()
            .map(|(from, to)| {
                let o = outage::describe(
                    &traffic.seconds,
                    from as usize,
                    to as usize,
                    outage::Kind::Errors,
                    baseline.slow_bucket,
                    true,
                );
                let kind =
                    if o.slow_rate - baseline.slow_rate > o.failure_rate - baseline.failure_rate {
                        outage::Kind::Slow
                    } else {
                        outage::Kind::Errors
                    };
                Outage { kind, ..o }
            })
            .collect(),
        None => detected,
    };
    rank(traffic, baseline, outages, current, tick)
}

/// Derives the grid and ranks it on `traffic` with the given baseline
/// and outages (what [`tune`] does after detection; a time-of-day period
/// reuses the whole log's baseline and outages).
pub fn rank(
    traffic: &Traffic,
    baseline: Baseline,
    outages: Vec<Outage>,
    current: Option<CircuitBreakerConfig>,
    tick: &(dyn Fn() + Sync),
) -> Result<Tuning, String> {
    let candidates = grid::derive(traffic, &baseline, &outages);
    rank_candidates(traffic, baseline, outages, candidates, current, tick)
}

/// Ranks the given candidates (what [`rank`] does after deriving the
/// grid; a caller with a grid of its own, such as a benchmark of a larger
/// one, passes it here). Replays run in parallel, and one that can no
/// longer be any objective's pick stops early (see [`super::bound`]).
pub fn rank_candidates(
    traffic: &Traffic,
    baseline: Baseline,
    outages: Vec<Outage>,
    candidates: Candidates,
    current: Option<CircuitBreakerConfig>,
    tick: &(dyn Fn() + Sync),
) -> Result<Tuning, String> {
    let rate = candidates.facts.healthy_rate;
    let weights: Vec<f64> = Objective::ALL
        .iter()
        .map(|o| o.false_trip_seconds())
        .collect();
    let bound = Bound::new(&weights);
    // Classes of configs that decide alike until a trip, in grid order of
    // their leaders; each replays its shared stretch once.
    let mut classes: Vec<(CircuitBreakerConfig, Vec<usize>)> = Vec::new();
    for (i, c) in candidates.configs.iter().enumerate() {
        let key = replay::closed_behaviour(c);
        match classes.iter_mut().find(|(k, _)| *k == key) {
            Some((_, members)) => members.push(i),
            None => classes.push((key, vec![i])),
        }
    }
    let replayed: Vec<Vec<(usize, Outcome)>> = classes
        .par_iter()
        .map(|(_, members)| {
            let configs: Vec<&CircuitBreakerConfig> =
                members.iter().map(|&i| &candidates.configs[i]).collect();
            let outcomes = replay::run_class(traffic, &outages, &configs, rate, &bound)?;
            configs.iter().for_each(|_| tick());
            Ok(members.iter().copied().zip(outcomes).collect())
        })
        .collect::<Result<_, ConfigError>>()
        .map_err(|e| format!("a candidate config was refused: {e}"))?;
    let mut results: Vec<Option<Outcome>> = vec![None; candidates.configs.len()];
    for (i, outcome) in replayed.into_iter().flatten() {
        results[i] = Some(outcome);
    }
    let results: Vec<Outcome> = results.into_iter().flatten().collect();
    if results.is_empty() {
        return Err("no candidate config could be derived from this traffic".to_owned());
    }
    let picks = Objective::ALL
        .iter()
        .map(|&objective| {
            // A replay stopped early cost more than a finished one under
            // every objective; at least one always finishes.
            let finished = |r: &&Outcome| r.stopped_at.is_none();
            let mut best = results.iter().position(|r| finished(&r)).unwrap_or(0);
            for (i, r) in results.iter().enumerate().filter(|(_, r)| finished(r)) {
                if objective.cost(r) < objective.cost(&results[best]) - 1e-9 {
                    best = i;
                }
            }
            Recommendation {
                objective,
                index: best,
            }
        })
        .collect();
    let current = match current {
        Some(c) => {
            let r =
                replay::run(traffic, &outages, &c, rate).map_err(|e| format!("--current: {e}"))?;
            Some((c, r))
        }
        None => None,
    };
    Ok(Tuning {
        traffic: Summary {
            start: traffic.start,
            seconds: traffic.seconds.len() as u64,
            calls: traffic.calls(),
            failures: traffic.failures(),
        },
        baseline,
        outages,
        candidates,
        results,
        picks,
        current,
    })
}

impl Tuning {
    /// The config recommended for `objective`.
    pub fn pick(&self, objective: Objective) -> (&CircuitBreakerConfig, &Outcome) {
        let i = self
            .picks
            .iter()
            .find(|p| p.objective == objective)
            .map_or(0, |p| p.index);
        (&self.candidates.configs[i], &self.results[i])
    }
}

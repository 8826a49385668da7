//! Replaying the recorded traffic through one real breaker.
//!
//! The calls of each recorded second start at evenly spread instants in
//! it (`s + (i + ½) / n`); its failures are spread evenly among them (a
//! Bresenham interleave), and each call takes the middle of its latency
//! bucket. The breaker is the library's own, on a [`ManualClock`] set to
//! each call's start; a call records its outcome and duration at once.
//! A rejected call is not sent.
//!
//! Scoring follows the simulator's [`Score`]: a trip (closed → open)
//! inside an outage detects it, at `trip − start`; a trip within the
//! breaker's window span after the outage ends still holds the outage's
//! calls and counts for nothing; any other trip is a false trip. Calls
//! rejected outside outages are collateral; calls sent into an outage
//! after its first trip are load. Both are divided by the healthy call
//! rate to read as seconds of traffic.

use std::time::Duration;

use tripline::{
    CircuitBreaker, CircuitBreakerConfig, ConfigError, ManualClock, State, Timestamp, WindowConfig,
};

mod class;

pub use class::{closed_behaviour, run_class};

use super::bound::Bound;
use super::outage::Outage;
use super::read::{BUCKETS, Second, Traffic, bucket_mid_ms};
use crate::score::{FALSE_TRIP_SECONDS, Score};

/// What one config did on the recorded traffic.
#[derive(Clone, Debug, PartialEq)]
pub struct Outcome {
    /// Every trip (closed → open), seconds from the log's start.
    pub trips: Vec<f64>,
    /// Per outage, its detection delay in seconds, if a trip caught it.
    pub detection: Vec<Option<f64>>,
    /// Trips outside outages (and their window's tail).
    pub false_trips: u64,
    /// Calls rejected while no outage acted.
    pub rejected_healthy: u64,
    /// Calls sent into outages after their first trip.
    pub let_through: u64,
    /// Calls sent into outages before their first trip (or at all, if missed).
    pub before_trip: u64,
    /// The simulator's score of the run.
    pub score: Score,
    /// Stopped early at this second: its cost so far already exceeded
    /// the best finished replay's under every objective (see
    /// [`super::bound`]), so the figures above are partial.
    pub stopped_at: Option<u64>,
}

/// How long after an outage a trip still comes from its calls: the
/// window's span, at least one second.
fn tail(config: &CircuitBreakerConfig, rate: f64) -> u64 {
    match config.window {
        WindowConfig::Time { length, .. } => length.as_secs().max(1),
        WindowConfig::Count { size } => ((f64::from(size) / rate.max(1e-9)).ceil() as u64).max(1),
    }
}

/// Replays `traffic` through a breaker built from `config`.
pub fn run(
    traffic: &Traffic,
    outages: &[Outage],
    config: &CircuitBreakerConfig,
    healthy_rate: f64,
) -> Result<Outcome, ConfigError> {
    run_within(traffic, outages, config, healthy_rate, &Bound::none())
}

/// [`run`], stopped early once `bound` says the replay cannot be picked
/// (checked once per recorded second); a replay that ends is offered to
/// `bound`.
pub fn run_within(
    traffic: &Traffic,
    outages: &[Outage],
    config: &CircuitBreakerConfig,
    healthy_rate: f64,
    bound: &Bound,
) -> Result<Outcome, ConfigError> {
    let mut replay = Replay::new(config, outages, healthy_rate, None)?;
    replay.seconds(traffic, 0, bound, |_, _| {});
    Ok(replay.finish(bound))
}

/// One config's replay under way: its breaker and clock, and the figures
/// so far. [`class`] starts one from another's state.
struct Replay<'a> {
    clock: ManualClock,
    breaker: CircuitBreaker,
    outages: &'a [Outage],
    tail: u64,
    rate: f64,
    mids: [Duration; BUCKETS],
    out: Outcome,
    /// The breaker was closed after the last call.
    closed: bool,
    /// The first outage not yet over (with its tail).
    cursor: usize,
}

impl<'a> Replay<'a> {
    /// A replay of `config`, from the start or (with `from`) from another
    /// replay's state: its breaker restored into this config, its figures
    /// carried on.
    fn new(
        config: &CircuitBreakerConfig,
        outages: &'a [Outage],
        healthy_rate: f64,
        from: Option<&class::Checkpoint>,
    ) -> Result<Self, ConfigError> {
        let clock = from.map_or_else(ManualClock::new, |c| ManualClock::starting_at(c.at));
        let mut builder = CircuitBreaker::builder()
            .config(config.clone())
            .clock(clock.clone());
        if let Some(c) = from {
            builder = builder
                .restore(c.snapshot.clone())
                .restore_window(c.window.clone())
                .restore_times(c.times);
        }
        let breaker = builder.build_with_warnings()?.0;
        let out = from.map_or_else(
            || Outcome {
                trips: Vec::new(),
                detection: vec![None; outages.len()],
                false_trips: 0,
                rejected_healthy: 0,
                let_through: 0,
                before_trip: 0,
                score: Score {
                    value: 0.0,
                    detection: 0.0,
                    missed: 0,
                    false_trips: 0,
                    collateral: 0.0,
                    load: 0.0,
                    lockstep: 0.0,
                },
                stopped_at: None,
            },
            |c| c.out.clone(),
        );
        Ok(Replay {
            clock,
            breaker,
            outages,
            tail: tail(config, healthy_rate),
            rate: healthy_rate.max(1e-9),
            mids: std::array::from_fn(|i| Duration::from_secs_f64(bucket_mid_ms(i) / 1000.0)),
            out,
            closed: from.is_none_or(|c| c.closed),
            cursor: from.map_or(0, |c| c.cursor),
        })
    }

    /// Replays the recorded seconds from `first` on, calling `before` at
    /// the start of each second that has calls (with the second), until
    /// the end or until `bound` stops it.
    fn seconds(
        &mut self,
        traffic: &Traffic,
        first: u64,
        bound: &Bound,
        mut before: impl FnMut(&Self, u64),
    ) {
        let skip = usize::try_from(first).unwrap_or(usize::MAX);
        for (s, sec) in traffic.seconds.iter().enumerate().skip(skip) {
            let s = s as u64;
            if sec.calls() == 0 {
                continue;
            }
            let (so_far, _) = detection(self.outages, &self.out.detection, Some(s));
            let cost =
                so_far + (self.out.rejected_healthy + self.out.let_through) as f64 / self.rate;
            if bound.beaten(cost, self.out.false_trips) {
                self.out.stopped_at = Some(s);
                return;
            }
            before(self, s);
            self.second(s, sec);
        }
    }

    /// Replays one recorded second's calls.
    fn second(&mut self, s: u64, sec: &Second) {
        let n = sec.calls();
        let outages = self.outages;
        while self.cursor < outages.len() && outages[self.cursor].to + self.tail <= s {
            self.cursor += 1;
        }
        let cursor = self.cursor;
        let inside = outages[cursor..]
            .iter()
            .position(|o| o.contains(s))
            .map(|i| i + cursor);
        let after = outages[cursor..]
            .iter()
            .position(|o| s >= o.to && s < o.to + self.tail)
            .map(|i| i + cursor);
        let f = sec.failures();
        let (mut ok_b, mut fail_b) = (0usize, 0usize);
        let (mut ok_left, mut fail_left) = (sec.ok[0], sec.failed[0]);
        // Bresenham: call i fails when ⌊(i+1)·f/n⌋ > ⌊i·f/n⌋, kept as a
        // running remainder (no division per call).
        let mut acc = 0u64;
        // Call i starts at ⌊(2i + 1)·10⁹ / 2n⌋ ns into the second, kept as
        // a quotient and remainder that each call moves by 2·10⁹ / 2n (a
        // float product and its saturating cast cost ~20 instructions a
        // call, a tenth of the replay).
        let d = 2 * n;
        let (q_step, r_step) = (2_000_000_000 / d, 2_000_000_000 % d);
        let (mut q, mut r) = (1_000_000_000 / d, 1_000_000_000 % d);
        let base = s * 1_000_000_000;
        let out = &mut self.out;
        for _ in 0..n {
            acc += f;
            let failed = acc >= n;
            if failed {
                acc -= n;
            }
            let bucket = if failed {
                while fail_left == 0 && fail_b + 1 < BUCKETS {
                    fail_b += 1;
                    fail_left = sec.failed[fail_b];
                }
                fail_left = fail_left.saturating_sub(1);
                fail_b
            } else {
                while ok_left == 0 && ok_b + 1 < BUCKETS {
                    ok_b += 1;
                    ok_left = sec.ok[ok_b];
                }
                ok_left = ok_left.saturating_sub(1);
                ok_b
            };
            let t = base + q;
            (q, r) = (q + q_step, r + r_step);
            if r >= d {
                (q, r) = (q + 1, r - d);
            }
            self.clock.set(Timestamp::from_nanos(t));
            match self.breaker.try_acquire() {
                Err(_) => {
                    if inside.is_none() {
                        out.rejected_healthy += 1;
                    }
                }
                Ok(permit) => {
                    if let Some(o) = inside {
                        if out.detection[o].is_some() {
                            out.let_through += 1;
                        } else {
                            out.before_trip += 1;
                        }
                    }
                    let outcome = if failed {
                        tripline::Outcome::Failure
                    } else {
                        tripline::Outcome::Success
                    };
                    permit.record(outcome, self.mids[bucket]);
                }
            }
            let state = self.breaker.state();
            if self.closed && state == State::Open {
                let at = t as f64 / 1e9;
                out.trips.push(at);
                match (inside, after) {
                    (Some(o), _) => {
                        if out.detection[o].is_none() {
                            out.detection[o] = Some(at - outages[o].from as f64);
                        }
                    }
                    (None, Some(_)) => {}
                    (None, None) => out.false_trips += 1,
                }
            }
            self.closed = state == State::Closed;
        }
    }

    /// The clock: the last call's start.
    fn clock_now(&self) -> Timestamp {
        tripline::Clock::now(&self.clock)
    }

    /// The figures, scored; a replay that ran to the end is offered to
    /// `bound`.
    fn finish(mut self, bound: &Bound) -> Outcome {
        let out = &mut self.out;
        let (detection, missed) = detection(self.outages, &out.detection, out.stopped_at);
        let collateral = out.rejected_healthy as f64 / self.rate;
        let load = out.let_through as f64 / self.rate;
        out.score = Score {
            value: detection + FALSE_TRIP_SECONDS * out.false_trips as f64 + collateral + load,
            detection,
            missed,
            false_trips: out.false_trips,
            collateral,
            load,
            lockstep: 0.0,
        };
        if out.stopped_at.is_none() {
            bound.offer(detection + collateral + load, out.false_trips);
        }
        self.out
    }
}

/// The outages' detection delays summed, and how many were missed. With
/// `at` (a second of the replay), the least they can still come to: an
/// outage not detected yet costs the time since it began, up to its
/// length (what a miss costs), and one not begun costs nothing.
fn detection(outages: &[Outage], detected: &[Option<f64>], at: Option<u64>) -> (f64, u64) {
    let mut sum = 0.0;
    let mut missed = 0;
    for (o, d) in outages.iter().zip(detected) {
        match (d, at) {
            (Some(d), _) => sum += d,
            (None, Some(at)) => sum += at.clamp(o.from, o.to).saturating_sub(o.from) as f64,
            (None, None) => {
                missed += 1;
                sum += (o.to - o.from) as f64;
            }
        }
    }
    (sum, missed)
}

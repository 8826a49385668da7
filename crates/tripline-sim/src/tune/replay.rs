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

use super::outage::Outage;
use super::read::{BUCKETS, Traffic, bucket_mid_ms};
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
    let clock = ManualClock::new();
    let breaker = CircuitBreaker::builder()
        .config(config.clone())
        .clock(clock.clone())
        .build_with_warnings()?
        .0;
    let tail = tail(config, healthy_rate);
    let mut out = Outcome {
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
    };
    let mids: [Duration; BUCKETS] =
        std::array::from_fn(|i| Duration::from_secs_f64(bucket_mid_ms(i) / 1000.0));
    let mut closed = true;
    let mut cursor = 0usize; // first outage not yet over
    for (s, sec) in traffic.seconds.iter().enumerate() {
        let s = s as u64;
        let n = sec.calls();
        if n == 0 {
            continue;
        }
        while cursor < outages.len() && outages[cursor].to + tail <= s {
            cursor += 1;
        }
        let inside = outages[cursor..]
            .iter()
            .position(|o| o.contains(s))
            .map(|i| i + cursor);
        let after = outages[cursor..]
            .iter()
            .position(|o| s >= o.to && s < o.to + tail)
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
            clock.set(Timestamp::from_nanos(t));
            match breaker.try_acquire() {
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
                    permit.record(outcome, mids[bucket]);
                }
            }
            let state = breaker.state();
            if closed && state == State::Open {
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
            closed = state == State::Closed;
        }
    }
    let rate = healthy_rate.max(1e-9);
    let mut detection = 0.0;
    let mut missed = 0;
    for (o, d) in outages.iter().zip(&out.detection) {
        match d {
            Some(d) => detection += d,
            None => {
                missed += 1;
                detection += (o.to - o.from) as f64;
            }
        }
    }
    let collateral = out.rejected_healthy as f64 / rate;
    let load = out.let_through as f64 / rate;
    out.score = Score {
        value: detection + FALSE_TRIP_SECONDS * out.false_trips as f64 + collateral + load,
        detection,
        missed,
        false_trips: out.false_trips,
        collateral,
        load,
        lockstep: 0.0,
    };
    Ok(out)
}

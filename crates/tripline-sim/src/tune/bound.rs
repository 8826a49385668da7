//! Stopping a replay that can no longer be picked.
//!
//! Every part of a replay's cost only grows as it goes on: detection
//! delays (an outage still undetected has cost at least the time since it
//! began, and its whole length if it is missed), false trips, healthy
//! calls rejected and calls let through. So the cost so far is a lower
//! bound of the final cost. Replays running in parallel share the best
//! final cost per objective found so far; a replay whose lower bound is
//! already above it under every objective can be neither objective's
//! pick, and stops. The picks are the same as without the bound; only the
//! losers' figures are left partial (and marked so).

use std::sync::atomic::{AtomicU64, Ordering};

/// The best final cost per objective among the replays finished so far.
#[derive(Debug)]
pub struct Bound {
    /// Seconds one false trip costs, per objective.
    weights: Vec<f64>,
    /// The best final costs as `f64` bits: for non-negative floats the
    /// bits order as the numbers do, so `fetch_min` keeps the least.
    best: Vec<AtomicU64>,
}

impl Bound {
    /// A bound with no replay finished yet, for objectives whose false
    /// trips cost `weights` seconds each.
    pub fn new(weights: &[f64]) -> Bound {
        Bound {
            weights: weights.to_vec(),
            best: weights
                .iter()
                .map(|_| AtomicU64::new(f64::INFINITY.to_bits()))
                .collect(),
        }
    }

    /// A bound that never stops a replay.
    pub fn none() -> Bound {
        Bound::new(&[])
    }

    /// Offers a finished replay's cost: `seconds` (detection, collateral
    /// and load) plus its false trips.
    pub fn offer(&self, seconds: f64, false_trips: u64) {
        for (w, best) in self.weights.iter().zip(&self.best) {
            let cost = (seconds + w * false_trips as f64).max(0.0);
            best.fetch_min(cost.to_bits(), Ordering::Relaxed);
        }
    }

    /// Whether a replay whose cost so far is `seconds` and `false_trips`
    /// is beaten under every objective (never with no objective).
    pub fn beaten(&self, seconds: f64, false_trips: u64) -> bool {
        !self.weights.is_empty()
            && self.weights.iter().zip(&self.best).all(|(w, best)| {
                let best = f64::from_bits(best.load(Ordering::Relaxed));
                // A margin keeps ties (and rounding) to the full replays.
                seconds + w * false_trips as f64 > best + 1e-6
            })
    }
}

#[cfg(test)]
mod tests {
    use super::Bound;

    #[test]
    fn beaten_only_under_every_objective() {
        let b = Bound::new(&[1.0, 60.0]);
        assert!(!b.beaten(1e9, 0), "nothing finished yet");
        b.offer(10.0, 0); // costs 10 and 10
        b.offer(3.0, 1); // costs 4 and 63
        assert!(!b.beaten(5.0, 0), "5 > 4 but not > 10");
        assert!(b.beaten(11.0, 0));
        assert!(!b.beaten(4.0, 0), "a tie is not beaten");
        assert!(!Bound::none().beaten(1e9, 9));
    }
}

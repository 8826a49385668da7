//! When calls start: call `k` of every replica at `t_k = k / rate`.
//!
//! The one rule both sides of the simulator agree on: the scenario bounds
//! how many calls a run makes before it exists, and the engine's loop
//! starts them. It sits below both so neither imports the other for it.

use std::time::Duration;

/// When calls start: `t_k = k / rate`, in nanoseconds.
#[derive(Clone, Copy, Debug)]
pub(crate) struct CallTimes {
    rate: f64,
}

impl CallTimes {
    pub(crate) fn new(rate: f64) -> Self {
        CallTimes { rate }
    }

    /// Start of call `k`, in nanoseconds.
    #[inline]
    pub(crate) fn at(&self, k: u64) -> u64 {
        (k as f64 * 1e9 / self.rate).round() as u64
    }

    /// The first `k` with `t_k ≥ t`.
    pub(crate) fn first_at_or_after(&self, t: Duration) -> u64 {
        let t = u64::try_from(t.as_nanos()).unwrap_or(u64::MAX);
        let mut k = (t as f64 * self.rate / 1e9).ceil() as u64;
        while k > 0 && self.at(k - 1) >= t {
            k -= 1;
        }
        while self.at(k) < t {
            k += 1;
        }
        k
    }

    /// How many calls start before `t`.
    pub(crate) fn count_before(&self, t: Duration) -> u64 {
        self.first_at_or_after(t)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn call_times_round_trip() {
        let t = CallTimes::new(3.0);
        assert_eq!(t.at(1), 333_333_333);
        assert_eq!(t.first_at_or_after(Duration::from_nanos(333_333_333)), 1);
        assert_eq!(t.first_at_or_after(Duration::from_nanos(333_333_334)), 2);
        assert_eq!(t.count_before(Duration::from_secs(10)), 30);
        let t = CallTimes::new(2.0);
        assert_eq!(t.count_before(Duration::from_secs(120)), 240);
        assert_eq!(t.first_at_or_after(Duration::from_millis(112_200)), 225);
    }
}

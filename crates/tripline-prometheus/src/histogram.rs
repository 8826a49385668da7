//! The optional call-duration histogram: a wrapper, not a hook.
//!
//! A breaker does not time its calls unless slow-call detection needs it,
//! and keeps no duration sum: a histogram per breaker would cost every
//! call of every breaker a clock read, a bucket search and two atomic adds
//! whether or not anyone looks. So the histogram lives here, in
//! [`TimedBreaker`], a wrapper whose calls time themselves on the breaker's
//! own clock (the cached 1 ms tick in production, a `ManualClock` in tests)
//! and record into lock-free buckets. Calls made on the bare breaker are
//! untouched: the library has no hook for this and needs none.
//!
//! Cost per call through the wrapper (two clock reads, the classifier run
//! once more, a bucket search over the bounds, two relaxed atomic adds) is
//! measured in `benches/benches/prometheus.rs`; figures in
//! `benches/README.md`.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tripline::clock::Clock;
use tripline::{CallError, CircuitBreaker, Classifier, DefaultClassifier, Outcome};

/// Default bucket bounds, seconds: 1 ms to 10 s.
pub(crate) const DEFAULT_BUCKETS: [f64; 12] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0,
];

/// Lock-free buckets of one breaker's call durations.
#[derive(Debug)]
pub(crate) struct DurationHistogram {
    bounds: Arc<[f64]>,
    bounds_nanos: Box<[u64]>,
    /// One per bound, then the overflow (`+Inf`) bucket; not cumulative.
    buckets: Box<[AtomicU64]>,
    /// Nanoseconds by outcome: successful, failed, ignored.
    sums: [AtomicU64; 3],
}

/// A histogram read at a scrape.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct HistogramSample {
    /// `(upper bound, count)`, not cumulative, ending with `+Inf`.
    pub(crate) buckets: Vec<(f64, u64)>,
    /// Seconds by outcome: successful, failed, ignored.
    pub(crate) sums: [f64; 3],
}

impl HistogramSample {
    /// Seconds observed, all outcomes.
    pub(crate) fn sum(&self) -> f64 {
        self.sums.iter().sum()
    }
}

impl DurationHistogram {
    pub(crate) fn new(bounds: Arc<[f64]>) -> Self {
        let bounds_nanos = bounds.iter().map(|b| (b * 1e9) as u64).collect();
        let buckets = (0..=bounds.len()).map(|_| AtomicU64::new(0)).collect();
        DurationHistogram {
            bounds,
            bounds_nanos,
            buckets,
            sums: Default::default(),
        }
    }

    /// Records one call of `nanos` that ended as `outcome`.
    #[inline]
    pub(crate) fn observe(&self, nanos: u64, outcome: Outcome) {
        let i = self.bounds_nanos.partition_point(|&b| b < nanos);
        self.buckets[i].fetch_add(1, Ordering::Relaxed);
        let k = match outcome {
            Outcome::Success => 0,
            Outcome::Failure => 1,
            _ => 2,
        };
        self.sums[k].fetch_add(nanos, Ordering::Relaxed);
    }

    pub(crate) fn sample(&self) -> HistogramSample {
        let mut buckets: Vec<(f64, u64)> = self
            .bounds
            .iter()
            .zip(self.buckets.iter())
            .map(|(b, c)| (*b, c.load(Ordering::Relaxed)))
            .collect();
        let overflow = self.buckets.last().map_or(0, |c| c.load(Ordering::Relaxed));
        buckets.push((f64::INFINITY, overflow));
        HistogramSample {
            buckets,
            sums: self
                .sums
                .each_ref()
                .map(|s| s.load(Ordering::Relaxed) as f64 / 1e9),
        }
    }
}

/// A breaker whose calls are timed into its `breaker_call_duration_seconds`
/// histogram. Made by [`Exporter::timed`](crate::Exporter::timed); cheap to
/// clone (clones share the histogram). Only calls made through the wrapper
/// are timed, and only calls the breaker admitted (a rejection has no
/// duration); the breaker's other callers pay nothing.
///
/// ```
/// use tripline::{CircuitBreaker, CircuitBreakerConfig, ManualClock};
/// use tripline_prometheus::{Detail, Exporter};
///
/// let clock = ManualClock::new();
/// let breaker = CircuitBreaker::builder()
///     .config(CircuitBreakerConfig { name: "geo".into(), ..Default::default() })
///     .clock(clock.clone())
///     .build()
///     .unwrap();
/// let exporter = Exporter::default();
/// exporter.register_breaker(&breaker, Detail::Essential).unwrap();
/// let timed = exporter.timed(&breaker);
/// let answer = timed.call(|| {
///     clock.advance(std::time::Duration::from_millis(30));
///     Ok::<_, ()>(42)
/// });
/// assert_eq!(answer.unwrap(), 42);
/// let text = exporter.render(tripline_prometheus::http::Format::PrometheusText).unwrap();
/// assert!(text.contains(r#"tripline_breaker_call_duration_seconds_bucket{name="geo",le="0.05"} 1"#));
/// ```
#[derive(Clone, Debug)]
pub struct TimedBreaker {
    pub(crate) breaker: CircuitBreaker,
    pub(crate) histogram: Arc<DurationHistogram>,
}

impl TimedBreaker {
    /// The breaker (calls made on it directly are not timed).
    pub fn breaker(&self) -> &CircuitBreaker {
        &self.breaker
    }

    /// Like [`CircuitBreaker::call`], timing the call if it is admitted.
    #[inline]
    pub fn call<T, E>(&self, f: impl FnOnce() -> Result<T, E>) -> Result<T, CallError<E>> {
        self.call_with(&DefaultClassifier, f)
    }

    /// Like [`CircuitBreaker::call_with`], timing the call if it is
    /// admitted; `classifier` also sorts the duration by outcome.
    #[inline]
    pub fn call_with<T, E, C>(
        &self,
        classifier: &C,
        f: impl FnOnce() -> Result<T, E>,
    ) -> Result<T, CallError<E>>
    where
        C: Classifier<T, E> + ?Sized,
    {
        let clock = self.breaker.clock();
        self.breaker.call_with(classifier, || {
            let start = clock.now();
            let result = f();
            let nanos = clock.now().as_nanos().saturating_sub(start.as_nanos());
            self.histogram.observe(nanos, classifier.classify(&result));
            result
        })
    }

    /// Records a call timed elsewhere (a [`Permit`](tripline::Permit) or an
    /// async call): `elapsed`, ending as `outcome`.
    pub fn observe(&self, outcome: Outcome, elapsed: Duration) {
        let nanos = u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX);
        self.histogram.observe(nanos, outcome);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_upper_inclusive_and_overflow_goes_to_inf() {
        let h = DurationHistogram::new(Arc::from(&[0.01, 0.1][..]));
        for (ms, o) in [
            (10, Outcome::Success),
            (11, Outcome::Failure),
            (100, Outcome::Ignored),
            (5_000, Outcome::Success),
        ] {
            h.observe(ms * 1_000_000, o);
        }
        let s = h.sample();
        assert_eq!(s.buckets, vec![(0.01, 1), (0.1, 2), (f64::INFINITY, 1)]);
        assert!((s.sums[0] - 5.01).abs() < 1e-9);
        assert!((s.sum() - 5.121).abs() < 1e-9);
    }
}

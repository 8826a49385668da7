//! Hedging: when an answer is late, ask again — once or twice, and take
//! whichever answer comes first.
//!
//! Tail latency is often one slow replica, a GC pause, a lost packet. A
//! hedged request sends a second attempt when the first has not answered
//! after a delay, and takes the first success; the other attempts are
//! cancelled (their futures dropped). The delay is fixed, or a moving
//! quantile (say p95) of recent latencies once enough samples exist, so
//! only the slowest few percent of calls are hedged.
//!
//! Hedges are extra load exactly like retries, so they draw on the same
//! [`RetryBudget`]: under an outage the budget runs dry and hedging stops
//! by itself, instead of doubling the load on a struggling dependency. An
//! attempt that fails outright launches the next hedge at once (if any are
//! left); when every attempt has failed the last error is returned.
//!
//! Hedging needs concurrency, so it is async only, on a [`Timer`](crate::timeout::Timer).
//!
//! The quantile is computed over the last `samples` latencies of winning
//! attempts (see `hedge/latency.rs`).

mod config;
mod latency;

use std::fmt;
use std::future::{Future, poll_fn};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::Poll;
use std::time::Duration;

pub use config::{HedgeConfig, HedgeDelay};

use self::latency::Latencies;
use crate::budget::RetryBudget;
use crate::clock::{Clock, SharedClock};
use crate::error::PolicyConfigError;
use crate::setters::setters;
use crate::sync::{Arc, Mutex, lock};
use crate::timeout::{SharedTimer, Sleep};

/// Cumulative counts of one hedging policy.
///
/// ```
/// assert_eq!(tripline::hedge::HedgeStats::default().hedges, 0);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct HedgeStats {
    /// Logical calls.
    pub calls: u64,
    /// Hedges sent.
    pub hedges: u64,
    /// Calls won by a hedge rather than the first attempt.
    pub hedge_wins: u64,
    /// Hedges wanted but refused by the budget.
    pub refused_budget: u64,
}

struct Inner {
    config: HedgeConfig,
    budget: Option<RetryBudget>,
    timer: SharedTimer,
    clock: SharedClock,
    latencies: Mutex<Latencies>,
    calls: AtomicU64,
    hedges: AtomicU64,
    wins: AtomicU64,
    refused: AtomicU64,
}

/// A hedging policy; cheap to clone, clones share latencies and counters.
///
/// ```
/// # #[cfg(feature = "tokio")]
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// use std::sync::Arc;
/// use std::time::Duration;
/// use tripline::hedge::{Hedge, HedgeConfig, HedgeDelay};
/// use tripline::timeout::TokioTimer;
///
/// let hedge = Hedge::builder()
///     .config(HedgeConfig { delay: HedgeDelay::Fixed { delay: Duration::from_millis(10) }, ..Default::default() })
///     .timer(Arc::new(TokioTimer))
///     .clock(TokioTimer.clock())
///     .build()
///     .unwrap();
/// let v = hedge
///     .call(|n| async move {
///         let wait = if n == 1 { 1000 } else { 1 }; // the first replica is slow
///         tokio::time::sleep(Duration::from_millis(wait)).await;
///         Ok::<_, ()>(n)
///     })
///     .await;
/// assert_eq!(v, Ok(2)); // the hedge won
/// # }
/// # #[cfg(not(feature = "tokio"))] fn main() {}
/// ```
#[derive(Clone)]
pub struct Hedge {
    inner: Arc<Inner>,
}

/// Builds a [`Hedge`].
#[derive(Default)]
pub struct HedgeBuilder {
    config: HedgeConfig,
    budget: Option<RetryBudget>,
    timer: Option<SharedTimer>,
    clock: Option<SharedClock>,
}

impl HedgeBuilder {
    setters! {
        /// The config.
        config: HedgeConfig,

        /// Hedges spend from `budget` (share the retries' budget).
        budget: Some(RetryBudget),

        /// The timer hedge delays run on (required).
        timer: Some(SharedTimer),

        /// The clock latencies are measured on (use the timer's clock).
        clock: Some(impl Into<SharedClock>),
    }

    /// Validates and builds.
    pub fn build(self) -> Result<Hedge, PolicyConfigError> {
        self.config.validate()?;
        let Some(timer) = self.timer.or_else(crate::timeout::default_timer) else {
            return Err(PolicyConfigError::new(
                "hedge",
                "timer",
                "is required: hedging waits for the delay on a timer",
            ));
        };
        let n = self.config.samples as usize;
        Ok(Hedge {
            inner: Arc::new(Inner {
                budget: self.budget,
                timer,
                clock: self.clock.unwrap_or_default(),
                latencies: Mutex::new(Latencies::new(n)),
                calls: AtomicU64::new(0),
                hedges: AtomicU64::new(0),
                wins: AtomicU64::new(0),
                refused: AtomicU64::new(0),
                config: self.config,
            }),
        })
    }
}

type Racer<Fut> = (u32, Pin<Box<Fut>>, crate::clock::Timestamp);

impl Hedge {
    /// A builder.
    pub fn builder() -> HedgeBuilder {
        HedgeBuilder::default()
    }

    /// Counts.
    pub fn stats(&self) -> HedgeStats {
        let i = &self.inner;
        HedgeStats {
            calls: i.calls.load(Ordering::Relaxed),
            hedges: i.hedges.load(Ordering::Relaxed),
            hedge_wins: i.wins.load(Ordering::Relaxed),
            refused_budget: i.refused.load(Ordering::Relaxed),
        }
    }

    /// The delay the next call would hedge after.
    pub fn current_delay(&self) -> Duration {
        match self.inner.config.delay {
            HedgeDelay::Fixed { delay } => delay,
            HedgeDelay::Quantile {
                quantile,
                min_samples,
                initial,
            } => lock(&self.inner.latencies)
                .quantile(quantile, min_samples)
                .unwrap_or(initial),
        }
    }

    fn observe(&self, latency: Duration) {
        lock(&self.inner.latencies).observe(latency);
    }

    fn may_hedge(&self) -> bool {
        let ok = self
            .inner
            .budget
            .as_ref()
            .is_none_or(RetryBudget::try_withdraw);
        if ok {
            self.inner.hedges.fetch_add(1, Ordering::Relaxed);
        } else {
            self.inner.refused.fetch_add(1, Ordering::Relaxed);
        }
        ok
    }

    /// Runs `op(1)`, and `op(2)`, `op(3)`… as hedges while no answer has
    /// come; the first `Ok` wins and the others are dropped (cancelled).
    pub async fn call<T, E, F, Fut>(&self, mut op: F) -> Result<T, E>
    where
        F: FnMut(u32) -> Fut,
        Fut: Future<Output = Result<T, E>>,
    {
        let inner = &*self.inner;
        inner.calls.fetch_add(1, Ordering::Relaxed);
        if let Some(b) = &inner.budget {
            b.deposit();
        }
        let delay = self.current_delay();
        let mut racers: Vec<Racer<Fut>> = vec![(1, Box::pin(op(1)), inner.clock.now())];
        let mut launched = 1u32;
        let mut sleep: Option<Sleep> = Some(inner.timer.sleep(delay));
        let mut last_err: Option<E> = None;
        let mut hedge_now = false;
        poll_fn(|cx| {
            loop {
                let mut i = 0;
                while i < racers.len() {
                    match racers[i].1.as_mut().poll(cx) {
                        Poll::Ready(Ok(v)) => {
                            let (n, _, started) = &racers[i];
                            self.observe(inner.clock.now() - *started);
                            if *n > 1 {
                                inner.wins.fetch_add(1, Ordering::Relaxed);
                            }
                            return Poll::Ready(Ok(v));
                        }
                        Poll::Ready(Err(e)) => {
                            racers.swap_remove(i);
                            last_err = Some(e);
                            hedge_now = true;
                        }
                        Poll::Pending => i += 1,
                    }
                }
                if !hedge_now
                    && let Some(s) = sleep.as_mut()
                    && s.as_mut().poll(cx).is_ready()
                {
                    sleep = None;
                    hedge_now = true;
                }
                if hedge_now && launched <= inner.config.max_hedges {
                    hedge_now = false;
                    if self.may_hedge() {
                        launched += 1;
                        racers.push((launched, Box::pin(op(launched)), inner.clock.now()));
                        sleep =
                            (launched <= inner.config.max_hedges).then(|| inner.timer.sleep(delay));
                        continue;
                    }
                    sleep = None;
                }
                hedge_now = false;
                if racers.is_empty() {
                    return match last_err.take() {
                        Some(e) => Poll::Ready(Err(e)),
                        None => Poll::Pending,
                    };
                }
                return Poll::Pending;
            }
        })
        .await
    }
}

impl fmt::Debug for Hedge {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Hedge")
            .field("config", &self.inner.config)
            .field("stats", &self.stats())
            .finish()
    }
}

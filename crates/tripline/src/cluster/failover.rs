//! Failover: when an endpoint fails, try another one not yet tried.
//!
//! It masks one node's blip or death, at the price of
//! latency, and — applied blindly — of a retry storm when the dependency
//! as a whole is overloaded. So this failover is bounded on every side:
//!
//! * at most `retries` further attempts, each on a *distinct* endpoint;
//!   endpoints that are ejected or whose breaker is open are skipped by
//!   selection (a skip costs nothing: no attempt, no budget);
//! * only failures fail over ([`EndpointOutcome::is_failure`]); a business
//!   error is final;
//! * a non-idempotent operation (`idempotent: false`) is never sent twice:
//!   it fails over only from a [`ConnectFailure`](EndpointOutcome::ConnectFailure),
//!   which never reached the endpoint;
//! * every failover spends one token of a shared [`RetryBudget`], if one
//!   is set, so that during an outage failovers stop by themselves;
//! * the deadline ([`Deadline::current`]) is checked before the first
//!   attempt and before every failover (after the backoff, if any), and
//!   handed to each attempt for its client timeout.
//!
//! The loop holds one snapshot of the endpoint set for the whole call, so
//! "not yet tried" stays exact while discovery changes the set.

mod config;
mod run;

use std::fmt;
use std::future::Future;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

pub use config::{FailoverConfig, FailoverStats};

use self::config::Counters;
use self::run::{Run, failover_loop};
use super::shared::{Shared, with_default_classifier};
use super::{Cluster, ClusterAttempt, ClusterError, Endpoint};
use crate::budget::RetryBudget;
use crate::endpoint::EndpointClassifier;
use crate::error::PolicyConfigError;
use crate::setters::setters;
use crate::sync::Arc;
use crate::timeout::SharedTimer;

struct Inner {
    config: FailoverConfig,
    budget: Option<RetryBudget>,
    timer: Option<SharedTimer>,
    rng: AtomicU64,
    counters: Counters,
}

/// The failover strategy over a cluster; cheap to clone, clones share
/// counters and budget.
///
/// ```
/// use tripline::cluster::{Cluster, ClusterError, EndpointConfig, EndpointOutcome, Failover, FailoverConfig};
///
/// let cluster = Cluster::builder()
///     .endpoints(["a", "b", "c"].map(|id| EndpointConfig::new(id, id)))
///     .build()
///     .unwrap();
/// // A payment: not idempotent.
/// let pay = Failover::try_new(cluster, FailoverConfig { idempotent: false, ..Default::default() }).unwrap();
/// let mut sent = 0;
/// let r = pay.call_with(
///     &|r: &Result<(), &str>| match r {
///         Ok(_) => EndpointOutcome::Success,
///         Err(_) => EndpointOutcome::LocalOriginFailure, // reset after sending
///     },
///     |_endpoint, _attempt| { sent += 1; Err("connection reset") },
/// );
/// assert!(matches!(r, Err(ClusterError::Failed { attempts: 1, .. })));
/// assert_eq!(sent, 1); // never sent twice
/// ```
#[derive(Clone)]
pub struct Failover {
    cluster: Cluster,
    inner: Arc<Inner>,
}

/// Builds a [`Failover`].
///
/// ```
/// use tripline::budget::{RetryBudget, RetryBudgetConfig};
/// use tripline::cluster::{Cluster, EndpointConfig, Failover, FailoverConfig};
///
/// let cluster = Cluster::builder().endpoint(EndpointConfig::new("a", "a:80")).build().unwrap();
/// let budget = RetryBudget::try_new(RetryBudgetConfig::default()).unwrap();
/// let failover = Failover::builder(cluster)
///     .config(FailoverConfig { retries: 1, ..Default::default() })
///     .budget(budget.clone())
///     .seed(7)
///     .build()
///     .unwrap();
/// assert!(failover.budget().unwrap().ptr_eq(&budget));
/// ```
pub struct FailoverBuilder {
    cluster: Cluster,
    config: FailoverConfig,
    budget: Option<RetryBudget>,
    timer: Option<SharedTimer>,
    seed: u64,
}

impl FailoverBuilder {
    setters! {
        /// The config (validated by [`build`](Self::build)).
        config: FailoverConfig,

        /// Failovers spend from `budget` (share it with the other policies of
        /// the same dependency).
        budget: Some(RetryBudget),

        /// The timer async calls wait their backoff on (without one, and off a
        /// `ManualClock`, an async backoff blocks the thread).
        timer: Some(SharedTimer),

        /// Seeds the backoff jitter.
        seed: u64,
    }

    /// Validates and builds.
    pub fn build(self) -> Result<Failover, PolicyConfigError> {
        self.config.validate()?;
        Ok(Failover {
            cluster: self.cluster,
            inner: Arc::new(Inner {
                config: self.config,
                budget: self.budget,
                timer: self.timer,
                rng: AtomicU64::new(self.seed),
                counters: Counters::default(),
            }),
        })
    }
}

impl Failover {
    /// Failover over `cluster` with `config`, no budget.
    pub fn try_new(cluster: Cluster, config: FailoverConfig) -> Result<Self, PolicyConfigError> {
        Self::builder(cluster).config(config).build()
    }

    /// A builder.
    pub fn builder(cluster: Cluster) -> FailoverBuilder {
        FailoverBuilder {
            cluster,
            config: FailoverConfig::default(),
            budget: None,
            timer: None,
            seed: 0x6661_696c_6f76_6572,
        }
    }

    /// The cluster.
    pub fn cluster(&self) -> &Cluster {
        &self.cluster
    }

    /// The config.
    pub fn config(&self) -> &FailoverConfig {
        &self.inner.config
    }

    /// The budget, if any.
    pub fn budget(&self) -> Option<&RetryBudget> {
        self.inner.budget.as_ref()
    }

    /// Cumulative counts.
    pub fn stats(&self) -> FailoverStats {
        self.inner.counters.snapshot()
    }

    with_default_classifier! {
        /// Runs `op` on selected endpoints until one succeeds or failover must
        /// stop: `Ok` is a success, `Err` an upstream failure.
        #[inline]
        pub fn call(op: FnMut) -> Result<T, ClusterError<E>> = call_with;
    }

    /// Like [`call`](Self::call), classifying results with `classifier`
    /// (which decides what fails over, and what a non-idempotent call may
    /// fail over from).
    pub fn call_with<T, E, C>(
        &self,
        classifier: &C,
        mut op: impl FnMut(&Endpoint, &ClusterAttempt) -> Result<T, E>,
    ) -> Result<T, ClusterError<E>>
    where
        C: EndpointClassifier<T, E> + ?Sized,
    {
        let s = &*self.cluster.shared;
        let mut run = Run::begin(s, &self.inner)?;
        let set = s.set.load();
        failover_loop!(run over &set,
            attempt(e, permit, attempt) => s.attempt(e, permit, &attempt, classifier, &mut op),
            backoff(wait) => s.sleep_sync(wait),
        )
    }

    with_default_classifier! {
        /// Awaits the futures `op` makes on selected endpoints until one
        /// succeeds or failover must stop.
        pub async fn call_async(op: FnMut) -> Result<T, ClusterError<E>> = call_async_with;
    }

    /// Like [`call_async`](Self::call_async), classifying with `classifier`.
    pub async fn call_async_with<T, E, C, F, Fut>(
        &self,
        classifier: &C,
        mut op: F,
    ) -> Result<T, ClusterError<E>>
    where
        C: EndpointClassifier<T, E> + ?Sized,
        F: FnMut(Endpoint, ClusterAttempt) -> Fut,
        Fut: Future<Output = Result<T, E>>,
    {
        let s = &*self.cluster.shared;
        let mut run = Run::begin(s, &self.inner)?;
        // The set is held across the awaits: an `Arc`, where the blocking
        // loop borrows a guard.
        let set = s.set.load_full();
        failover_loop!(run over &set,
            attempt(e, permit, attempt) => {
                let fut = op(e.clone(), attempt);
                s.attempt_async(e, permit, &attempt, classifier, fut).await
            },
            backoff(wait) => self.sleep_async(s, wait).await,
        )
    }

    async fn sleep_async(&self, s: &Shared, wait: Duration) {
        if wait.is_zero() {
            return;
        }
        match (&self.inner.timer, s.clock.as_manual()) {
            (_, Some(m)) => {
                m.advance(wait);
            }
            (Some(t), None) => t.sleep(wait).await,
            (None, None) => s.sleep_sync(wait),
        }
    }
}

impl fmt::Debug for Failover {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Failover")
            .field("cluster", &self.cluster.name())
            .field("config", &self.inner.config)
            .field("stats", &self.stats())
            .finish()
    }
}

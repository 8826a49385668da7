//! Building a pipeline: every part optional, validated once, with warnings
//! for settings that work against each other.

use std::time::Duration;

use super::{Inner, Pipeline, PolicyConfigError, Sleeper, Stage, order};
use crate::breaker::{CircuitBreaker, ConfigWarning};
use crate::budget::RetryBudget;
use crate::bulkhead::Bulkhead;
use crate::clock::SharedClock;
use crate::retry_policy::{RetryConfig, RetryPolicy};
use crate::setters::setters;
use crate::sync::Arc;
use crate::timeout::{SharedTimer, TimeoutConfig};

/// Builds a [`Pipeline`]; every part is optional.
#[derive(Default)]
pub struct PipelineBuilder {
    retry: Option<RetryConfig>,
    retry_policy: Option<RetryPolicy>,
    budget: Option<RetryBudget>,
    seed: Option<u64>,
    breaker: Option<CircuitBreaker>,
    bulkhead: Option<Bulkhead>,
    timeouts: TimeoutConfig,
    clock: Option<SharedClock>,
    timer: Option<SharedTimer>,
    sleeper: Option<Sleeper>,
    irreversible: bool,
    order: Option<Vec<Stage>>,
}

impl PipelineBuilder {
    /// Retries with `config` (a fresh policy; see [`share_retry`](Self::share_retry)).
    pub fn retry(mut self, config: RetryConfig) -> Self {
        self.retry = Some(config);
        self
    }

    pub(crate) fn retry_policy(mut self, policy: RetryPolicy) -> Self {
        self.retry_policy = Some(policy);
        self
    }

    setters! {
        /// Bounds retries with `budget` (shared with whoever else holds it).
        budget: Some(RetryBudget),

        /// Seeds the retry jitter.
        seed: Some(u64),
    }

    /// Protects the calls with `breaker`. The pipeline also takes the
    /// breaker's clock unless [`clock`](Self::clock) sets one.
    pub fn circuit_breaker(mut self, breaker: CircuitBreaker) -> Self {
        self.breaker = Some(breaker);
        self
    }

    setters! {
        /// Limits concurrency with `bulkhead`.
        bulkhead: Some(Bulkhead),

        /// Per-attempt timeout, overall deadline and floor.
        timeouts: TimeoutConfig,

        /// The clock deadlines and durations are measured on.
        clock: Some(impl Into<SharedClock>),

        /// The timer async calls sleep and time out on (default: tokio's, with
        /// the `tokio` feature). Without one, async timeouts are judged after
        /// the fact like sync ones, and backoff blocks the thread.
        timer: Some(SharedTimer),
    }

    /// How sync calls wait between attempts (default: advance a
    /// `ManualClock`, else block the thread).
    pub fn sleeper(mut self, sleeper: impl Fn(Duration) + Send + Sync + 'static) -> Self {
        self.sleeper = Some(Arc::new(sleeper));
        self
    }

    /// Marks the operation irreversible (payments, stock deduction,
    /// authorization): it refuses a fallback and must fail explicitly.
    pub fn irreversible(mut self) -> Self {
        self.irreversible = true;
        self
    }

    /// Declares the stack order you intend (outermost first) to have it
    /// checked: the pipeline runs only the canonical order, so any other is
    /// refused with the reason it would hurt.
    pub fn order(mut self, stages: &[Stage]) -> Self {
        self.order = Some(stages.to_vec());
        self
    }

    /// Validates and builds.
    pub fn build(self) -> Result<Pipeline, PolicyConfigError> {
        self.build_with_warnings().map(|(p, _)| p)
    }

    /// Like [`build`](Self::build), also returning soft warnings (a slow-call
    /// threshold not below the per-attempt timeout, say).
    pub fn build_with_warnings(self) -> Result<(Pipeline, Vec<ConfigWarning>), PolicyConfigError> {
        self.timeouts.validate()?;
        if let Some(order) = &self.order {
            order::check_canonical(order)?;
        }
        let retry = match (self.retry_policy, self.retry) {
            (Some(p), _) => Some(p),
            (None, Some(config)) => Some(RetryPolicy::new(config, self.budget.clone(), self.seed)?),
            (None, None) => None,
        };
        if self.budget.is_some() && retry.is_none() {
            return Err(PolicyConfigError::new(
                "pipeline",
                "budget",
                "needs a retry policy to bound (add `retry`)",
            ));
        }
        let mut warnings = Vec::new();
        if let (Some(b), Some(t)) = (&self.breaker, self.timeouts.per_attempt)
            && let Some(slow) = b.config().slow_call_duration
            && slow >= t
        {
            warnings.push(ConfigWarning {
                field: "timeouts.per_attempt".into(),
                message: format!(
                    "the breaker's slow_call_duration ({}) is not below the per-attempt timeout \
                     ({}): no call can be slow without first timing out",
                    humantime::format_duration(slow),
                    humantime::format_duration(t)
                ),
            });
        }
        if let Some(r) = &retry
            && r.config().max_attempts > 1
            && self.timeouts.overall.is_none()
            && self.timeouts.per_attempt.is_none()
        {
            warnings.push(ConfigWarning {
                field: "timeouts".into(),
                message: "retries without any timeout: a hung dependency holds every attempt \
                          forever and the breaker never sees it fail"
                    .into(),
            });
        }
        let untimed_retries = warnings.iter().any(|w| w.field == "timeouts");
        // The untimed-retries warning is logged at use, where it can be
        // judged (see `Inner::untimed_retries`); the caller still gets it.
        for w in warnings.iter().filter(|w| w.field != "timeouts") {
            tracing::warn!(target: "tripline::pipeline", "{w}");
        }
        let clock = self
            .clock
            .or_else(|| self.breaker.as_ref().map(|b| b.clock().clone()))
            .unwrap_or_default();
        Ok((
            Pipeline {
                inner: Arc::new(Inner {
                    retry,
                    breaker: self.breaker,
                    bulkhead: self.bulkhead,
                    timeouts: self.timeouts,
                    clock,
                    timer: self.timer.or_else(crate::timeout::default_timer),
                    sleeper: self.sleeper,
                    irreversible: self.irreversible,
                    untimed_retries,
                    untimed_warned: std::sync::atomic::AtomicBool::new(false),
                }),
            },
            warnings,
        ))
    }
}

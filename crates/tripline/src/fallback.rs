//! Fallback: what to return when the call did not produce a value — and a
//! marker saying that it is not the real thing.
//!
//! After a breaker opens, the caller must return *something*:
//! a static default, a computed substitute, a cached last good
//! value, or an explicit failure. Two rules shape this module:
//!
//! * **Degraded data must say so.** An empty list from a fallback and an
//!   empty list from the dependency mean different things, and stale cache
//!   must not be mistaken for fresh data. Every value comes wrapped in
//!   [`Served`], whose [`Degraded`] marker carries the reason, the source and
//!   the time the data is from (`as_of`). The cache's maximum age is its own
//!   setting, independent of the breaker's open duration, so a long outage
//!   never serves hours-old data silently.
//! * **Irreversible operations never fall back**. Payments, stock
//!   deduction, authorization: a default answer causes real loss. A
//!   fallback configured for an operation marked irreversible is refused
//!   when it is built; such calls fail explicitly.
//!
//! Fallbacks are typed per cause: [`on_rejected`](FallbackBuilder::on_rejected)
//! (a local policy refused: breaker open, bulkhead full, deadline floor,
//! budget spent), [`on_failure`](FallbackBuilder::on_failure) (the
//! dependency failed) and [`on_timeout`](FallbackBuilder::on_timeout).
//! A cause without a fallback stays an error.

mod pipeline;
mod served;

use std::fmt;
use std::time::Duration;

pub use pipeline::FallbackPipeline;
pub use served::{Degraded, DegradedReason, FallbackSource, Served};

use crate::clock::{Clock, SharedClock, Timestamp};
use crate::pipeline::{PolicyConfigError, PolicyError};
use crate::sync::{Arc, Mutex, lock};

type FallbackFn<T, E> = Arc<dyn Fn(&PolicyError<E>) -> T + Send + Sync>;

/// One substitute.
pub enum FallbackValue<T, E> {
    /// A constant.
    Static(T),
    /// Computed from the error.
    Function(FallbackFn<T, E>),
    /// The last good value if younger than `max_age`; else the error stands.
    Cached {
        /// Oldest data that may be served.
        max_age: Duration,
    },
}

impl<T: Clone, E> Clone for FallbackValue<T, E> {
    fn clone(&self) -> Self {
        match self {
            FallbackValue::Static(v) => FallbackValue::Static(v.clone()),
            FallbackValue::Function(f) => FallbackValue::Function(f.clone()),
            FallbackValue::Cached { max_age } => FallbackValue::Cached { max_age: *max_age },
        }
    }
}

impl<T, E> FallbackValue<T, E> {
    /// A computed substitute.
    pub fn function(f: impl Fn(&PolicyError<E>) -> T + Send + Sync + 'static) -> Self {
        FallbackValue::Function(Arc::new(f))
    }
}

struct Inner<T, E> {
    on_rejected: Option<FallbackValue<T, E>>,
    on_failure: Option<FallbackValue<T, E>>,
    on_timeout: Option<FallbackValue<T, E>>,
    cache: Option<Mutex<Option<(T, Timestamp)>>>,
    clock: SharedClock,
}

/// Typed fallbacks for rejected, failed and timed-out calls.
///
/// ```
/// use std::time::Duration;
/// use tripline::clock::ManualClock;
/// use tripline::fallback::{Fallback, FallbackSource, FallbackValue};
/// use tripline::pipeline::PolicyError;
///
/// let fallback: Fallback<Vec<&str>, &str> = Fallback::builder()
///     .on_rejected(FallbackValue::Static(vec![]))
///     .on_failure(FallbackValue::Cached { max_age: Duration::from_secs(60) })
///     .clock(ManualClock::new())
///     .build()
///     .unwrap();
/// let fresh = fallback.apply(Ok(vec!["a", "b"])).unwrap();
/// assert!(!fresh.is_degraded());
/// let stale = fallback.apply(Err(PolicyError::Inner("503"))).unwrap();
/// assert_eq!(stale.value, vec!["a", "b"]);
/// assert_eq!(stale.degraded.unwrap().source, FallbackSource::Cache);
/// ```
pub struct Fallback<T, E> {
    inner: Arc<Inner<T, E>>,
}

impl<T, E> Clone for Fallback<T, E> {
    fn clone(&self) -> Self {
        Fallback {
            inner: self.inner.clone(),
        }
    }
}

/// Builds a [`Fallback`].
pub struct FallbackBuilder<T, E> {
    on_rejected: Option<FallbackValue<T, E>>,
    on_failure: Option<FallbackValue<T, E>>,
    on_timeout: Option<FallbackValue<T, E>>,
    clock: Option<SharedClock>,
    irreversible: bool,
}

impl<T, E> Default for FallbackBuilder<T, E> {
    fn default() -> Self {
        FallbackBuilder {
            on_rejected: None,
            on_failure: None,
            on_timeout: None,
            clock: None,
            irreversible: false,
        }
    }
}

impl<T: Clone, E> FallbackBuilder<T, E> {
    /// The substitute when a local policy refused the call.
    pub fn on_rejected(mut self, v: FallbackValue<T, E>) -> Self {
        self.on_rejected = Some(v);
        self
    }

    /// The substitute when the dependency failed.
    pub fn on_failure(mut self, v: FallbackValue<T, E>) -> Self {
        self.on_failure = Some(v);
        self
    }

    /// The substitute when the call timed out.
    pub fn on_timeout(mut self, v: FallbackValue<T, E>) -> Self {
        self.on_timeout = Some(v);
        self
    }

    /// The same substitute for every cause.
    pub fn on_any(self, v: FallbackValue<T, E>) -> Self {
        self.on_rejected(v.clone())
            .on_failure(v.clone())
            .on_timeout(v)
    }

    /// The clock cache ages are measured on.
    pub fn clock(mut self, clock: impl Into<SharedClock>) -> Self {
        self.clock = Some(clock.into());
        self
    }

    /// Declares the operation irreversible: [`build`](Self::build) then refuses.
    pub fn irreversible(mut self, irreversible: bool) -> Self {
        self.irreversible = irreversible;
        self
    }

    /// Validates and builds.
    pub fn build(self) -> Result<Fallback<T, E>, PolicyConfigError> {
        if self.irreversible {
            return Err(irreversible_error());
        }
        let all = [&self.on_rejected, &self.on_failure, &self.on_timeout];
        if all.iter().all(|v| v.is_none()) {
            return Err(PolicyConfigError::new(
                "fallback",
                "on_rejected",
                "no fallback for any cause: set on_rejected, on_failure or on_timeout",
            ));
        }
        for (field, v) in ["on_rejected", "on_failure", "on_timeout"]
            .into_iter()
            .zip(all)
        {
            if let Some(FallbackValue::Cached { max_age }) = v
                && max_age.is_zero()
            {
                return Err(PolicyConfigError::new(
                    "fallback",
                    field,
                    "cached max_age must be positive, got 0s",
                ));
            }
        }
        let cached = all
            .iter()
            .any(|v| matches!(v, Some(FallbackValue::Cached { .. })));
        Ok(Fallback {
            inner: Arc::new(Inner {
                on_rejected: self.on_rejected,
                on_failure: self.on_failure,
                on_timeout: self.on_timeout,
                cache: cached.then(|| Mutex::new(None)),
                clock: self.clock.unwrap_or_default(),
            }),
        })
    }
}

pub(crate) fn irreversible_error() -> PolicyConfigError {
    PolicyConfigError::new(
        "fallback",
        "fallback",
        "must not be set on an irreversible operation (payment, stock deduction, \
         authorization): a substitute answer causes real loss, so it must fail explicitly",
    )
}

impl<T: Clone, E> Fallback<T, E> {
    /// A builder.
    pub fn builder() -> FallbackBuilder<T, E> {
        FallbackBuilder::default()
    }

    /// Turns a call's result into a served value: real values pass (and
    /// refresh the cache), errors get their cause's substitute, or stay
    /// errors when there is none (or the cache is empty or too old).
    pub fn apply(&self, result: Result<T, PolicyError<E>>) -> Result<Served<T>, PolicyError<E>> {
        let inner = &*self.inner;
        let error = match result {
            Ok(v) => {
                if let Some(cache) = &inner.cache {
                    *lock(cache) = Some((v.clone(), inner.clock.now()));
                }
                return Ok(Served::fresh(v));
            }
            Err(e) => e,
        };
        let reason = DegradedReason::of(&error);
        let source = match reason {
            DegradedReason::Rejected => &inner.on_rejected,
            DegradedReason::Failed => &inner.on_failure,
            DegradedReason::TimedOut => &inner.on_timeout,
        };
        let (value, source, as_of) = match source {
            None => return Err(error),
            Some(FallbackValue::Static(v)) => (v.clone(), FallbackSource::Static, None),
            Some(FallbackValue::Function(f)) => (f(&error), FallbackSource::Function, None),
            Some(FallbackValue::Cached { max_age }) => {
                let cached = inner.cache.as_ref().and_then(|c| lock(c).clone());
                match cached {
                    Some((v, at)) if inner.clock.now() - at <= *max_age => {
                        (v, FallbackSource::Cache, Some(at))
                    }
                    _ => return Err(error),
                }
            }
        };
        Ok(Served {
            value,
            degraded: Some(Degraded {
                reason,
                source,
                as_of,
            }),
        })
    }
}

impl<T, E> fmt::Debug for Fallback<T, E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let i = &self.inner;
        f.debug_struct("Fallback")
            .field("on_rejected", &i.on_rejected.is_some())
            .field("on_failure", &i.on_failure.is_some())
            .field("on_timeout", &i.on_timeout.is_some())
            .finish()
    }
}

//! Adaptive client throttling: shed load locally, in proportion, while a
//! backend is overloaded but still working.
//!
//! A circuit breaker is a switch: it either sends or it does not. A backend
//! that is *overloaded* — answering some requests and refusing the rest with
//! "too busy" (HTTP 429, 503, gRPC `RESOURCE_EXHAUSTED`) — needs a dial:
//! fewer requests, not none. Google SRE's client-side throttling ("Handling
//! Overload") is that dial.
//!
//! # Algorithm
//!
//! Each client keeps, over a sliding time window:
//!
//! * `requests` — requests the application attempted through the throttle,
//!   *including* those the throttle itself rejected;
//! * `accepts` — requests the backend accepted (processed, whatever the
//!   business result).
//!
//! and rejects each new request locally with probability
//!
//! ```text
//! p = min(max_rejection_probability, max(0, (requests − k·accepts) / (requests + 1)))
//! ```
//!
//! and `p = 0` while `requests` over the window is below
//! `minimum_requests_per_second × window.length`. A healthy backend accepts
//! everything, so `requests ≤ k·accepts` and `p = 0`: the throttle costs
//! nothing. As the backend refuses more, the client sends about `k` times
//! what the backend accepts and drops the excess at home, where it costs no
//! network, no backend CPU and no retry. As the backend recovers, `accepts`
//! rises and `p` falls back to zero: no state machine, no half-open probe,
//! no thundering herd. Counting local rejections as requests is what makes
//! the equilibrium `k × accepts` (SRE's choice); `max_rejection_probability`
//! keeps a trickle flowing so recovery is always observed.
//!
//! Recovery is gradual by design: the requests shed while overloaded stay
//! in the window as requests, so once the backend accepts everything again
//! `p` falls roughly as `p → 1 − k·(1 − p)` per window length (with k = 2,
//! 0.9 → 0.8 → 0.6 → 0.2 → 0), a ramp rather than a step.
//!
//! What a permit records:
//!
//! | response                                     | call                                   |
//! |----------------------------------------------|----------------------------------------|
//! | processed (2xx, 4xx business errors, 500)    | [`ThrottlePermit::accepted`]           |
//! | "overloaded" (429, 503, `RESOURCE_EXHAUSTED`)| [`ThrottlePermit::rejected_by_backend`]|
//! | no answer about load (connect error, timeout, cancelled, refused by a breaker) | drop the permit: neutral |
//!
//! Local rejections are never counted as accepts, nor reported to a breaker
//! as failures of the dependency: they say nothing about its health.
//!
//! # Throttle or breaker: when to use which
//!
//! | the dependency is…           | signal                                 | right tool                 | action                          |
//! |------------------------------|----------------------------------------|----------------------------|---------------------------------|
//! | overloaded but working       | explicit overload answers (429/503)    | [`AdaptiveThrottle`]       | send fewer requests, smoothly   |
//! | down or broken               | connect errors, timeouts, 5xx, slow calls | [`CircuitBreaker`](crate::CircuitBreaker) | stop sending, probe later |
//!
//! An overload refusal proves the server is alive and
//! merely busy, so feeding it into a breaker's failure rate turns "busy"
//! into "cut off" — exactly the wrong reaction. Route overload signals to
//! the throttle (the breaker's classifier marks them `Ignored`) and health
//! failures to the breaker. The throttle alone never stops traffic to a
//! dead dependency (some requests always go out), and the breaker alone
//! turns a 30% overload into a 100% outage. Use both, throttle first:
//!
//! ```
//! use std::time::Duration;
//! use tripline::throttle::AdaptiveThrottle;
//! use tripline::{CircuitBreaker, Outcome};
//!
//! enum Reply { Ok, Overloaded, Unreachable }
//!
//! fn call(
//!     throttle: &AdaptiveThrottle,
//!     breaker: &CircuitBreaker,
//!     send: impl FnOnce() -> Reply,
//! ) -> Result<(), &'static str> {
//!     let t = throttle.try_acquire().map_err(|_| "throttled locally")?;
//!     // A breaker rejection drops `t`: neutral for the throttle.
//!     let b = breaker.try_acquire().map_err(|_| "circuit open")?;
//!     match send() {
//!         Reply::Ok => {
//!             t.accepted();
//!             b.record(Outcome::Success, Duration::from_millis(3));
//!             Ok(())
//!         }
//!         Reply::Overloaded => {
//!             t.rejected_by_backend();
//!             b.record(Outcome::Ignored, Duration::from_millis(1)); // busy, not broken
//!             Err("overloaded")
//!         }
//!         Reply::Unreachable => {
//!             drop(t); // no answer about load
//!             b.record(Outcome::Failure, Duration::from_millis(1));
//!             Err("unreachable")
//!         }
//!     }
//! }
//!
//! let throttle = AdaptiveThrottle::try_new(Default::default()).unwrap();
//! let breaker = CircuitBreaker::try_new(Default::default()).unwrap();
//! assert_eq!(call(&throttle, &breaker, || Reply::Ok), Ok(()));
//! assert_eq!(call(&throttle, &breaker, || Reply::Overloaded), Err("overloaded"));
//! ```
//!
//! # Concurrency and cost
//!
//! Lock-free: admission reads the clock, two cached sums of the completed
//! buckets, this thread's stripe of the current bucket and a snapshot of
//! the other stripes at most 10 ms old (so threads do not read the lines
//! other threads are writing; the metrics stay exact; see `window.rs`),
//! and draws a random number only when `p > 0`; settling a permit is one
//! or two CAS on this thread's stripe. Randomness
//! is a per-instance SplitMix64 stream advanced by `fetch_add`, seedable for
//! reproducible runs and mixed with an instance id so replicas differ.

mod config;
mod metrics;
mod permit;
mod window;

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;

pub use config::{AdaptiveThrottleConfig, ThrottleConfigError, ThrottleWindow};
pub use metrics::{ThrottleCounts, ThrottleMetrics};
pub use permit::{OwnedThrottlePermit, ThrottlePermit, Throttled};

use self::window::{THROTTLED, Window};
use crate::clock::{Clock, SharedClock};
use crate::rng;
use crate::setters::setters;

/// An adaptive client-side throttle: a cheap, cloneable handle; clones share
/// one window.
///
/// ```
/// use std::time::Duration;
/// use tripline::clock::ManualClock;
/// use tripline::throttle::{AdaptiveThrottle, AdaptiveThrottleConfig};
///
/// let clock = ManualClock::new();
/// let throttle = AdaptiveThrottle::builder()
///     .config(AdaptiveThrottleConfig { minimum_requests_per_second: 0.0, ..Default::default() })
///     .clock(clock.clone())
///     .seed(7)
///     .build()
///     .unwrap();
///
/// // The backend is overloaded: it processes one request in ten.
/// let mut shed = 0;
/// for i in 0..1_000 {
///     match throttle.try_acquire() {
///         Ok(permit) if i % 10 == 0 => permit.accepted(),
///         Ok(permit) => permit.rejected_by_backend(),
///         Err(_) => shed += 1, // never sent
///     }
/// }
/// assert!(shed > 500, "most of the excess is shed at home");
/// let m = throttle.metrics();
/// let (r, a) = (m.window.requests as f64, m.window.accepts as f64);
/// let p = ((r - 2.0 * a) / (r + 1.0)).min(0.9);
/// assert!((throttle.rejection_probability() - p).abs() < 1e-9);
/// ```
#[derive(Clone)]
pub struct AdaptiveThrottle {
    inner: Arc<Inner>,
}

struct Inner {
    name: Arc<str>,
    config: AdaptiveThrottleConfig,
    clock: SharedClock,
    window: Window,
    /// `minimum_requests_per_second × window.length`.
    min_requests: f64,
    rng: AtomicU64,
}

/// Builds an [`AdaptiveThrottle`] with a non-default clock or seed.
///
/// ```
/// use tripline::clock::ManualClock;
/// use tripline::throttle::{AdaptiveThrottle, AdaptiveThrottleConfig};
///
/// let throttle = AdaptiveThrottle::builder()
///     .config(AdaptiveThrottleConfig { name: "search".into(), ..Default::default() })
///     .clock(ManualClock::new())
///     .seed(42)
///     .instance_id(3)
///     .build()
///     .unwrap();
/// assert_eq!(throttle.name(), "search");
/// ```
#[derive(Debug, Default)]
pub struct AdaptiveThrottleBuilder {
    config: AdaptiveThrottleConfig,
    clock: Option<SharedClock>,
    seed: Option<u64>,
    instance: Option<u64>,
}

impl AdaptiveThrottleBuilder {
    setters! {
        /// Uses `config` (validated by [`build`](Self::build)).
        config: AdaptiveThrottleConfig,

        /// Uses `clock` instead of the production [`MonotonicClock`](crate::clock::MonotonicClock).
        clock: Some(impl Into<SharedClock>),

        /// Seeds the rejection draws, for reproducible runs. Mixed with the
        /// instance id, so replicas built with one seed still diverge.
        seed: Some(u64),
    }

    /// Sets the instance id mixed into the seed (default: a per-process
    /// counter).
    pub fn instance_id(mut self, id: u64) -> Self {
        self.instance = Some(id);
        self
    }

    /// Validates the config and builds the throttle.
    pub fn build(self) -> Result<AdaptiveThrottle, ThrottleConfigError> {
        self.config.validate()?;
        let instance = self.instance.unwrap_or_else(rng::next_instance_id);
        let seed = rng::mix_seed(self.seed.unwrap_or_else(rng::random_seed), instance);
        let config = self.config;
        Ok(AdaptiveThrottle {
            inner: Arc::new(Inner {
                name: Arc::from(config.name.as_str()),
                window: Window::new(config.window.length, config.window.buckets),
                min_requests: config.minimum_requests_per_second
                    * config.window.length.as_secs_f64(),
                rng: AtomicU64::new(seed),
                clock: self.clock.unwrap_or_default(),
                config,
            }),
        })
    }
}

impl Inner {
    /// The SRE formula, capped, and zero below the minimum request rate.
    #[inline]
    fn probability(&self, requests: u64, accepts: u64) -> f64 {
        let requests = requests as f64;
        if requests < self.min_requests {
            return 0.0;
        }
        let p = (requests - self.config.k * accepts as f64) / (requests + 1.0);
        p.clamp(0.0, self.config.max_rejection_probability)
    }

    /// A uniform draw in [0, 1): each caller advances the shared SplitMix64
    /// state by one step with `fetch_add`, so concurrent draws never repeat.
    #[inline]
    fn draw(&self) -> f64 {
        rng::unit(rng::splitmix64_shared(&self.rng))
    }

    /// Admits one request, or sheds it (counted) with the probability in
    /// force.
    #[inline]
    fn admit(&self) -> Result<(), Throttled> {
        let now = self.clock.now();
        let epoch = self.window.epoch(now);
        let (requests, accepts) = self.window.requests_and_accepts(epoch, now);
        let p = self.probability(requests, accepts);
        if p > 0.0 && self.draw() < p {
            self.window.record(epoch, Some(THROTTLED));
            return Err(Throttled {
                rejection_probability: p,
            });
        }
        Ok(())
    }

    #[inline]
    fn record(&self, field: Option<usize>) {
        let epoch = self.window.epoch(self.clock.now());
        self.window.record(epoch, field);
    }
}

impl AdaptiveThrottle {
    /// A throttle with `config` on the production clock.
    pub fn try_new(config: AdaptiveThrottleConfig) -> Result<Self, ThrottleConfigError> {
        Self::builder().config(config).build()
    }

    /// A builder, for a custom clock or seed.
    pub fn builder() -> AdaptiveThrottleBuilder {
        AdaptiveThrottleBuilder::default()
    }

    /// The throttle's name.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// The config the throttle runs with.
    pub fn config(&self) -> &AdaptiveThrottleConfig {
        &self.inner.config
    }

    /// Asks to send one request: a [`ThrottlePermit`] to report the
    /// backend's answer on, or [`Throttled`] when the request is shed
    /// locally (it then counts as a request, never as an accept).
    #[inline]
    pub fn try_acquire(&self) -> Result<ThrottlePermit<'_>, Throttled> {
        self.inner.admit()?;
        Ok(ThrottlePermit { inner: &self.inner })
    }

    /// Like [`try_acquire`](Self::try_acquire), with a permit that owns a
    /// handle on the throttle: for a call whose answer comes back after
    /// the caller's borrow ends (a spawned task, a binding to another
    /// language's objects).
    ///
    /// ```
    /// use tripline::throttle::AdaptiveThrottle;
    ///
    /// let throttle = AdaptiveThrottle::try_new(Default::default()).unwrap();
    /// let permit = throttle.try_acquire_owned().expect("an idle throttle admits");
    /// std::thread::spawn(move || permit.rejected_by_backend()).join().unwrap();
    /// assert_eq!(throttle.metrics().window.requests, 1);
    /// ```
    pub fn try_acquire_owned(&self) -> Result<OwnedThrottlePermit, Throttled> {
        self.inner.admit()?;
        Ok(OwnedThrottlePermit {
            throttle: self.clone(),
        })
    }

    /// The probability with which the next request would be shed.
    pub fn rejection_probability(&self) -> f64 {
        let inner = &*self.inner;
        let now = inner.clock.now();
        let epoch = inner.window.epoch(now);
        let (requests, accepts) = inner.window.requests_and_accepts(epoch, now);
        inner.probability(requests, accepts)
    }
}

impl fmt::Debug for AdaptiveThrottle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AdaptiveThrottle")
            .field("name", &self.inner.name)
            .field("config", &self.inner.config)
            .finish()
    }
}

#[allow(dead_code)]
fn _assert_send_sync() {
    fn check<T: Send + Sync>() {}
    check::<AdaptiveThrottle>();
    check::<ThrottlePermit<'static>>();
}

//! Timers for the async policies, from any runtime.
//!
//! tripline's core has no runtime: a [`Timer`] is how an async policy
//! sleeps (backoff, hedge delay, timeouts). With the `tokio` feature,
//! [`TokioTimer`] sleeps on tokio's timer and [`TokioClock`] reads tokio's
//! time, so `tokio::time::pause()` drives every policy deterministically.
//! Other runtimes implement [`Timer`] in three lines.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use super::Timeout;

/// A boxed sleep future, the currency of [`Timer`].
pub type Sleep = Pin<Box<dyn Future<Output = ()> + Send + 'static>>;

/// Sleeps for the async policies: implement it for your runtime.
///
/// ```
/// use std::time::Duration;
/// use tripline::timeout::{Sleep, Timer};
///
/// struct NeverFires;
/// impl Timer for NeverFires {
///     fn sleep(&self, _: Duration) -> Sleep {
///         Box::pin(std::future::pending())
///     }
/// }
/// ```
pub trait Timer: Send + Sync + 'static {
    /// A future that completes after `d`.
    fn sleep(&self, d: Duration) -> Sleep;
}

/// A timer shared by policies and their clones.
pub type SharedTimer = Arc<dyn Timer>;

pin_project_lite::pin_project! {
    /// `fut`, abandoned with [`Timeout`] if it has not finished after the
    /// timer's delay. The inner future is polled first, so a future that is
    /// already ready never even arms the timer.
    pub struct TimeoutFuture<F> {
        #[pin]
        fut: F,
        sleep: Option<Sleep>,
        timer: Option<SharedTimer>,
        after: Duration,
    }
}

/// Races `fut` against `timer.sleep(after)`.
///
/// ```
/// # #[cfg(feature = "tokio")]
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// use std::sync::Arc;
/// use std::time::Duration;
/// use tripline::timeout::{timeout, TokioTimer};
///
/// let timer = Arc::new(TokioTimer::new());
/// let slow = tokio::time::sleep(Duration::from_secs(10));
/// let err = timeout(timer, Duration::from_secs(1), slow).await.unwrap_err();
/// assert_eq!(err.after, Duration::from_secs(1));
/// # }
/// # #[cfg(not(feature = "tokio"))] fn main() {}
/// ```
pub fn timeout<F: Future>(timer: SharedTimer, after: Duration, fut: F) -> TimeoutFuture<F> {
    TimeoutFuture {
        fut,
        sleep: None,
        timer: Some(timer),
        after,
    }
}

impl<F: Future> Future for TimeoutFuture<F> {
    type Output = Result<F::Output, Timeout>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        if let Poll::Ready(v) = this.fut.poll(cx) {
            return Poll::Ready(Ok(v));
        }
        if this.sleep.is_none()
            && let Some(timer) = this.timer.take()
        {
            *this.sleep = Some(timer.sleep(*this.after));
        }
        match this.sleep {
            Some(s) => match s.as_mut().poll(cx) {
                Poll::Ready(()) => Poll::Ready(Err(Timeout { after: *this.after })),
                Poll::Pending => Poll::Pending,
            },
            None => Poll::Pending,
        }
    }
}

/// The timer a policy sleeps on when its builder was given none: tokio's
/// with the `tokio` feature, else none (the policy then sleeps by blocking
/// or refuses what needs a timer). One place, so every policy defaults alike.
#[cfg(feature = "tokio")]
pub(crate) fn default_timer() -> Option<SharedTimer> {
    Some(Arc::new(TokioTimer))
}

/// Without the `tokio` feature there is no timer to default to.
#[cfg(not(feature = "tokio"))]
pub(crate) fn default_timer() -> Option<SharedTimer> {
    None
}

#[cfg(feature = "tokio")]
mod tokio_timer {
    use std::sync::OnceLock;
    use std::time::Duration;

    use super::{Sleep, Timer};
    use crate::clock::{Clock, SharedClock, Timestamp, duration_to_nanos};

    /// Sleeps on tokio's timer (needs a tokio runtime with time enabled).
    ///
    /// ```
    /// use tripline::timeout::TokioTimer;
    /// let timer = TokioTimer::new();
    /// let _clock = timer.clock(); // tokio time, paused in tests
    /// ```
    #[derive(Clone, Copy, Debug, Default)]
    pub struct TokioTimer;

    impl TokioTimer {
        /// The timer.
        pub fn new() -> Self {
            TokioTimer
        }

        /// The matching clock: tokio's time, so paused tests stay coherent.
        pub fn clock(&self) -> SharedClock {
            SharedClock::custom(TokioClock)
        }
    }

    impl Timer for TokioTimer {
        fn sleep(&self, d: Duration) -> Sleep {
            Box::pin(tokio::time::sleep(d))
        }
    }

    /// Reads `tokio::time::Instant::now()`: virtual under
    /// `tokio::time::pause()`, real otherwise. All `TokioClock`s share one
    /// epoch, so their timestamps (and [`Deadline`](crate::timeout::Deadline)s
    /// made with them) are comparable across the process.
    #[derive(Clone, Copy, Debug, Default)]
    pub struct TokioClock;

    fn epoch() -> tokio::time::Instant {
        static EPOCH: OnceLock<tokio::time::Instant> = OnceLock::new();
        *EPOCH.get_or_init(|| {
            // Slack, so that a paused runtime started just before the epoch
            // was taken still reads forward.
            let now = tokio::time::Instant::now();
            now.checked_sub(Duration::from_secs(3600)).unwrap_or(now)
        })
    }

    impl Clock for TokioClock {
        fn now(&self) -> Timestamp {
            let d = tokio::time::Instant::now().saturating_duration_since(epoch());
            Timestamp::from_nanos(duration_to_nanos(d))
        }

        fn resolution(&self) -> Duration {
            Duration::from_millis(1)
        }
    }
}

#[cfg(feature = "tokio")]
pub use tokio_timer::{TokioClock, TokioTimer};

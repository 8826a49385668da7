//! The deadline and how it travels: task-local context, explicit
//! parameter, HTTP header.
//!
//! # The header
//!
//! [`DEADLINE_HEADER`] (`tripline-timeout-ms`) carries the caller's
//! *remaining* budget as a decimal count of milliseconds, 1 to 12 ASCII
//! digits, e.g. `tripline-timeout-ms: 750`. A relative budget needs no
//! synchronised clocks; the receiver turns it into a deadline on its own
//! clock the moment the request arrives (network time in flight is thus
//! granted to the receiver, a few ms of optimism). gRPC's `grpc-timeout`
//! (1 to 8 digits and a unit: `H`, `M`, `S`, `m`, `u`, `n`) is accepted too.
//! A malformed value is treated as absent and counted
//! ([`malformed_header_count`]); it never panics and never fails the request.

use std::cell::Cell;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use crate::clock::{Clock, Timestamp};

/// The header carrying the remaining budget in milliseconds.
pub const DEADLINE_HEADER: &str = "tripline-timeout-ms";
/// gRPC's timeout header, accepted on the way in.
pub const GRPC_TIMEOUT_HEADER: &str = "grpc-timeout";
// The same names as `HeaderName`s: a lookup by `&str` parses and
// lower-cases the name on every call (~360 instructions each in the
// proxy's profile); a `HeaderName` is hashed directly.
#[cfg(feature = "tower")]
const DEADLINE_NAME: http::HeaderName = http::HeaderName::from_static(DEADLINE_HEADER);
#[cfg(feature = "tower")]
const GRPC_TIMEOUT_NAME: http::HeaderName = http::HeaderName::from_static(GRPC_TIMEOUT_HEADER);

/// When the work for a request stops being useful, on the pipeline's clock.
///
/// ```
/// use std::time::Duration;
/// use tripline::clock::ManualClock;
/// use tripline::timeout::Deadline;
///
/// let clock = ManualClock::new();
/// let deadline = Deadline::after(&clock, Duration::from_millis(800));
/// clock.advance(Duration::from_millis(300));
/// assert_eq!(deadline.remaining(&clock), Duration::from_millis(500));
/// let inner = deadline.scope(|| Deadline::current());
/// assert_eq!(inner, Some(deadline));
/// assert_eq!(Deadline::current(), None);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Deadline {
    at: Timestamp,
}

thread_local! {
    static CURRENT: Cell<Option<Deadline>> = const { Cell::new(None) };
}

/// Restores the previous context deadline on drop (also on panic).
struct Restore(Option<Deadline>);

impl Drop for Restore {
    fn drop(&mut self) {
        CURRENT.with(|c| c.set(self.0));
    }
}

impl Deadline {
    /// A deadline at `at` on some clock.
    pub const fn at(at: Timestamp) -> Self {
        Deadline { at }
    }

    /// A deadline `budget` from now on `clock`.
    pub fn after(clock: &impl Clock, budget: Duration) -> Self {
        Deadline {
            at: clock.now() + budget,
        }
    }

    /// The instant, on the clock that made it.
    pub const fn instant(&self) -> Timestamp {
        self.at
    }

    /// Budget left at `clock`'s now (zero once passed).
    #[inline]
    pub fn remaining(&self, clock: &impl Clock) -> Duration {
        self.at - clock.now()
    }

    /// Whether the deadline has passed.
    pub fn is_expired(&self, clock: &impl Clock) -> bool {
        clock.now() >= self.at
    }

    /// The earlier of two optional deadlines.
    pub fn earliest(a: Option<Deadline>, b: Option<Deadline>) -> Option<Deadline> {
        match (a, b) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, None) => a,
            (None, b) => b,
        }
    }

    /// The deadline of the request this thread (or task, inside
    /// [`scope_future`](Self::scope_future)) is working for, if any.
    #[inline]
    pub fn current() -> Option<Deadline> {
        CURRENT.with(Cell::get)
    }

    /// Runs `f` with `self` as the context deadline (tightened to an
    /// enclosing, earlier one: a callee can never extend its caller's budget).
    pub fn scope<R>(self, f: impl FnOnce() -> R) -> R {
        let prev = Self::current();
        CURRENT.with(|c| c.set(Self::earliest(prev, Some(self))));
        let _restore = Restore(prev);
        f()
    }

    /// Wraps `fut` so that, while it is polled, [`Deadline::current`] is
    /// `self`: a task-local context that works on any runtime (it is set and
    /// restored around every poll, so it follows the task across threads).
    pub fn scope_future<F: Future>(self, fut: F) -> WithDeadline<F> {
        WithDeadline {
            fut,
            deadline: self,
        }
    }

    /// The deadline a request carries in `headers` on `clock`, from
    /// [`DEADLINE_HEADER`] or else `grpc-timeout`; `None` if absent or
    /// malformed (malformed values are counted, see [`malformed_header_count`]).
    #[cfg(feature = "tower")]
    pub fn from_headers(headers: &http::HeaderMap, clock: &impl Clock) -> Option<Deadline> {
        Self::parse_headers(headers, clock).unwrap_or(None)
    }

    /// Like [`from_headers`](Self::from_headers), telling a malformed
    /// header (still counted) from an absent one.
    #[cfg(feature = "tower")]
    pub fn parse_headers(
        headers: &http::HeaderMap,
        clock: &impl Clock,
    ) -> Result<Option<Deadline>, MalformedDeadline> {
        // One pass comparing names (a tag or a length for most) instead of
        // two hashed lookups (~160 instructions each): nearly every
        // request carries neither header, and a proxy asks on every one.
        let (mut own, mut grpc) = (None, None);
        // `as_str`: comparing with a `const` name would build and drop a
        // temporary name per comparison.
        for (name, value) in headers {
            match name.as_str() {
                DEADLINE_HEADER => {
                    own.get_or_insert(value);
                }
                GRPC_TIMEOUT_HEADER => {
                    grpc.get_or_insert(value);
                }
                _ => {}
            }
        }
        let parsed = if let Some(v) = own {
            v.to_str()
                .map_err(|_| MalformedDeadline)
                .and_then(parse_timeout_ms)
        } else if let Some(v) = grpc {
            v.to_str()
                .map_err(|_| MalformedDeadline)
                .and_then(parse_grpc_timeout)
        } else {
            return Ok(None);
        };
        match parsed {
            Ok(budget) => Ok(Some(Deadline::after(clock, budget))),
            Err(e) => {
                MALFORMED.fetch_add(1, Ordering::Relaxed);
                Err(e)
            }
        }
    }

    /// Writes the remaining budget into [`DEADLINE_HEADER`] (replacing any
    /// incoming value, and dropping `grpc-timeout` so it cannot contradict it).
    #[cfg(feature = "tower")]
    pub fn write_headers(&self, headers: &mut http::HeaderMap, clock: &impl Clock) {
        headers.remove(GRPC_TIMEOUT_NAME);
        let value = format_timeout_ms(self.remaining(clock));
        if let Ok(v) = http::HeaderValue::from_str(&value) {
            headers.insert(DEADLINE_NAME, v);
        }
    }
}

pin_project_lite::pin_project! {
    /// A future run under a context deadline; see [`Deadline::scope_future`].
    pub struct WithDeadline<F> {
        #[pin]
        fut: F,
        deadline: Deadline,
    }
}

impl<F: Future> Future for WithDeadline<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = self.project();
        let prev = Deadline::current();
        CURRENT.with(|c| c.set(Deadline::earliest(prev, Some(*this.deadline))));
        let _restore = Restore(prev);
        this.fut.poll(cx)
    }
}

/// A deadline header whose value does not parse.
///
/// ```
/// use tripline::timeout::{parse_timeout_ms, MalformedDeadline};
/// assert_eq!(parse_timeout_ms("soon"), Err(MalformedDeadline));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MalformedDeadline;

impl fmt::Display for MalformedDeadline {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("malformed deadline header")
    }
}

impl std::error::Error for MalformedDeadline {}

static MALFORMED: AtomicU64 = AtomicU64::new(0);

/// Malformed deadline headers seen by `Deadline::from_headers` (feature `tower`) in this
/// process (treated as absent; a rising count means a misbehaving caller).
pub fn malformed_header_count() -> u64 {
    MALFORMED.load(Ordering::Relaxed)
}

/// Parses a [`DEADLINE_HEADER`] value: 1 to 12 ASCII digits of milliseconds.
///
/// ```
/// use std::time::Duration;
/// use tripline::timeout::parse_timeout_ms;
/// assert_eq!(parse_timeout_ms("750"), Ok(Duration::from_millis(750)));
/// assert!(parse_timeout_ms("-1").is_err());
/// assert!(parse_timeout_ms("1e3").is_err());
/// ```
pub fn parse_timeout_ms(value: &str) -> Result<Duration, MalformedDeadline> {
    let v = value.trim();
    if v.is_empty() || v.len() > 12 || !v.bytes().all(|b| b.is_ascii_digit()) {
        return Err(MalformedDeadline);
    }
    v.parse::<u64>()
        .map(Duration::from_millis)
        .map_err(|_| MalformedDeadline)
}

/// Parses a `grpc-timeout` value: 1 to 8 digits and a unit (`H` hours, `M`
/// minutes, `S` seconds, `m` ms, `u` µs, `n` ns).
///
/// ```
/// use std::time::Duration;
/// use tripline::timeout::parse_grpc_timeout;
/// assert_eq!(parse_grpc_timeout("250m"), Ok(Duration::from_millis(250)));
/// assert_eq!(parse_grpc_timeout("2S"), Ok(Duration::from_secs(2)));
/// assert!(parse_grpc_timeout("123456789S").is_err());
/// ```
pub fn parse_grpc_timeout(value: &str) -> Result<Duration, MalformedDeadline> {
    let v = value.trim();
    let Some(unit) = v.chars().last() else {
        return Err(MalformedDeadline);
    };
    let digits = &v[..v.len() - unit.len_utf8()];
    if digits.is_empty() || digits.len() > 8 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(MalformedDeadline);
    }
    let n: u64 = digits.parse().map_err(|_| MalformedDeadline)?;
    Ok(match unit {
        'H' => Duration::from_secs(n * 3600),
        'M' => Duration::from_secs(n * 60),
        'S' => Duration::from_secs(n),
        'm' => Duration::from_millis(n),
        'u' => Duration::from_micros(n),
        'n' => Duration::from_nanos(n),
        _ => return Err(MalformedDeadline),
    })
}

/// Formats a remaining budget for [`DEADLINE_HEADER`] (whole ms, rounded down).
///
/// ```
/// use std::time::Duration;
/// use tripline::timeout::format_timeout_ms;
/// assert_eq!(format_timeout_ms(Duration::from_micros(750_900)), "750");
/// ```
pub fn format_timeout_ms(remaining: Duration) -> String {
    remaining.as_millis().min(999_999_999_999).to_string()
}

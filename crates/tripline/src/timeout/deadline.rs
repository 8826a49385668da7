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
//! (1 to 8 digits and a unit: `H`, `M`, `S`, `m`, `u`, `n`) is accepted too,
//! and written back for a gRPC peer ([`Deadline::write_grpc_headers`]): a
//! gRPC server reads only `grpc-timeout`, so a hop that forwarded only
//! [`DEADLINE_HEADER`] would leave it working without a deadline.
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
/// gRPC's timeout header: read on the way in, written for a gRPC peer.
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
    /// For a peer that is not gRPC; a gRPC one takes
    /// [`write_grpc_headers`](Self::write_grpc_headers).
    #[cfg(feature = "tower")]
    pub fn write_headers(&self, headers: &mut http::HeaderMap, clock: &impl Clock) {
        headers.remove(GRPC_TIMEOUT_NAME);
        insert_timeout_ms(headers, self.remaining(clock));
    }

    /// Writes the remaining budget into both [`DEADLINE_HEADER`] and
    /// [`GRPC_TIMEOUT_HEADER`] (replacing any incoming values): a gRPC
    /// server knows only `grpc-timeout`, and without it would work on
    /// after every caller upstream has given up. Both headers carry one
    /// reading of the clock, so they cannot contradict each other.
    ///
    /// ```
    /// use std::time::Duration;
    /// use tripline::clock::ManualClock;
    /// use tripline::timeout::Deadline;
    ///
    /// let clock = ManualClock::new();
    /// let deadline = Deadline::after(&clock, Duration::from_secs(5));
    /// clock.advance(Duration::from_millis(250));
    /// let mut headers = http::HeaderMap::new();
    /// headers.insert("grpc-timeout", "5S".parse().unwrap());
    /// deadline.write_grpc_headers(&mut headers, &clock);
    /// assert_eq!(headers["grpc-timeout"], "4750000u");
    /// assert_eq!(headers["tripline-timeout-ms"], "4750");
    /// ```
    #[cfg(feature = "tower")]
    pub fn write_grpc_headers(&self, headers: &mut http::HeaderMap, clock: &impl Clock) {
        let remaining = self.remaining(clock);
        insert_timeout_ms(headers, remaining);
        if let Ok(v) = http::HeaderValue::from_str(&format_grpc_timeout(remaining)) {
            headers.insert(GRPC_TIMEOUT_NAME, v);
        }
    }

    /// Writes the remaining budget the way the request's next hop reads
    /// it: [`write_grpc_headers`](Self::write_grpc_headers) for a gRPC
    /// request (one that came with `grpc-timeout`, or whose `content-type`
    /// is `application/grpc…`), else [`write_headers`](Self::write_headers).
    /// For proxies and client layers that forward requests they did not
    /// build, and so cannot know the peer's protocol otherwise.
    ///
    /// ```
    /// use std::time::Duration;
    /// use tripline::clock::ManualClock;
    /// use tripline::timeout::Deadline;
    ///
    /// let clock = ManualClock::new();
    /// let deadline = Deadline::after(&clock, Duration::from_secs(2));
    /// let mut grpc = http::HeaderMap::new();
    /// grpc.insert("content-type", "application/grpc+proto".parse().unwrap());
    /// deadline.write_headers_for_peer(&mut grpc, &clock);
    /// assert_eq!(grpc["grpc-timeout"], "2000000u");
    /// let mut plain = http::HeaderMap::new();
    /// deadline.write_headers_for_peer(&mut plain, &clock);
    /// assert_eq!((plain["tripline-timeout-ms"].to_str().unwrap(), plain.get("grpc-timeout")), ("2000", None));
    /// ```
    #[cfg(feature = "tower")]
    pub fn write_headers_for_peer(&self, headers: &mut http::HeaderMap, clock: &impl Clock) {
        let grpc = headers.contains_key(GRPC_TIMEOUT_NAME)
            || headers
                .get(http::header::CONTENT_TYPE)
                .is_some_and(|v| v.as_bytes().starts_with(b"application/grpc"));
        if grpc {
            self.write_grpc_headers(headers, clock);
        } else {
            self.write_headers(headers, clock);
        }
    }
}

/// Sets [`DEADLINE_HEADER`] to `remaining` (replacing any value).
#[cfg(feature = "tower")]
fn insert_timeout_ms(headers: &mut http::HeaderMap, remaining: Duration) {
    if let Ok(v) = http::HeaderValue::from_str(&format_timeout_ms(remaining)) {
        headers.insert(DEADLINE_NAME, v);
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

/// The largest count a `grpc-timeout` value may carry: 8 digits.
const GRPC_TIMEOUT_MAX_COUNT: u128 = 99_999_999;

/// `grpc-timeout`'s units, finest first, with their length in nanoseconds.
const GRPC_TIMEOUT_UNITS: [(u128, char); 6] = [
    (1, 'n'),
    (1_000, 'u'),
    (1_000_000, 'm'),
    (1_000_000_000, 'S'),
    (60_000_000_000, 'M'),
    (3_600_000_000_000, 'H'),
];

/// Formats a remaining budget for `grpc-timeout`: at most 8 digits and
/// the finest unit they can hold, rounded down (a callee is never granted
/// more than its caller had), so the error is under one unit and below
/// 10⁻⁵ of the budget. Rounding never reaches `0` for a non-zero budget:
/// a budget too long for 8 digits of one unit is at least 10⁸ of it,
/// hence at least 1 of the next. Beyond 99 999 999 hours (11 000 years)
/// it is capped there.
///
/// ```
/// use std::time::Duration;
/// use tripline::timeout::{format_grpc_timeout, parse_grpc_timeout};
/// assert_eq!(format_grpc_timeout(Duration::from_millis(250)), "250000u");
/// assert_eq!(format_grpc_timeout(Duration::from_secs(5)), "5000000u");
/// assert_eq!(format_grpc_timeout(Duration::from_nanos(1)), "1n");
/// let d = Duration::from_millis(4_321);
/// assert!(parse_grpc_timeout(&format_grpc_timeout(d)).unwrap() <= d);
/// ```
pub fn format_grpc_timeout(remaining: Duration) -> String {
    let nanos = remaining.as_nanos();
    for (length, unit) in GRPC_TIMEOUT_UNITS {
        let count = nanos / length;
        if count <= GRPC_TIMEOUT_MAX_COUNT {
            return format!("{count}{unit}");
        }
    }
    format!("{GRPC_TIMEOUT_MAX_COUNT}H")
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use proptest::prelude::*;

    use super::{format_grpc_timeout, parse_grpc_timeout};

    #[test]
    fn grpc_timeouts_take_the_finest_unit_that_fits_eight_digits() {
        let cases = [
            (Duration::ZERO, "0n"),
            (Duration::from_nanos(1), "1n"),
            (Duration::from_nanos(99_999_999), "99999999n"),
            // One more nanosecond no longer fits: microseconds, rounded down.
            (Duration::from_nanos(100_000_000), "100000u"),
            (Duration::from_nanos(100_000_999), "100000u"),
            (Duration::from_millis(300), "300000u"),
            (Duration::from_secs(5), "5000000u"),
            (Duration::from_micros(99_999_999), "99999999u"),
            (Duration::from_micros(100_000_000), "100000m"),
            (Duration::from_millis(99_999_999), "99999999m"),
            (Duration::from_secs(100_000), "100000S"),
            (Duration::from_secs(99_999_999), "99999999S"),
            (Duration::from_secs(100_000_000), "1666666M"),
            (Duration::from_secs(99_999_999 * 60), "99999999M"),
            (Duration::from_secs(100_000_000 * 60), "1666666H"),
            (Duration::from_secs(99_999_999 * 3600), "99999999H"),
            (Duration::from_secs(100_000_000 * 3600), "99999999H"),
            (Duration::MAX, "99999999H"),
        ];
        for (budget, text) in cases {
            assert_eq!(format_grpc_timeout(budget), text, "{budget:?}");
        }
    }

    #[test]
    fn a_non_zero_budget_never_rounds_down_to_zero() {
        // The budgets just past each unit's 8 digits round the most.
        for budget in [
            Duration::from_nanos(1),
            Duration::from_nanos(100_000_000),
            Duration::from_micros(100_000_000),
            Duration::from_millis(100_000_000),
            Duration::from_secs(100_000_000),
            Duration::from_secs(100_000_000 * 60),
        ] {
            let back = parse_grpc_timeout(&format_grpc_timeout(budget)).unwrap();
            assert!(!back.is_zero(), "{budget:?}");
        }
    }

    #[cfg(feature = "tower")]
    #[test]
    fn a_grpc_peer_gets_the_remaining_budget_in_both_headers() {
        use super::{DEADLINE_HEADER, Deadline, GRPC_TIMEOUT_HEADER};
        use crate::clock::ManualClock;

        let clock = ManualClock::new();
        let deadline = Deadline::after(&clock, Duration::from_secs(5));
        clock.advance(Duration::from_micros(1_000_500));
        let mut headers = http::HeaderMap::new();
        headers.insert(GRPC_TIMEOUT_HEADER, "5S".parse().unwrap());
        headers.insert(DEADLINE_HEADER, "5000".parse().unwrap());
        deadline.write_grpc_headers(&mut headers, &clock);
        // Replaced, not appended: one value each, from one reading.
        assert_eq!(headers.get_all(GRPC_TIMEOUT_HEADER).iter().count(), 1);
        assert_eq!(headers.get_all(DEADLINE_HEADER).iter().count(), 1);
        assert_eq!(headers[GRPC_TIMEOUT_HEADER], "3999500u");
        assert_eq!(headers[DEADLINE_HEADER], "3999");
        assert_eq!(
            Deadline::from_headers(&headers, &clock),
            Some(Deadline::after(&clock, Duration::from_millis(3999)))
        );

        // A peer that is not gRPC gets only the proxy's own header.
        deadline.write_headers(&mut headers, &clock);
        assert!(headers.get(GRPC_TIMEOUT_HEADER).is_none());
        assert_eq!(headers[DEADLINE_HEADER], "3999");
    }

    proptest! {
        /// What a gRPC peer reads back is never more than the budget
        /// (a callee must not outlive its caller), and short of it by less
        /// than one unit — at most 10⁻⁵ of the budget.
        #[test]
        fn formatted_grpc_timeouts_read_back_no_longer_and_close(
            nanos in prop_oneof![
                0u64..1_000_000_000,
                0u64..=u64::MAX,
            ],
        ) {
            let budget = Duration::from_nanos(nanos);
            let text = format_grpc_timeout(budget);
            prop_assert!(text.len() <= 9, "{}", text);
            let back = parse_grpc_timeout(&text).unwrap();
            prop_assert!(back <= budget, "{:?} read back as {:?} ({})", budget, back, text);
            let short = budget - back;
            prop_assert!(
                short.as_nanos() * 100_000 <= budget.as_nanos(),
                "{:?} read back as {:?} ({})", budget, back, text
            );
            prop_assert_eq!(back.is_zero(), budget.is_zero());
        }
    }
}

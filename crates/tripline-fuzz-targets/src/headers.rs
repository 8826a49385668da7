//! Values read from request and response headers: the deadline a request
//! carries (`tripline-timeout-ms`, `grpc-timeout`) and a server's
//! pushback (`Retry-After`, `grpc-retry-pushback-ms`).

use http::{HeaderMap, HeaderValue};
use tripline::ManualClock;
use tripline::retry::RetryDecision;
use tripline::timeout::{DEADLINE_HEADER, Deadline};

/// The first byte says which headers are present (bit 0: the deadline
/// header, bit 1: `grpc-timeout`), the rest up to a newline is the first
/// value and after it the second. Beyond not panicking, a parsed deadline
/// must survive being forwarded: what [`Deadline::write_headers`] writes,
/// [`Deadline::from_headers`] reads back, never longer than the original.
pub fn deadline_headers(data: &[u8]) {
    let Some((&which, rest)) = data.split_first() else {
        return;
    };
    let (first, second) = match rest.iter().position(|&b| b == b'\n') {
        Some(i) => (&rest[..i], &rest[i + 1..]),
        None => (rest, &rest[..0]),
    };
    let mut headers = HeaderMap::new();
    if which & 1 != 0
        && let Ok(v) = HeaderValue::from_bytes(first)
    {
        headers.insert(DEADLINE_HEADER, v);
    }
    if which & 2 != 0
        && let Ok(v) = HeaderValue::from_bytes(if which & 1 != 0 { second } else { first })
    {
        headers.insert("grpc-timeout", v);
    }
    // Late enough that a deadline at the epoch would not hide arithmetic
    // that assumes `now` is small.
    let clock = ManualClock::new();
    clock.advance(std::time::Duration::from_secs(86_400 * 365));
    let parsed = Deadline::parse_headers(&headers, &clock);
    let deadline = Deadline::from_headers(&headers, &clock);
    assert_eq!(deadline, parsed.ok().flatten(), "the two readers disagree");
    let Some(deadline) = deadline else {
        return;
    };
    let remaining = deadline.remaining(&clock);
    let mut forwarded = HeaderMap::new();
    deadline.write_headers(&mut forwarded, &clock);
    let again = Deadline::from_headers(&forwarded, &clock)
        .unwrap_or_else(|| panic!("a forwarded deadline is unreadable: {forwarded:?}"));
    assert!(
        again.remaining(&clock) <= remaining,
        "forwarding lengthened the deadline: {remaining:?} -> {:?}",
        again.remaining(&clock)
    );
}

/// A `Retry-After` value (and the same bytes as gRPC pushback). A wait
/// the server asks for is at most what it said: a number of seconds is
/// taken as is.
pub fn retry_after(data: &[u8]) {
    let value = String::from_utf8_lossy(data);
    let decision = RetryDecision::from_retry_after(&value);
    if let Ok(secs) = value.trim().parse::<u64>() {
        assert_eq!(
            decision,
            RetryDecision::RetryAfter(std::time::Duration::from_secs(secs))
        );
    }
    let _ = RetryDecision::from_grpc_pushback(&value);
}

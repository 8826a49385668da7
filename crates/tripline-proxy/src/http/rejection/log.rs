//! One `tracing` line per request refused for what the client sent
//! (a malformed head, a stalled body), rate-limited.
//!
//! A refusal of bad input says who sent it and why, so a smuggling probe
//! or a flood of broken clients shows in the logs as well as in the
//! `DPE`/`CT` counters. The same client can send thousands a second,
//! though, and a line each would let it flood the log (and the disk
//! behind it) for the price of a socket: at most [`LINES_PER_SECOND`]
//! lines are written a second, process-wide, and the next line written
//! says how many were left out meanwhile. The counters count every one.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, UNIX_EPOCH};

use super::Reason;

/// Lines written a second at most; the rest are counted, not written.
pub(crate) const LINES_PER_SECOND: u64 = 10;

/// The second the lines counted in [`WRITTEN`] belong to.
static SECOND: AtomicU64 = AtomicU64::new(0);
/// Lines written in [`SECOND`].
static WRITTEN: AtomicU64 = AtomicU64::new(0);
/// Lines left out since the last one written.
static LEFT_OUT: AtomicU64 = AtomicU64::new(0);

/// Logs that the request of `client` was refused for `reason`, `what`
/// saying what was wrong with it — unless the second's lines are spent.
pub(crate) fn refused(client: SocketAddr, reason: Reason, what: &str) {
    let Some(left_out) = may_write() else {
        return;
    };
    tracing::warn!(
        client = %client,
        reason = reason.as_str(),
        flag = reason.flag(),
        left_out,
        "tripline-proxy: refused a request from {client}: {what} ({} {})",
        reason.status(),
        reason.as_str(),
    );
}

/// `Some(lines left out since the last written)` when a line may be
/// written now. Races between threads may let a few more through in a
/// second, never fewer: the bound is the order of magnitude.
fn may_write() -> Option<u64> {
    let now = tripline::clock::system_time_after(Duration::ZERO)
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    if SECOND.swap(now, Ordering::Relaxed) != now {
        WRITTEN.store(0, Ordering::Relaxed);
    }
    if WRITTEN.fetch_add(1, Ordering::Relaxed) >= LINES_PER_SECOND {
        LEFT_OUT.fetch_add(1, Ordering::Relaxed);
        return None;
    }
    Some(LEFT_OUT.swap(0, Ordering::Relaxed))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn at_most_the_seconds_lines_are_written_and_the_rest_counted() {
        // Calls far faster than a second apart: one second's worth at
        // most (two if the second turned meanwhile).
        let written = (0..100).filter(|_| may_write().is_some()).count() as u64;
        assert!(
            (1..=2 * LINES_PER_SECOND).contains(&written),
            "{written} written"
        );
    }
}

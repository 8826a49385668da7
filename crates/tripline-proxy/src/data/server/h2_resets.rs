//! Closing an HTTP/2 connection whose client cancels most of its streams
//! before their answer ("rapid reset", CVE-2023-44487).
//!
//! A stream costs its client two frames (HEADERS, then RST_STREAM) and the
//! proxy a routed request, an upstream try and an endpoint's work, all
//! abandoned. h2's own limit counts only streams reset before the server
//! accepted them, and hyper accepts at once, so a client pacing its resets
//! had the proxy send upstream without bound (measured: 5 000 cancelled
//! streams on one connection, 1 669 of them reached the endpoint, the
//! connection served on). The rule is Envoy's (its
//! `downstream_rq_too_many_premature_resets`): a stream the client
//! cancels within [`PREMATURE`] of its start, before its answer, is
//! premature; the connection is closed once half of [`LIMIT`] streams were
//! premature, or after `LIMIT` streams once at least half of all its
//! closed streams were. Clients that cancel now and then (a user who
//! navigates away, a hedging client dropping the slower copy) are far
//! below either bound.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

/// Streams after which the share of premature resets is judged.
pub(crate) const LIMIT: usize = 500;

/// A cancellation later than this after the stream started is a client
/// giving up on a slow answer, not an attack.
pub(crate) const PREMATURE: Duration = Duration::from_secs(1);

/// One HTTP/2 connection's closed and prematurely reset streams.
#[derive(Debug, Default)]
pub(crate) struct StreamResets {
    closed: AtomicUsize,
    premature: AtomicUsize,
    /// Notified (a stored permit) when the connection must be closed.
    exceeded: Notify,
}

impl StreamResets {
    /// A watch on one stream, started now.
    pub(crate) fn watch(self: &Arc<Self>) -> Unanswered {
        Unanswered {
            resets: self.clone(),
            since: Instant::now(),
        }
    }

    /// Resolves once the connection has had too many premature resets.
    pub(crate) async fn exceeded(&self) {
        self.exceeded.notified().await;
    }

    /// How many of the connection's closed streams were premature, and of
    /// how many.
    pub(crate) fn counts(&self) -> (usize, usize) {
        (
            self.premature.load(Ordering::Relaxed),
            self.closed.load(Ordering::Relaxed),
        )
    }

    fn closed(&self, premature: bool) {
        let closed = self.closed.fetch_add(1, Ordering::Relaxed) + 1;
        let premature = match premature {
            true => self.premature.fetch_add(1, Ordering::Relaxed) + 1,
            false => self.premature.load(Ordering::Relaxed),
        };
        let too_many = match closed < LIMIT {
            true => premature * 2 >= LIMIT,
            false => premature * 2 >= closed,
        };
        if too_many {
            self.exceeded.notify_one();
        }
    }
}

/// Kept in a stream's service future: dropped with the future when the
/// client cancels the stream, or [answered](Unanswered::answered).
pub(crate) struct Unanswered {
    resets: Arc<StreamResets>,
    since: Instant,
}

impl Unanswered {
    /// The stream's answer is ready: it closes as an answered stream.
    pub(crate) fn answered(self) {
        let resets = self.resets.clone();
        std::mem::forget(self);
        resets.closed(false);
    }
}

impl Drop for Unanswered {
    fn drop(&mut self) {
        self.resets.closed(self.since.elapsed() < PREMATURE);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn half_the_limit_of_early_cancels_closes_the_connection() {
        let resets = Arc::new(StreamResets::default());
        for _ in 0..LIMIT / 2 - 1 {
            drop(resets.watch());
        }
        assert_eq!(resets.counts(), (LIMIT / 2 - 1, LIMIT / 2 - 1));
        assert!(!has_permit(&resets).await);
        drop(resets.watch());
        assert!(has_permit(&resets).await);
    }

    #[tokio::test(start_paused = true)]
    async fn answered_streams_and_late_cancels_do_not_count() {
        let resets = Arc::new(StreamResets::default());
        for i in 0..4 * LIMIT {
            let stream = resets.watch();
            match i % 4 {
                // A quarter cancelled early: under half of all streams.
                0 => drop(stream),
                // A quarter cancelled after waiting long for the answer.
                1 => {
                    tokio::time::advance(PREMATURE).await;
                    drop(stream);
                }
                _ => stream.answered(),
            }
        }
        assert_eq!(resets.counts(), (LIMIT, 4 * LIMIT));
        assert!(!has_permit(&resets).await);
    }

    #[tokio::test(start_paused = true)]
    async fn past_the_limit_half_of_all_streams_cancelled_early_closes_it() {
        let resets = Arc::new(StreamResets::default());
        for _ in 0..LIMIT {
            resets.watch().answered();
        }
        // 250 premature of 750 closed: a third.
        for _ in 0..LIMIT / 2 {
            drop(resets.watch());
        }
        assert!(!has_permit(&resets).await);
        for _ in 0..LIMIT / 2 {
            drop(resets.watch());
        }
        assert_eq!(resets.counts(), (LIMIT, 2 * LIMIT));
        assert!(has_permit(&resets).await);
    }

    /// Whether [`StreamResets::exceeded`] would resolve now.
    async fn has_permit(resets: &StreamResets) -> bool {
        tokio::time::timeout(Duration::ZERO, resets.exceeded())
            .await
            .is_ok()
    }
}

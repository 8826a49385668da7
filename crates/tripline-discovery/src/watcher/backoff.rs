//! The wait before the next session attempt: doubling from 100 ms to 5 s,
//! back to 100 ms once a session is made. No jitter: each watcher follows
//! one cluster, and an ensemble that comes back takes a few hundred
//! sessions in a burst without trouble.

use std::time::Duration;

const FIRST: Duration = Duration::from_millis(100);
const MOST: Duration = Duration::from_secs(5);

/// The back-off between session attempts.
#[derive(Debug)]
pub(crate) struct Backoff {
    next: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff { next: FIRST }
    }
}

impl Backoff {
    /// The wait before this attempt; the next one waits twice as long.
    pub(crate) fn next_delay(&mut self) -> Duration {
        let now = self.next;
        self.next = (self.next * 2).min(MOST);
        now
    }

    /// A session was made: the next failure waits the least again.
    pub(crate) fn reset(&mut self) {
        self.next = FIRST;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_to_five_seconds_and_resets() {
        let mut b = Backoff::default();
        let waits: Vec<u64> = (0..8).map(|_| b.next_delay().as_millis() as u64).collect();
        assert_eq!(waits, [100, 200, 400, 800, 1600, 3200, 5000, 5000]);
        b.reset();
        assert_eq!(b.next_delay(), FIRST);
    }
}

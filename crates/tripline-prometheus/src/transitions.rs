//! Transitions by from, to and reason, counted from breaker events.
//!
//! A breaker counts its transitions in total but not by kind; its events
//! say every transition's from, to and reason. Transitions are rare (a
//! breaker that trips a thousand times a second is broken in other ways),
//! so the exporter subscribes to them and counts here, under a mutex, in
//! the thread that made the transition: no call that does not change the
//! state ever reaches this code. Counts start when the breaker is
//! registered, as Prometheus expects of a counter that appears.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use tripline::{Event, EventKind, Reason, State};

/// One (from, to, reason) and its count.
pub(crate) type Count = (State, State, Reason, u64);

/// Transition counts of every exported breaker, by breaker name.
#[derive(Debug, Default)]
pub(crate) struct TransitionBook {
    counts: Mutex<HashMap<Arc<str>, Vec<Count>, foldhash::fast::RandomState>>,
}

impl TransitionBook {
    /// Counts `event` if it is a transition.
    pub(crate) fn record(&self, event: &Event) {
        let EventKind::Transition(t) = &event.kind else {
            return;
        };
        let mut map = self.lock();
        let list = map.entry(event.breaker.clone()).or_default();
        match list
            .iter_mut()
            .find(|(f, to, r, _)| (*f, *to, *r) == (t.from, t.to, t.reason))
        {
            Some(c) => c.3 += 1,
            None => list.push((t.from, t.to, t.reason, 1)),
        }
    }

    /// A subscriber callback that feeds this book.
    pub(crate) fn callback(self: &Arc<Self>) -> impl Fn(&Event) + Send + Sync + 'static {
        let book = Arc::downgrade(self);
        move |event| {
            if let Some(book) = book.upgrade() {
                book.record(event);
            }
        }
    }

    /// Runs `f` with the counts (one lock for a whole scrape's lookups, so
    /// a transition waits at most for that, never for the encoding).
    pub(crate) fn with<R>(&self, f: impl FnOnce(&Counts<'_>) -> R) -> R {
        let map = self.lock();
        f(&Counts(&map))
    }

    /// Forgets breakers for which `keep` says no (no longer exported).
    pub(crate) fn retain(&self, mut keep: impl FnMut(&str) -> bool) {
        self.lock().retain(|name, _| keep(name));
    }

    /// Forgets one breaker (unregistered).
    pub(crate) fn forget(&self, name: &str) {
        self.lock().remove(name);
    }

    fn lock(
        &self,
    ) -> std::sync::MutexGuard<'_, HashMap<Arc<str>, Vec<Count>, foldhash::fast::RandomState>> {
        // Every critical section leaves the map consistent.
        self.counts.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A read view of the counts during a scrape.
pub(crate) struct Counts<'a>(&'a HashMap<Arc<str>, Vec<Count>, foldhash::fast::RandomState>);

impl Counts<'_> {
    /// Whether no transition was counted at all.
    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The counts of breaker `name` (a copy: the scrape encodes them after
    /// the lock is released).
    pub(crate) fn of(&self, name: &str) -> Vec<Count> {
        self.0.get(name).cloned().unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tripline::{CircuitBreaker, CircuitBreakerConfig};

    #[test]
    fn counts_by_from_to_reason() {
        let book = Arc::new(TransitionBook::default());
        let b = CircuitBreaker::try_new(CircuitBreakerConfig {
            name: "t".into(),
            ..Default::default()
        })
        .unwrap();
        let _sub = b.subscribe(book.callback());
        b.force_open();
        b.reset();
        b.force_open();
        let counts = book.with(|c| c.of("t"));
        assert_eq!(
            counts,
            vec![
                (State::Closed, State::ForcedOpen, Reason::Forced, 2),
                (State::ForcedOpen, State::Closed, Reason::Forced, 1),
            ]
        );
        book.retain(|n| n != "t");
        assert!(book.with(|c| c.of("t")).is_empty());
    }
}

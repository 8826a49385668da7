//! Transitions by from, to and reason, counted from breaker events, for
//! exporters.
//!
//! A breaker counts its transitions in total but not by kind; its events
//! say every transition's from, to and reason. An alert on flapping
//! ("closed → open three times in ten minutes") needs the kinds. They are
//! rare (a breaker that trips a thousand times a second is broken in other
//! ways), so an exporter subscribes and counts here, under a mutex, in the
//! thread that made the transition: no call that leaves the state alone
//! ever reaches this code. Counts start at subscription, as Prometheus
//! expects of a counter that appears.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use super::{Event, EventKind, Reason, State};

/// How often one breaker went from one state to another for one reason.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TransitionCount {
    /// The state left.
    pub from: State,
    /// The state entered.
    pub to: State,
    /// Why.
    pub reason: Reason,
    /// How many times, since the tally began.
    pub count: u64,
}

type ByName = HashMap<Arc<str>, Vec<TransitionCount>, foldhash::fast::RandomState>;

/// Transition counts of many breakers, by breaker name: one tally serves
/// an exporter's every breaker and registry (subscribe each with
/// [`subscriber`](Self::subscriber)).
///
/// ```
/// use std::sync::Arc;
/// use tripline::breaker::{Reason, TransitionTally};
/// use tripline::{CircuitBreaker, CircuitBreakerConfig, State};
///
/// let tally = Arc::new(TransitionTally::default());
/// let b = CircuitBreaker::try_new(CircuitBreakerConfig { name: "db".into(), ..Default::default() })?;
/// let _counting = b.subscribe(tally.subscriber());
/// b.force_open();
/// let counts = tally.of("db");
/// assert_eq!((counts[0].from, counts[0].to, counts[0].reason, counts[0].count),
///            (State::Closed, State::ForcedOpen, Reason::Forced, 1));
/// # Ok::<(), tripline::ConfigError>(())
/// ```
#[derive(Debug, Default)]
pub struct TransitionTally {
    counts: Mutex<ByName>,
}

impl TransitionTally {
    /// Counts `event` if it is a transition; any other event is left alone.
    pub fn record(&self, event: &Event) {
        let EventKind::Transition(t) = &event.kind else {
            return;
        };
        let mut map = self.lock();
        let list = map.entry(event.breaker.clone()).or_default();
        match list
            .iter_mut()
            .find(|c| (c.from, c.to, c.reason) == (t.from, t.to, t.reason))
        {
            Some(c) => c.count += 1,
            None => list.push(TransitionCount {
                from: t.from,
                to: t.to,
                reason: t.reason,
                count: 1,
            }),
        }
    }

    /// A subscriber callback that feeds this tally. It holds the tally
    /// weakly: an exporter that goes does not live on in its breakers.
    pub fn subscriber(self: &Arc<Self>) -> impl Fn(&Event) + Send + Sync + 'static {
        let tally = Arc::downgrade(self);
        move |event| {
            if let Some(tally) = tally.upgrade() {
                tally.record(event);
            }
        }
    }

    /// The counts of breaker `name`, in the order the kinds first
    /// happened (a copy, so that nothing is encoded under the lock).
    pub fn of(&self, name: &str) -> Vec<TransitionCount> {
        self.lock().get(name).cloned().unwrap_or_default()
    }

    /// Runs `f` with every breaker's counts under one lock: a scrape's
    /// lookups wait for no more than that, and a transition waits at most
    /// for them, never for the encoding.
    pub fn with<R>(&self, f: impl FnOnce(&TransitionLookup<'_>) -> R) -> R {
        let map = self.lock();
        f(&TransitionLookup(&map))
    }

    /// Forgets the breakers for which `keep` says no (no longer exported),
    /// so that names of breakers long gone do not pile up.
    pub fn retain(&self, mut keep: impl FnMut(&str) -> bool) {
        self.lock().retain(|name, _| keep(name));
    }

    /// Forgets one breaker (unregistered).
    pub fn forget(&self, name: &str) {
        self.lock().remove(name);
    }

    fn lock(&self) -> MutexGuard<'_, ByName> {
        // Every critical section leaves the map consistent.
        self.counts.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Every breaker's counts, read under the tally's lock (see
/// [`TransitionTally::with`]).
#[derive(Debug)]
pub struct TransitionLookup<'a>(&'a ByName);

impl TransitionLookup<'_> {
    /// Whether no transition was counted at all (a scrape then skips the
    /// lookups).
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The counts of breaker `name`; empty if it never transitioned.
    pub fn of(&self, name: &str) -> &[TransitionCount] {
        self.0.get(name).map_or(&[], Vec::as_slice)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{CircuitBreaker, CircuitBreakerConfig};

    #[test]
    fn counts_by_from_to_reason_and_forgets() {
        let tally = Arc::new(TransitionTally::default());
        let b = CircuitBreaker::try_new(CircuitBreakerConfig {
            name: "t".into(),
            ..Default::default()
        })
        .unwrap();
        let _sub = b.subscribe(tally.subscriber());
        b.force_open();
        b.reset();
        b.force_open();
        let kinds: Vec<_> = tally
            .of("t")
            .iter()
            .map(|c| (c.from, c.to, c.reason, c.count))
            .collect();
        assert_eq!(
            kinds,
            vec![
                (State::Closed, State::ForcedOpen, Reason::Forced, 2),
                (State::ForcedOpen, State::Closed, Reason::Forced, 1),
            ]
        );
        tally.with(|t| {
            assert!(!t.is_empty());
            assert_eq!(t.of("t").len(), 2);
            assert!(t.of("other").is_empty());
        });
        tally.retain(|n| n != "t");
        assert!(tally.of("t").is_empty());
        b.force_open();
        tally.forget("t");
        assert!(tally.of("t").is_empty());
    }
}

//! What a rollout's shadow period runs: a metrics-only twin per changed
//! breaker, and for a changed registry family a twin per member key.
//!
//! A family's members each judge their own key's traffic (one tenant's
//! failures open only that tenant's breaker), so one twin fed the whole
//! family's mixed outcomes would judge a different thing: it could trip
//! where no member would, or stay closed while one key's breaker trips
//! every minute. Each key seen during the shadow gets a twin of its own
//! instead, built on first sight, up to [`MAX_FAMILY_TWINS`]; outcomes of
//! keys past that bound are counted as unjudged rather than dropped
//! silently, so the report says how much of the family it covers.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use tripline::clock::SharedClock;
use tripline::{CircuitBreakerConfig, ConfigError, Outcome};

use super::managed::Twin;
use crate::audit::FamilyShadow;

/// At most this many keys of one family get a shadow twin; a shadow
/// period sees at most this many distinct keys' worth of memory
/// (a twin is one small breaker), whatever the key's cardinality.
pub const MAX_FAMILY_TWINS: usize = 4096;

/// How many of a family's keys the shadow report names, those that would
/// have tripped most first.
const REPORTED_KEYS: usize = 10;

/// The shadow of one changed target.
pub(crate) enum Shadow {
    /// A single breaker's twin.
    One(Twin),
    /// A family's twins, one per member key seen.
    Family(Box<FamilyTwins>),
}

impl Shadow {
    /// The shadow of a single breaker on `config`.
    pub(crate) fn one(
        config: CircuitBreakerConfig,
        clock: SharedClock,
    ) -> Result<Self, ConfigError> {
        Twin::new(config, clock).map(Shadow::One)
    }

    /// The shadow of a family whose members will run `config` (validated
    /// with its document, like a single breaker's).
    pub(crate) fn family(config: CircuitBreakerConfig, clock: SharedClock) -> Self {
        Shadow::Family(Box::new(FamilyTwins {
            config,
            clock,
            members: Mutex::new(HashMap::new()),
            unjudged: AtomicU64::new(0),
        }))
    }
}

/// One twin per member key of a family, built on first sight.
pub(crate) struct FamilyTwins {
    config: CircuitBreakerConfig,
    clock: SharedClock,
    members: Mutex<HashMap<String, Twin>>,
    /// Outcomes of keys that found the twin table full.
    unjudged: AtomicU64,
}

impl FamilyTwins {
    /// Judges one outcome of member `key` by the new rules.
    pub(crate) fn observe(&self, key: &str, outcome: Outcome, elapsed: Duration) {
        let mut members = self.members.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(twin) = members.get(key) {
            twin.observe(outcome, elapsed);
            return;
        }
        if members.len() >= MAX_FAMILY_TWINS {
            self.unjudged.fetch_add(1, Ordering::Relaxed);
            return;
        }
        // The config was validated with its document, so building cannot
        // fail; were it to, the outcome is counted as unjudged, not lost.
        match Twin::new(self.config.clone(), self.clock.clone()) {
            Ok(twin) => {
                twin.observe(outcome, elapsed);
                members.insert(key.to_owned(), twin);
            }
            Err(_) => {
                self.unjudged.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Whether any member's outcome reached the shadow.
    pub(crate) fn saw_traffic(&self) -> bool {
        self.unjudged.load(Ordering::Relaxed) > 0
            || !self
                .members
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .is_empty()
    }

    /// The family's part of the shadow report.
    pub(crate) fn report(&self, name: &str) -> FamilyShadow {
        let members = self.members.lock().unwrap_or_else(PoisonError::into_inner);
        let mut tripping: Vec<(String, u64)> = members
            .iter()
            .map(|(k, t)| (k.clone(), t.would_trip()))
            .filter(|(_, n)| *n > 0)
            .collect();
        tripping.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        FamilyShadow {
            family: name.to_owned(),
            keys_judged: members.len() as u64,
            keys_would_trip: tripping.len() as u64,
            would_trip: tripping.iter().map(|(_, n)| n).sum(),
            top_keys: tripping.into_iter().take(REPORTED_KEYS).collect(),
            unjudged_outcomes: self.unjudged.load(Ordering::Relaxed),
        }
    }
}

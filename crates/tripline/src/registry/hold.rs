//! An operator state for a whole family: every breaker of it, present and
//! future (the overflow breaker too), held forced open, disabled or
//! metrics-only until the hold is lifted.
//!
//! A keyed family is one dependency seen per tenant, shard or host; an
//! operator who forces "payments" open during an incident means every
//! tenant's breaker, including those of tenants whose first call comes
//! during the incident. Holding each live breaker alone would miss those.
//!
//! The hold sits in the family template, under the lock a creation holds
//! from reading the template to inserting the breaker: once [`hold_family`]
//! has the write lock, every breaker made before is in the map (and is put
//! in the state below), and every later one is made in it.
//!
//! [`hold_family`]: BreakerRegistry::hold_family

use std::sync::{Mutex, PoisonError};

use super::config::error;
use super::{BreakerRegistry, RegistryKey};
use crate::breaker::{CircuitBreaker, ConfigError, State};
use crate::clock::{Clock, Timestamp};

impl<K: RegistryKey> BreakerRegistry<K> {
    /// Holds every breaker of the family in `state` (forced open,
    /// disabled or metrics-only), those created from now on included, or
    /// with `None` lifts the hold: the breakers still in the held state
    /// reset to automatic operation (one an operator has since put in
    /// another state keeps it). A per-key override holds too: the hold is
    /// an operator's, above any config. Refused, with nothing changed, for
    /// a state only the breaker itself enters.
    ///
    /// Breaker events of the change reach subscribers as usual; a
    /// subscriber must not call `hold_family` on the same registry.
    ///
    /// ```
    /// use tripline::registry::{BreakerRegistry, RegistryConfig};
    /// use tripline::State;
    ///
    /// let tenants = BreakerRegistry::<String>::try_new(RegistryConfig::default())?;
    /// let acme = tenants.get(&"acme".to_owned()).unwrap();
    /// tenants.hold_family(Some(State::ForcedOpen))?;
    /// assert_eq!(acme.state(), State::ForcedOpen);
    /// let newcomer = tenants.get(&"newcomer".to_owned()).unwrap();
    /// assert_eq!(newcomer.state(), State::ForcedOpen, "made during the hold");
    /// tenants.hold_family(None)?;
    /// assert_eq!((acme.state(), newcomer.state()), (State::Closed, State::Closed));
    /// assert!(tenants.hold_family(Some(State::Open)).is_err());
    /// # Ok::<(), tripline::ConfigError>(())
    /// ```
    pub fn hold_family(&self, state: Option<State>) -> Result<(), ConfigError> {
        if let Some(s) = state.filter(|s| !s.is_operator_state()) {
            return Err(error(
                "state",
                format!(
                    "must be an operator state (forced_open, disabled or metrics_only), not {}",
                    s.as_str()
                ),
            ));
        }
        let s = &*self.shared;
        // Two holds at once would put the breakers in the states of both,
        // in any order: one at a time, the breakers' states included.
        let _one_at_a_time = s.holding.lock().unwrap_or_else(PoisonError::into_inner);
        let previous = {
            let mut template = s.template.write().unwrap_or_else(PoisonError::into_inner);
            let since = match template.held {
                // Held in the same state already: it is held since then.
                Some((held, since)) if Some(held) == state => since,
                _ => s.clock.now(),
            };
            std::mem::replace(&mut template.held, state.map(|st| (st, since))).map(|(held, _)| held)
        };
        // The states are set outside the template lock: the breakers'
        // events run subscribers, which may create breakers.
        let mut breakers = Vec::new();
        self.for_each_breaker(|_, b| breakers.push(b.clone()));
        breakers.extend(s.overflow_breaker.get().cloned());
        for b in &breakers {
            match state {
                Some(state) => put_in(b, state),
                None if previous == Some(b.state()) => b.reset(),
                None => {}
            }
        }
        Ok(())
    }

    /// The state [`hold_family`](Self::hold_family) holds the family in,
    /// if any.
    pub fn family_hold(&self) -> Option<State> {
        self.shared.template().held.map(|(state, _)| state)
    }

    /// Since when the family is held in its state, on the registry's
    /// clock; `None` when it is not held. Holding it again in the same
    /// state keeps the time.
    pub fn family_held_since(&self) -> Option<Timestamp> {
        self.shared.template().held.map(|(_, since)| since)
    }
}

/// Puts a breaker in an operator state (a breaker state is a no-op:
/// [`BreakerRegistry::hold_family`] refuses those).
pub(crate) fn put_in(breaker: &CircuitBreaker, state: State) {
    match state {
        State::ForcedOpen => breaker.force_open(),
        State::Disabled => breaker.disable(),
        State::MetricsOnly => breaker.metrics_only(),
        State::Closed | State::Open | State::HalfOpen => {}
    }
}

/// Serialises [`BreakerRegistry::hold_family`] calls.
pub(crate) type Holding = Mutex<()>;

//! Live reconfiguration of a whole family: one call changes
//! the config of every breaker that follows the family template, present
//! and future, without losing their state.

use std::sync::PoisonError;

use super::config::error;
use super::{BreakerRegistry, RegistryKey};
use crate::breaker::{CircuitBreakerConfig, ConfigError, ConfigWarning};

impl<K: RegistryKey> BreakerRegistry<K> {
    /// Replaces the family's breaker config: every breaker without a
    /// per-key override (and the overflow breaker) is reconfigured in place
    /// — state, window contents and subscribers kept, see
    /// [`CircuitBreaker::reconfigure`](crate::CircuitBreaker::reconfigure) — and breakers created from now on
    /// get it. Breakers with an override keep theirs.
    ///
    /// An invalid config is refused, naming the field, and changes nothing;
    /// so is a new `name` (it names the family's breakers and their
    /// metrics). Returns the config's warnings.
    ///
    /// ```
    /// use tripline::registry::{BreakerRegistry, RegistryConfig};
    /// use tripline::CircuitBreakerConfig;
    ///
    /// let registry = BreakerRegistry::<u32>::try_new(RegistryConfig::default()).unwrap();
    /// let b = registry.get(&7).unwrap();
    /// registry
    ///     .reconfigure_family(CircuitBreakerConfig { minimum_calls: 50, ..registry.family_config() })
    ///     .unwrap();
    /// assert_eq!(b.config().minimum_calls, 50);
    /// assert_eq!(registry.get(&8).unwrap().config().minimum_calls, 50);
    ///
    /// let err = registry
    ///     .reconfigure_family(CircuitBreakerConfig { minimum_calls: 0, ..registry.family_config() })
    ///     .unwrap_err();
    /// assert_eq!(err.field, "minimum_calls");
    /// assert_eq!(b.config().minimum_calls, 50, "the last good config stays");
    /// ```
    pub fn reconfigure_family(
        &self,
        config: CircuitBreakerConfig,
    ) -> Result<Vec<ConfigWarning>, ConfigError> {
        let s = &*self.shared;
        if config.name != *s.family {
            return Err(error(
                "name",
                format!(
                    "cannot change on a live family (it names its breakers): {:?} → {:?}",
                    s.family, config.name
                ),
            ));
        }
        // Creations hold the read lock from reading the template to
        // inserting the breaker: once the write lock is ours, every breaker
        // made from the old template is in the map, and every later one
        // gets the new template.
        let mut template = s.template.write().unwrap_or_else(PoisonError::into_inner);
        // The template's own breaker validates the config and makes the one
        // settings object the whole family will share; if it refuses,
        // nothing has changed.
        let warnings = template.sibling.reconfigure(config.clone())?;
        template.config = config;
        let sibling = template.sibling.clone();
        drop(template);
        let guard = scc::Guard::new();
        for (key, entry) in s.map.iter(&guard) {
            if s.override_for(key).is_none() {
                entry.breaker.adopt_settings_of(&sibling, &warnings);
            }
        }
        if let Some(b) = s.overflow_breaker.get() {
            b.adopt_settings_of(&sibling, &warnings);
        }
        Ok(warnings)
    }
}

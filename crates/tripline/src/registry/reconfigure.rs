//! Live reconfiguration of a whole family (DESIGN §4): one call changes
//! the config of every breaker that follows the family template, present
//! and future, without losing their state.

use std::sync::PoisonError;

use super::config::error;
use super::{BreakerRegistry, RegistryKey};
use crate::breaker::{CircuitBreaker, CircuitBreakerConfig, ConfigError, ConfigWarning};

impl<K: RegistryKey> BreakerRegistry<K> {
    /// Replaces the family's breaker config: every breaker without a
    /// per-key override (and the overflow breaker) is reconfigured in place
    /// — state, window contents and subscribers kept, see
    /// [`CircuitBreaker::reconfigure`] — and breakers created from now on
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
        let warnings = config.validate()?;
        // Creations hold the read lock from reading the template to
        // inserting the breaker: once the write lock is ours, every breaker
        // made from the old template is in the map, and every later one
        // gets the new template.
        let mut template = s.template.write().unwrap_or_else(PoisonError::into_inner);
        let old = template.clone();
        *template = config.clone();
        drop(template);

        let mut done: Vec<CircuitBreaker> = Vec::new();
        let mut apply = |b: &CircuitBreaker| -> Result<(), ConfigError> {
            b.reconfigure(CircuitBreakerConfig {
                name: b.name().to_owned(),
                ..config.clone()
            })?;
            done.push(b.clone());
            Ok(())
        };
        let guard = scc::Guard::new();
        let result = s
            .map
            .iter(&guard)
            .filter(|(k, _)| s.override_for(k).is_none())
            .try_for_each(|(_, e)| apply(&e.breaker))
            .and_then(|()| s.overflow_breaker.get().map_or(Ok(()), &mut apply));
        if let Err(e) = result {
            // Validated above, so a breaker refusing it is not expected;
            // if one does, put every breaker and the template back.
            *s.template.write().unwrap_or_else(PoisonError::into_inner) = old.clone();
            for b in &done {
                let _ = b.reconfigure(CircuitBreakerConfig {
                    name: b.name().to_owned(),
                    ..old.clone()
                });
            }
            return Err(e);
        }
        Ok(warnings)
    }
}

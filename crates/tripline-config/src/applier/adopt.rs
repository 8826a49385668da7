//! Breakers whose owner rebuilds them while the applier runs: a proxy's
//! reload builds new route breakers, registry families and clusters, and
//! hands each to the applier again.
//!
//! Pushed parameters outlive the rebuild: a breaker adopted under a name
//! some document configured is put on that document's config before it is
//! managed (the owner calls this before the breaker takes traffic), so a
//! reload of the owner's own config never undoes a push for the breakers
//! the push names. A name no document configured keeps the owner's config.

use tripline::registry::RegistryKey;
use tripline::{BreakerRegistry, CircuitBreaker, CircuitBreakerConfig};

use super::{Applier, ApplyError, Managed};
use crate::document::DocumentError;

impl Applier {
    /// Manages `breaker` from now on under its name, replacing what was
    /// managed under that name (an operator override recorded for the name
    /// stays recorded). If a document configured that name, the breaker is
    /// first reconfigured to that config, state kept; the error says which
    /// field it refused (which validation of the document rules out).
    pub fn adopt_breaker(&self, breaker: CircuitBreaker) -> Result<(), ApplyError> {
        let name = breaker.name().to_owned();
        let mut core = self.core();
        if let Some(pushed) = core.pushed.get(&name)
            && breaker.config() != *pushed
        {
            breaker
                .reconfigure(pushed.clone())
                .map_err(|e| refused(&name, e))?;
        }
        let managed_now = core.breakers.get(&name);
        if managed_now
            .and_then(|m| m.breaker())
            .is_some_and(|b| b.ptr_eq(&breaker))
        {
            // Already managed: keep its trip count (a canary's bake
            // compares it with the fleet's).
            return Ok(());
        }
        let overridden = managed_now.is_some_and(|m| m.overridden);
        let mut managed = Managed::new(breaker);
        managed.overridden = overridden;
        core.breakers.insert(name, managed);
        Ok(())
    }

    /// [`adopt_breaker`](Self::adopt_breaker) for a registry family,
    /// managed under its family name: a pushed config for that name
    /// becomes the family's template (every breaker on it follows).
    pub fn adopt_family<K: RegistryKey>(
        &self,
        registry: BreakerRegistry<K>,
    ) -> Result<(), ApplyError> {
        let name = registry.family().to_owned();
        let mut core = self.core();
        if let Some(pushed) = core.pushed.get(&name)
            && registry.family_config() != *pushed
        {
            registry
                .reconfigure_family(pushed.clone())
                .map_err(|e| refused(&name, e))?;
        }
        core.breakers.insert(name, Managed::family(registry));
        Ok(())
    }

    /// Stops managing `name` (its owner dropped it). A later document
    /// naming it gets a breaker of the applier's own, as for any new name.
    pub fn release(&self, name: &str) {
        self.core().breakers.remove(name);
    }

    /// The config the last document naming `name` installed, if one did:
    /// what an owner rebuilding that breaker should give it.
    pub fn pushed_config(&self, name: &str) -> Option<CircuitBreakerConfig> {
        self.core().pushed.get(name).cloned()
    }
}

fn refused(name: &str, e: tripline::ConfigError) -> ApplyError {
    ApplyError::Document(DocumentError::Invalid {
        breaker: name.to_owned(),
        field: e.field,
        constraint: e.constraint,
    })
}

//! Breakers whose owner rebuilds them while the applier runs: a proxy's
//! reload builds new route breakers, registry families and clusters, and
//! hands each to the applier again.
//!
//! Pushed parameters outlive the rebuild: a breaker adopted under a name
//! some document configured gets that document's table laid on its own
//! config before it is managed (the owner calls this before the breaker
//! takes traffic), so a reload of the owner's own config never undoes a
//! push for the fields the push names — and a field the push does not
//! name follows the owner's new config. A name no document configured
//! keeps the owner's config.

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
        let managed_now = core.breakers.get(&name);
        if managed_now
            .and_then(|m| m.breaker())
            .is_some_and(|b| b.ptr_eq(&breaker))
        {
            // Already managed, on its base and pushed table (a reload that
            // kept it went through `rebase`): keep its trip count (a
            // canary's bake compares it with the fleet's).
            return Ok(());
        }
        let base = breaker.config();
        if let Some(wanted) = Applier::wanted(&core, &base) {
            let wanted = wanted?;
            if wanted != base {
                breaker.reconfigure(wanted).map_err(|e| refused(&name, e))?;
            }
        }
        let overridden = managed_now.is_some_and(|m| m.overridden);
        let mut managed = Managed::new(breaker);
        managed.overridden = overridden;
        managed.base = base;
        core.breakers.insert(name, managed);
        drop(core);
        // A fleet override naming it holds it before it takes traffic.
        self.with_core(|this, core| this.reconcile_overrides(core));
        Ok(())
    }

    /// The owner of breaker `owner.name` now configures it as `owner` (a
    /// reload of its file that kept the breaker): records `owner` as the
    /// base pushed tables patch, and returns the config the breaker should
    /// run — `owner` with the last pushed table for that name laid on it,
    /// or `owner` itself if no document named it (or its table does not
    /// fit the new base: the refusal is logged and the file wins).
    pub fn rebase(&self, owner: CircuitBreakerConfig) -> CircuitBreakerConfig {
        let mut core = self.core();
        if let Some(managed) = core.breakers.get_mut(&owner.name) {
            managed.base = owner.clone();
        }
        let Some(wanted) = Applier::wanted(&core, &owner) else {
            return owner;
        };
        match wanted {
            Ok(wanted) => wanted,
            Err(e) => {
                tracing::warn!(error = %e,
                    "tripline-config: the pushed table does not fit the owner's new config; the owner's config runs");
                owner
            }
        }
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
        let base = registry.family_config();
        if let Some(wanted) = Applier::wanted(&core, &base) {
            let wanted = wanted?;
            if wanted != base {
                registry
                    .reconfigure_family(wanted)
                    .map_err(|e| refused(&name, e))?;
            }
        }
        let mut managed = Managed::family(registry);
        managed.base = base;
        core.breakers.insert(name, managed);
        Ok(())
    }

    /// Stops managing `name` (its owner dropped it). A later document
    /// naming it gets a breaker of the applier's own, as for any new name.
    pub fn release(&self, name: &str) {
        self.core().breakers.remove(name);
    }

    /// The config the last document naming `name` gives it, if one did:
    /// its table laid on the breaker's base (the library's defaults for a
    /// name not managed). `None` also when the table does not fit that base.
    pub fn pushed_config(&self, name: &str) -> Option<CircuitBreakerConfig> {
        let core = self.core();
        let base = core.breakers.get(name).map_or_else(
            || CircuitBreakerConfig {
                name: name.to_owned(),
                ..Default::default()
            },
            |m| m.base.clone(),
        );
        Applier::wanted(&core, &base)?.ok()
    }
}

fn refused(name: &str, e: tripline::ConfigError) -> ApplyError {
    ApplyError::Document(DocumentError::Invalid {
        breaker: name.to_owned(),
        field: e.field,
        constraint: e.constraint,
    })
}

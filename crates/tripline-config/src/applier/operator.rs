//! Operator overrides and feeding the shadow twins.

use std::sync::PoisonError;
use std::sync::atomic::Ordering;
use std::time::Duration;

use tripline::{CallError, CircuitBreaker, Clock, Outcome};

use super::{Applier, ApplyError, Shadow};
use crate::document::OverrideState;

impl Applier {
    /// Forces `name` open as an operator override: pushed configs keep
    /// changing its thresholds but never its state, until
    /// [`clear_override`](Self::clear_override).
    pub fn force_open(&self, name: &str) -> Result<(), ApplyError> {
        self.hold_locally(name, OverrideState::ForcedOpen)
    }

    /// Holds `name` in `state` as this instance's operator override: it
    /// holds over a fleet override too, until
    /// [`clear_override`](Self::clear_override). A registry family is held
    /// whole: every breaker of it, present and future
    /// ([`BreakerRegistry::hold_family`](tripline::BreakerRegistry::hold_family)).
    pub fn hold_locally(&self, name: &str, state: OverrideState) -> Result<(), ApplyError> {
        let mut core = self.core();
        let managed = core
            .breakers
            .get_mut(name)
            .ok_or_else(|| ApplyError::UnknownBreaker(name.to_owned()))?;
        managed.hold(state);
        managed.overridden = true;
        Ok(())
    }

    /// Ends this instance's operator override: the breaker resets to
    /// automatic operation, or goes back to the fleet override in force.
    pub fn clear_override(&self, name: &str) -> Result<(), ApplyError> {
        self.with_core(|this, core| {
            let managed = core
                .breakers
                .get_mut(name)
                .ok_or_else(|| ApplyError::UnknownBreaker(name.to_owned()))?;
            managed.release();
            managed.overridden = false;
            managed.fleet = None;
            this.reconcile_overrides(core);
            Ok(())
        })
    }

    /// The breakers under an operator override.
    pub fn overrides(&self) -> Vec<String> {
        let core = self.core();
        core.breakers
            .iter()
            .filter(|(_, m)| m.overridden)
            .map(|(n, _)| n.clone())
            .collect()
    }

    /// Feeds one outcome of breaker `name` to its shadow twin, if a rollout
    /// is shadowing it (a no-op otherwise). Call it with every outcome the
    /// live breaker records, or use [`call`](Self::call), which does.
    /// Members of a registry family go through
    /// [`observe_member`](Self::observe_member) instead.
    pub fn observe(&self, name: &str, outcome: Outcome, elapsed: Duration) {
        self.with_shadow(name, |shadow| {
            if let Shadow::One(twin) = shadow {
                twin.observe(outcome, elapsed);
            }
        });
    }

    /// Feeds one outcome of the member `key` of family `family` to that
    /// key's shadow twin, if a rollout is shadowing the family (a no-op
    /// otherwise). Each key is judged by a twin of its own, as the live
    /// members are; see [`FamilyShadow`](crate::FamilyShadow).
    pub fn observe_member(&self, family: &str, key: &str, outcome: Outcome, elapsed: Duration) {
        self.with_shadow(family, |shadow| {
            if let Shadow::Family(twins) = shadow {
                twins.observe(key, outcome, elapsed);
            }
        });
    }

    /// Runs `f` on the shadow of `name`, if a shadow period runs one.
    fn with_shadow(&self, name: &str, f: impl FnOnce(&Shadow)) {
        if !self.is_shadowing() {
            return;
        }
        let twins = self
            .shared
            .twins
            .read()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(shadow) = twins.get(name) {
            f(shadow);
        }
    }

    /// Whether a rollout's shadow period is running twins now: one relaxed
    /// atomic load, for callers that would otherwise clone or look up
    /// something per call only to hand it to [`observe`](Self::observe).
    /// A shadow may start or end just after this answers; an outcome missed
    /// or fed late then is one sample of the twin's window, nothing more.
    #[inline]
    pub fn is_shadowing(&self) -> bool {
        self.shared.shadowing.load(Ordering::Relaxed)
    }

    /// Runs `f` through `breaker` and feeds the outcome to its shadow twin.
    /// Calls the live breaker rejects never reach the twin: there is no
    /// outcome to judge.
    pub fn call<T, E>(
        &self,
        breaker: &CircuitBreaker,
        f: impl FnOnce() -> Result<T, E>,
    ) -> Result<T, CallError<E>> {
        let clock = breaker.clock();
        let start = clock.now();
        let result = breaker.call(f);
        let elapsed = clock
            .now()
            .as_duration()
            .saturating_sub(start.as_duration());
        match &result {
            Ok(_) => self.observe(breaker.name(), Outcome::Success, elapsed),
            Err(CallError::Inner(_)) => self.observe(breaker.name(), Outcome::Failure, elapsed),
            Err(CallError::Rejected(_)) => {}
        }
        result
    }
}

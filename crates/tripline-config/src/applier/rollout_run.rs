//! A rollout in progress: shadow, then canary selection, then bake.
//!
//! Steps are driven by [`Applier::tick`] on the applier's clock (the
//! sources call it on their status interval; tests advance a
//! `ManualClock`), never by timers of their own, so a rollout is
//! deterministic under test and costs nothing between steps.

use std::sync::atomic::Ordering;

use tripline::clock::Timestamp;
use tripline::{CircuitBreakerConfig, Clock};

use super::Origin;
use super::resolve::{changes_of, resolve};
use super::{Applier, ApplyError, Core, Shadow};
use crate::audit::{AuditAction, AuditRecord};
use crate::document::{BreakerTable, Document};
use crate::rollout::{Rollout, TrafficSample, canary_bucket};

/// The step a rollout is at.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RolloutPhase {
    /// Metrics-only twins judge traffic by the new rules until `until`.
    Shadow {
        /// When the shadow period ends.
        until: Timestamp,
    },
    /// This instance is a canary running the new rules, watched until `until`.
    Bake {
        /// When the bake period ends.
        until: Timestamp,
    },
}

impl RolloutPhase {
    /// `"shadow"` or `"bake"`, for status reports.
    pub fn name(&self) -> &'static str {
        match self {
            RolloutPhase::Shadow { .. } => "shadow",
            RolloutPhase::Bake { .. } => "bake",
        }
    }
}

pub(super) struct RolloutRun {
    doc: Document,
    origin: Origin,
    plan: Rollout,
    step: Step,
}

enum Step {
    Shadow {
        until: Timestamp,
    },
    Bake {
        until: Timestamp,
        previous_version: u64,
        previous: Vec<CircuitBreakerConfig>,
        start_self: TrafficSample,
        start_fleet: Option<TrafficSample>,
    },
}

impl RolloutRun {
    pub(super) fn phase(&self) -> RolloutPhase {
        match self.step {
            Step::Shadow { until } => RolloutPhase::Shadow { until },
            Step::Bake { until, .. } => RolloutPhase::Bake { until },
        }
    }
}

impl Applier {
    /// Advances a rollout in progress to its next step when its time on
    /// the applier's clock has come, checks a baking canary against the
    /// fleet, and ends fleet overrides whose `until` has come. Returns the
    /// rollout phase still in progress, if any.
    pub fn tick(&self) -> Option<RolloutPhase> {
        self.with_core(|this, core| {
            this.advance(core);
            this.reconcile_overrides(core);
            this.switch_profiles(core);
            core.rollout.as_ref().map(RolloutRun::phase)
        })
    }

    /// The summed cumulative [`TrafficSample`] of the fleet's non-canary
    /// instances, as reported through the source; a baking canary compares
    /// its own rates since the bake began with the fleet's.
    pub fn set_fleet_sample(&self, sample: TrafficSample) {
        self.with_core(|this, core| {
            core.fleet = Some(sample);
            this.advance(core);
        });
    }

    /// Whether a baking canary is waiting for fleet samples (sources fetch
    /// peers' status only then).
    pub fn needs_fleet_sample(&self) -> bool {
        matches!(
            self.core().rollout.as_ref().map(|r| &r.step),
            Some(Step::Bake { .. })
        )
    }

    /// The rollout step in progress, if any.
    pub fn rollout_phase(&self) -> Option<RolloutPhase> {
        self.core().rollout.as_ref().map(RolloutRun::phase)
    }

    pub(super) fn start_rollout(
        &self,
        core: &mut Core,
        doc: Document,
        origin: Origin,
        plan: Rollout,
    ) -> Result<AuditRecord, ApplyError> {
        let profile = self.profile_of(&doc).and_then(|i| doc.profiles.get(i));
        let (configs, warnings) = match resolve(core, &doc, profile) {
            Ok(resolved) => resolved,
            Err(e) => return Err(self.refuse(core, &origin, e)),
        };
        let changes = changes_of(core, &configs);
        let mut twins = std::collections::BTreeMap::new();
        for config in &configs {
            if !changes.iter().any(|c| c.breaker == config.name) {
                continue;
            }
            let family = core
                .breakers
                .get(&config.name)
                .is_some_and(|m| m.breaker().is_none());
            let clock = self.shared.clock.clone();
            let shadow = match family {
                true => Ok(Shadow::family(config.clone(), clock)),
                false => Shadow::one(config.clone(), clock),
            };
            // Validated with the document: building a twin cannot fail.
            if let Ok(shadow) = shadow {
                twins.insert(config.name.clone(), shadow);
            }
        }
        let any = !twins.is_empty();
        *self
            .shared
            .twins
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = twins;
        self.shared.shadowing.store(any, Ordering::Relaxed);
        let until = self.shared.clock.now() + plan.shadow;
        let record = self.record(
            core,
            AuditAction::ShadowStarted,
            &origin,
            Some(doc.clone()),
            changes,
            warnings,
        );
        core.rollout = Some(RolloutRun {
            doc,
            origin,
            plan,
            step: Step::Shadow { until },
        });
        self.advance(core);
        Ok(record)
    }

    pub(super) fn cancel_rollout(&self, core: &mut Core) {
        core.rollout = None;
        self.shared.shadowing.store(false, Ordering::Relaxed);
        self.shared
            .twins
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clear();
    }

    fn advance(&self, core: &mut Core) {
        let now = self.shared.clock.now();
        let Some(run) = core.rollout.take() else {
            return;
        };
        match run.step {
            Step::Shadow { until } if now >= until => self.end_shadow(core, run, now),
            Step::Bake { until, .. } if now >= until => {
                self.record(
                    core,
                    AuditAction::BakeCompleted,
                    &run.origin,
                    None,
                    Vec::new(),
                    Vec::new(),
                );
            }
            Step::Bake { .. } => self.check_bake(core, run),
            Step::Shadow { .. } => core.rollout = Some(run),
        }
    }

    fn end_shadow(&self, core: &mut Core, run: RolloutRun, now: Timestamp) {
        let action = {
            let mut twins = self
                .shared
                .twins
                .write()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            let (mut would_trip, mut not_judged, mut families) = (vec![], vec![], vec![]);
            for (name, shadow) in twins.iter() {
                match shadow {
                    Shadow::One(twin) => would_trip.push((name.clone(), twin.would_trip())),
                    Shadow::Family(f) if f.saw_traffic() => families.push(f.report(name)),
                    Shadow::Family(_) => not_judged.push(name.clone()),
                }
            }
            twins.clear();
            self.shared.shadowing.store(false, Ordering::Relaxed);
            AuditAction::ShadowReport {
                would_trip,
                not_judged,
                families,
            }
        };
        self.record(core, action, &run.origin, None, Vec::new(), Vec::new());
        if !run.plan.selects(&self.shared.instance) {
            let bucket = canary_bucket(&self.shared.instance);
            self.record(
                core,
                AuditAction::NotSelected { bucket },
                &run.origin,
                None,
                Vec::new(),
                Vec::new(),
            );
            core.canary = false;
            return;
        }
        let previous_version = core.version;
        let previous = run
            .doc
            .breakers
            .iter()
            .filter_map(|c| core.breakers.get(&c.name).map(|m| m.config()))
            .collect();
        let start_self = core.sample();
        let start_fleet = core.fleet;
        let applied = self.install(core, run.doc.clone(), &run.origin, AuditAction::Applied);
        if applied.is_err() {
            return;
        }
        core.canary = true;
        core.rollout = Some(RolloutRun {
            step: Step::Bake {
                until: now + run.plan.bake,
                previous_version,
                previous,
                start_self,
                start_fleet,
            },
            ..run
        });
    }

    fn check_bake(&self, core: &mut Core, mut run: RolloutRun) {
        let Step::Bake {
            previous_version,
            ref previous,
            start_self,
            ref mut start_fleet,
            ..
        } = run.step
        else {
            return;
        };
        let (Some(fleet_now), Some(fleet_start)) = (core.fleet, *start_fleet) else {
            // No fleet report yet: the first one becomes the baseline.
            *start_fleet = core.fleet;
            core.rollout = Some(run);
            return;
        };
        let mine = core.sample().since(&start_self);
        let fleet = fleet_now.since(&fleet_start);
        let margin = run.plan.margin;
        let reason = if mine.rejection_rate() > fleet.rejection_rate() + margin {
            Some(format!(
                "canary rejection rate {:.3} exceeds the fleet's {:.3} by more than {margin}",
                mine.rejection_rate(),
                fleet.rejection_rate()
            ))
        } else if mine.trip_rate() > fleet.trip_rate() + margin {
            Some(format!(
                "canary trip rate {:.3} exceeds the fleet's {:.3} by more than {margin}",
                mine.trip_rate(),
                fleet.trip_rate()
            ))
        } else {
            None
        };
        let Some(reason) = reason else {
            core.rollout = Some(run);
            return;
        };
        tracing::warn!(%reason, to = previous_version, "tripline-config: canary rolled back");
        let doc = Document {
            breakers: previous.iter().map(BreakerTable::whole).collect(),
            overrides: core.in_force.overrides.clone(),
            profiles: core.in_force.profiles.clone(),
            comment: Some(format!("automatic rollback: {reason}")),
            ..Document::default()
        };
        let action = AuditAction::AutoRolledBack {
            to: previous_version,
            reason,
        };
        core.canary = false;
        let origin = Origin::new("rollback", Some(format!("v{previous_version}")));
        // The previous configs were in force a moment ago: they validate.
        let _ = self.install(core, doc, &origin, action);
    }
}

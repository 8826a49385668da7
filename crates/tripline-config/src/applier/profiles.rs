//! Scheduled profiles as one applier carries them out: at each boundary
//! of the document's `[[profile]]` windows (on the applier's clock, see
//! [`Applier::wall_now`]) the breakers are reconfigured to the document's
//! tables with the profile now holding laid over them — state kept, like
//! any reconfiguration — and the switch is an audit record (which
//! listeners, such as the proxy's event stream, see) with the change field
//! by field. The version does not change: the document is the same.

use tripline::CircuitBreakerConfig;

use super::resolve::{overlay, resolve};
use super::{Applier, Core, Origin};
use crate::audit::AuditAction;
use crate::diff::diff_configs;
use crate::document::profiles::{check, from_unix, holding, unix};
use crate::document::{Document, DocumentError, Profile};

impl Applier {
    /// The name of the profile holding now, if one does.
    pub fn active_profile(&self) -> Option<String> {
        self.core().active_profile.clone()
    }

    /// Which of `doc`'s profiles holds now (a valid document's).
    pub(super) fn profile_of(&self, doc: &Document) -> Option<usize> {
        let windows = check(&doc.profiles).ok()?;
        holding(&windows, self.wall_now())
    }

    /// Every profile of `doc` fits this instance's breakers.
    pub(super) fn check_profiles(&self, core: &Core, doc: &Document) -> Result<(), DocumentError> {
        for profile in &doc.profiles {
            resolve(core, doc, Some(profile))?;
        }
        Ok(())
    }

    /// The next instant a profile of the document in force starts or
    /// ends, as a wait on the applier's clock.
    pub(super) fn until_next_profile_boundary(&self, core: &Core) -> Option<std::time::Duration> {
        let windows = check(&core.in_force.profiles).ok()?;
        let now = self.wall_now();
        let next = windows
            .iter()
            .filter_map(|w| w.next_boundary(unix(now)))
            .min()?;
        Some(from_unix(next).duration_since(now).unwrap_or_default())
    }

    /// Switches to the profile holding now, if it is not the one in force.
    pub(super) fn switch_profiles(&self, core: &mut Core) {
        let doc = core.in_force.clone();
        let now = self.profile_of(&doc).and_then(|i| doc.profiles.get(i));
        if now.map(|p| &p.name) == core.active_profile.as_ref() {
            return;
        }
        let was = core.active_profile.clone();
        let before = was
            .as_ref()
            .and_then(|n| doc.profiles.iter().find(|p| &p.name == n));
        let Ok((mut configs, _)) = resolve(core, &doc, now) else {
            // Checked when the document was installed; a breaker adopted
            // since that cannot take it keeps its config (logged on adoption).
            return;
        };
        // Breakers only the old profile named go back to their base.
        for table in before.into_iter().flat_map(|p| &p.breakers) {
            if !configs.iter().any(|c| c.name == table.name)
                && let Some(m) = core.breakers.get(&table.name)
            {
                configs.push(m.base.clone());
            }
        }
        let mut changes = Vec::new();
        for config in configs {
            let Some(managed) = core.breakers.get(&config.name) else {
                continue;
            };
            let old = managed.config();
            if old != config && managed.reconfigure(config.clone()).is_ok() {
                changes.extend(diff_configs(&config.name, Some(&old), &config));
            }
        }
        core.active_profile = now.map(|p| p.name.clone());
        tracing::info!(
            from = was.as_deref().unwrap_or("-"),
            to = core.active_profile.as_deref().unwrap_or("-"),
            changes = changes.len(),
            "tripline-config: profile switched"
        );
        let action = AuditAction::ProfileSwitched {
            from: was,
            to: core.active_profile.clone(),
        };
        let mut record = self.new_record(
            core,
            action,
            &Origin::new("schedule", core.revision.clone()),
        );
        record.changes = changes;
        record.author.clone_from(&doc.author);
        self.keep(core, record);
    }

    /// The config `name` should run on `base`: the last pushed table and
    /// the profile holding now laid on it, or `None` if neither names it.
    pub(super) fn wanted(
        core: &Core,
        base: &CircuitBreakerConfig,
    ) -> Option<Result<CircuitBreakerConfig, DocumentError>> {
        let table = core.pushed.get(&base.name);
        let profile: Option<&Profile> = core
            .active_profile
            .as_ref()
            .and_then(|n| core.in_force.profiles.iter().find(|p| &p.name == n))
            .filter(|p| p.breakers.iter().any(|t| t.name == base.name));
        if table.is_none() && profile.is_none() {
            return None;
        }
        Some(overlay(base.clone(), table, profile).map(|(c, _)| c))
    }
}

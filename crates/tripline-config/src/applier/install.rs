//! Accepting, refusing and installing documents; operator rollback.
//!
//! Installation is all-or-nothing: new breakers are built first (nothing
//! live has changed if one fails), then existing ones reconfigured; should
//! a reconfiguration fail after validation passed — which validation
//! rules out, since both run the same checks — the breakers already
//! changed are put back on their old configs before the refusal.

use tripline::{CircuitBreaker, CircuitBreakerConfig, Clock};

use super::resolve::{changes_of, resolve};
use super::{Applier, ApplyError, Core, Managed, Origin, PushedAt};
use crate::audit::{AuditAction, AuditRecord};
use crate::diff::FieldChange;
use crate::document::{Document, DocumentError, DocumentWarning};

impl Applier {
    /// A validated document: applied now, or handed to its rollout.
    pub(super) fn accept(
        &self,
        core: &mut Core,
        doc: Document,
        origin: Origin,
    ) -> Result<AuditRecord, ApplyError> {
        // A newer document supersedes a rollout in progress.
        self.cancel_rollout(core);
        let result = match doc.rollout.clone() {
            // Overrides are an operator's emergency brake: they take effect
            // at once on every instance, whatever the rollout of the tables.
            Some(plan) => self.start_rollout(core, doc.clone(), origin.clone(), plan),
            None => {
                core.canary = false;
                self.install(core, doc.clone(), &origin, AuditAction::Applied)
            }
        };
        if result.is_ok() {
            self.take_overrides(core, &doc, &origin);
            self.reconcile_overrides(core);
        }
        result
    }

    /// Records a refusal everywhere it must show: audit (and listeners),
    /// log line, metric, status.
    pub(super) fn refuse(
        &self,
        core: &mut Core,
        origin: &Origin,
        error: DocumentError,
    ) -> ApplyError {
        tracing::warn!(
            source = %origin.source,
            revision = origin.revision.as_deref().unwrap_or("-"),
            breaker = error.breaker().unwrap_or("-"),
            error = %error,
            "tripline-config: document refused, last good config kept"
        );
        self.shared.metrics.rejected(&origin.source);
        core.last_error = Some(error.to_string());
        let action = AuditAction::Rejected {
            error: error.to_string(),
        };
        self.record(core, action, origin, None, Vec::new(), Vec::new());
        ApplyError::Document(error)
    }

    /// Reconfigures (or creates) every breaker of `doc` — each table laid
    /// on its breaker's base — bumps the version and audits the change as
    /// `action`, with the warnings of the configs it installed.
    pub(super) fn install(
        &self,
        core: &mut Core,
        doc: Document,
        origin: &Origin,
        action: AuditAction,
    ) -> Result<AuditRecord, ApplyError> {
        let active = self.profile_of(&doc);
        let resolved = self
            .check_profiles(core, &doc)
            .and_then(|()| resolve(core, &doc, active.and_then(|i| doc.profiles.get(i))));
        let (configs, warnings) = match resolved {
            Ok(resolved) => resolved,
            Err(e) => return Err(self.refuse(core, origin, e)),
        };
        let changes = changes_of(core, &configs);
        let mut fresh = Vec::new();
        for config in configs
            .iter()
            .filter(|c| !core.breakers.contains_key(&c.name))
        {
            let built = CircuitBreaker::builder()
                .config(config.clone())
                .clock(self.shared.clock.clone())
                .build();
            match built {
                Ok(breaker) => fresh.push(breaker),
                Err(e) => return Err(self.refuse(core, origin, invalid(&config.name, e))),
            }
        }
        let mut changed: Vec<(&str, CircuitBreakerConfig)> = Vec::new();
        for config in &configs {
            let Some(managed) = core.breakers.get(&config.name) else {
                continue;
            };
            let old = managed.config();
            if old == *config {
                continue;
            }
            if let Err(e) = managed.reconfigure(config.clone()) {
                for (name, old) in changed {
                    if let Some(managed) = core.breakers.get(name) {
                        // The old config was in force a moment ago: it validates.
                        let _ = managed.reconfigure(old);
                    }
                }
                return Err(self.refuse(core, origin, invalid(&config.name, e)));
            }
            changed.push((&config.name, old));
        }
        for breaker in fresh {
            let mut managed = Managed::new(breaker);
            // Built by the applier: its owner's config is the library's.
            managed.base = tripline::CircuitBreakerConfig {
                name: managed.base.name.clone(),
                ..Default::default()
            };
            core.breakers.insert(managed.base.name.clone(), managed);
        }
        core.version += 1;
        for table in &doc.breakers {
            core.pushed.insert(table.name.clone(), table.clone());
            let at = PushedAt {
                version: core.version,
                source: origin.source.clone(),
                revision: origin.revision.clone(),
            };
            core.pushed_at.insert(table.name.clone(), at);
        }
        core.revision.clone_from(&origin.revision);
        core.last_error = None;
        core.active_profile = active
            .and_then(|i| doc.profiles.get(i))
            .map(|p| p.name.clone());
        core.in_force = doc.clone();
        self.shared.metrics.applied(&origin.source, core.version);
        tracing::info!(
            source = %origin.source,
            revision = origin.revision.as_deref().unwrap_or("-"),
            version = core.version,
            changes = changes.len(),
            warnings = warnings.len(),
            "tripline-config: document applied"
        );
        Ok(self.record(core, action, origin, Some(doc), changes, warnings))
    }

    /// Re-applies version `version`'s document, without its rollout.
    pub(super) fn roll_back(
        &self,
        core: &mut Core,
        version: u64,
    ) -> Result<AuditRecord, ApplyError> {
        let mut doc = core
            .audit
            .document(version)
            .cloned()
            .ok_or(ApplyError::UnknownVersion(version))?;
        doc.rollout = None;
        self.cancel_rollout(core);
        core.canary = false;
        doc.validate()?;
        let origin = Origin::new("rollback", Some(format!("v{version}")));
        self.install(core, doc, &origin, AuditAction::RolledBack { to: version })
    }

    /// Appends an audit record (queued for listeners) and returns it.
    pub(super) fn record(
        &self,
        core: &mut Core,
        action: AuditAction,
        origin: &Origin,
        document: Option<Document>,
        changes: Vec<FieldChange>,
        warnings: Vec<DocumentWarning>,
    ) -> AuditRecord {
        let mut record = self.new_record(core, action, origin);
        record.author = document.as_ref().and_then(|d| d.author.clone());
        record.comment = document.as_ref().and_then(|d| d.comment.clone());
        record.changes = changes;
        record.warnings = warnings;
        record.document = document;
        self.keep(core, record)
    }

    /// A record of `action` now, at the version in force, with nothing else.
    pub(super) fn new_record(
        &self,
        core: &Core,
        action: AuditAction,
        origin: &Origin,
    ) -> AuditRecord {
        AuditRecord {
            version: core.version,
            action,
            at: self.shared.clock.now(),
            unix_ms: unix_ms(),
            source: origin.source.clone(),
            revision: origin.revision.clone(),
            author: None,
            comment: None,
            changes: Vec::new(),
            warnings: Vec::new(),
            document: None,
        }
    }

    /// Appends `record` to the audit log and queues it for listeners.
    pub(super) fn keep(&self, core: &mut Core, record: AuditRecord) -> AuditRecord {
        core.audit.push(record.clone());
        core.pending.push(record.clone());
        record
    }
}

pub(super) fn invalid(breaker: &str, e: tripline::ConfigError) -> DocumentError {
    DocumentError::Invalid {
        breaker: breaker.to_owned(),
        field: e.field,
        constraint: e.constraint,
    }
}

fn unix_ms() -> u64 {
    let now = tripline::clock::system_time_after(std::time::Duration::ZERO);
    now.duration_since(std::time::UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

//! Accepting, refusing and installing documents; operator rollback.
//!
//! Installation is all-or-nothing: new breakers are built first (nothing
//! live has changed if one fails), then existing ones reconfigured; should
//! a reconfiguration fail after validation passed — which validation
//! rules out, since both run the same checks — the breakers already
//! changed are put back on their old configs before the refusal.

use tripline::{CircuitBreaker, CircuitBreakerConfig, Clock};

use super::{Applier, ApplyError, Core, Managed, Origin, PushedAt};
use crate::audit::{AuditAction, AuditRecord};
use crate::diff::{FieldChange, diff_configs};
use crate::document::{Document, DocumentError, DocumentWarning};

impl Applier {
    /// A validated document: applied now, or handed to its rollout.
    pub(super) fn accept(
        &self,
        core: &mut Core,
        doc: Document,
        warnings: Vec<DocumentWarning>,
        origin: Origin,
    ) -> Result<AuditRecord, ApplyError> {
        // A newer document supersedes a rollout in progress.
        self.cancel_rollout(core);
        match doc.rollout.clone() {
            Some(plan) => self.start_rollout(core, doc, warnings, origin, plan),
            None => {
                core.canary = false;
                self.install(core, doc, warnings, &origin, AuditAction::Applied)
            }
        }
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

    /// Reconfigures (or creates) every breaker of `doc`, bumps the version
    /// and audits the change as `action`.
    pub(super) fn install(
        &self,
        core: &mut Core,
        doc: Document,
        warnings: Vec<DocumentWarning>,
        origin: &Origin,
        action: AuditAction,
    ) -> Result<AuditRecord, ApplyError> {
        let changes = changes_of(core, &doc);
        let mut fresh = Vec::new();
        for config in doc
            .breakers
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
        for config in &doc.breakers {
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
            core.breakers
                .insert(breaker.name().to_owned(), Managed::new(breaker));
        }
        core.version += 1;
        for config in &doc.breakers {
            core.pushed.insert(config.name.clone(), config.clone());
            let at = PushedAt {
                version: core.version,
                source: origin.source.clone(),
                revision: origin.revision.clone(),
            };
            core.pushed_at.insert(config.name.clone(), at);
        }
        core.revision.clone_from(&origin.revision);
        core.last_error = None;
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
        let warnings = doc.validate()?;
        let origin = Origin::new("rollback", Some(format!("v{version}")));
        self.install(
            core,
            doc,
            warnings,
            &origin,
            AuditAction::RolledBack { to: version },
        )
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
        let record = AuditRecord {
            version: core.version,
            action,
            at: self.shared.clock.now(),
            unix_ms: unix_ms(),
            source: origin.source.clone(),
            revision: origin.revision.clone(),
            author: document.as_ref().and_then(|d| d.author.clone()),
            comment: document.as_ref().and_then(|d| d.comment.clone()),
            changes,
            warnings,
            document,
        };
        core.audit.push(record.clone());
        core.pending.push(record.clone());
        record
    }
}

/// Old → new for every breaker `doc` names.
pub(super) fn changes_of(core: &Core, doc: &Document) -> Vec<FieldChange> {
    doc.breakers
        .iter()
        .flat_map(|new| {
            let old = core.breakers.get(&new.name).map(Managed::config);
            diff_configs(&new.name, old.as_ref(), new)
        })
        .collect()
}

fn invalid(breaker: &str, e: tripline::ConfigError) -> DocumentError {
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

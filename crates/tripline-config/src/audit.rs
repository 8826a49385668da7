//! The audit log: every document applied, refused or rolled back, with
//! the field-by-field change, in a bounded in-memory ring and optionally a
//! JSON-lines file.
//!
//! Applied records keep their whole document, so
//! [`Applier::rollback`](crate::Applier::rollback) can re-apply any version
//! still in the ring. The ring is bounded so a source that flaps cannot
//! grow the process; the file, when set, keeps everything.

use std::collections::VecDeque;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::Path;

use serde::{Deserialize, Serialize};
use tripline::clock::Timestamp;

use crate::diff::FieldChange;
use crate::document::{Document, DocumentWarning};

/// What happened to a document.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum AuditAction {
    /// The document was applied to every breaker it names.
    Applied,
    /// The document was refused whole; nothing changed.
    Rejected {
        /// Why, naming the breaker and field.
        error: String,
    },
    /// An operator re-applied an earlier version.
    RolledBack {
        /// The version re-applied.
        to: u64,
    },
    /// A canary's bake found it worse than the fleet and reverted itself.
    AutoRolledBack {
        /// The version restored.
        to: u64,
        /// The comparison that failed.
        reason: String,
    },
    /// A document with a rollout began its shadow period.
    ShadowStarted,
    /// The shadow period ended; what the new rules would have done.
    ShadowReport {
        /// Trips the metrics-only twins would have made, per breaker.
        would_trip: Vec<(String, u64)>,
        /// Changed registry families (keyed and endpoint breakers) no
        /// outcome reached during the shadow, so it says nothing about
        /// them; an operator must not read their silence as "no would-be
        /// trips". Empty when every changed family saw traffic.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        not_judged: Vec<String>,
        /// What each changed family's members would have done, judged key
        /// by key (a twin per member key seen).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        families: Vec<FamilyShadow>,
    },
    /// The rollout does not select this instance; its config is unchanged.
    NotSelected {
        /// The instance's stable bucket, 0–100.
        bucket: f64,
    },
    /// A canary's bake period ended without a rollback.
    BakeCompleted,
    /// A fleet override began holding a breaker (the record's `author` and
    /// `comment` are the override's author and reason).
    OverrideStarted {
        /// The breaker held.
        breaker: String,
        /// The state it is held in.
        state: crate::document::OverrideState,
        /// When it ends by itself (RFC 3339).
        until: String,
    },
    /// The profile holding changed at a boundary of its schedule; the
    /// record's changes say what each breaker's config became.
    ProfileSwitched {
        /// The profile that held until now, if one did.
        from: Option<String>,
        /// The profile holding from now, if one does.
        to: Option<String>,
    },
    /// A fleet override stopped holding a breaker, which was reset.
    OverrideEnded {
        /// The breaker released.
        breaker: String,
        /// The state it had been held in.
        state: crate::document::OverrideState,
        /// `expired` (its `until` came) or `lifted` (a document dropped it).
        why: String,
    },
}

impl AuditAction {
    /// Whether the record's document became the one in force.
    pub fn installs(&self) -> bool {
        matches!(
            self,
            AuditAction::Applied
                | AuditAction::RolledBack { .. }
                | AuditAction::AutoRolledBack { .. }
        )
    }
}

/// A registry family's shadow verdict: its members judged key by key, each
/// by a metrics-only twin on the new rules fed only that key's outcomes —
/// as the live members judge them — so a trip the report names is one a
/// member would really have made.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FamilyShadow {
    /// The family's name (a keyed route breaker's or a cluster's).
    pub family: String,
    /// Distinct member keys that got a twin (at most
    /// [`MAX_FAMILY_TWINS`](crate::MAX_FAMILY_TWINS)).
    pub keys_judged: u64,
    /// How many of them would have tripped at least once.
    pub keys_would_trip: u64,
    /// Trips summed over all members' twins.
    pub would_trip: u64,
    /// The members that would have tripped most, with their trips (at most ten).
    pub top_keys: Vec<(String, u64)>,
    /// Outcomes of keys seen after the twin table was full: not judged.
    pub unjudged_outcomes: u64,
}

/// One entry of the audit log.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AuditRecord {
    /// The config version in force after this record.
    pub version: u64,
    /// What happened.
    pub action: AuditAction,
    /// When, on the applier's clock (tests drive it with `ManualClock`).
    pub at: Timestamp,
    /// When, in milliseconds since the Unix epoch, for humans.
    pub unix_ms: u64,
    /// Where the document came from (`file`, `etcd`, `api`, `rollback`).
    pub source: String,
    /// The source's revision of it (an etcd mod revision, a file's hash).
    pub revision: Option<String>,
    /// Who, if the document said.
    pub author: Option<String>,
    /// Why, if the document said.
    pub comment: Option<String>,
    /// Old → new, per breaker and field.
    pub changes: Vec<FieldChange>,
    /// Validation warnings of the new configs.
    pub warnings: Vec<DocumentWarning>,
    /// The document itself for versions that were in force, to roll back to.
    pub document: Option<Document>,
}

/// A bounded ring of [`AuditRecord`]s, optionally mirrored to a file.
#[derive(Debug)]
pub struct AuditLog {
    records: VecDeque<AuditRecord>,
    capacity: usize,
    file: Option<File>,
}

impl AuditLog {
    /// A ring of at most `capacity` records (at least 1).
    pub fn new(capacity: usize) -> Self {
        AuditLog {
            records: VecDeque::new(),
            capacity: capacity.max(1),
            file: None,
        }
    }

    /// Also appends every record as one JSON line to `path`.
    pub fn with_file(mut self, path: &Path) -> std::io::Result<Self> {
        self.file = Some(OpenOptions::new().create(true).append(true).open(path)?);
        Ok(self)
    }

    pub(crate) fn push(&mut self, record: AuditRecord) {
        if let Some(file) = &mut self.file {
            let written = serde_json::to_string(&record)
                .map_err(std::io::Error::other)
                .and_then(|line| writeln!(file, "{line}"));
            if let Err(e) = written {
                tracing::warn!(error = %e, "tripline-config: audit file write failed");
            }
        }
        if self.records.len() == self.capacity {
            self.records.pop_front();
        }
        self.records.push_back(record);
    }

    /// The records, oldest first.
    pub fn records(&self) -> Vec<AuditRecord> {
        self.records.iter().cloned().collect()
    }

    /// The document that was in force as `version`, if still in the ring.
    /// Only records that installed a document count: a rollout's shadow
    /// record carries the document it trials, which was never in force.
    pub fn document(&self, version: u64) -> Option<&Document> {
        self.records
            .iter()
            .rev()
            .filter(|r| r.version == version && r.action.installs())
            .find_map(|r| r.document.as_ref())
    }
}

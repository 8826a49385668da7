//! The [`Applier`]: owns a set of named breakers and applies documents to
//! them, whole or not at all.
//!
//! Every source (file, etcd, an admin API) hands the applier raw bytes or a
//! parsed [`Document`]; the applier validates all of it, then reconfigures
//! each changed breaker through the library's live reconfiguration (the
//! breaker keeps its state, window and counters), bumps the version and
//! appends an audit record. A refused document changes nothing: the last
//! good config stays, and the refusal is an audit record (which listeners
//! see), a `tracing` warning naming breaker and field, and a count in
//! `tripline_config_rejected_total`.
//!
//! A document names the breakers it configures: one it adds is built on
//! the applier's clock; one it leaves out keeps running on its last
//! config (callers may hold handles to it, so it is never torn down), and
//! the same holds for a rollback to a version from before that breaker.
//!
//! Pushed config never touches a breaker's state, so an operator's
//! force-open stays in force through any number of pushes until
//! [`Applier::clear_override`] ends it.

mod adopt;
mod builder;
mod fleet;
mod inspect;
mod install;
mod managed;
mod operator;
mod profiles;
mod resolve;
mod rollout_run;
mod shadow;
mod status;

use std::collections::BTreeMap;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, RwLock};

use tripline::CircuitBreaker;
use tripline::clock::SharedClock;

use crate::audit::{AuditLog, AuditRecord};
use crate::document::{Document, DocumentError};
use crate::metrics::ConfigMetrics;
use crate::rollout::TrafficSample;
pub use builder::ApplierBuilder;
pub use fleet::OverrideHolder;
pub use inspect::{ManagedStatus, PushedAt};
use managed::Managed;
pub use rollout_run::RolloutPhase;
use rollout_run::RolloutRun;
pub use shadow::MAX_FAMILY_TWINS;
use shadow::Shadow;
pub use status::{BreakerSummary, FamilySummary, InstanceStatus};

/// Where a document came from, for the audit log and the metrics' label.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Origin {
    /// The source's fixed name (`file`, `etcd`, `api`, `rollback`).
    pub source: String,
    /// The source's revision of the document, if it has one.
    pub revision: Option<String>,
}

impl Origin {
    /// An origin `source` at `revision`.
    pub fn new(source: impl Into<String>, revision: Option<String>) -> Self {
        Origin {
            source: source.into(),
            revision,
        }
    }
}

/// Why [`Applier::apply`] or [`Applier::rollback`] changed nothing.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum ApplyError {
    /// The document was refused whole.
    #[error(transparent)]
    Document(#[from] DocumentError),
    /// The version asked for has left the bounded audit log, or never was.
    #[error("config version {0} is not in the audit log")]
    UnknownVersion(u64),
    /// The breaker is not one this applier owns.
    #[error("no breaker named {0:?}")]
    UnknownBreaker(String),
}

type Listener = Arc<dyn Fn(&AuditRecord) + Send + Sync>;

/// Owns named breakers and applies config documents to them.
///
/// ```
/// use tripline_config::{Applier, Origin};
///
/// let applier = Applier::builder().instance_id("web-1").build();
/// applier.apply(b"[[breaker]]\nname = \"payments\"\nminimum_calls = 10\n",
///               Origin::new("file", None)).unwrap();
/// let payments = applier.breaker("payments").unwrap();
/// assert_eq!(payments.config().minimum_calls, 10);
///
/// // Refused whole: the last good config stays.
/// let err = applier.apply(b"[[breaker]]\nname = \"payments\"\nminimum_calls = 0\n",
///                         Origin::new("file", None)).unwrap_err();
/// assert!(err.to_string().contains("minimum_calls"));
/// assert_eq!(payments.config().minimum_calls, 10);
/// ```
#[derive(Clone)]
pub struct Applier {
    shared: Arc<Shared>,
}

struct Shared {
    instance: String,
    clock: SharedClock,
    /// The wall-clock instant `clock` read zero at: how an override's
    /// `until` is placed on the applier's clock.
    wall_epoch: std::time::SystemTime,
    /// Wakes the override timer when a document changes the overrides.
    overrides_changed: tokio::sync::Notify,
    metrics: ConfigMetrics,
    core: Mutex<Core>,
    /// Read on every observed call while a shadow runs; apart from the
    /// core so feeding twins never waits behind an apply.
    twins: RwLock<BTreeMap<String, Shadow>>,
    /// Whether `twins` holds any twin: read (one relaxed load) before
    /// anything else on every observed call, so a process with no shadow
    /// in progress pays no lock on its request path.
    shadowing: AtomicBool,
    listeners: Mutex<Vec<Listener>>,
}

struct Core {
    breakers: BTreeMap<String, Managed>,
    version: u64,
    revision: Option<String>,
    audit: AuditLog,
    rollout: Option<RolloutRun>,
    canary: bool,
    last_error: Option<String>,
    fleet: Option<TrafficSample>,
    /// The last table a document installed for each breaker name,
    /// whatever the source: what [`Applier::adopt_breaker`] lays on a
    /// breaker rebuilt by its owner, so pushed parameters outlive it.
    pushed: BTreeMap<String, crate::document::BreakerTable>,
    /// Which version (source, revision) installed each `pushed` config:
    /// what [`Applier::managed_status`] reports per breaker.
    pushed_at: BTreeMap<String, PushedAt>,
    /// Records made under the lock, handed to listeners after it is released.
    pending: Vec<AuditRecord>,
    /// The fleet overrides of the document in force.
    fleet_overrides: Vec<crate::document::FleetOverride>,
    /// That document's author (an override's own `author` goes first).
    fleet_author: Option<String>,
    /// Where that document came from, for the overrides' audit records.
    fleet_origin: Origin,
    /// The document installed last (its tables and profiles).
    in_force: Document,
    /// The name of its profile holding now, if one does.
    active_profile: Option<String>,
}

impl Applier {
    /// A builder.
    pub fn builder() -> ApplierBuilder {
        ApplierBuilder::default()
    }

    /// Parses, validates and applies `bytes` (TOML or JSON) from `origin`;
    /// see [`apply_document`](Self::apply_document).
    pub fn apply(&self, bytes: &[u8], origin: Origin) -> Result<AuditRecord, ApplyError> {
        self.with_core(|this, core| match Document::parse_and_validate(bytes) {
            Ok((doc, _)) => this.accept(core, doc, origin),
            Err(e) => Err(this.refuse(core, &origin, e)),
        })
    }

    /// Validates `doc` in full and applies it — at once, or through its
    /// rollout — or refuses it whole. Returns the audit record made.
    pub fn apply_document(&self, doc: Document, origin: Origin) -> Result<AuditRecord, ApplyError> {
        self.with_core(|this, core| match doc.validate() {
            Ok(_) => this.accept(core, doc, origin),
            Err(e) => Err(this.refuse(core, &origin, e)),
        })
    }

    /// Re-applies the document that was in force as `version` (from the
    /// audit log), at once and without its rollout, as a new version.
    pub fn rollback(&self, version: u64) -> Result<AuditRecord, ApplyError> {
        self.with_core(|this, core| this.roll_back(core, version))
    }

    /// The breaker `name`, if a document or the builder provided it.
    pub fn breaker(&self, name: &str) -> Option<CircuitBreaker> {
        self.core()
            .breakers
            .get(name)
            .and_then(|m| m.breaker().cloned())
    }

    /// The names of the owned breakers.
    pub fn breaker_names(&self) -> Vec<String> {
        self.core().breakers.keys().cloned().collect()
    }

    /// The config version in force (0 before any document).
    pub fn version(&self) -> u64 {
        self.core().version
    }

    /// The audit log, oldest first.
    pub fn audit(&self) -> Vec<AuditRecord> {
        self.core().audit.records()
    }

    /// The metrics this applier counts into.
    pub fn metrics(&self) -> &ConfigMetrics {
        &self.shared.metrics
    }

    /// The instance id.
    pub fn instance_id(&self) -> &str {
        &self.shared.instance
    }

    /// Calls `f` with every audit record as it is made (applied, refused,
    /// rolled back, rollout steps), after the applier's lock is released.
    pub fn subscribe(&self, f: impl Fn(&AuditRecord) + Send + Sync + 'static) {
        lock(&self.shared.listeners).push(Arc::new(f));
    }

    fn core(&self) -> MutexGuard<'_, Core> {
        lock(&self.shared.core)
    }

    /// Runs `f` under the core lock, then hands the records it made to the
    /// listeners with the lock released (a listener may call back in).
    fn with_core<R>(&self, f: impl FnOnce(&Self, &mut Core) -> R) -> R {
        let (result, records) = {
            let mut core = self.core();
            let result = f(self, &mut core);
            (result, std::mem::take(&mut core.pending))
        };
        if !records.is_empty() {
            let listeners = lock(&self.shared.listeners).clone();
            for record in &records {
                for listener in &listeners {
                    listener(record);
                }
            }
        }
        result
    }
}

impl Core {
    fn sample(&self) -> TrafficSample {
        let mut total = TrafficSample::default();
        for managed in self.breakers.values() {
            total.add(&managed.sample());
        }
        total
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A listener that panicked must not wedge config for good: the data
    // under the lock is only ever replaced whole.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

//! Building an [`Applier`]: instance id, clock, metrics, audit log, and
//! breakers made elsewhere to manage.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex, RwLock};

use tripline::Clock;
use tripline::clock::SharedClock;
use tripline::registry::RegistryKey;
use tripline::{BreakerRegistry, CircuitBreaker};

use super::{Applier, Core, Managed, Shared};
use crate::audit::AuditLog;
use crate::metrics::ConfigMetrics;

/// Builds an [`Applier`].
#[derive(Default)]
pub struct ApplierBuilder {
    instance: Option<String>,
    clock: Option<SharedClock>,
    wall_epoch: Option<std::time::SystemTime>,
    metrics: Option<ConfigMetrics>,
    audit: Option<AuditLog>,
    breakers: Vec<CircuitBreaker>,
    families: Vec<(String, Managed)>,
}

impl ApplierBuilder {
    /// The instance id that places this instance in rollouts (default `"local"`).
    pub fn instance_id(mut self, id: impl Into<String>) -> Self {
        self.instance = Some(id.into());
        self
    }

    /// The clock for new breakers, twins and rollout steps (tests: `ManualClock`).
    pub fn clock(mut self, clock: impl Into<SharedClock>) -> Self {
        self.clock = Some(clock.into());
        self
    }

    /// The wall-clock instant the applier's clock read zero at (default:
    /// now minus the clock's reading at build). Fleet overrides end at a
    /// wall-clock `until`, placed on the applier's clock through this: a
    /// test on a `ManualClock` sets it and advances the clock to expire them.
    pub fn wall_epoch(mut self, at: std::time::SystemTime) -> Self {
        self.wall_epoch = Some(at);
        self
    }

    /// Counts into these metrics (register them with [`ConfigMetrics::register`]).
    pub fn metrics(mut self, metrics: ConfigMetrics) -> Self {
        self.metrics = Some(metrics);
        self
    }

    /// Keeps at most `capacity` audit records in memory (default 256).
    pub fn audit_capacity(mut self, capacity: usize) -> Self {
        self.audit = Some(AuditLog::new(capacity));
        self
    }

    /// Mirrors the audit log to a JSON-lines file.
    pub fn audit_file(mut self, path: &Path) -> std::io::Result<Self> {
        let log = self.audit.take().unwrap_or_else(|| AuditLog::new(256));
        self.audit = Some(log.with_file(path)?);
        Ok(self)
    }

    /// Manages a breaker built elsewhere: documents naming it reconfigure
    /// it in place.
    pub fn manage(mut self, breaker: CircuitBreaker) -> Self {
        self.breakers.push(breaker);
        self
    }

    /// Manages a registry family: a document table named like the family
    /// reconfigures every breaker on its template, present and future,
    /// keeping their state (per-key overrides keep theirs). Shadow twins
    /// judge single breakers only: a family's keys each see their own
    /// traffic, which one twin could not reproduce.
    pub fn manage_family<K: RegistryKey>(mut self, registry: BreakerRegistry<K>) -> Self {
        self.families
            .push((registry.family().to_owned(), Managed::family(registry)));
        self
    }

    /// The applier, at version 0 with the managed breakers as they are.
    pub fn build(self) -> Applier {
        let breakers = self
            .breakers
            .into_iter()
            .map(|b| (b.name().to_owned(), Managed::new(b)))
            .chain(self.families)
            .collect();
        let clock = self.clock.unwrap_or_else(SharedClock::monotonic);
        let wall_epoch = self.wall_epoch.unwrap_or_else(|| {
            let now = tripline::clock::system_time_after(std::time::Duration::ZERO);
            now.checked_sub(clock.now().as_duration()).unwrap_or(now)
        });
        Applier {
            shared: Arc::new(Shared {
                instance: self.instance.unwrap_or_else(|| "local".to_owned()),
                clock,
                wall_epoch,
                overrides_changed: tokio::sync::Notify::new(),
                metrics: self.metrics.unwrap_or_default(),
                core: Mutex::new(Core {
                    breakers,
                    version: 0,
                    revision: None,
                    audit: self.audit.unwrap_or_else(|| AuditLog::new(256)),
                    rollout: None,
                    canary: false,
                    last_error: None,
                    fleet: None,
                    pushed: BTreeMap::new(),
                    pushed_at: BTreeMap::new(),
                    pending: Vec::new(),
                    fleet_overrides: Vec::new(),
                    fleet_author: None,
                    fleet_origin: super::Origin::new("none", None),
                    in_force: crate::document::Document::default(),
                    active_profile: None,
                }),
                twins: RwLock::new(BTreeMap::new()),
                shadowing: std::sync::atomic::AtomicBool::new(false),
                listeners: Mutex::new(Vec::new()),
            }),
        }
    }
}

//! The exporter: what is registered, and the collector Prometheus scrapes.
//!
//! An [`Exporter`] is a cheap handle (clones share one set of sources) and
//! a prometheus-client [`Collector`](prometheus_client::collector::Collector):
//! put a clone into a `prometheus_client` `Registry`, or serve it with
//! [`MetricsHandler`](crate::http::MetricsHandler). Registering takes a
//! write lock on the source list; a scrape takes a read lock only while it
//! reads the sources, then encodes without it, so a slow scraper never
//! holds up a registration.

mod builder;
mod policies;

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

pub use builder::ExporterBuilder;

use tripline::registry::RegistryKey;
use tripline::{BreakerRegistry, CircuitBreaker};

use crate::error::ExportError;
use crate::histogram::{DurationHistogram, TimedBreaker};
use crate::names::{COMPAT, FAMILIES};
pub use crate::source::SourceKind;
use crate::source::{Detail, OneBreaker, Registry, RegistrySource, Sources};

/// Collects tripline's counts at scrape time and writes them as Prometheus
/// metrics. See the [crate docs](crate) and [`names`](crate::names).
///
/// ```
/// use prometheus_client::registry::Registry;
/// use tripline_prometheus::Exporter;
///
/// let exporter = Exporter::default();
/// // Beside the application's own metrics:
/// let mut registry = Registry::default();
/// registry.register_collector(Box::new(exporter.clone()));
/// ```
#[derive(Clone)]
pub struct Exporter {
    pub(crate) shared: Arc<Shared>,
}

pub(crate) struct Shared {
    pub(crate) prefix: String,
    pub(crate) constant: Vec<(String, String)>,
    pub(crate) compat: bool,
    buckets: Arc<[f64]>,
    pub(crate) sources: RwLock<Sources>,
    pub(crate) transitions: Arc<tripline::breaker::TransitionTally>,
    /// Call-duration histograms of timed breakers, by breaker name.
    pub(crate) histograms: Mutex<HashMap<String, Arc<DurationHistogram>>>,
    /// Breakers left out of the last scrape as duplicates.
    pub(crate) skipped: AtomicU64,
}

impl Shared {
    fn new(
        prefix: String,
        constant: Vec<(String, String)>,
        compat: bool,
        buckets: Arc<[f64]>,
    ) -> Self {
        Shared {
            prefix,
            constant,
            compat,
            buckets,
            sources: RwLock::default(),
            transitions: Arc::default(),
            histograms: Mutex::default(),
            skipped: AtomicU64::new(0),
        }
    }

    // Every critical section leaves the sources consistent: a poisoned
    // lock still holds a usable list.
    pub(crate) fn read(&self) -> RwLockReadGuard<'_, Sources> {
        self.sources.read().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn write(&self) -> RwLockWriteGuard<'_, Sources> {
        self.sources.write().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Default for Exporter {
    /// An exporter with the default settings (prefix `tripline`, no
    /// constant labels, no compat names).
    fn default() -> Self {
        Exporter {
            shared: Arc::new(Shared::new(
                "tripline".into(),
                Vec::new(),
                false,
                crate::histogram::DEFAULT_BUCKETS.into(),
            )),
        }
    }
}

impl Exporter {
    /// A builder for a prefix, constant labels, compat names or buckets.
    pub fn builder() -> ExporterBuilder {
        ExporterBuilder::default()
    }

    /// The metric name prefix.
    pub fn prefix(&self) -> &str {
        &self.shared.prefix
    }

    /// Every metric name this exporter may write (with `_total` on
    /// counters; a histogram's `_bucket`, `_sum` and `_count` series come
    /// under its one name): for checking dashboards and rules against.
    pub fn metric_names(&self) -> Vec<String> {
        let compat = if self.shared.compat { COMPAT } else { &[] };
        FAMILIES
            .iter()
            .map(|f| f.exposed(&self.shared.prefix))
            .chain(compat.iter().map(|f| f.exposed("")))
            .collect()
    }

    /// Exports `breaker` at `detail`. Refused if it, or another breaker
    /// of the same name, is exported already (by itself or in a registry).
    /// The exporter keeps a handle (the breaker lives on until
    /// [`unregister`](Self::unregister)ed) and subscribes to its events to
    /// count transitions; calls are not touched.
    pub fn register_breaker(
        &self,
        breaker: &CircuitBreaker,
        detail: Detail,
    ) -> Result<(), ExportError> {
        let mut sources = self.shared.write();
        if sources.exports_breaker(breaker.name(), Some(breaker)) {
            return Err(already(SourceKind::Breaker, breaker.name()));
        }
        let events = breaker.subscribe(self.shared.transitions.subscriber());
        sources.breakers.push(OneBreaker {
            breaker: breaker.clone(),
            detail,
            _events: events,
        });
        Ok(())
    }

    /// Exports `registry` (its counts by state, and each breaker at
    /// `detail`): breakers appear in the scrape after the registry made
    /// them and disappear once it dropped them. Refused if a registry of
    /// the same family, or a breaker of the same name as one of its
    /// breakers, is exported already.
    pub fn register_registry<K: RegistryKey>(
        &self,
        registry: &BreakerRegistry<K>,
        detail: Detail,
    ) -> Result<(), ExportError> {
        let mut sources = self.shared.write();
        self.add_registry(&mut sources, registry, detail)
    }

    pub(crate) fn add_registry<K: RegistryKey>(
        &self,
        sources: &mut Sources,
        registry: &BreakerRegistry<K>,
        detail: Detail,
    ) -> Result<(), ExportError> {
        let family = registry.family();
        if sources
            .registries
            .iter()
            .any(|r| r.source.family() == family)
        {
            return Err(already(SourceKind::Registry, family));
        }
        let mut taken = std::collections::HashSet::new();
        for b in &sources.breakers {
            taken.insert(b.breaker.name().to_string());
        }
        for r in &sources.registries {
            r.source.each(&mut |b| {
                taken.insert(b.name().to_string());
            });
        }
        let mut clash = None;
        registry.for_each_breaker(|_, b| {
            if clash.is_none() && taken.contains(b.name()) {
                clash = Some(b.name().to_string());
            }
        });
        if let Some(name) = clash {
            return Err(already(SourceKind::Breaker, &name));
        }
        // Aggregate exports no transitions: no forwarder on every breaker.
        let events = (detail > Detail::Aggregate).then(|| {
            let callback = self.shared.transitions.subscriber();
            registry.subscribe(move |_, event| callback(event))
        });
        sources.registries.push(Registry {
            source: Box::new(registry.clone()),
            detail,
            _events: events,
        });
        Ok(())
    }

    /// Stops exporting the source of `kind` registered as `name` (a
    /// cluster takes its endpoint breakers with it); `false` if there is
    /// none. Its series disappear from the next scrape.
    pub fn unregister(&self, kind: SourceKind, name: &str) -> bool {
        let mut s = self.shared.write();
        let before = s.len();
        match kind {
            SourceKind::Breaker => s.breakers.retain(|b| b.breaker.name() != name),
            SourceKind::Registry => s.registries.retain(|r| r.source.family() != name),
            SourceKind::Retry => s.retries.retain(|(n, _)| n != name),
            SourceKind::Budget => s.budgets.retain(|(n, _)| n != name),
            SourceKind::Bulkhead => s.bulkheads.retain(|(n, _)| n != name),
            SourceKind::Throttle => s.throttles.retain(|t| t.name() != name),
            SourceKind::Failback => s.failbacks.retain(|(n, _)| n != name),
            SourceKind::Cluster => {
                if let Some(c) = s.clusters.iter().find(|c| c.cluster.name() == name) {
                    let family = c.cluster.breakers().family().to_string();
                    s.registries.retain(|r| r.source.family() != family);
                }
                s.clusters.retain(|c| c.cluster.name() != name);
            }
        }
        if kind == SourceKind::Breaker {
            self.shared.transitions.forget(name);
        }
        s.len() < before
    }

    /// A handle on `breaker` whose calls are timed into its
    /// `breaker_call_duration_seconds` histogram (shown while the breaker
    /// is exported). Every handle for one breaker name shares one histogram.
    pub fn timed(&self, breaker: &CircuitBreaker) -> TimedBreaker {
        let mut map = self
            .shared
            .histograms
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let histogram = map
            .entry(breaker.name().to_string())
            .or_insert_with(|| Arc::new(DurationHistogram::new(self.shared.buckets.clone())))
            .clone();
        TimedBreaker {
            breaker: breaker.clone(),
            histogram,
        }
    }
}

pub(crate) fn already(kind: SourceKind, name: &str) -> ExportError {
    ExportError::AlreadyRegistered {
        kind,
        name: name.to_string(),
    }
}

impl fmt::Debug for Exporter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Exporter")
            .field("prefix", &self.shared.prefix)
            .field("labels", &self.shared.constant)
            .field("compat", &self.shared.compat)
            .field("sources", &*self.shared.read())
            .finish()
    }
}

#[allow(dead_code)]
fn _assert_send_sync() {
    fn check<T: Send + Sync>() {}
    check::<Exporter>();
    check::<Box<dyn RegistrySource>>();
}

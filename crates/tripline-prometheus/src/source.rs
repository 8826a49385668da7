//! What the exporter reads at scrape time: the registered sources.
//!
//! Sources are handles (clones) of the library's own objects, so reading
//! them costs the objects nothing between scrapes. A registry is kept
//! behind a small object-safe trait, so registries of any key type sit in
//! one list.

use std::fmt;

use tripline::budget::RetryBudget;
use tripline::bulkhead::Bulkhead;
use tripline::cluster::{Cluster, FailbackStats};
use tripline::registry::{RegistryKey, RegistryStats, RegistrySubscription};
use tripline::retry::RetryStats;
use tripline::{AdaptiveThrottle, BreakerRegistry, CircuitBreaker, Subscription};

/// How many series each breaker of a source gets: the lever on a
/// registry's cardinality (and on a scrape's cost, which grows with it).
///
/// A registry of 20 000 tenant breakers at `Full` is over half a million
/// series per process; `Essential` keeps what the shipped dashboard and
/// alert rules need per breaker, and `Aggregate` only the registry's counts
/// by state. Every detail keeps the registry-wide families.
///
/// ```
/// use tripline_prometheus::Detail;
/// assert!(Detail::Aggregate < Detail::Essential && Detail::Essential < Detail::Full);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Detail {
    /// No per-breaker series (a registry's own counts only).
    Aggregate,
    /// Per breaker: the state code, calls that succeeded, failed and were
    /// rejected, the live failure and slow-call rates, and transitions —
    /// what the shipped dashboard's state, outcome, rate and transition
    /// panels and the open and flapping alerts need (thresholds, window
    /// fill and the stuck-half-open alert need `Full`). For registries of
    /// many keys.
    Essential,
    /// Every per-breaker family (see [`names`](crate::names)). For breakers
    /// registered one by one, and clusters' endpoints.
    Full,
}

/// The kinds of sources, as named in errors and by
/// [`Exporter::unregister`](crate::Exporter::unregister).
///
/// ```
/// use tripline_prometheus::SourceKind;
/// assert_eq!(SourceKind::Registry.to_string(), "breaker registry");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SourceKind {
    /// A circuit breaker, by its name.
    Breaker,
    /// A breaker registry, by its family.
    Registry,
    /// A retry policy (or a pipeline's), by the name it was registered under.
    Retry,
    /// A retry budget, by the name it was registered under.
    Budget,
    /// A bulkhead, by the name it was registered under.
    Bulkhead,
    /// An adaptive throttle, by its name.
    Throttle,
    /// A cluster, by its name.
    Cluster,
    /// A failback queue, by the name it was registered under.
    Failback,
}

impl fmt::Display for SourceKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SourceKind::Breaker => "breaker",
            SourceKind::Registry => "breaker registry",
            SourceKind::Retry => "retry policy",
            SourceKind::Budget => "retry budget",
            SourceKind::Bulkhead => "bulkhead",
            SourceKind::Throttle => "throttle",
            SourceKind::Cluster => "cluster",
            SourceKind::Failback => "failback queue",
        })
    }
}

/// A registry of any key type, as the exporter sees it.
pub(crate) trait RegistrySource: Send + Sync {
    fn family(&self) -> &str;
    fn stats(&self) -> RegistryStats;
    /// Breakers now (a hint for sizing a scrape's buffers).
    fn len(&self) -> usize;
    fn each(&self, f: &mut dyn FnMut(&CircuitBreaker));
}

impl<K: RegistryKey> RegistrySource for BreakerRegistry<K> {
    fn family(&self) -> &str {
        BreakerRegistry::family(self)
    }

    fn stats(&self) -> RegistryStats {
        BreakerRegistry::stats(self)
    }

    fn len(&self) -> usize {
        BreakerRegistry::len(self) + usize::from(self.overflow_breaker().is_some())
    }

    fn each(&self, f: &mut dyn FnMut(&CircuitBreaker)) {
        self.for_each_breaker(|_, b| f(b));
        if let Some(overflow) = self.overflow_breaker() {
            f(&overflow);
        }
    }
}

/// One breaker registered by itself.
pub(crate) struct OneBreaker {
    pub(crate) breaker: CircuitBreaker,
    pub(crate) detail: Detail,
    pub(crate) _events: Subscription,
}

/// A registry and its breakers.
pub(crate) struct Registry {
    pub(crate) source: Box<dyn RegistrySource>,
    pub(crate) detail: Detail,
    /// The transition counter's subscription (none at `Aggregate`).
    pub(crate) _events: Option<RegistrySubscription>,
}

/// Retry statistics of a `Retry` or a `Pipeline`.
pub(crate) type RetryRead = Box<dyn Fn() -> Option<RetryStats> + Send + Sync>;

/// What a failback queue reports at a scrape.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct FailbackSample {
    pub(crate) depth: usize,
    pub(crate) oldest_age_secs: f64,
    pub(crate) stats: FailbackStats,
}

pub(crate) type FailbackRead = Box<dyn Fn() -> FailbackSample + Send + Sync>;

/// A cluster: health, outlier detection and panic mode (its endpoint
/// breakers are a [`Registry`] source beside it).
pub(crate) struct ClusterSource {
    pub(crate) cluster: Cluster,
    pub(crate) tally: std::sync::Arc<tripline::cluster::EjectionTally>,
    pub(crate) _events: tripline::outlier::ClusterSubscription,
}

/// Everything registered, by kind, each with its exported name.
#[derive(Default)]
pub(crate) struct Sources {
    pub(crate) breakers: Vec<OneBreaker>,
    pub(crate) registries: Vec<Registry>,
    pub(crate) retries: Vec<(String, RetryRead)>,
    pub(crate) budgets: Vec<(String, RetryBudget)>,
    pub(crate) bulkheads: Vec<(String, Bulkhead)>,
    pub(crate) throttles: Vec<AdaptiveThrottle>,
    pub(crate) clusters: Vec<ClusterSource>,
    pub(crate) failbacks: Vec<(String, FailbackRead)>,
}

impl Sources {
    /// Sources of every kind.
    pub(crate) fn len(&self) -> usize {
        self.breakers.len()
            + self.registries.len()
            + self.retries.len()
            + self.budgets.len()
            + self.bulkheads.len()
            + self.throttles.len()
            + self.clusters.len()
            + self.failbacks.len()
    }

    /// Whether a breaker named `name` is exported already, by itself or
    /// through a registry (a registry is scanned: registration is rare).
    pub(crate) fn exports_breaker(&self, name: &str, same: Option<&CircuitBreaker>) -> bool {
        let mut found = self
            .breakers
            .iter()
            .any(|b| b.breaker.name() == name || same.is_some_and(|s| s.ptr_eq(&b.breaker)));
        for r in &self.registries {
            if found {
                break;
            }
            r.source.each(&mut |b| found |= b.name() == name);
        }
        found
    }
}

fn names<T>(v: &[(String, T)]) -> Vec<&str> {
    v.iter().map(|(n, _)| n.as_str()).collect()
}

impl fmt::Debug for Sources {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Sources")
            .field(
                "breakers",
                &self
                    .breakers
                    .iter()
                    .map(|b| b.breaker.name())
                    .collect::<Vec<_>>(),
            )
            .field(
                "registries",
                &self
                    .registries
                    .iter()
                    .map(|r| r.source.family())
                    .collect::<Vec<_>>(),
            )
            .field("retries", &self.retries.len())
            .field("budgets", &names(&self.budgets))
            .field("bulkheads", &names(&self.bulkheads))
            .field("throttles", &self.throttles.len())
            .field(
                "clusters",
                &self
                    .clusters
                    .iter()
                    .map(|c| c.cluster.name())
                    .collect::<Vec<_>>(),
            )
            .field("failbacks", &self.failbacks.len())
            .finish()
    }
}

//! One scrape: read every source under the read lock, then encode.
//!
//! Reading first makes the families of one breaker agree with each other
//! (the state and the state code come from one `metrics()` call) and lets
//! the encoding run without the lock. A breaker name exported twice (two
//! registries whose naming collides, a registry that made a breaker named
//! like one registered by itself) would be a duplicate series, which makes
//! Prometheus reject the whole scrape; registration refuses the cases it
//! can see, and here the first source to export a name wins and the rest
//! are counted in `exporter_skipped_duplicates`.

use std::collections::HashSet;
use std::fmt;
use std::sync::PoisonError;
use std::sync::atomic::Ordering;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::DescriptorEncoder;
use tripline::budget::BudgetStats;
use tripline::bulkhead::BulkheadStats;
use tripline::registry::RegistryStats;
use tripline::retry::RetryStats;
use tripline::throttle::ThrottleMetrics;

use crate::encode::{self, Out};
use crate::exporter::{Exporter, Shared};
use crate::names::f;
use crate::outlier::OutlierSample;
use crate::sample::{BreakerSample, ScrapeContext, sample};
use crate::source::{Detail, FailbackSample};

/// Everything one scrape writes.
#[derive(Default)]
pub(crate) struct Snapshot {
    pub(crate) breakers: Vec<BreakerSample>,
    pub(crate) registries: Vec<RegistryStats>,
    pub(crate) retries: Vec<(String, RetryStats)>,
    pub(crate) budgets: Vec<(String, BudgetStats, u64)>,
    pub(crate) bulkheads: Vec<(String, BulkheadStats, u32)>,
    pub(crate) throttles: Vec<ThrottleMetrics>,
    pub(crate) clusters: Vec<OutlierSample>,
    pub(crate) failbacks: Vec<(String, FailbackSample)>,
}

impl Shared {
    /// Reads every source.
    pub(crate) fn snapshot(&self) -> Snapshot {
        let sources = self.read();
        let mut snap = Snapshot::default();
        // Sized once: a registry of thousands grown by doubling would hold
        // the old and the new buffer at once.
        let sampled = sources
            .registries
            .iter()
            .filter(|r| r.detail > Detail::Aggregate);
        let expected = sources.breakers.len() + sampled.map(|r| r.source.len()).sum::<usize>();
        snap.breakers.reserve_exact(expected + expected / 64);
        let cx = ScrapeContext {
            unix_now: ScrapeContext::unix_now(),
            compat: self.compat,
        };
        for b in &sources.breakers {
            snap.breakers.push(sample(&b.breaker, b.detail, &cx));
        }
        for r in &sources.registries {
            if r.detail > Detail::Aggregate {
                r.source
                    .each(&mut |b| snap.breakers.push(sample(b, r.detail, &cx)));
            }
        }
        snap.registries = sources
            .registries
            .iter()
            .map(|r| r.source.stats())
            .collect();
        for (name, read) in &sources.retries {
            if let Some(stats) = read() {
                snap.retries.push((name.clone(), stats));
            }
        }
        for (name, b) in &sources.budgets {
            snap.budgets.push((name.clone(), b.stats(), b.available()));
        }
        for (name, b) in &sources.bulkheads {
            snap.bulkheads
                .push((name.clone(), b.stats(), b.config().max_concurrent));
        }
        snap.throttles = sources.throttles.iter().map(|t| t.metrics()).collect();
        for c in &sources.clusters {
            snap.clusters
                .push(crate::outlier::sample(&c.tally, &c.cluster));
        }
        for (name, read) in &sources.failbacks {
            snap.failbacks.push((name.clone(), read()));
        }
        drop(sources);
        self.dedupe_and_time(&mut snap.breakers);
        snap
    }

    /// Drops breakers whose name an earlier source exported, prunes the
    /// transition counts of breakers no longer exported, and attaches the
    /// transition counts and the duration histograms.
    fn dedupe_and_time(&self, breakers: &mut Vec<BreakerSample>) {
        let mut seen: HashSet<&str, foldhash::fast::RandomState> =
            HashSet::with_capacity_and_hasher(breakers.len(), Default::default());
        let keep: Vec<bool> = breakers.iter().map(|s| seen.insert(&s.name)).collect();
        self.transitions.retain(|name| seen.contains(name));
        drop(seen);
        // One short lock for the lookups, never while reading breakers: a
        // transition waits at most for this.
        self.transitions.with(|t| {
            if !t.is_empty() {
                for s in breakers.iter_mut() {
                    s.transitions = t.of(&s.name).to_vec();
                }
            }
        });
        let skipped = keep.iter().filter(|k| !**k).count();
        self.skipped.store(skipped as u64, Ordering::Relaxed);
        if skipped > 0 {
            let mut i = 0;
            breakers.retain(|_| {
                i += 1;
                keep[i - 1]
            });
        }
        let histograms = self
            .histograms
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if !histograms.is_empty() {
            for s in breakers.iter_mut() {
                s.histogram = histograms.get(&s.name).map(|h| Box::new(h.sample()));
            }
        }
    }
}

impl Collector for Exporter {
    fn encode(&self, encoder: DescriptorEncoder) -> Result<(), fmt::Error> {
        let shared = &*self.shared;
        let snap = shared.snapshot();
        let mut out = Out::new(encoder, &shared.prefix, &shared.constant);
        encode::breakers(&mut out, &snap.breakers)?;
        encode::registries(&mut out, &snap.registries)?;
        encode::retries(&mut out, &snap.retries)?;
        encode::budgets(&mut out, &snap.budgets)?;
        encode::bulkheads(&mut out, &snap.bulkheads)?;
        encode::throttles(&mut out, &snap.throttles)?;
        encode::clusters(&mut out, &snap.clusters)?;
        encode::failbacks(&mut out, &snap.failbacks)?;
        let base = out.labels();
        out.family(&f::SKIPPED_DUPLICATES)?
            .count(&base, shared.skipped.load(Ordering::Relaxed))?;
        if shared.compat {
            encode::compat(&mut out, &snap.breakers)?;
        }
        Ok(())
    }
}

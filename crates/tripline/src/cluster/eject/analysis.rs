//! The interval analysis pass: returns, multiplier decay, and the
//! success-rate and failure-percentage detectors.
//!
//! The two detectors judge alike: a pool of the endpoints with at least
//! `request_volume` requests in the interval, judged only when it holds at
//! least `minimum_hosts`, its outliers ejected worst first. They differ
//! only in the percentage an endpoint is ranked by and in where the line
//! is drawn; [`Rule`] is that difference and [`detect`] the rest, written
//! once so that the detectors cannot drift apart in how they pool and eject.

use super::{Ctx, HealthBook};
use crate::cluster::set::EndpointSet;
use crate::outlier::host::{EXT_FAIL, EXT_TOTAL, LOCAL_FAIL, LOCAL_TOTAL};
use crate::outlier::{
    Detector, DetectorStats, FailurePercentageConfig, OutlierConfig, SuccessRateConfig,
};

/// One analysis pass over `set`. No allocation once the book's scratch
/// vectors have grown to the cluster's size.
pub(crate) fn analyze(
    config: &OutlierConfig,
    book: &mut HealthBook,
    set: &EndpointSet,
    ctx: &mut Ctx,
) {
    let total = set.len();
    let mut counts = std::mem::take(&mut book.counts);
    counts.clear();
    for e in set.endpoints.iter() {
        counts.push(e.inner.outlier.take_interval());
        book.return_or_decay(e, total, ctx);
    }
    let rules = [
        config.success_rate.as_ref().map(Rule::SuccessRate),
        config
            .failure_percentage
            .as_ref()
            .map(Rule::FailurePercentage),
    ];
    for rule in rules.into_iter().flatten() {
        detect(config, book, set, &counts, rule, false, ctx);
        if config.split_external_local_origin_errors {
            detect(config, book, set, &counts, rule, true, ctx);
        }
    }
    book.counts = counts;
}

/// One of the two pool detectors, with its config.
#[derive(Clone, Copy)]
enum Rule<'a> {
    /// Ejects endpoints whose success rate is below `mean − k·σ` of the
    /// pool.
    SuccessRate(&'a SuccessRateConfig),
    /// Ejects endpoints whose failure percentage reaches a fixed threshold.
    FailurePercentage(&'a FailurePercentageConfig),
}

/// Where a [`Rule`] draws the line in one pool, for the events it emits.
enum Line {
    SuccessRate {
        mean: f64,
        stdev: f64,
        threshold: f64,
    },
    FailurePercentage {
        threshold: u32,
    },
}

impl Rule<'_> {
    /// The detector an ejection is reported as, and its enforcing percent,
    /// for the external counts or (`local`) the local-origin ones.
    fn detector(self, local: bool) -> (Detector, u32) {
        match (self, local) {
            (Rule::SuccessRate(sr), false) => (Detector::SuccessRate, sr.enforcing_percent),
            (Rule::SuccessRate(sr), true) => (
                Detector::LocalOriginSuccessRate,
                sr.enforcing_local_origin_percent,
            ),
            (Rule::FailurePercentage(fp), false) => {
                (Detector::FailurePercentage, fp.enforcing_percent)
            }
            (Rule::FailurePercentage(fp), true) => (
                Detector::LocalOriginFailurePercentage,
                fp.enforcing_local_origin_percent,
            ),
        }
    }

    /// `(request_volume, minimum_hosts)`: who enters the pool, and how
    /// large it must be to be judged.
    fn pool(self) -> (u64, usize) {
        let (volume, hosts) = match self {
            Rule::SuccessRate(sr) => (sr.request_volume, sr.minimum_hosts),
            Rule::FailurePercentage(fp) => (fp.request_volume, fp.minimum_hosts),
        };
        (u64::from(volume), hosts as usize)
    }

    /// The percentage an endpoint with `requests` (non-zero) and `failures`
    /// is ranked by.
    fn percent(self, requests: u64, failures: u64) -> f64 {
        let counted = match self {
            Rule::SuccessRate(_) => requests.saturating_sub(failures),
            Rule::FailurePercentage(_) => failures.min(requests),
        };
        100.0 * counted as f64 / requests as f64
    }

    /// Keeps the pool's outliers in `c`, worst first, and says where the
    /// line was drawn.
    fn outliers(
        self,
        c: &mut Vec<(f64, usize, u64)>,
        counts: &[[u64; 4]],
        (t, f): (usize, usize),
    ) -> Line {
        match self {
            Rule::SuccessRate(sr) => {
                let hosts = c.len() as f64;
                let mean = c.iter().map(|x| x.0).sum::<f64>() / hosts;
                let var = c.iter().map(|x| (x.0 - mean) * (x.0 - mean)).sum::<f64>() / hosts;
                let stdev = var.sqrt();
                let threshold = mean - sr.stdev_factor * stdev;
                c.retain(|x| x.0 < threshold);
                c.sort_by(|a, b| a.0.total_cmp(&b.0));
                Line::SuccessRate {
                    mean,
                    stdev,
                    threshold,
                }
            }
            Rule::FailurePercentage(fp) => {
                // Exactly `failures / requests ≥ threshold%`, in integers:
                // the percentage in `c` is for the event, not the decision.
                let threshold = u128::from(fp.threshold_percent);
                c.retain(|x| {
                    let n = &counts[x.1];
                    100 * u128::from(n[f].min(n[t])) >= threshold * u128::from(n[t])
                });
                c.sort_by(|a, b| b.0.total_cmp(&a.0));
                Line::FailurePercentage {
                    threshold: fp.threshold_percent,
                }
            }
        }
    }
}

impl Line {
    /// The event's figures for an outlier ranked at `percent` with
    /// `requests`, in a pool of `hosts`.
    fn stats(&self, percent: f64, requests: u64, hosts: usize) -> DetectorStats {
        match *self {
            Line::SuccessRate {
                mean,
                stdev,
                threshold,
            } => DetectorStats::SuccessRate {
                success_rate: percent,
                mean,
                stdev,
                threshold,
                requests,
                hosts,
            },
            Line::FailurePercentage { threshold } => DetectorStats::FailurePercentage {
                failure_percent: percent,
                threshold,
                requests,
            },
        }
    }
}

/// Runs `rule` over the external counts or (`local`) the local-origin
/// ones: pools the endpoints with enough requests and, when enough are
/// pooled, ejects the outliers worst first. No allocation: the pool is the
/// book's scratch vector.
fn detect(
    config: &OutlierConfig,
    book: &mut HealthBook,
    set: &EndpointSet,
    counts: &[[u64; 4]],
    rule: Rule<'_>,
    local: bool,
    ctx: &mut Ctx,
) {
    let (t, f) = if local {
        (LOCAL_TOTAL, LOCAL_FAIL)
    } else {
        (EXT_TOTAL, EXT_FAIL)
    };
    let (detector, enforcing) = rule.detector(local);
    let (request_volume, minimum_hosts) = rule.pool();
    let mut c = std::mem::take(&mut book.candidates);
    c.clear();
    for (i, n) in counts.iter().enumerate() {
        if n[t] >= request_volume {
            c.push((rule.percent(n[t], n[f]), i, n[t]));
        }
    }
    if c.len() >= minimum_hosts {
        let hosts = c.len();
        let line = rule.outliers(&mut c, counts, (t, f));
        for &(percent, i, requests) in &c {
            let stats = line.stats(percent, requests, hosts);
            let e = &set.endpoints[i];
            book.try_eject(config, e, set.len(), detector, stats, enforcing, ctx);
        }
    }
    book.candidates = c;
}

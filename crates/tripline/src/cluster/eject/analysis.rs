//! The interval analysis pass: returns, multiplier decay, and the
//! success-rate and failure-percentage detectors.

use super::{Ctx, HealthBook};
use crate::cluster::set::EndpointSet;
use crate::outlier::host::{EXT_FAIL, EXT_TOTAL, LOCAL_FAIL, LOCAL_TOTAL};
use crate::outlier::{Detector, DetectorStats, OutlierConfig};

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
    let split = config.split_external_local_origin_errors;
    if let Some(sr) = &config.success_rate {
        let mut run = |t, f, detector, enforcing| {
            success_rate(config, book, set, &counts, (t, f), detector, enforcing, ctx)
        };
        run(
            EXT_TOTAL,
            EXT_FAIL,
            Detector::SuccessRate,
            sr.enforcing_percent,
        );
        if split {
            run(
                LOCAL_TOTAL,
                LOCAL_FAIL,
                Detector::LocalOriginSuccessRate,
                sr.enforcing_local_origin_percent,
            );
        }
    }
    if let Some(fp) = &config.failure_percentage {
        let mut run = |t, f, detector, enforcing| {
            failure_percentage(config, book, set, &counts, (t, f), detector, enforcing, ctx)
        };
        run(
            EXT_TOTAL,
            EXT_FAIL,
            Detector::FailurePercentage,
            fp.enforcing_percent,
        );
        if split {
            run(
                LOCAL_TOTAL,
                LOCAL_FAIL,
                Detector::LocalOriginFailurePercentage,
                fp.enforcing_local_origin_percent,
            );
        }
    }
    book.counts = counts;
}

/// Ejects endpoints whose success rate is below `mean − k·σ` of the
/// endpoints with at least `request_volume` requests, worst first, when at
/// least `minimum_hosts` such endpoints exist.
#[allow(clippy::too_many_arguments)]
fn success_rate(
    config: &OutlierConfig,
    book: &mut HealthBook,
    set: &EndpointSet,
    counts: &[[u64; 4]],
    (t, f): (usize, usize),
    detector: Detector,
    enforcing: u32,
    ctx: &mut Ctx,
) {
    let Some(sr) = &config.success_rate else {
        return;
    };
    let mut c = std::mem::take(&mut book.candidates);
    c.clear();
    for (i, n) in counts.iter().enumerate() {
        if n[t] >= u64::from(sr.request_volume) {
            let ok = n[t].saturating_sub(n[f]);
            c.push((100.0 * ok as f64 / n[t] as f64, i, n[t]));
        }
    }
    if c.len() >= sr.minimum_hosts as usize {
        let hosts = c.len();
        let mean = c.iter().map(|x| x.0).sum::<f64>() / hosts as f64;
        let var = c.iter().map(|x| (x.0 - mean) * (x.0 - mean)).sum::<f64>() / hosts as f64;
        let stdev = var.sqrt();
        let threshold = mean - sr.stdev_factor * stdev;
        c.retain(|x| x.0 < threshold);
        c.sort_by(|a, b| a.0.total_cmp(&b.0));
        for &(rate, i, requests) in &c {
            let stats = DetectorStats::SuccessRate {
                success_rate: rate,
                mean,
                stdev,
                threshold,
                requests,
                hosts,
            };
            let e = &set.endpoints[i];
            book.try_eject(config, e, set.len(), detector, stats, enforcing, ctx);
        }
    }
    book.candidates = c;
}

/// Ejects endpoints whose failure percentage reaches the threshold, worst
/// first, when at least `minimum_hosts` endpoints have `request_volume`.
#[allow(clippy::too_many_arguments)]
fn failure_percentage(
    config: &OutlierConfig,
    book: &mut HealthBook,
    set: &EndpointSet,
    counts: &[[u64; 4]],
    (t, f): (usize, usize),
    detector: Detector,
    enforcing: u32,
    ctx: &mut Ctx,
) {
    let Some(fp) = &config.failure_percentage else {
        return;
    };
    let mut c = std::mem::take(&mut book.candidates);
    c.clear();
    for (i, n) in counts.iter().enumerate() {
        if n[t] >= u64::from(fp.request_volume) {
            c.push((100.0 * n[f].min(n[t]) as f64 / n[t] as f64, i, n[t]));
        }
    }
    if c.len() >= fp.minimum_hosts as usize {
        // Exactly `failures / requests ≥ threshold%`, in integers: the
        // percentage in `c` is for the event, not for the decision.
        let threshold = u128::from(fp.threshold_percent);
        c.retain(|x| {
            let n = &counts[x.1];
            100 * u128::from(n[f].min(n[t])) >= threshold * u128::from(n[t])
        });
        c.sort_by(|a, b| b.0.total_cmp(&a.0));
        for &(failure_percent, i, requests) in &c {
            let stats = DetectorStats::FailurePercentage {
                failure_percent,
                threshold: fp.threshold_percent,
                requests,
            };
            let e = &set.endpoints[i];
            book.try_eject(config, e, set.len(), detector, stats, enforcing, ctx);
        }
    }
    book.candidates = c;
}

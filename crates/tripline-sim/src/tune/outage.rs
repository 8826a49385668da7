//! The baseline and the outages: where the recorded failure or slow rate
//! stands out from the dependency's normal behaviour.
//!
//! The traffic is cut into [`WINDOW`]-second windows. The baseline failure
//! rate starts as the whole log's and is re-estimated twice from the
//! windows not flagged, so a long outage does not raise its own bar. A
//! window is flagged when its rate exceeds the baseline by at least
//! [`MIN_EXCESS`] *and* by four standard errors of a binomial at the
//! baseline rate (so sparse traffic needs a larger excess). Slow calls —
//! at least [`SLOW_FACTOR`] × the median latency — are judged alike.
//! Flagged windows at most one window apart merge into one outage, whose
//! edges are then refined to the second: the first and last second whose
//! rate is above the midpoint of baseline and outage.

use std::time::Duration;

use super::read::{BUCKETS, Second, Traffic, bucket_of, bucket_upper_ms};

/// Window length for detection, seconds.
pub const WINDOW: usize = 5;
/// Smallest excess over the baseline rate that makes an outage.
pub const MIN_EXCESS: f64 = 0.1;
/// A call this many times slower than the median is slow for detection.
pub const SLOW_FACTOR: f64 = 5.0;

/// What was wrong during an outage.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Calls failed.
    Errors,
    /// Calls were slow.
    Slow,
}

/// One outage, as seconds from the log's start.
#[derive(Clone, Debug, PartialEq)]
pub struct Outage {
    /// First second affected.
    pub from: u64,
    /// First second no longer affected.
    pub to: u64,
    /// Errors or slowness.
    pub kind: Kind,
    /// Failed share of its calls.
    pub failure_rate: f64,
    /// Slow share of its calls.
    pub slow_rate: f64,
    /// Given with `--outage` rather than detected.
    pub labelled: bool,
}

impl Outage {
    /// Whether second `s` is inside it.
    pub fn contains(&self, s: u64) -> bool {
        (self.from..self.to).contains(&s)
    }
}

/// The dependency's normal behaviour.
#[derive(Clone, Debug, PartialEq)]
pub struct Baseline {
    /// Failed share of the calls outside outages.
    pub failure_rate: f64,
    /// Slow share of the calls outside outages.
    pub slow_rate: f64,
    /// Median latency of every call, ms.
    pub p50_ms: f64,
    /// 99th percentile latency outside outages, ms.
    pub p99_ms: f64,
    /// The latency bucket from which a call counts as slow for detection.
    pub slow_bucket: usize,
}

/// Totals of a run of seconds.
#[derive(Clone, Copy, Default)]
struct Tally {
    calls: u64,
    failed: u64,
    slow: u64,
}

fn tally(seconds: &[Second], slow_bucket: usize) -> Tally {
    seconds.iter().fold(Tally::default(), |t, s| Tally {
        calls: t.calls + s.calls(),
        failed: t.failed + s.failures(),
        slow: t.slow + s.slow(slow_bucket),
    })
}

/// A latency percentile (0..1) of the seconds' histograms, in ms (the
/// bucket's upper bound).
pub fn percentile<'a>(seconds: impl Iterator<Item = &'a Second>, q: f64) -> f64 {
    let mut hist = [0u64; BUCKETS];
    for s in seconds {
        for (h, (ok, failed)) in hist.iter_mut().zip(s.ok.iter().zip(&s.failed)) {
            *h += u64::from(*ok) + u64::from(*failed);
        }
    }
    let total: u64 = hist.iter().sum();
    let want = (total as f64 * q).ceil() as u64;
    let mut seen = 0;
    for (i, n) in hist.iter().enumerate() {
        seen += n;
        if seen >= want.max(1) {
            return bucket_upper_ms(i);
        }
    }
    bucket_upper_ms(BUCKETS - 1)
}

fn stands_out(rate: f64, base: f64, n: u64) -> bool {
    let se = (base * (1.0 - base) / n as f64).sqrt();
    n >= 5 && rate >= base + MIN_EXCESS.max(4.0 * se)
}

/// Estimates the baseline and finds the outages.
pub fn detect(traffic: &Traffic) -> (Baseline, Vec<Outage>) {
    let secs = &traffic.seconds;
    let p50 = percentile(secs.iter(), 0.5);
    let slow_bucket = (bucket_of(p50 * SLOW_FACTOR) + 1).min(BUCKETS - 1);
    let windows: Vec<Tally> = secs.chunks(WINDOW).map(|c| tally(c, slow_bucket)).collect();
    let all = tally(secs, slow_bucket);
    let (mut pf, mut ps) = (ratio(all.failed, all.calls), ratio(all.slow, all.calls));
    let mut flags = vec![None; windows.len()];
    for _ in 0..3 {
        for (w, f) in windows.iter().zip(flags.iter_mut()) {
            *f = if stands_out(ratio(w.failed, w.calls), pf, w.calls) {
                Some(Kind::Errors)
            } else if stands_out(ratio(w.slow, w.calls), ps, w.calls) {
                Some(Kind::Slow)
            } else {
                None
            };
        }
        let healthy = windows
            .iter()
            .zip(&flags)
            .filter(|(_, f)| f.is_none())
            .fold(Tally::default(), |t, (w, _)| Tally {
                calls: t.calls + w.calls,
                failed: t.failed + w.failed,
                slow: t.slow + w.slow,
            });
        pf = ratio(healthy.failed, healthy.calls);
        ps = ratio(healthy.slow, healthy.calls);
    }
    let mut outages = Vec::new();
    let mut i = 0;
    while i < flags.len() {
        let Some(kind) = flags[i] else {
            i += 1;
            continue;
        };
        let mut j = i + 1;
        while j < flags.len()
            && (flags[j].is_some() || flags.get(j + 1).is_some_and(Option::is_some))
        {
            j += 1;
        }
        let (from, to) = refine(
            secs,
            i * WINDOW,
            (j * WINDOW).min(secs.len()),
            kind,
            pf,
            ps,
            slow_bucket,
        );
        outages.push(describe(secs, from, to, kind, slow_bucket, false));
        i = j;
    }
    let healthy = secs
        .iter()
        .enumerate()
        .filter(|(s, _)| !outages.iter().any(|o: &Outage| o.contains(*s as u64)));
    let baseline = Baseline {
        failure_rate: pf,
        slow_rate: ps,
        p50_ms: p50,
        p99_ms: percentile(healthy.map(|(_, s)| s), 0.99),
        slow_bucket,
    };
    (baseline, outages)
}

/// An outage's figures over `[from, to)`.
pub fn describe(
    secs: &[Second],
    from: usize,
    to: usize,
    kind: Kind,
    slow_bucket: usize,
    labelled: bool,
) -> Outage {
    let t = tally(&secs[from.min(secs.len())..to.min(secs.len())], slow_bucket);
    Outage {
        from: from as u64,
        to: to as u64,
        kind,
        failure_rate: ratio(t.failed, t.calls),
        slow_rate: ratio(t.slow, t.calls),
        labelled,
    }
}

/// Narrows `[from, to)` (window edges) to the seconds whose rate is above
/// the midpoint, looking one window beyond each edge.
fn refine(
    secs: &[Second],
    from: usize,
    to: usize,
    kind: Kind,
    pf: f64,
    ps: f64,
    slow: usize,
) -> (usize, usize) {
    let rate = |s: &Second| match kind {
        Kind::Errors => ratio(s.failures(), s.calls()),
        Kind::Slow => ratio(s.slow(slow), s.calls()),
    };
    let inside = tally(&secs[from..to], slow);
    let (base, level) = match kind {
        Kind::Errors => (pf, ratio(inside.failed, inside.calls)),
        Kind::Slow => (ps, ratio(inside.slow, inside.calls)),
    };
    let mid = (base + level) / 2.0;
    let lo = from.saturating_sub(WINDOW);
    let hi = (to + WINDOW).min(secs.len());
    let bad = |s: &Second| s.calls() > 0 && rate(s) >= mid;
    let start = (lo..hi).find(|&s| bad(&secs[s])).unwrap_or(from);
    let end = (lo..hi)
        .rev()
        .find(|&s| bad(&secs[s]))
        .map_or(to, |e| e + 1);
    (start, end.max(start + 1))
}

fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 { 0.0 } else { a as f64 / b as f64 }
}

/// Parses `FROM..TO` for `--outage`: each end is an offset from the log's
/// start (`90s`, `2m30s`), a time of day (`14:02` or `14:02:30`, UTC, on
/// the log's first day or the next), or an RFC 3339 timestamp.
pub fn parse_range(text: &str, traffic: &Traffic) -> Result<(u64, u64), String> {
    let (a, b) = text
        .split_once("..")
        .ok_or_else(|| format!("--outage `{text}`: expected FROM..TO"))?;
    let (from, to) = (instant(a.trim(), traffic)?, instant(b.trim(), traffic)?);
    if to <= from {
        return Err(format!("--outage `{text}`: TO must be after FROM"));
    }
    let span = traffic.seconds.len() as u64;
    if from >= span {
        return Err(format!(
            "--outage `{text}`: starts after the log ends ({span} s long)"
        ));
    }
    Ok((from, to.min(span)))
}

fn instant(t: &str, traffic: &Traffic) -> Result<u64, String> {
    if t.contains('T') {
        let s = super::read::line::timestamp(t)? as u64;
        return s
            .checked_sub(traffic.start)
            .ok_or_else(|| format!("`{t}` is before the log starts"));
    }
    if t.contains(':') {
        let parts: Vec<u64> = t
            .split(':')
            .map(|p| {
                p.parse::<u64>()
                    .map_err(|_| format!("`{t}`: expected HH:MM[:SS]"))
            })
            .collect::<Result<_, _>>()?;
        let of_day = match parts.as_slice() {
            [h, m] if *h < 24 && *m < 60 => h * 3600 + m * 60,
            [h, m, s] if *h < 24 && *m < 60 && *s < 60 => h * 3600 + m * 60 + s,
            _ => return Err(format!("`{t}`: expected HH:MM[:SS]")),
        };
        let day = traffic.start - traffic.start % 86_400;
        let mut at = day + of_day;
        if at < traffic.start {
            at += 86_400;
        }
        return Ok(at - traffic.start);
    }
    humantime::parse_duration(t)
        .map(|d: Duration| d.as_secs())
        .map_err(|_| format!("`{t}`: expected an offset (`90s`), a time of day (`14:02`) or an RFC 3339 timestamp"))
}

//! The scenario file as serde reads it, and the checks types cannot express.

use std::ops::Range;
use std::time::Duration;

use serde::Deserialize;
use toml::Spanned;
use tripline::CircuitBreakerConfig;

use super::fault::fault;
use super::{BreakerSpec, Scenario, Traffic};
use crate::error::{Locator, ScenarioError};

/// Longest scenario accepted: a week of virtual time.
const MAX_DURATION: Duration = Duration::from_secs(7 * 86_400);
/// Most calls a scenario may make, all replicas together: the engine runs
/// 10–25 million a second on one core, so this is about a minute per
/// breaker. More is a typo (a rate in calls per hour?) or wants a shorter
/// scenario.
const MAX_CALLS: u64 = 1_000_000_000;

/// Most replicas accepted (each is a breaker instance in memory).
const MAX_REPLICAS: u32 = 100_000;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawScenario {
    name: Option<String>,
    duration: Spanned<Dur>,
    #[serde(default)]
    seed: u64,
    traffic: Spanned<RawTraffic>,
    #[serde(default)]
    fault: Vec<Spanned<RawFault>>,
    #[serde(default)]
    breaker: Vec<Spanned<CircuitBreakerConfig>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTraffic {
    rate: Spanned<f64>,
    latency: Option<Spanned<Dur>>,
    timeout: Option<Spanned<Dur>>,
    replicas: Option<Spanned<u32>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawFault {
    pub(super) name: Option<String>,
    pub(super) start: Option<Spanned<Dur>>,
    pub(super) end: Option<Spanned<Dur>>,
    pub(super) at: Option<Spanned<Vec<Spanned<Dur>>>>,
    pub(super) kind: Option<Spanned<RawKind>>,
    pub(super) latency: Option<Spanned<Dur>>,
    pub(super) rate: Option<Spanned<f64>>,
    pub(super) expect_trip: Option<bool>,
}

#[derive(Deserialize, Clone, Copy)]
#[serde(rename_all = "snake_case")]
pub(super) enum RawKind {
    Error,
    Latency,
}

/// A duration written as in the library's configs: `"20ms"`, `"1m 30s"`.
#[derive(Clone, Copy)]
pub(super) struct Dur(pub(super) Duration);

impl<'de> Deserialize<'de> for Dur {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        tripline::clock::duration_serde::parse(&s)
            .map(Dur)
            .map_err(serde::de::Error::custom)
    }
}

pub(super) fn span<T>(s: &Spanned<T>) -> Option<Range<usize>> {
    Some(s.span())
}

pub(super) fn secs(d: Duration) -> String {
    humantime::format_duration(d).to_string()
}

pub(super) fn parse(file: &str, src: &str) -> Result<Scenario, ScenarioError> {
    let loc = Locator { file, src };
    let raw: RawScenario = toml::from_str(src).map_err(|e| loc.toml_error(&e))?;
    let doc: toml::Table = toml::from_str(src).map_err(|e| loc.toml_error(&e))?;
    let duration = raw.duration.get_ref().0;
    if duration.is_zero() || duration > MAX_DURATION {
        return Err(loc.at(
            span(&raw.duration),
            None,
            Some("duration"),
            format!("must be above 0s and at most 7days, got {}", secs(duration)),
        ));
    }
    let traffic = traffic(&loc, &raw.traffic)?;
    let calls =
        super::calls_before(traffic.rate, duration).saturating_mul(u64::from(traffic.replicas));
    if calls > MAX_CALLS {
        return Err(loc.at(
            span(&raw.traffic.get_ref().rate),
            Some("[traffic]".to_owned()),
            Some("rate"),
            format!(
                "with `duration` {} and {} replica(s) the scenario makes {calls} calls; \
                 at most {MAX_CALLS} (about a minute per breaker): lower the rate, the \
                 replicas or the duration",
                secs(duration),
                traffic.replicas
            ),
        ));
    }
    let faults = raw
        .fault
        .iter()
        .enumerate()
        .map(|(i, f)| fault(&loc, i, f, duration))
        .collect::<Result<Vec<_>, _>>()?;
    let tables = doc.get("breaker").and_then(|b| b.as_array());
    let mut breakers: Vec<BreakerSpec> = Vec::with_capacity(raw.breaker.len());
    for (i, b) in raw.breaker.iter().enumerate() {
        let table = tables
            .and_then(|t| t.get(i))
            .and_then(|t| t.as_table())
            .cloned()
            .unwrap_or_default();
        let spec = breaker(&loc, i, b, table)?;
        if breakers.iter().any(|o| o.config.name == spec.config.name) {
            return Err(loc.at(
                find_key(src, b.span(), "name").or(Some(b.span())),
                Some(format!("[[breaker]] #{} {:?}", i + 1, spec.config.name)),
                Some("name"),
                format!(
                    "{:?} is already the name of another breaker",
                    spec.config.name
                ),
            ));
        }
        breakers.push(spec);
    }
    if breakers.is_empty() {
        return Err(loc.at(
            None,
            None,
            Some("breaker"),
            "needs at least one [[breaker]] table",
        ));
    }
    let name = raw.name.unwrap_or_else(|| file.to_owned());
    Ok(Scenario {
        name,
        file: file.to_owned(),
        duration,
        seed: raw.seed,
        traffic,
        faults,
        breakers,
    })
}

fn traffic(loc: &Locator<'_>, t: &Spanned<RawTraffic>) -> Result<Traffic, ScenarioError> {
    let table = || Some("[traffic]".to_owned());
    let raw = t.get_ref();
    let rate = *raw.rate.get_ref();
    if !(rate > 0.0 && rate.is_finite() && rate <= 1e9) {
        let msg =
            format!("must be a number of calls per second above 0 and at most 1e9, got {rate}");
        return Err(loc.at(span(&raw.rate), table(), Some("rate"), msg));
    }
    let timeout = raw.timeout.as_ref().map(|s| (s, s.get_ref().0));
    if let Some((s, d)) = timeout
        && d.is_zero()
    {
        return Err(loc.at(span(s), table(), Some("timeout"), "must be above 0s"));
    }
    let replicas = raw.replicas.as_ref().map_or(1, |r| *r.get_ref());
    if !(1..=MAX_REPLICAS).contains(&replicas) {
        let msg = format!("must be between 1 and {MAX_REPLICAS}, got {replicas}");
        let s = raw.replicas.as_ref().map(|r| r.span());
        return Err(loc.at(s, table(), Some("replicas"), msg));
    }
    Ok(Traffic {
        rate,
        latency: raw
            .latency
            .as_ref()
            .map_or(Duration::ZERO, |l| l.get_ref().0),
        timeout: timeout.map(|(_, d)| d),
        replicas,
    })
}

fn breaker(
    loc: &Locator<'_>,
    i: usize,
    b: &Spanned<CircuitBreakerConfig>,
    table: toml::Table,
) -> Result<BreakerSpec, ScenarioError> {
    let mut config = b.get_ref().clone();
    if !table.contains_key("name") {
        config.name = format!("breaker {}", i + 1);
    }
    let label = format!("[[breaker]] #{} {:?}", i + 1, config.name);
    let warnings = config.validate().map_err(|e| {
        let leaf = e.field.rsplit('.').next().unwrap_or(&e.field);
        let at = find_key(loc.src, b.span(), leaf)
            .or_else(|| find_key(loc.src, b.span(), e.field.split('.').next().unwrap_or("")))
            .or(Some(b.span()));
        loc.at(
            at,
            Some(label.clone()),
            Some(&e.field),
            e.constraint.clone(),
        )
    })?;
    Ok(BreakerSpec {
        config,
        table,
        warnings,
    })
}

/// Where the bare key `key` is written (followed by `=`) in the table whose
/// span starts at `range` (an array-of-tables span covers only its header,
/// so the search runs to the next header).
fn find_key(src: &str, range: Range<usize>, key: &str) -> Option<Range<usize>> {
    if key.is_empty() {
        return None;
    }
    let next_header = src[range.end..]
        .match_indices('\n')
        .map(|(i, _)| range.end + i + 1)
        .find(|&i| src[i..].trim_start().starts_with('['))
        .unwrap_or(src.len());
    let range = range.start..next_header.max(range.end);
    let body = src.get(range.clone())?;
    let is_key = |b: u8| b.is_ascii_alphanumeric() || b == b'_' || b == b'-';
    let mut from = 0;
    while let Some(off) = body[from..].find(key) {
        let start = from + off;
        let end = start + key.len();
        let before_ok = start == 0 || !is_key(body.as_bytes()[start - 1]);
        let after_ok = body[end..].trim_start_matches([' ', '\t']).starts_with('=')
            && !body.as_bytes().get(end).is_some_and(|b| is_key(*b));
        if before_ok && after_ok {
            return Some(range.start + start..range.start + end);
        }
        from = end;
    }
    None
}

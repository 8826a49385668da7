//! The drill file as written, and its validation into a [`Drill`].

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use serde::Deserialize;
use toml::Spanned;
use tripline_proxy::config::{AbortSection, DelaySection};

mod sections;

use super::{AbortRule, Drill, Expectations, Phase, UpstreamSpec};
use crate::DrillError;
use sections::{load, phase, target};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawDrill {
    name: Option<String>,
    #[serde(default)]
    watch: Vec<String>,
    compare_breaker: Option<String>,
    target: Spanned<RawTarget>,
    load: Spanned<RawLoad>,
    #[serde(default, rename = "phase")]
    phases: Vec<Spanned<RawPhase>>,
    abort: Option<Spanned<RawAbort>>,
    expect: Spanned<RawExpect>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTarget {
    admin: Option<String>,
    url: Option<String>,
    in_process: Option<String>,
    proxy: Option<String>,
    #[serde(default)]
    upstreams: BTreeMap<String, UpstreamSpec>,
    #[serde(default)]
    seed: u64,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLoad {
    rate: f64,
    #[serde(with = "tripline::clock::duration_serde")]
    duration: Duration,
    #[serde(default = "default_concurrency")]
    concurrency: usize,
    #[serde(default = "default_paths")]
    paths: Vec<String>,
    #[serde(default = "default_timeout", with = "tripline::clock::duration_serde")]
    timeout: Duration,
}

fn default_concurrency() -> usize {
    64
}
fn default_paths() -> Vec<String> {
    vec!["/".to_owned()]
}
fn default_timeout() -> Duration {
    Duration::from_secs(10)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPhase {
    name: Option<String>,
    #[serde(with = "tripline::clock::duration_serde")]
    from: Duration,
    #[serde(with = "tripline::clock::duration_serde")]
    to: Duration,
    route: Option<String>,
    abort: Option<AbortSection>,
    delay: Option<DelaySection>,
    endpoint: Option<String>,
    header: Option<String>,
    expect_trip: Option<bool>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawAbort {
    error_rate_above: f64,
    #[serde(rename = "for", with = "tripline::clock::duration_serde")]
    sustained: Duration,
    #[serde(default)]
    during: During,
}

#[derive(Deserialize, Default, PartialEq)]
#[serde(rename_all = "snake_case")]
enum During {
    #[default]
    Any,
    Healthy,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawExpect {
    #[serde(default, with = "tripline::clock::duration_serde::option")]
    trip_within: Option<Duration>,
    false_trips: Option<u64>,
    max_healthy_rejected: Option<u64>,
    #[serde(default, with = "tripline::clock::duration_serde::option")]
    recover_within: Option<Duration>,
    max_probes_per_second: Option<u64>,
    max_retry_amplification: Option<f64>,
    #[serde(default, with = "tripline::clock::duration_serde::option")]
    fault_p99: Option<Duration>,
}

/// Errors about one place of the file: its line and field.
struct At<'a> {
    file: &'a str,
    text: &'a str,
}

impl At<'_> {
    fn err(&self, span: std::ops::Range<usize>, field: &str, message: &str) -> DrillError {
        let line = self.text[..span.start.min(self.text.len())]
            .bytes()
            .filter(|b| *b == b'\n')
            .count()
            + 1;
        DrillError::File {
            file: format!("{}:{line}", self.file),
            message: format!("{field}: {message}"),
        }
    }
}

pub(super) fn parse(file: &str, text: &str, dir: &Path) -> Result<Drill, DrillError> {
    let raw: RawDrill = toml::from_str(text).map_err(|e| DrillError::File {
        file: file.to_owned(),
        message: e.to_string().trim_end().to_owned(),
    })?;
    let at = At { file, text };
    let load_span = raw.load.span();
    let load = load(&at, load_span, raw.load.into_inner())?;
    let target_span = raw.target.span();
    let target = target(&at, target_span, raw.target.into_inner(), dir)?;
    let mut phases: Vec<Phase> = Vec::new();
    for (i, p) in raw.phases.into_iter().enumerate() {
        let span = p.span();
        let phase = phase(&at, i + 1, span.clone(), p.into_inner(), &load, &target)?;
        if let Some(before) = phases.last()
            && phase.from < before.to
        {
            return Err(at.err(
                span,
                &format!("phase[{}].from", i + 1),
                "phases must be in time order and not overlap",
            ));
        }
        phases.push(phase);
    }
    let abort = match raw.abort {
        None => None,
        Some(a) => {
            let span = a.span();
            let a = a.into_inner();
            if !(a.error_rate_above >= 0.0 && a.error_rate_above < 1.0) {
                return Err(at.err(
                    span,
                    "abort.error_rate_above",
                    "must be within 0 (inclusive) and 1 (exclusive)",
                ));
            }
            if a.sustained < Duration::from_secs(1) || a.sustained.subsec_nanos() != 0 {
                return Err(at.err(span, "abort.for", "must be whole seconds, at least 1s"));
            }
            Some(AbortRule {
                error_rate_above: a.error_rate_above,
                sustained: a.sustained,
                during_faults: a.during == During::Any,
            })
        }
    };
    let span = raw.expect.span();
    let e = raw.expect.into_inner();
    let expect = Expectations {
        trip_within: e.trip_within,
        false_trips: e.false_trips,
        max_healthy_rejected: e.max_healthy_rejected,
        recover_within: e.recover_within,
        max_probes_per_second: e.max_probes_per_second,
        max_retry_amplification: e.max_retry_amplification,
        fault_p99: e.fault_p99,
    };
    if expect == Expectations::default() {
        return Err(at.err(
            span,
            "expect",
            "needs at least one expectation (a drill that checks nothing passes whatever happens)",
        ));
    }
    if let Some(a) = expect.max_retry_amplification
        && !(a >= 1.0 && a.is_finite())
    {
        return Err(at.err(
            span,
            "expect.max_retry_amplification",
            "must be at least 1 (every request is tried once)",
        ));
    }
    let wants_fault = expect.trip_within.is_some()
        || expect.recover_within.is_some()
        || expect.fault_p99.is_some()
        || expect.max_probes_per_second.is_some();
    if wants_fault && phases.is_empty() {
        return Err(at.err(
            span,
            "expect",
            "trip_within, recover_within, max_probes_per_second and fault_p99 need a [[phase]] with a fault",
        ));
    }
    let name = raw.name.unwrap_or_else(|| file.to_owned());
    Ok(Drill {
        name,
        target,
        load,
        phases,
        abort,
        expect,
        watch: raw.watch,
        compare_breaker: raw.compare_breaker,
    })
}

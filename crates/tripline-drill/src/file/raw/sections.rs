//! Validation of the `[load]`, `[target]` and `[[phase]]` tables: each
//! refusal names the field and the table's line.

use std::path::Path;
use std::time::Duration;

use super::{At, RawLoad, RawPhase, RawTarget};
use crate::DrillError;
use crate::file::{Drill, Load, Phase, Target};

pub(super) fn load(
    at: &At<'_>,
    whole: std::ops::Range<usize>,
    l: RawLoad,
) -> Result<Load, DrillError> {
    if !(l.rate > 0.0 && l.rate <= 10_000.0) {
        return Err(at.err(
            whole,
            "load.rate",
            "must be within (0, 10000] requests per second",
        ));
    }
    if l.duration.is_zero() || l.duration > Duration::from_secs(3600) {
        return Err(at.err(
            whole,
            "load.duration",
            "must be more than zero and at most 1h",
        ));
    }
    if l.concurrency == 0 || l.concurrency > 4096 {
        return Err(at.err(whole, "load.concurrency", "must be within 1-4096"));
    }
    if l.paths.is_empty() || l.paths.iter().any(|p| !p.starts_with('/')) {
        return Err(at.err(
            whole,
            "load.paths",
            "must be a non-empty list of paths starting with '/'",
        ));
    }
    if l.timeout.is_zero() {
        return Err(at.err(whole, "load.timeout", "must be more than zero"));
    }
    Ok(Load {
        rate: l.rate,
        duration: l.duration,
        concurrency: l.concurrency,
        paths: l.paths,
        timeout: l.timeout,
    })
}

pub(super) fn target(
    at: &At<'_>,
    whole: std::ops::Range<usize>,
    t: RawTarget,
    dir: &Path,
) -> Result<Target, DrillError> {
    let remote = t.admin.is_some() || t.url.is_some();
    let local = t.in_process.is_some() || t.proxy.is_some();
    match (remote, local) {
        (true, true) => Err(at.err(
            whole,
            "target",
            "names both a running proxy (admin, url) and an in-process one (in_process, proxy); pick one",
        )),
        (false, false) => Err(at.err(
            whole,
            "target",
            "needs admin and url (a running proxy), or in_process or proxy (one built here)",
        )),
        (true, false) => {
            let need = |v: Option<String>, field: &str| {
                let v = v.ok_or_else(|| {
                    at.err(whole.clone(), field, "required with a running proxy")
                })?;
                if !v.starts_with("http://") {
                    return Err(at.err(whole.clone(), field, "must be an http:// URL"));
                }
                Ok(v.trim_end_matches('/').to_owned())
            };
            Ok(Target::Remote {
                admin: need(t.admin, "target.admin")?,
                url: need(t.url, "target.url")?,
            })
        }
        (false, true) => {
            if t.in_process.is_some() && t.proxy.is_some() {
                return Err(at.err(
                    whole,
                    "target.proxy",
                    "write in_process (a file) or proxy (inline), not both",
                ));
            }
            let config = match t.in_process {
                Some(path) => {
                    let path = Drill::resolve(dir, &path);
                    std::fs::read_to_string(&path).map_err(|e| {
                        at.err(whole.clone(), "target.in_process", &format!("cannot read {}: {e}", path.display()))
                    })?
                }
                None => t.proxy.unwrap_or_default(),
            };
            Ok(Target::InProcess {
                config,
                upstreams: t.upstreams,
                seed: t.seed,
            })
        }
    }
}

pub(super) fn phase(
    at: &At<'_>,
    n: usize,
    span: std::ops::Range<usize>,
    p: RawPhase,
    load: &Load,
    target: &Target,
) -> Result<Phase, DrillError> {
    let field = |f: &str| format!("phase[{n}].{f}");
    let err = |f: &str, m: &str| at.err(span.clone(), &field(f), m);
    if p.to <= p.from {
        return Err(err("to", "must be after from"));
    }
    if p.to > load.duration {
        return Err(err("to", "must be within load.duration"));
    }
    if p.abort.is_none() && p.delay.is_none() {
        return Err(err(
            "abort",
            "a phase needs an abort or a delay (time outside phases is healthy already)",
        ));
    }
    let Some(route) = p.route else {
        return Err(err(
            "route",
            "required: the route the fault is injected into",
        ));
    };
    if let Some(a) = &p.abort
        && (!(200..=599).contains(&a.status) || !(0.0..=100.0).contains(&a.percent))
    {
        return Err(err(
            "abort",
            "status must be within 200-599 and percent within 0-100",
        ));
    }
    if let Some(d) = &p.delay
        && (d.duration.is_zero() || !(0.0..=100.0).contains(&d.percent))
    {
        return Err(err(
            "delay",
            "duration must be more than zero and percent within 0-100",
        ));
    }
    if let (Some(e), Target::InProcess { upstreams, .. }) = (&p.endpoint, target)
        && !upstreams.contains_key(e)
    {
        return Err(err(
            "endpoint",
            &format!("{e:?} names no in-process upstream (target.upstreams)"),
        ));
    }
    Ok(Phase {
        name: p.name.unwrap_or_else(|| format!("phase {n}")),
        from: p.from,
        to: p.to,
        route,
        abort: p.abort,
        delay: p.delay,
        endpoint: p.endpoint,
        header: p.header,
        expect_trip: p.expect_trip.unwrap_or(true),
    })
}

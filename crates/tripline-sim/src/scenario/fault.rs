//! A `[[fault]]` table checked: a window that makes sense inside the
//! scenario, a kind with what it needs, a probability in (0, 1].

use std::ops::Range;
use std::time::Duration;

use toml::Spanned;

use super::raw::{RawFault, RawKind, secs, span};
use super::{Fault, FaultKind, FaultWindow};
use crate::error::{Locator, ScenarioError};

/// Validates fault number `i` (0-based) of a scenario lasting `duration`.
pub(super) fn fault(
    loc: &Locator<'_>,
    i: usize,
    f: &Spanned<RawFault>,
    duration: Duration,
) -> Result<Fault, ScenarioError> {
    let raw = f.get_ref();
    let name = raw
        .name
        .clone()
        .unwrap_or_else(|| format!("fault {}", i + 1));
    let table = || Some(format!("[[fault]] #{} {name:?}", i + 1));
    let err = |s: Option<Range<usize>>, field: &str, msg: String| {
        loc.at(s.or(Some(f.span())), table(), Some(field), msg)
    };
    let window = match (&raw.start, &raw.at) {
        (Some(_), Some(at)) => {
            return Err(err(
                span(at),
                "at",
                "a fault has either `start`/`end` or `at`, not both".into(),
            ));
        }
        (None, None) => {
            return Err(err(
                None,
                "start",
                "a fault needs `start` (with `end`) or an `at` list".into(),
            ));
        }
        (Some(start), None) => {
            let s = start.get_ref().0;
            if s >= duration {
                let msg = format!(
                    "{} is not before the scenario's duration ({})",
                    secs(s),
                    secs(duration)
                );
                return Err(err(span(start), "start", msg));
            }
            let e = raw.end.as_ref().map_or(duration, |e| e.get_ref().0);
            if e <= s {
                let msg = format!("must be after `start` ({}), got {}", secs(s), secs(e));
                return Err(err(raw.end.as_ref().and_then(span), "end", msg));
            }
            FaultWindow::Interval { start: s, end: e }
        }
        (None, Some(at)) => {
            if let Some(end) = &raw.end {
                return Err(err(span(end), "end", "an `at` fault has no `end`".into()));
            }
            let list = at.get_ref();
            if list.is_empty() {
                return Err(err(span(at), "at", "must list at least one instant".into()));
            }
            for (j, t) in list.iter().enumerate() {
                let d = t.get_ref().0;
                if d >= duration {
                    let msg = format!(
                        "{} is not before the scenario's duration ({})",
                        secs(d),
                        secs(duration)
                    );
                    return Err(err(span(t), "at", msg));
                }
                if j > 0 && d <= list[j - 1].get_ref().0 {
                    let msg = format!(
                        "instants must be in increasing order without repeats: {} follows {}",
                        secs(d),
                        secs(list[j - 1].get_ref().0)
                    );
                    return Err(err(span(t), "at", msg));
                }
            }
            FaultWindow::Instants(list.iter().map(|t| t.get_ref().0).collect())
        }
    };
    let kind = match raw.kind.as_ref().map(|k| *k.get_ref()) {
        None | Some(RawKind::Error) => FaultKind::Error,
        Some(RawKind::Latency) => FaultKind::Latency,
    };
    let latency = raw.latency.as_ref().map(|l| l.get_ref().0);
    if kind == FaultKind::Latency && latency.is_none_or(|l| l.is_zero()) {
        let s = raw
            .latency
            .as_ref()
            .and_then(span)
            .or(raw.kind.as_ref().and_then(span));
        return Err(err(
            s,
            "latency",
            "a `latency` fault needs a latency above 0s".into(),
        ));
    }
    let rate = raw.rate.as_ref().map_or(1.0, |r| *r.get_ref());
    if !(rate > 0.0 && rate <= 1.0) {
        let msg = format!("must be a probability in (0, 1], got {rate}");
        return Err(err(raw.rate.as_ref().and_then(span), "rate", msg));
    }
    Ok(Fault {
        name,
        window,
        kind,
        latency,
        rate,
        expect_trip: raw.expect_trip.unwrap_or(true),
    })
}

//! Events as one line a person reads in a log or a terminal:
//! `payments: closed → open (failure rate 62% ≥ 50% over 20 calls; open for 5.0s)`.

use std::fmt;

use super::{Event, EventKind, Reason, Thresholds, Transition};
use crate::breaker::window::WindowSnapshot;
use crate::clock::HumanDuration;

/// A rate as a percentage with no more digits than it has: `62%`, `62.5%`.
fn percent(rate: f64) -> String {
    let tenths = (rate * 1000.0).round();
    if tenths % 10.0 == 0.0 {
        format!("{:.0}%", tenths / 10.0)
    } else {
        format!("{:.1}%", tenths / 10.0)
    }
}

fn calls(n: u64) -> String {
    if n == 1 {
        "1 call".to_owned()
    } else {
        format!("{n} calls")
    }
}

/// Why a decision was taken, with the numbers it was taken on.
fn explain(reason: Reason, w: &WindowSnapshot, t: &Thresholds) -> String {
    match reason {
        Reason::FailureRate => format!(
            "failure rate {} ≥ {} over {}",
            percent(w.failure_rate()),
            percent(t.failure_rate),
            calls(w.calls)
        ),
        Reason::SlowCallRate => {
            let mut s = format!(
                "slow-call rate {} ≥ {} over {}",
                percent(w.slow_call_rate()),
                percent(t.slow_call_rate),
                calls(w.calls)
            );
            if let Some(d) = t.slow_call_duration {
                s.push_str(&format!(", slow from {}", HumanDuration(d)));
            }
            s
        }
        Reason::OpenDurationElapsed => "open duration elapsed".to_owned(),
        Reason::ProbeFailed => format!("{} of {} failed", w.failures, probes(w.calls)),
        Reason::ProbeSlow => format!("{} answered too slowly", probes(w.calls)),
        Reason::ProbesSucceeded => format!("{} succeeded", probes(w.calls)),
        Reason::HalfOpenTimeout => "half-open outlived max_half_open_duration".to_owned(),
        Reason::Forced => "forced".to_owned(),
        Reason::HealthCheckPassed => "health check passed".to_owned(),
        Reason::HealthCheckFailed => "health check failed".to_owned(),
    }
}

fn probes(n: u64) -> String {
    if n == 1 {
        "1 probe".to_owned()
    } else {
        format!("{n} probes")
    }
}

fn transition(f: &mut fmt::Formatter<'_>, t: &Transition) -> fmt::Result {
    write!(
        f,
        "{} → {} ({}",
        t.from,
        t.to,
        explain(t.reason, &t.window, &t.thresholds)
    )?;
    if let Some(d) = t.open_duration {
        write!(f, "; open for {}", HumanDuration(d))?;
    }
    f.write_str(")")
}

impl fmt::Display for Event {
    /// `name: what happened (why, with the numbers)`. The wall-clock time is
    /// left to the log line that carries the event.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: ", self.breaker)?;
        match &self.kind {
            EventKind::Transition(t) => transition(f, t),
            EventKind::WouldTrip {
                reason,
                window,
                thresholds,
            } => write!(
                f,
                "would trip, metrics-only ({})",
                explain(*reason, window, thresholds)
            ),
            EventKind::OpenDeadlineChanged { previous, until } => {
                if until >= previous {
                    write!(
                        f,
                        "open deadline moved {} later",
                        HumanDuration(*until - *previous)
                    )
                } else {
                    write!(
                        f,
                        "open deadline moved {} earlier",
                        HumanDuration(*previous - *until)
                    )
                }
            }
            EventKind::WindowReset { window } => write!(
                f,
                "window reset ({} discarded, {} failed)",
                calls(window.calls),
                window.failures
            ),
            EventKind::ConfigChanged {
                version, warnings, ..
            } => {
                write!(f, "config changed to version {version}")?;
                match warnings.len() {
                    0 => Ok(()),
                    1 => write!(f, " (1 warning: {})", warnings[0]),
                    n => write!(f, " ({n} warnings: {})", warnings.join("; ")),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::percent;

    #[test]
    fn percentages_keep_only_the_digits_they_have() {
        assert_eq!(percent(0.62), "62%");
        assert_eq!(percent(0.625), "62.5%");
        assert_eq!(percent(0.5), "50%");
        assert_eq!(percent(1.0 / 3.0), "33.3%");
        assert_eq!(percent(0.0), "0%");
    }
}

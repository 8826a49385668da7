//! Which stack orders hurt, and why.
//!
//! With hand-stacked layers (tower's `ServiceBuilder`, say) nothing stops a
//! stack that makes policies fight. [`check_order`] takes a stack, outermost
//! first, and refuses the harmful orders or warns about the dubious ones,
//! each with the reason. The rules:
//!
//! * **refused** — a `CircuitBreaker` *inside* `Retry`: as separate layers
//!   the breaker counts every attempt, so one logical failure counts up to
//!   `max_attempts` times and the breaker trips that much early (use the
//!   pipeline, whose breaker counts the logical call and still short-circuits
//!   the loop).
//! * **refused** — a `Fallback` inside `Retry` or `CircuitBreaker`: it turns
//!   failures into successes before they are seen, so nothing is retried and
//!   the breaker never trips.
//! * **refused** — a `Bulkhead` outside the `CircuitBreaker`: calls the open
//!   breaker will reject at once first take (or queue for) a slot, and a
//!   bulkhead stacked *around* the breaker usually sits under another retry
//!   or breaker that then counts its `BulkheadFull` rejections as failures —
//!   local congestion tripping the breaker on a healthy dependency. Put it
//!   inside the breaker, whose default classifier ignores tripline's own
//!   rejections.
//! * **warned** — the per-attempt `Timeout` outside `Retry` (it bounds the
//!   whole loop: that is the `Deadline`'s job), or outside the `Bulkhead`
//!   (queueing time eats the attempt's budget).
//! * **warned** — the `Deadline` inside `Retry`: every attempt gets a fresh
//!   budget, so retries can outlive the caller.
//! * **refused** — a stage listed twice.

use std::fmt;

use super::PolicyConfigError;

/// One layer of a stack.
///
/// ```
/// use tripline::pipeline::Stage;
/// assert_eq!(Stage::CANONICAL[2], Stage::Retry);
/// assert_eq!(Stage::CircuitBreaker.to_string(), "circuit_breaker");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
pub enum Stage {
    /// Serves a degraded value on failure.
    Fallback,
    /// The overall deadline.
    Deadline,
    /// The retry loop (with its budget).
    Retry,
    /// The circuit breaker.
    CircuitBreaker,
    /// The concurrency limit.
    Bulkhead,
    /// The per-attempt timeout.
    Timeout,
    /// Hedged requests.
    Hedge,
}

impl Stage {
    /// The canonical order, outermost first.
    pub const CANONICAL: [Stage; 6] = [
        Stage::Fallback,
        Stage::Deadline,
        Stage::Retry,
        Stage::CircuitBreaker,
        Stage::Bulkhead,
        Stage::Timeout,
    ];

    /// The snake_case name.
    pub const fn as_str(self) -> &'static str {
        match self {
            Stage::Fallback => "fallback",
            Stage::Deadline => "deadline",
            Stage::Retry => "retry",
            Stage::CircuitBreaker => "circuit_breaker",
            Stage::Bulkhead => "bulkhead",
            Stage::Timeout => "timeout",
            Stage::Hedge => "hedge",
        }
    }
}

impl fmt::Display for Stage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A stack order that works but probably not as intended.
///
/// ```
/// use tripline::pipeline::{check_order, Stage};
/// let w = check_order(&[Stage::Retry, Stage::Deadline]).unwrap();
/// assert_eq!(w[0].stage, Stage::Deadline);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OrderWarning {
    /// The stage the warning is about.
    pub stage: Stage,
    /// What goes wrong and why.
    pub reason: String,
}

impl fmt::Display for OrderWarning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "`{}`: {}", self.stage, self.reason)
    }
}

/// Checks a hand-made stack, outermost first: harmful orders are refused
/// with the reason, dubious ones returned as warnings.
///
/// ```
/// use tripline::pipeline::{check_order, Stage};
///
/// // Retry outside a separate breaker layer: every attempt is counted.
/// let err = check_order(&[Stage::Retry, Stage::CircuitBreaker]).unwrap_err();
/// assert_eq!(err.field, "circuit_breaker");
/// assert!(check_order(&[Stage::CircuitBreaker, Stage::Retry, Stage::Bulkhead, Stage::Timeout]).unwrap().is_empty());
/// ```
pub fn check_order(stages: &[Stage]) -> Result<Vec<OrderWarning>, PolicyConfigError> {
    let pos = |s: Stage| stages.iter().position(|x| *x == s);
    let refuse = |field, reason: &str| Err(PolicyConfigError::new("order", field, reason));
    for (i, s) in stages.iter().enumerate() {
        if stages[..i].contains(s) {
            return Err(PolicyConfigError::new(
                "order",
                s.as_str(),
                "is listed twice: stacking a policy on itself multiplies its effect",
            ));
        }
    }
    let (retry, breaker, bulkhead, fallback, timeout, deadline) = (
        pos(Stage::Retry),
        pos(Stage::CircuitBreaker),
        pos(Stage::Bulkhead),
        pos(Stage::Fallback),
        pos(Stage::Timeout),
        pos(Stage::Deadline),
    );
    let inside = |a: Option<usize>, b: Option<usize>| matches!((a, b), (Some(a), Some(b)) if a > b);
    if inside(breaker, retry) {
        return refuse(
            "circuit_breaker",
            "is inside `retry`: as a separate layer it counts every attempt, so one logical \
             failure counts max_attempts times and trips the breaker early; put the breaker \
             outside the retry, or use the Pipeline (outer statistics, inner short-circuit)",
        );
    }
    if inside(fallback, retry) || inside(fallback, breaker) {
        return refuse(
            "fallback",
            "is inside `retry` or `circuit_breaker`: it turns failures into successes before \
             they are seen, so nothing is retried and the breaker never trips; make it outermost",
        );
    }
    if inside(breaker, bulkhead) {
        return refuse(
            "bulkhead",
            "is outside `circuit_breaker`: calls the open breaker rejects at once first take or \
             queue for a slot, and the bulkhead's own rejections reach whatever retries or \
             counts outside it as failures; put the bulkhead inside the breaker",
        );
    }
    let mut warnings = Vec::new();
    if inside(retry, timeout) {
        warnings.push(OrderWarning {
            stage: Stage::Timeout,
            reason: "is outside `retry`: it bounds the whole retry loop, not one attempt; \
                     use a Deadline for that and put the per-attempt timeout inside"
                .into(),
        });
    }
    if inside(bulkhead, timeout) {
        warnings.push(OrderWarning {
            stage: Stage::Timeout,
            reason: "is outside `bulkhead`: time spent queueing for a slot eats the attempt's \
                     budget"
                .into(),
        });
    }
    if inside(deadline, retry) {
        warnings.push(OrderWarning {
            stage: Stage::Deadline,
            reason: "is inside `retry`: each attempt gets a fresh budget and the retries can \
                     outlive the caller"
                .into(),
        });
    }
    Ok(warnings)
}

/// The pipeline runs only the canonical order (where, unlike separate
/// layers, the retry loop may sit outside the breaker because the breaker
/// still counts the logical call): any other declared order is refused,
/// with [`check_order`]'s reason when it is a harmful one.
pub(super) fn check_canonical(stages: &[Stage]) -> Result<(), PolicyConfigError> {
    let canonical: Vec<Stage> = Stage::CANONICAL
        .iter()
        .copied()
        .filter(|s| stages.contains(s))
        .collect();
    if canonical == stages {
        return Ok(());
    }
    let warnings = check_order(stages)?;
    let reason = warnings.first().map_or_else(
        || {
            "is not the canonical order fallback → deadline → retry → circuit_breaker → \
             bulkhead → timeout (hedging is a separate policy)"
                .to_owned()
        },
        ToString::to_string,
    );
    Err(PolicyConfigError::new("pipeline", "order", reason))
}

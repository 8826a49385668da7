//! Noticing, at run time, a breaker layer placed where it hurts.
//!
//! The retry and pipeline layers mark the thread while their futures are
//! polled, and the bulkhead layer while it calls its inner service; a
//! breaker service called under a mark is in a harmful order (see
//! [`check_order`](crate::pipeline::check_order)).

use std::cell::Cell;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::task::{Context, Poll};

/// Which tripline layers the current `call` (or poll) runs inside.
pub(crate) const IN_RETRY: u8 = 1;
pub(crate) const IN_BULKHEAD: u8 = 2;

thread_local! {
    static ENCLOSING: Cell<u8> = const { Cell::new(0) };
}

/// Restores the enclosing-layer marks on drop.
pub(crate) struct Enclosed(u8);

impl Drop for Enclosed {
    fn drop(&mut self) {
        ENCLOSING.with(|c| c.set(self.0));
    }
}

/// Marks the current thread as running inside `layer` until the guard drops.
pub(crate) fn enter(layer: u8) -> Enclosed {
    let prev = ENCLOSING.with(Cell::get);
    ENCLOSING.with(|c| c.set(prev | layer));
    Enclosed(prev)
}

static MISORDERED: AtomicU64 = AtomicU64::new(0);
static WARNED: [AtomicBool; 2] = [AtomicBool::new(false), AtomicBool::new(false)];

/// Calls that reached a [`CircuitBreakerService`](super::CircuitBreakerService) from inside a retry or
/// a bulkhead layer (a harmful order; see [`check_order`](crate::pipeline::check_order)).
pub fn misordered_calls() -> u64 {
    MISORDERED.load(Ordering::Relaxed)
}

/// Called by the breaker service: when it runs inside a retry or a
/// bulkhead, counts the call, warns (once per kind) and — unless the stack
/// opted out — returns the error that refuses it.
#[inline]
pub(crate) fn check_breaker_placement(
    breaker: &crate::breaker::CircuitBreaker,
    allow_harmful_order: bool,
) -> Option<MisorderedLayers> {
    let marks = ENCLOSING.with(Cell::get);
    if marks != 0 {
        // The name is read only here, off the path of a well-ordered call.
        return misplaced(breaker.name(), marks, allow_harmful_order);
    }
    None
}

/// A circuit breaker layer called from inside a retry or a bulkhead layer:
/// the harmful order a hand-built stack falls into by listing the layers in
/// the order the pipeline runs them. Refused by default (opt out with
/// [`CircuitBreakerLayer::allow_harmful_order`](super::CircuitBreakerLayer::allow_harmful_order)),
/// because its damage — a breaker that trips early on every retried
/// failure, or slots queued for calls the breaker would refuse — shows
/// only as mysterious trips in production.
///
/// ```
/// use tripline::tower::MisorderedLayers;
/// let e = MisorderedLayers { breaker: "payments".into(), inside: "retry" };
/// assert!(e.to_string().contains("CircuitBreakerLayer → RetryLayer"));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MisorderedLayers {
    /// The breaker whose layer is misplaced.
    pub breaker: String,
    /// The layer it was called from inside: `"retry"` or `"bulkhead"`.
    pub inside: &'static str,
}

impl std::fmt::Display for MisorderedLayers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let why = if self.inside == "retry" {
            "it would count every attempt, so one logical failure counts max_attempts times \
             and trips the breaker early"
        } else {
            "calls the open breaker would refuse at once first take or queue for a bulkhead slot"
        };
        write!(
            f,
            "circuit breaker layer {:?} is inside a {} layer: {why}. Use PipelineLayer (one \
             layer, the right order), or stack separate layers outermost first as \
             FallbackLayer → DeadlineLayer → CircuitBreakerLayer → RetryLayer → BulkheadLayer \
             → TimeoutLayer; CircuitBreakerLayer::allow_harmful_order() opts out",
            self.breaker, self.inside
        )
    }
}

impl std::error::Error for MisorderedLayers {}

#[cold]
fn misplaced(breaker: &str, marks: u8, allowed: bool) -> Option<MisorderedLayers> {
    MISORDERED.fetch_add(1, Ordering::Relaxed);
    let inside = if marks & IN_RETRY != 0 {
        "retry"
    } else {
        "bulkhead"
    };
    let (kind, reason) = if marks & IN_RETRY != 0 {
        (
            0,
            "circuit breaker layer inside a retry: it counts every attempt, so one logical \
             failure counts max_attempts times and trips the breaker early; put the breaker \
             outside the retry, or use PipelineLayer (outer statistics, inner short-circuit)",
        )
    } else {
        (
            1,
            "circuit breaker layer inside a bulkhead: calls the open breaker would reject at \
             once first take or queue for a bulkhead slot; put the bulkhead inside the breaker",
        )
    };
    if !WARNED[kind].swap(true, Ordering::Relaxed) {
        tracing::warn!(target: "tripline::tower", breaker, "harmful layer order: {reason}");
    }
    (!allowed).then(|| MisorderedLayers {
        breaker: breaker.to_owned(),
        inside,
    })
}

pin_project_lite::pin_project! {
    /// A future polled with the current thread marked as inside a layer.
    pub(crate) struct Marked<F> {
        #[pin]
        fut: F,
        layer: u8,
    }
}

impl<F> Marked<F> {
    pub(crate) fn new(layer: u8, fut: F) -> Self {
        Marked { fut, layer }
    }
}

impl<F: Future> Future for Marked<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = self.project();
        let _in = enter(*this.layer);
        this.fut.poll(cx)
    }
}

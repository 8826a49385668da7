//! Permits: the RAII guard between admission and outcome.
//!
//! A permit has exactly one terminal event: [`Permit::record`], or its drop.
//! Dropping an unrecorded permit — the future was cancelled, the closure
//! panicked, the caller gave up — releases its half-open slot with a neutral
//! verdict: cancellation is not evidence about the dependency, and a slot
//! that is never returned would pin the breaker half-open forever.
//! No code path can leak a slot.

use std::fmt;
use std::time::Duration;

use super::State;
use super::core::{Admission, Inner};
use super::counters::Counter;
use super::half_open::Verdict;
use crate::classify::Outcome;
use crate::clock::duration_to_nanos;
use crate::sync::Arc;

/// A call refused by the breaker itself, without reaching the dependency.
///
/// Distinct from every failure of the dependency, so callers and dashboards
/// can tell "rejected locally" from "failed remotely".
///
/// An open breaker hands these out at the full call rate, so the value is
/// two words and its wait stays in nanoseconds until somebody asks for it
/// as a [`Duration`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Rejected {
    state: State,
    /// Nanoseconds until a retry may be admitted; [`UNKNOWN_WAIT`] if unknown.
    retry_after_nanos: u64,
}

/// "No known wait" in [`Rejected::retry_after_nanos`].
const UNKNOWN_WAIT: u64 = u64::MAX;

impl Rejected {
    /// A rejection by `state`, retryable after `retry_after` if known (for
    /// callers that test their own rejection handling).
    pub fn new(state: State, retry_after: Option<Duration>) -> Self {
        let nanos =
            retry_after.map_or(UNKNOWN_WAIT, |d| duration_to_nanos(d).min(UNKNOWN_WAIT - 1));
        Rejected::after_nanos(state, nanos)
    }

    /// The hot path's constructor: `nanos` is the rest of the open duration.
    #[inline]
    pub(crate) fn after_nanos(state: State, nanos: u64) -> Self {
        Rejected {
            state,
            retry_after_nanos: nanos,
        }
    }

    /// The state that refused the call.
    pub fn state(&self) -> State {
        self.state
    }

    /// When a retry may be admitted, if known: the rest of the open
    /// duration. `None` while forced open or while half-open probes are busy.
    pub fn retry_after(&self) -> Option<Duration> {
        (self.retry_after_nanos != UNKNOWN_WAIT)
            .then(|| Duration::from_nanos(self.retry_after_nanos))
    }
}

impl fmt::Display for Rejected {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "call rejected: circuit breaker is {}", self.state)?;
        if let Some(d) = self.retry_after() {
            write!(f, " (retry after {})", crate::clock::HumanDuration(d))?;
        }
        Ok(())
    }
}

impl std::error::Error for Rejected {}

/// The error of [`CircuitBreaker::call`](super::CircuitBreaker::call): the
/// breaker refused, or the call itself failed.
#[derive(Debug, PartialEq, Eq)]
pub enum CallError<E> {
    /// The breaker did not let the call through.
    Rejected(Rejected),
    /// The call ran and returned this error.
    Inner(E),
}

impl<E> CallError<E> {
    /// The call's own error, if it ran.
    pub fn into_inner(self) -> Option<E> {
        match self {
            CallError::Inner(e) => Some(e),
            CallError::Rejected(_) => None,
        }
    }

    /// Whether the breaker refused the call.
    pub fn is_rejected(&self) -> bool {
        matches!(self, CallError::Rejected(_))
    }
}

impl<E: fmt::Display> fmt::Display for CallError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CallError::Rejected(r) => r.fmt(f),
            CallError::Inner(e) => e.fmt(f),
        }
    }
}

impl<E: std::error::Error + 'static> std::error::Error for CallError<E> {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            CallError::Rejected(r) => Some(r),
            CallError::Inner(e) => Some(e),
        }
    }
}

/// The shared logic of borrowed and owned permits.
#[derive(Debug)]
struct Ticket {
    admission: Admission,
    generation: u64,
    settled: bool,
}

impl Ticket {
    /// A ticket for one admitted call, not yet settled.
    #[inline(always)]
    fn new(admission: Admission, generation: u64) -> Ticket {
        Ticket {
            admission,
            generation,
            settled: false,
        }
    }

    #[inline(always)]
    fn record(&mut self, inner: &Inner, outcome: Outcome, elapsed_nanos: u64) {
        self.settled = true;
        inner.record(self.admission, self.generation, outcome, elapsed_nanos);
    }

    #[cold]
    fn release(&mut self, inner: &Inner) {
        if self.settled {
            return;
        }
        self.settled = true;
        if self.admission == Admission::Probe {
            inner.settle_probe(self.generation, Verdict::Neutral);
        }
        inner.counters().add(Counter::Cancelled, 1);
    }
}

/// Permission to make one call, borrowed from the breaker.
///
/// ```
/// use std::time::Duration;
/// use tripline::{CircuitBreaker, Outcome};
///
/// let breaker = CircuitBreaker::try_new(Default::default()).unwrap();
/// let permit = breaker.try_acquire().expect("closed");
/// // ... make the call ...
/// permit.record(Outcome::Success, Duration::from_millis(12));
/// ```
#[must_use = "record the outcome, or drop the permit to release it neutrally"]
pub struct Permit<'a> {
    inner: &'a Inner,
    ticket: Ticket,
}

impl<'a> Permit<'a> {
    #[inline]
    pub(crate) fn new(inner: &'a Inner, admission: Admission, generation: u64) -> Self {
        Permit {
            inner,
            ticket: Ticket::new(admission, generation),
        }
    }

    /// Records the call's outcome and how long it took (for slow-call
    /// detection). Consumes the permit.
    #[inline]
    pub fn record(self, outcome: Outcome, elapsed: Duration) {
        // Settling consumes the permit; skip the drop check.
        let this = std::mem::ManuallyDrop::new(self);
        this.inner.record(
            this.ticket.admission,
            this.ticket.generation,
            outcome,
            duration_to_nanos(elapsed),
        );
    }

    /// Records the outcome of a call that took `elapsed_nanos`, in place;
    /// the hot path of [`CircuitBreaker::call`](super::CircuitBreaker::call).
    /// Settling in place, rather than moving the permit into a consuming
    /// method, keeps the permit where it was stored before the call: a move
    /// re-reads it with wider loads than the stores that wrote it, which
    /// defeats store forwarding and cost ~10 ns per call.
    #[inline(always)]
    pub(crate) fn record_in_place(&mut self, outcome: Outcome, elapsed_nanos: u64) {
        self.ticket.record(self.inner, outcome, elapsed_nanos);
    }

    /// Whether this permit is a half-open probe.
    pub fn is_probe(&self) -> bool {
        self.ticket.admission == Admission::Probe
    }

    /// The state generation the permit was admitted under.
    pub fn generation(&self) -> u64 {
        self.ticket.generation
    }
}

impl Drop for Permit<'_> {
    #[inline]
    fn drop(&mut self) {
        if !self.ticket.settled {
            self.ticket.release(self.inner);
        }
    }
}

impl fmt::Debug for Permit<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Permit")
            .field("ticket", &self.ticket)
            .finish()
    }
}

/// Permission to make one call, held apart from the breaker: for owners
/// that keep the breaker themselves (the pipeline's tower future owns its
/// pipeline, and so its breaker), which spares the per-call reference
/// count of an [`OwnedPermit`]. It has no `Drop`: the owner settles it
/// with [`record`](Self::record) or [`release`](Self::release) against
/// the breaker that admitted it, from its own `Drop` (both are no-ops once
/// settled).
#[derive(Debug)]
pub(crate) struct DetachedPermit {
    ticket: Ticket,
}

impl DetachedPermit {
    #[inline]
    pub(crate) fn new(admission: Admission, generation: u64) -> Self {
        DetachedPermit {
            ticket: Ticket::new(admission, generation),
        }
    }

    /// Whether this permit is a half-open probe.
    pub(crate) fn is_probe(&self) -> bool {
        self.ticket.admission == Admission::Probe
    }

    /// Records the outcome of a call that took `elapsed_nanos` on
    /// `breaker` (the one that admitted it), in place.
    #[inline(always)]
    pub(crate) fn record(
        &mut self,
        breaker: &super::CircuitBreaker,
        outcome: Outcome,
        elapsed_nanos: u64,
    ) {
        if !self.ticket.settled {
            self.ticket.record(&breaker.inner, outcome, elapsed_nanos);
        }
    }

    /// Releases the permit neutrally (no attempt ran, or it was cancelled).
    #[inline]
    pub(crate) fn release(&mut self, breaker: &super::CircuitBreaker) {
        if !self.ticket.settled {
            self.ticket.release(&breaker.inner);
        }
    }
}

/// Permission to make one call, owning a handle to the breaker: for
/// futures that must be `'static` (tower services, spawned tasks).
#[must_use = "record the outcome, or drop the permit to release it neutrally"]
pub struct OwnedPermit {
    inner: Arc<Inner>,
    ticket: Ticket,
}

impl OwnedPermit {
    pub(crate) fn new(inner: Arc<Inner>, admission: Admission, generation: u64) -> Self {
        OwnedPermit {
            inner,
            ticket: Ticket::new(admission, generation),
        }
    }

    /// Records the call's outcome and duration. Consumes the permit.
    #[inline]
    pub fn record(mut self, outcome: Outcome, elapsed: Duration) {
        self.ticket
            .record(&self.inner, outcome, duration_to_nanos(elapsed));
    }

    /// Whether this permit is a half-open probe.
    pub fn is_probe(&self) -> bool {
        self.ticket.admission == Admission::Probe
    }

    /// The state generation the permit was admitted under.
    pub fn generation(&self) -> u64 {
        self.ticket.generation
    }
}

impl Drop for OwnedPermit {
    fn drop(&mut self) {
        if !self.ticket.settled {
            self.ticket.release(&self.inner);
        }
    }
}

impl fmt::Debug for OwnedPermit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OwnedPermit")
            .field("breaker", &self.inner.name)
            .field("ticket", &self.ticket)
            .finish()
    }
}

/// Counts a freely admitted call as cancelled if it unwinds, or its future
/// is dropped, before it is recorded (`call` and `call_async` forget the
/// guard once the operation returns).
pub(crate) struct CancelOnUnwind<'a>(pub(crate) &'a Inner);

impl Drop for CancelOnUnwind<'_> {
    fn drop(&mut self) {
        self.0.counters().add(Counter::Cancelled, 1);
    }
}

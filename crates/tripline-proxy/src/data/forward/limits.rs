//! A request's time limits as its tries see them: the deadline the client
//! or the route set, and the default limit of a route that sets none.
//!
//! The two are kept apart because they cost differently. A deadline is
//! forwarded upstream and bounds each try with a timer of the runtime's;
//! the default limit (15 s) almost never fires, so it is not forwarded,
//! it costs no clock reading of its own (it counts from the reading the
//! route breaker takes anyway), and the coarse timer ends the tries it
//! catches (see the coarse timer's docs: ~2 000 instructions a request
//! less than a runtime timer and its clock readings).

use tokio::time::Instant;
use tripline::timeout::Deadline;

use crate::config::DEFAULT_OVERALL;

/// A request's time limits.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Limits {
    /// Set by the client or the route; told upstream.
    pub(crate) deadline: Option<Deadline>,
    /// When the default limit of a route that sets none ends the request.
    pub(crate) guard: Option<Instant>,
}

impl Limits {
    /// When the request's time ends: the earlier of its deadline and its
    /// default limit. A wait for a connection or an endpoint ends there.
    pub(crate) fn until(&self) -> Option<Instant> {
        let deadline = self
            .deadline
            .map(|d| Instant::now() + d.remaining(&tripline::timeout::TokioClock));
        match (deadline, self.guard) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// The limits of a request whose default limit (when `default_guard`)
    /// counts from now: for the rare path that starts late (a fallback's
    /// secondary cluster), reading the clock only when it is taken.
    pub(crate) fn lazy(deadline: Option<Deadline>, default_guard: bool) -> LazyLimits {
        LazyLimits {
            deadline,
            default_guard,
        }
    }
}

/// [`Limits`] whose default limit starts when they are taken.
#[derive(Clone, Copy, Debug)]
pub(crate) struct LazyLimits {
    deadline: Option<Deadline>,
    default_guard: bool,
}

impl LazyLimits {
    /// The limits, the default one counting from now.
    pub(crate) fn take(self) -> Limits {
        Limits {
            deadline: self.deadline,
            guard: self.default_guard.then(|| Instant::now() + DEFAULT_OVERALL),
        }
    }
}

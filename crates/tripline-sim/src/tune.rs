//! Tuning from recorded traffic: breaker parameters chosen from what a
//! dependency actually did, not from a hand-written scenario.
//!
//! People pick breaker parameters from the dependency's normal failure
//! rate and latency, where it broke, and how early they want to catch an
//! outage against how often they accept a trip on noise. Every one of
//! those inputs is in a proxy's access log. This module closes the loop:
//!
//! 1. [`read`] streams the log (the proxy's JSON lines, or plain CSV /
//!    JSON lines of `timestamp, outcome, duration[, key]`) into a
//!    [`Traffic`]: per second, the calls, the failures and a latency
//!    histogram. That compact form is all that is kept, so memory grows
//!    with the log's time span, not with its length.
//! 2. [`outage`] labels the stretches whose failure or slow rate stands
//!    out from the baseline (or takes the user's labels).
//! 3. [`grid`] derives the candidate configs from the data, and
//!    [`replay`] runs each through the real [`tripline::CircuitBreaker`]
//!    on a [`tripline::ManualClock`], scored like the simulator scores a
//!    run ([`crate::score::Score`]).
//! 4. [`recommend`] ranks them per objective and says why each parameter
//!    has its value.
//! 5. [`daytime`] proposes one config per period when the traffic differs
//!    by hour of the day.
//!
//! Approximations, stated once: calls are replayed at evenly spread
//! instants inside their second (their order inside a second is not
//! kept), failures are spread evenly among them, a call's latency is its
//! histogram bucket's middle, and each call records at its start (no
//! overlap of in-flight calls).

pub mod bound;
pub mod chart;
pub mod daytime;
pub mod grid;
pub mod outage;
pub mod read;
pub mod recommend;
pub mod replay;
pub mod scenario;
pub mod synth;

pub use grid::Candidates;
pub use outage::Outage;
pub use read::{ReadError, ReadOptions, Traffic};
pub use recommend::{Objective, Recommendation, Tuning};
pub use replay::Outcome;

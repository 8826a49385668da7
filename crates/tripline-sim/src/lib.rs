//! # tripline-sim
//!
//! A deterministic fault-scenario simulator: calibrate circuit breakers by
//! fault injection in virtual time instead of guessing.
//!
//! A [`Scenario`] (TOML) describes traffic, faults and one or more breaker
//! configs in the library's own vocabulary. The [`engine`] drives the
//! **real** [`tripline::CircuitBreaker`] — one instance per replica — on a
//! shared [`tripline::ManualClock`], and the [`report`] says exactly what
//! happened (every transition, with its reason and window) and what it cost
//! (detection delay, false trips, rejected healthy calls, downstream load).
//! [`chart`] draws it as SVG; [`sweep`] runs the cartesian product of
//! parameter values in parallel and ranks them by a documented [`score`].
//!
//! Everything is deterministic: no wall clock, no ambient randomness
//! (probabilistic faults and jitter come from the scenario's seed), ordered
//! iteration everywhere — the same file and seed give byte-identical text,
//! JSON and SVG.
//!
//! ```
//! use tripline_sim::{Report, Scenario};
//!
//! let scenario = Scenario::from_toml("doc.toml", r#"
//!     duration = "30s"
//!     [traffic]
//!     rate = 10.0
//!     [[fault]]
//!     name = "down"
//!     start = "10s"
//!     end = "20s"
//!     [[breaker]]
//!     name = "b"
//!     window = { kind = "count", size = 10 }
//!     minimum_calls = 10
//!     open_duration = "5s"
//!     half_open = { policy = "consecutive", successes = 1 }
//! "#).unwrap();
//! let report = Report::simulate(&scenario).unwrap();
//! let fault = &report.runs[0].faults[0];
//! // The window holds the last ten calls: five successes and, at 10.4 s,
//! // the fifth failure make 50 %, the default threshold.
//! assert_eq!(fault.detection_delay, Some(0.4));
//! ```

#![forbid(unsafe_code)]

mod call_times;
pub mod chart;
pub mod engine;
mod error;
mod fault_report;
pub mod report;
pub mod scenario;
pub mod score;
mod svg;
pub mod sweep;
pub mod tune;

pub use engine::{Plan, Trace};
pub use report::{Report, Run};
pub use scenario::{Scenario, ScenarioError};
pub use sweep::{Grid, Sweep};

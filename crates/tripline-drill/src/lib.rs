//! `tripline-drill`: fault-injection drills with verdicts.
//!
//! The simulator answers "which breaker parameters?" in virtual time; a
//! drill answers "does the deployed proxy behave?" in real time. A drill
//! drives real HTTP load through a `tripline proxy`, switches faults on
//! and off through the proxy's admin API (`/api/faults`, each with a TTL
//! so a drill process that dies never leaves a fault on), reads breaker
//! transitions as they happen, and judges written expectations:
//!
//! | key | measured | same as the simulator's |
//! |---|---|---|
//! | `trip_within` | first Closed→Open after a fault phase starts, minus its start (worst phase) | `detection_delay` |
//! | `false_trips` | Closed→Open before the first fault, or attributed to a phase with `expect_trip = false` | `false_trips` |
//! | `max_healthy_rejected` | requests refused by a breaker (`CO`, `HF`, `NH`) that started while no fault was on | `collateral_rejected` |
//! | `recover_within` | from a tripped fault's end until every watched breaker is Closed (worst phase) | `recovered_at` − fault end |
//! | `max_probes_per_second` | most requests not refused in one second, from the second after the trip to the fault's end | `probe_peak_per_second` |
//! | `max_retry_amplification` | tries the proxy made (retry budget deposits + withdrawals) ÷ requests sent | — |
//! | `fault_p99` | p99 latency of requests started in a fault phase (no answer counts as the client timeout) | — |
//!
//! Transitions are attributed as the simulator does: to the latest fault
//! phase started at or before them. Exit statuses of `tripline drill`:
//! 0 every expectation held, 1 one failed, 2 the drill's abort rule
//! stopped it, 3 it could not run (a bad file, naming the field and
//! line; a target that does not answer; Ctrl-C).
//!
//! ```no_run
//! # async fn run() -> Result<(), tripline_drill::DrillError> {
//! let drill = tripline_drill::Drill::load(std::path::Path::new("drills/ride-hailing-eta.toml"))?;
//! let outcome = tripline_drill::run(&drill).await?;
//! print!("{}", tripline_drill::render::text(&drill, &outcome));
//! std::process::exit(outcome.exit_code().into());
//! # }
//! ```

#![forbid(unsafe_code)]

mod admin;
pub mod compare;
mod events;
pub mod file;
mod load;
mod measure;
pub mod render;
mod run;
mod target;
mod upstream;
pub mod verdict;

pub use events::{TransitionLog, TransitionSeen, parse_sse_transition, subscribe_sse};
pub use file::Drill;
pub use run::run;
pub use verdict::{Outcome, Row};

/// Why a drill could not run (exit status 3).
#[derive(Debug, thiserror::Error)]
pub enum DrillError {
    /// The drill file is unreadable or invalid; `file` carries the line
    /// when it is known (`drill.toml:14`).
    #[error("{file}: {message}")]
    File {
        /// The file, and the line when known.
        file: String,
        /// What is wrong, naming the field.
        message: String,
    },
    /// The target did not answer, or answered something other than a
    /// tripline proxy's admin API.
    #[error("target not usable: {0}")]
    Target(String),
    /// Interrupted (Ctrl-C); every fault the drill switched on was cleared.
    #[error("interrupted; the drill's faults were cleared")]
    Interrupted,
}

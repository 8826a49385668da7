//! Scenarios: traffic, faults and the breakers to try, read from TOML.
//!
//! A scenario file is parsed in two steps. Serde reads it into raw structs
//! that keep the byte span of every value ([`toml::Spanned`]), refusing
//! unknown keys; then `raw` checks what types cannot express (a fault
//! ending before it starts, an `at` list out of order, a rate ≤ 0, …) and
//! validates each `[[breaker]]` with the library's own
//! [`CircuitBreakerConfig::validate`]. Every error is a [`ScenarioError`]
//! naming the file, the table and the field. The breaker tables use the
//! library's config vocabulary unchanged, so a config calibrated here can be
//! pasted into a service.
//!
//! # File reference
//!
//! ```text
//! name = str                 # default: the file name
//! duration = "120s"          # > 0, ≤ 7 days; calls start at t < duration
//! seed = u64                 # default 0; probabilistic faults and jitter
//!
//! [traffic]
//! rate = f64                 # > 0 calls/s per replica; call k starts at k / rate
//! latency = "20ms"           # a healthy call's duration, default 0
//! timeout = "1s"             # optional, > 0: a slower call fails at this duration
//! replicas = 1               # 1 ..= 100 000 callers, each with its own breaker
//!
//! [[fault]]                  # zero or more
//! name = str                 # default "fault N"
//! start = "30s"              # < duration; with `end` (exclusive, > start,
//! end = "70s"                #   default: the scenario's end) ...
//! at = ["112s", "115s"]      # ... or single calls: the first call at or after
//!                            #   each instant; strictly increasing, < duration
//! kind = "error"             # "error" (default): calls fail;
//!                            # "latency": calls take `latency`
//! latency = "700ms"          # required (> 0) for "latency"; for "error", how
//!                            #   long the failing calls take (default: traffic's)
//! rate = 1.0                 # (0, 1]: probability of hitting each call
//! expect_trip = true         # false: a blip to ride out; its trips are false
//!
//! [[breaker]]                # one or more, names unique (default "breaker N");
//! ...                        # tripline::CircuitBreakerConfig, unchanged
//! ```
//!
//! Faults active together combine: a call fails if any error fault hits it,
//! and takes the longest latency of the faults that hit it.
//!
//! ```
//! use tripline_sim::Scenario;
//!
//! let scenario = Scenario::from_toml("inline.toml", r#"
//!     duration = "60s"
//!     [traffic]
//!     rate = 10.0
//!     [[fault]]
//!     name = "down"
//!     start = "10s"
//!     end = "20s"
//!     [[breaker]]
//!     name = "b"
//!     window = { kind = "count", size = 20 }
//! "#).unwrap();
//! assert_eq!(scenario.calls_per_replica(), 600);
//! ```

mod fault;
mod raw;

use std::path::Path;
use std::time::Duration;

use tripline::{CircuitBreakerConfig, ConfigWarning};

pub use crate::error::ScenarioError;

/// A validated scenario, ready to simulate.
#[derive(Clone, Debug)]
pub struct Scenario {
    /// What the scenario is about (`name`, default: the file name).
    pub name: String,
    /// The file it came from, as named by the user (for error messages).
    pub file: String,
    /// Calls happen at `t < duration`.
    pub duration: Duration,
    /// Seeds probabilistic faults and the breakers' jitter.
    pub seed: u64,
    /// Who calls, how often, and how long a healthy call takes.
    pub traffic: Traffic,
    /// Faults, in file order.
    pub faults: Vec<Fault>,
    /// The breakers to run, each on the same traffic and faults.
    pub breakers: Vec<BreakerSpec>,
}

/// The callers.
#[derive(Clone, Debug, PartialEq)]
pub struct Traffic {
    /// Calls per second per replica; call `k` starts at `k / rate`.
    pub rate: f64,
    /// How long a healthy call takes.
    pub latency: Duration,
    /// A call slower than this fails at this duration.
    pub timeout: Option<Duration>,
    /// Independent callers, each with its own breaker instance.
    pub replicas: u32,
}

/// One injected fault.
#[derive(Clone, Debug, PartialEq)]
pub struct Fault {
    /// Names the fault in reports.
    pub name: String,
    /// When it acts.
    pub window: FaultWindow,
    /// What it does to the calls it hits.
    pub kind: FaultKind,
    /// Latency of the calls it hits: required for `latency` faults,
    /// optional for `error` faults (a slow failure); `None` keeps the
    /// traffic's latency.
    pub latency: Option<Duration>,
    /// Probability that it hits a call while active (seeded), in (0, 1].
    pub rate: f64,
    /// Whether a breaker should trip on it; `false` marks a blip the
    /// breaker should ride out, whose trips are false trips.
    pub expect_trip: bool,
}

/// When a fault acts.
#[derive(Clone, Debug, PartialEq)]
pub enum FaultWindow {
    /// Every call starting in `[start, end)`.
    Interval {
        /// First instant affected.
        start: Duration,
        /// First instant no longer affected.
        end: Duration,
    },
    /// The first call (per replica) starting at or after each instant;
    /// instants strictly increasing.
    Instants(Vec<Duration>),
}

impl FaultWindow {
    /// When the fault starts (its first instant for `at` lists): the point
    /// from which calls and transitions are attributed to it.
    pub fn start(&self) -> Duration {
        match self {
            FaultWindow::Interval { start, .. } => *start,
            FaultWindow::Instants(at) => at.first().copied().unwrap_or_default(),
        }
    }
}

/// What a fault does to a call it hits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FaultKind {
    /// The call fails.
    Error,
    /// The call takes the fault's latency: slow, or a timeout failure if
    /// that exceeds the traffic's timeout.
    Latency,
}

/// One `[[breaker]]` table: the config and what its validation warned about.
#[derive(Clone, Debug)]
pub struct BreakerSpec {
    /// The validated config.
    pub config: CircuitBreakerConfig,
    /// The table as written, for sweeps that vary its keys.
    pub table: toml::Table,
    /// Soft problems found by [`CircuitBreakerConfig::validate`], reported
    /// with the run rather than dropped.
    pub warnings: Vec<ConfigWarning>,
}

/// Scenario bytes as text; bytes that are not UTF-8 are an error at their
/// line and column, with their byte offset (the library's
/// [`tripline::breaker::utf8_text`], so every config reader says it alike).
pub fn text<'a>(file: &str, bytes: &'a [u8]) -> Result<&'a str, ScenarioError> {
    tripline::breaker::utf8_text(bytes).map_err(|e| ScenarioError {
        file: file.to_owned(),
        position: Some((e.line, e.column)),
        table: None,
        field: None,
        message: format!(
            "invalid UTF-8 at byte offset {}; a scenario is UTF-8 text",
            e.offset
        ),
    })
}

impl Scenario {
    /// Reads and validates the scenario file at `path`.
    pub fn load(path: &Path) -> Result<Scenario, ScenarioError> {
        let file = path.display().to_string();
        let bytes = std::fs::read(path).map_err(|e| ScenarioError {
            file: file.clone(),
            position: None,
            table: None,
            field: None,
            message: format!("cannot read the file: {e}"),
        })?;
        Self::from_toml(&file, text(&file, &bytes)?)
    }

    /// Parses and validates scenario text; `file` names it in errors.
    /// (Bytes read from elsewhere, such as stdin, become text through
    /// [`text`], which locates bytes that are not UTF-8.)
    pub fn from_toml(file: &str, src: &str) -> Result<Scenario, ScenarioError> {
        raw::parse(file, src)
    }

    /// Calls each replica makes: those starting before `duration`.
    pub fn calls_per_replica(&self) -> u64 {
        calls_before(self.traffic.rate, self.duration)
    }

    /// Calls all replicas together attempt per second.
    pub fn total_rate(&self) -> f64 {
        self.traffic.rate * f64::from(self.traffic.replicas)
    }
}

/// Calls one replica makes at `rate` before `duration` (what validation
/// bounds before a [`Scenario`] exists).
pub(crate) fn calls_before(rate: f64, duration: Duration) -> u64 {
    crate::call_times::CallTimes::new(rate).count_before(duration)
}

/// How long a fault acts, seconds (for the missed-fault penalty).
pub(crate) fn fault_span(scenario: &Scenario, window: &FaultWindow) -> f64 {
    match window {
        FaultWindow::Interval { start, end } => {
            ((*end).min(scenario.duration) - *start).as_secs_f64()
        }
        FaultWindow::Instants(at) => at.len() as f64 / scenario.traffic.rate,
    }
}

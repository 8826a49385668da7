//! The drill file: target, load, phases, abort rule and expectations.
//!
//! ```toml
//! name = "checkout → inventory outage"
//! watch = ["api"]                      # breakers whose transitions count (default: all)
//! compare_breaker = "balanced"         # the scenario's [[breaker]] for --compare-sim (default: first)
//!
//! [target]                             # a running proxy …
//! admin = "http://127.0.0.1:9901"
//! url = "http://127.0.0.1:8080"
//! # … or one built in this process, over in-process upstreams:
//! # proxy = """ …proxy TOML, endpoints written as "${a}"… """   (or in_process = "proxy.toml")
//! # upstreams = { a = { latency = "5ms" } }
//! # seed = 42                          # seeds the proxy's rolls of faults below 100 %
//!
//! [load]
//! rate = 40.0                          # requests per second
//! duration = "10s"
//! concurrency = 64                     # requests in flight at most
//! paths = ["/"]
//! timeout = "10s"                      # the client gives up on one request after this
//!
//! [[phase]]
//! from = "3s"
//! to = "6s"
//! route = "api"
//! abort = { status = 503, percent = 100 }
//! # delay = { duration = "800ms", percent = 30 }, endpoint = "a", header = "x-drill"
//! # expect_trip = false                # a blip the breaker should ride out
//!
//! [abort]                              # stop the drill if it hurts more than planned
//! error_rate_above = 0.5
//! for = "2s"
//! during = "healthy"                   # default "any": seconds in fault phases count too
//!
//! [expect]
//! trip_within = "2s"
//! false_trips = 0
//! max_healthy_rejected = 80
//! recover_within = "4s"
//! max_probes_per_second = 10
//! max_retry_amplification = 1.2
//! fault_p99 = "300ms"
//! ```
//!
//! Time between phases (and before the first, after the last) is healthy.
//! An in-process target's listener and admin addresses are replaced by
//! free ports on 127.0.0.1, whatever its config says.
//! Unknown keys are refused with their line; a value that cannot act as
//! written is refused naming its field (`phase[2].to`, line 14).

mod raw;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use tripline_proxy::config::{AbortSection, DelaySection};

use crate::DrillError;

/// A validated drill.
///
/// ```
/// use std::time::Duration;
/// use tripline_drill::Drill;
///
/// let drill = Drill::from_toml("blip.toml", r#"
///     [target]
///     admin = "http://127.0.0.1:9901"
///     url = "http://127.0.0.1:8080"
///     [load]
///     rate = 20.0
///     duration = "10s"
///     [[phase]]
///     from = "4s"
///     to = "5s"
///     route = "api"
///     abort = { status = 503, percent = 5 }
///     expect_trip = false
///     [expect]
///     false_trips = 0
/// "#, std::path::Path::new(".")).unwrap();
/// assert_eq!(drill.phase_at(Duration::from_millis(4500)).map(|p| p.expect_trip), Some(false));
/// assert!(drill.phase_at(Duration::from_secs(6)).is_none(), "healthy after the phase");
/// ```
#[derive(Clone, Debug)]
pub struct Drill {
    /// Its name, for the report (the file name if not written).
    pub name: String,
    /// Where the faults go and the load is sent.
    pub target: Target,
    /// The traffic driven through the proxy.
    pub load: Load,
    /// Fault phases, in time order, not overlapping.
    pub phases: Vec<Phase>,
    /// When to stop early: the drill hurts more than planned.
    pub abort: Option<AbortRule>,
    /// What must hold.
    pub expect: Expectations,
    /// Breakers whose transitions count; empty: all.
    pub watch: Vec<String>,
    /// The run of `--compare-sim`'s scenario to compare with (its
    /// `[[breaker]]` name); the first one if not written.
    pub compare_breaker: Option<String>,
}

/// A proxy already running, or one this process builds.
#[derive(Clone, Debug)]
pub enum Target {
    /// A proxy reached over HTTP.
    Remote {
        /// Its admin listener, e.g. `http://127.0.0.1:9901`.
        admin: String,
        /// Its data-plane listener, where the load goes.
        url: String,
    },
    /// A proxy built in this process (for CI): its config text, with
    /// `${name}` standing for the address of in-process upstream `name`.
    InProcess {
        /// The proxy config, before the upstreams' addresses are filled in.
        config: String,
        /// The healthy upstreams to start, by name.
        upstreams: BTreeMap<String, UpstreamSpec>,
        /// Seeds the proxy's fault rolls, so a drill replays its decisions.
        seed: u64,
    },
}

/// An in-process upstream: answers every request with 200 after `latency`.
#[derive(Clone, Debug, Default, PartialEq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UpstreamSpec {
    /// How long it takes to answer.
    #[serde(default, with = "tripline::clock::duration_serde")]
    pub latency: Duration,
}

/// The load: an open loop at `rate`, bounded in flight.
#[derive(Clone, Debug, PartialEq)]
pub struct Load {
    /// Requests started per second.
    pub rate: f64,
    /// How long the drill runs.
    pub duration: Duration,
    /// Requests in flight at most; a tick that finds them all busy is
    /// counted as skipped, never queued (an open loop must not catch up).
    pub concurrency: usize,
    /// Paths requested in turn.
    pub paths: Vec<String>,
    /// The client gives up on one request after this long.
    pub timeout: Duration,
}

/// One fault, switched on at `from` and off at `to`.
#[derive(Clone, Debug, PartialEq)]
pub struct Phase {
    /// For the report.
    pub name: String,
    /// Seconds from the drill's start.
    pub from: Duration,
    /// Seconds from the drill's start.
    pub to: Duration,
    /// The route the fault is injected into.
    pub route: String,
    /// Answer a share of tries with a status.
    pub abort: Option<AbortSection>,
    /// Hold a share of tries.
    pub delay: Option<DelaySection>,
    /// Only tries to this endpoint (`host:port`, or an in-process
    /// upstream's name).
    pub endpoint: Option<String>,
    /// Only requests carrying this header.
    pub header: Option<String>,
    /// Whether the breakers should trip (a blip should not).
    pub expect_trip: bool,
}

/// Stops the drill (exit 2) when errors stay above a ceiling.
#[derive(Clone, Debug, PartialEq)]
pub struct AbortRule {
    /// Share (0–1) of answers that are errors (5xx or no answer) in a second.
    pub error_rate_above: f64,
    /// For this many consecutive whole seconds.
    pub sustained: Duration,
    /// Whether seconds inside fault phases count.
    pub during_faults: bool,
}

/// Expectations; each written one is a row of the verdict.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Expectations {
    /// Each fault phase expecting a trip trips within this of its start.
    pub trip_within: Option<Duration>,
    /// Trips outside fault phases expecting one, at most.
    pub false_trips: Option<u64>,
    /// Requests refused while no fault was on, at most.
    pub max_healthy_rejected: Option<u64>,
    /// After each tripped fault ends, every breaker is closed within this.
    pub recover_within: Option<Duration>,
    /// Requests let through per second while a breaker is open, at most.
    pub max_probes_per_second: Option<u64>,
    /// Tries the proxy made ÷ requests sent, at most.
    pub max_retry_amplification: Option<f64>,
    /// p99 latency of requests started in fault phases, at most.
    pub fault_p99: Option<Duration>,
}

impl Drill {
    /// Reads and validates the drill file at `path`; an in-process
    /// target's `in_process` path is read relative to the drill file.
    pub fn load(path: &Path) -> Result<Drill, DrillError> {
        let file = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| DrillError::File {
            file: file.clone(),
            message: format!("cannot read the file: {e}"),
        })?;
        let dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
        Drill::from_toml(&file, &text, &dir)
    }

    /// Parses and validates drill text; `file` names it in errors and
    /// `dir` resolves a relative `in_process` path.
    pub fn from_toml(file: &str, text: &str, dir: &Path) -> Result<Drill, DrillError> {
        raw::parse(file, text, dir)
    }

    /// The phase acting at `t` seconds from the start, if any.
    pub fn phase_at(&self, t: Duration) -> Option<&Phase> {
        self.phases.iter().find(|p| p.from <= t && t < p.to)
    }

    /// The index of the latest phase started at or before `t` (the
    /// simulator's attribution: a trip belongs to the latest fault
    /// started, until the next one starts).
    pub fn attributed_phase(&self, t: Duration) -> Option<usize> {
        self.phases.iter().rposition(|p| p.from <= t)
    }

    /// Where the in-process config is read from, for messages.
    pub(crate) fn resolve(dir: &Path, path: &str) -> PathBuf {
        let p = Path::new(path);
        if p.is_absolute() {
            p.to_path_buf()
        } else {
            dir.join(p)
        }
    }
}

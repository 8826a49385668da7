//! Gradual rollout: shadow first, then a stable share of the fleet, then a
//! bake period with automatic rollback.
//!
//! Which instances are canaries is decided by a stable hash of the instance
//! id, so every instance decides alone, the same way on every restart and
//! every version, with no coordinator: [`canary_bucket`] is 64-bit FNV-1a
//! over the id's UTF-8 bytes (offset basis `0xcbf29ce484222325`, prime
//! `0x100000001b3`), passed through MurmurHash3's 64-bit finaliser
//! (`fmix64`), reduced to 0.00–99.99 as `hash % 10_000 / 100`. The
//! finaliser matters: FNV-1a alone leaves the low decimal digits of
//! sequential ids (`web-1`, `web-2`, …) correlated, and a 10 % rollout of
//! `instance-000`…`instance-199` picked 27 instead of about 20. An
//! instance is a canary for `percent` when its bucket is below `percent`,
//! so raising the percentage only ever adds canaries.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::error::DocumentError;

/// How a document reaches the fleet.
///
/// ```
/// use tripline_config::Document;
///
/// let doc = Document::parse(br#"
///     rollout = { percent = 10, shadow = "60s", bake = "5m", margin = 0.05 }
///     [[breaker]]
///     name = "payments"
/// "#).unwrap();
/// let rollout = doc.rollout.unwrap();
/// assert_eq!(rollout.percent, 10.0);
/// assert_eq!(rollout.bake.as_secs(), 300);
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rollout {
    /// Share of instances (0–100) that apply the change after the shadow
    /// period; the rest keep their config until a document without a
    /// rollout (or with 100) promotes it.
    pub percent: f64,
    /// How long a metrics-only twin of each changed breaker judges live
    /// traffic by the new rules before anything is applied ("0s": no shadow).
    /// A registry family gets a twin per member key seen, so each key is
    /// judged on its own traffic; a changed family no outcome reached is
    /// listed as not judged.
    #[serde(with = "tripline::clock::duration_serde", default)]
    pub shadow: Duration,
    /// How long canaries are watched after applying; a canary whose trip or
    /// rejection rate exceeds the rest of the fleet's by `margin` in this
    /// time rolls itself back.
    #[serde(with = "tripline::clock::duration_serde")]
    pub bake: Duration,
    /// How much worse (as a fraction 0–1 of calls) a canary's rejection or
    /// trip rate may be than the fleet's before it rolls back.
    #[serde(default = "default_margin")]
    pub margin: f64,
}

fn default_margin() -> f64 {
    0.05
}

impl Rollout {
    /// Checks the percentages and durations.
    pub fn validate(&self) -> Result<(), DocumentError> {
        if !(0.0..=100.0).contains(&self.percent) {
            return Err(DocumentError::Rollout {
                field: "percent",
                constraint: format!("must be between 0 and 100, got {}", self.percent),
            });
        }
        if !(0.0..=1.0).contains(&self.margin) {
            return Err(DocumentError::Rollout {
                field: "margin",
                constraint: format!("must be a fraction in [0, 1], got {}", self.margin),
            });
        }
        nonzero("bake", self.bake)
    }

    /// Whether `instance` is among the canaries of this rollout.
    pub fn selects(&self, instance: &str) -> bool {
        canary_bucket(instance) < self.percent
    }
}

/// The instance's stable position, 0.00–99.99, in every rollout (see the
/// module docs for the exact hash).
pub fn canary_bucket(instance: &str) -> f64 {
    (fmix64(fnv1a(instance.as_bytes())) % 10_000) as f64 / 100.0
}

/// MurmurHash3's 64-bit finaliser: every input bit flips about half the
/// output bits.
fn fmix64(mut k: u64) -> u64 {
    k ^= k >> 33;
    k = k.wrapping_mul(0xff51_afd7_ed55_8ccd);
    k ^= k >> 33;
    k = k.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    k ^ (k >> 33)
}

/// 64-bit FNV-1a: tiny, keyless and fixed forever, so every process and
/// version computes the same value.
pub(crate) fn fnv1a(bytes: &[u8]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in bytes {
        hash ^= u64::from(*byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    hash
}

/// Cumulative traffic counts of an instance's breakers, reported in its
/// status so canaries can compare themselves with the rest of the fleet.
///
/// ```
/// use tripline_config::TrafficSample;
///
/// let start = TrafficSample { requests: 100, rejected: 0, trips: 0 };
/// let now = TrafficSample { requests: 300, rejected: 50, trips: 1 };
/// let bake = now.since(&start);
/// assert_eq!(bake.rejection_rate(), 0.25);
/// assert_eq!(bake.trip_rate(), 0.005);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TrafficSample {
    /// Calls asked for (admitted or rejected).
    pub requests: u64,
    /// Calls rejected by a breaker.
    pub rejected: u64,
    /// Transitions into `Open`.
    pub trips: u64,
}

impl TrafficSample {
    /// The counts since `earlier` (saturating, so a restarted peer whose
    /// counters went back to zero reads as no traffic, not as overflow).
    pub fn since(&self, earlier: &TrafficSample) -> TrafficSample {
        TrafficSample {
            requests: self.requests.saturating_sub(earlier.requests),
            rejected: self.rejected.saturating_sub(earlier.rejected),
            trips: self.trips.saturating_sub(earlier.trips),
        }
    }

    /// Adds `other`'s counts (summing a fleet).
    pub fn add(&mut self, other: &TrafficSample) {
        self.requests += other.requests;
        self.rejected += other.rejected;
        self.trips += other.trips;
    }

    /// Rejected / requests (0 with no requests).
    pub fn rejection_rate(&self) -> f64 {
        ratio(self.rejected, self.requests)
    }

    /// Trips / requests (0 with no requests): trips per call, so instances
    /// with different traffic compare fairly.
    pub fn trip_rate(&self) -> f64 {
        ratio(self.trips, self.requests)
    }
}

fn ratio(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 / whole as f64
    }
}

/// Refuses a zero duration where one would make a rollout step meaningless.
fn nonzero(field: &'static str, d: Duration) -> Result<(), DocumentError> {
    if d.is_zero() {
        return Err(DocumentError::Rollout {
            field,
            constraint: "must be longer than zero".into(),
        });
    }
    Ok(())
}

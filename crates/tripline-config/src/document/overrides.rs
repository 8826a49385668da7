//! Fleet-wide operator overrides: `[[override]]` tables of the document.
//!
//! An override is part of the document, not a message: every instance
//! applies it from its watch, a restarted instance applies it again from
//! the document it reads at start, and it ends by itself at `until`
//! (each applier acts at that instant on its own clock, with no new
//! document). An `until` already past when an instance reads the document
//! is an expired override, not an error: the document stays valid for
//! every instance that starts after it. Only a tool that writes a new
//! override (`tripline config force-open`, `push`) refuses a past `until`,
//! through [`Document::check_overrides`](super::Document::check_overrides).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::{Document, DocumentError};

/// The operator state an override holds a breaker in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OverrideState {
    /// Every call rejected.
    ForcedOpen,
    /// Every call admitted; outcomes still recorded.
    Disabled,
    /// Every call admitted; would-be trips reported as events (shadow mode).
    MetricsOnly,
}

impl OverrideState {
    /// The library's state of that name.
    pub fn state(self) -> tripline::State {
        match self {
            OverrideState::ForcedOpen => tripline::State::ForcedOpen,
            OverrideState::Disabled => tripline::State::Disabled,
            OverrideState::MetricsOnly => tripline::State::MetricsOnly,
        }
    }

    /// `forced_open`, `disabled`, `metrics_only`: as documents write it.
    pub fn as_str(self) -> &'static str {
        self.state().as_str()
    }

    /// Puts `breaker` in this state.
    pub fn apply(self, breaker: &tripline::CircuitBreaker) {
        match self {
            OverrideState::ForcedOpen => breaker.force_open(),
            OverrideState::Disabled => breaker.disable(),
            OverrideState::MetricsOnly => breaker.metrics_only(),
        }
    }
}

/// One `[[override]]` table.
///
/// ```
/// use tripline_config::{Document, OverrideState};
///
/// let doc = Document::parse(br#"
///     [[override]]
///     breaker = "payments"
///     state = "forced_open"
///     until = "2026-12-05T10:00:00Z"
///     reason = "bank maintenance window"
///     author = "ops@example.com"
/// "#).unwrap();
/// assert_eq!(doc.overrides[0].state, OverrideState::ForcedOpen);
/// assert!(doc.validate().is_ok());
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FleetOverride {
    /// The breaker held (a route breaker's name in a proxy).
    pub breaker: String,
    /// The state it is held in.
    pub state: OverrideState,
    /// When it ends by itself: RFC 3339 (`2026-12-05T10:00:00Z`), whole seconds.
    #[serde(serialize_with = "write_time", deserialize_with = "read_time")]
    pub until: SystemTime,
    /// Why, for the audit log and `/api/breakers`.
    pub reason: String,
    /// Who; the document's `author` when left out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub author: Option<String>,
}

fn write_time<S: Serializer>(t: &SystemTime, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&humantime::format_rfc3339_seconds(*t).to_string())
}

fn read_time<'de, D: Deserializer<'de>>(d: D) -> Result<SystemTime, D::Error> {
    let text = String::deserialize(d)?;
    let t = humantime::parse_rfc3339_weak(&text).map_err(|e| {
        serde::de::Error::custom(format!(
            "{text:?} is not an RFC 3339 time (like \"2026-12-05T10:00:00Z\"): {e}"
        ))
    })?;
    Ok(whole_seconds(t))
}

/// `t` without its fraction of a second, so a document reads back equal.
pub(crate) fn whole_seconds(t: SystemTime) -> SystemTime {
    let secs = t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    UNIX_EPOCH + Duration::from_secs(secs)
}

impl Document {
    /// What a tool writing overrides checks beyond [`validate`](Document::validate):
    /// every override ends after `now`, and holds a breaker in `known` (the
    /// breakers and families the fleet reports) or one the document
    /// configures.
    pub fn check_overrides(&self, now: SystemTime, known: &[String]) -> Result<(), DocumentError> {
        for (index, o) in self.overrides.iter().enumerate() {
            if o.until <= now {
                return Err(DocumentError::Override {
                    index,
                    field: "until",
                    constraint: format!(
                        "must be in the future, got {} (now {})",
                        humantime::format_rfc3339_seconds(o.until),
                        humantime::format_rfc3339_seconds(now)
                    ),
                });
            }
            if !known.contains(&o.breaker) && self.breaker(&o.breaker).is_none() {
                return Err(DocumentError::Override {
                    index,
                    field: "breaker",
                    constraint: format!(
                        "names {:?}, which no live instance reports and the document does not configure",
                        o.breaker
                    ),
                });
            }
        }
        Ok(())
    }
}

/// Each override names a breaker, once, and says why.
pub(super) fn validate(overrides: &[FleetOverride]) -> Result<(), DocumentError> {
    let mut held = std::collections::BTreeSet::new();
    for (index, o) in overrides.iter().enumerate() {
        let bad = |field, constraint: &str| DocumentError::Override {
            index,
            field,
            constraint: constraint.to_owned(),
        };
        if o.breaker.is_empty() {
            return Err(bad("breaker", "must name a breaker"));
        }
        if o.reason.trim().is_empty() {
            return Err(bad("reason", "must say why (it is audited)"));
        }
        if !held.insert(o.breaker.as_str()) {
            return Err(bad(
                "breaker",
                &format!("{:?} is already held by an earlier override", o.breaker),
            ));
        }
    }
    Ok(())
}

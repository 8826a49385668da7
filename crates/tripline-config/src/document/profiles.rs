//! Scheduled parameter sets: `[[profile]]` tables of the document, each
//! with a `when` and `[[profile.breaker]]` tables laid over the
//! document's own while it holds.
//!
//! A `when` is weekly (`days`, `from`, `to` as `HH:MM`, `tz`) or one
//! stretch of time (`from`, `until` as RFC 3339 instants). A weekly window
//! whose `to` is not after its `from` runs past midnight into the next
//! day. `tz` is `UTC`, a fixed offset (`+08:00`, `-05:30`), or an IANA
//! zone name (`Europe/Berlin`, `Asia/Shanghai`) whose daylight-saving
//! rules come from the tz database bundled into the binary; what a window
//! does on the days the clocks change is in [`zoned`].
//! At most one profile holds at any instant: a document whose profiles
//! overlap is refused, naming both.

mod zoned;

use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use super::{BreakerTable, Document, DocumentError, overrides::whole_seconds};

const MINUTE: u64 = 60;
const DAY: u64 = 24 * 60 * MINUTE;
const WEEK: u64 = 7 * DAY;
const DAYS: [&str; 7] = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"];

/// One `[[profile]]`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Profile {
    /// Its name, in audit records and `tripline config check`.
    pub name: String,
    /// When it holds.
    pub when: When,
    /// Tables laid over the document's own tables of the same breakers.
    #[serde(rename = "breaker", default)]
    pub breakers: Vec<BreakerTable>,
}

/// When a profile holds: weekly, or one stretch of time.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct When {
    /// Weekly: the days it starts on (`mon` … `sun`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub days: Vec<String>,
    /// Weekly: `HH:MM`; once: an RFC 3339 instant.
    pub from: String,
    /// Weekly: `HH:MM` (not after `from`: the next day).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to: Option<String>,
    /// Once: an RFC 3339 instant.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until: Option<String>,
    /// Weekly: `UTC` (default), a fixed offset like `+08:00`, or a zone
    /// name like `Europe/Berlin` (daylight saving followed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tz: Option<String>,
}

/// A `when`, checked: the half-open stretches of time it covers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Window {
    /// Seconds of the week since Monday 00:00 UTC: `(start, length)` pairs.
    Weekly(Vec<(u64, u64)>),
    /// Seconds since the Unix epoch: `[start, end)`.
    Once(u64, u64),
    /// Weekly in a named zone: its instants move with the zone's offset.
    Zoned(Box<zoned::ZonedWeekly>),
}

/// Monday 2025-12-29 00:00 UTC: a zoned window is checked for overlaps
/// over the 53 weeks from here, every daylight-saving change of a year.
const ZONED_SCAN_FROM: u64 = 1_766_966_400;

/// Monday 1970-01-05 00:00 UTC, in Unix seconds: the weeks' origin.
const FIRST_MONDAY: u64 = 4 * DAY;

impl When {
    /// The window, or the field at fault (`field` relative to `when`).
    pub(crate) fn window(&self) -> Result<Window, (&'static str, String)> {
        if self.days.is_empty() {
            let from = instant("from", &self.from)?;
            let until = instant("until", self.until.as_deref().unwrap_or_default())?;
            if self.to.is_some() || self.tz.is_some() {
                return Err((
                    "to",
                    "belongs to a weekly window (with days); a one-off window takes from and until"
                        .into(),
                ));
            }
            if until <= from {
                return Err(("until", format!("must be after from ({})", self.from)));
            }
            return Ok(Window::Once(from, until));
        }
        if self.until.is_some() {
            return Err((
                "until",
                "belongs to a one-off window; a weekly one takes to".into(),
            ));
        }
        let tz = self.tz.as_deref().unwrap_or("UTC");
        let named = if tz.eq_ignore_ascii_case("utc") || tz.starts_with(['+', '-']) || tz == "Z" {
            None
        } else {
            Some(zoned::zone(tz).ok_or((
                "tz",
                format!(
                    "{tz:?} is not UTC, a fixed offset like +08:00, or a zone of the tz database like \"Europe/Berlin\""
                ),
            ))?)
        };
        let offset = if named.is_some() { 0 } else { offset(tz)? };
        let from = clock_time("from", &self.from)?;
        let to = clock_time("to", self.to.as_deref().unwrap_or_default())?;
        let length = if to > from {
            to - from
        } else {
            to + DAY - from
        };
        let mut spans = Vec::new();
        let mut indices = Vec::new();
        for day in &self.days {
            let index = DAYS
                .iter()
                .position(|d| day.to_ascii_lowercase().starts_with(d))
                .ok_or(("days", format!("{day:?} is not a day (mon … sun)")))?;
            indices.push(index as i8);
            let local = index as u64 * DAY + from;
            spans.push((
                (local as i64 - offset).rem_euclid(WEEK as i64) as u64,
                length,
            ));
        }
        if let Some(zone) = named {
            return Ok(Window::Zoned(Box::new(zoned::ZonedWeekly::new(
                tz, zone, indices, from, to,
            ))));
        }
        Ok(Window::Weekly(spans))
    }
}

impl Window {
    /// Whether it holds at `t` (Unix seconds).
    pub(crate) fn holds(&self, t: u64) -> bool {
        match self {
            Window::Once(from, until) => (*from..*until).contains(&t),
            Window::Zoned(z) => z.holds(t),
            Window::Weekly(spans) => {
                let w = (t + WEEK - FIRST_MONDAY % WEEK) % WEEK;
                spans.iter().any(|(s, len)| (w + WEEK - s) % WEEK < *len)
            }
        }
    }

    /// The first instant after `t` at which it starts or ends.
    pub(crate) fn next_boundary(&self, t: u64) -> Option<u64> {
        match self {
            Window::Once(from, until) => [*from, *until].into_iter().filter(|b| *b > t).min(),
            Window::Zoned(z) => z.next_boundary(t),
            Window::Weekly(spans) => {
                let w = (t + WEEK - FIRST_MONDAY % WEEK) % WEEK;
                spans
                    .iter()
                    .flat_map(|(s, len)| [*s, (s + len) % WEEK])
                    .map(|b| t + (b + WEEK - w - 1) % WEEK + 1)
                    .min()
            }
        }
    }

    /// Whether some instant is in both (checked at every boundary of
    /// either within the span they could share).
    pub(crate) fn overlaps(&self, other: &Window) -> bool {
        let (lo, hi) = match (self, other) {
            (Window::Once(a, b), Window::Once(c, d)) => return a < d && c < b,
            (Window::Once(a, b), _) | (_, Window::Once(a, b)) => (*a, (*b).min(a + 2 * WEEK)),
            (Window::Zoned(_), _) | (_, Window::Zoned(_)) => {
                (ZONED_SCAN_FROM, ZONED_SCAN_FROM + 53 * WEEK)
            }
            _ => (FIRST_MONDAY, FIRST_MONDAY + 2 * WEEK),
        };
        let mut t = lo;
        while t < hi {
            if self.holds(t) && other.holds(t) {
                return true;
            }
            let next = [self.next_boundary(t), other.next_boundary(t)]
                .into_iter()
                .flatten()
                .min();
            match next {
                Some(n) if n > t => t = n,
                _ => break,
            }
        }
        false
    }
}

/// The profile index of `profiles` that holds at `at`, if any.
pub(crate) fn holding(windows: &[Window], at: SystemTime) -> Option<usize> {
    let t = unix(at);
    windows.iter().position(|w| w.holds(t))
}

/// Checks every profile's `when` and that no two overlap.
pub(crate) fn check(profiles: &[Profile]) -> Result<Vec<Window>, DocumentError> {
    let mut windows: Vec<Window> = Vec::new();
    for (index, p) in profiles.iter().enumerate() {
        let bad = |field: &str, constraint: String| DocumentError::Profile {
            profile: p.name.clone(),
            field: field.to_owned(),
            constraint,
        };
        if p.name.is_empty() {
            return Err(bad("name", format!("of profile {index} must not be empty")));
        }
        let window = p
            .when
            .window()
            .map_err(|(f, c)| bad(&format!("when.{f}"), c))?;
        if let Some(other) = windows.iter().position(|w| w.overlaps(&window)) {
            return Err(bad(
                "when",
                format!(
                    "overlaps profile {:?}: at most one profile may hold at a time",
                    profiles[other].name
                ),
            ));
        }
        windows.push(window);
    }
    Ok(windows)
}

pub(crate) fn unix(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

pub(crate) fn from_unix(secs: u64) -> SystemTime {
    UNIX_EPOCH + std::time::Duration::from_secs(secs)
}

fn instant(field: &'static str, text: &str) -> Result<u64, (&'static str, String)> {
    humantime::parse_rfc3339_weak(text)
        .map(|t| unix(whole_seconds(t)))
        .map_err(|e| {
            (
                field,
                format!("{text:?} is not an RFC 3339 time (like \"2026-12-24T00:00:00Z\"): {e}"),
            )
        })
}

fn clock_time(field: &'static str, text: &str) -> Result<u64, (&'static str, String)> {
    let parsed = text.split_once(':').and_then(|(h, m)| {
        let (h, m) = (h.parse::<u64>().ok()?, m.parse::<u64>().ok()?);
        (h < 24 && m < 60 && text.len() == 5).then_some(h * 3600 + m * MINUTE)
    });
    parsed.ok_or((field, format!("{text:?} is not a time of day as HH:MM")))
}

/// Seconds east of UTC.
fn offset(tz: &str) -> Result<i64, (&'static str, String)> {
    if tz.eq_ignore_ascii_case("utc") || tz == "Z" {
        return Ok(0);
    }
    let bad = || {
        (
            "tz",
            format!("{tz:?} is not UTC or a fixed offset like +08:00"),
        )
    };
    let sign = match tz.as_bytes().first() {
        Some(b'+') => 1,
        Some(b'-') => -1,
        _ => return Err(bad()),
    };
    let minutes = clock_time("tz", &tz[1..]).map_err(|_| bad())? / MINUTE;
    Ok(sign * minutes as i64 * MINUTE as i64)
}

impl Document {
    /// The profile that holds at `at`, if any (the document must be valid).
    ///
    /// ```
    /// use std::time::{Duration, UNIX_EPOCH};
    /// use tripline_config::Document;
    ///
    /// let doc = Document::parse(br#"
    ///     [[profile]]
    ///     name = "evening-peak"
    ///     when = { days = ["mon", "tue", "wed", "thu", "fri"], from = "18:00", to = "22:00", tz = "+08:00" }
    ///     [[profile.breaker]]
    ///     name = "payments"
    ///     slow_call_rate_threshold = 0.9
    /// "#).unwrap();
    /// // Monday 2026-12-07 11:00 UTC is 19:00 at +08:00.
    /// let monday_evening = UNIX_EPOCH + Duration::from_secs(1_796_601_600 + 11 * 3600);
    /// assert_eq!(doc.profile_at(monday_evening).unwrap().name, "evening-peak");
    /// assert!(doc.profile_at(monday_evening + Duration::from_secs(4 * 3600)).is_none());
    /// ```
    pub fn profile_at(&self, at: SystemTime) -> Option<&Profile> {
        let windows = check(&self.profiles).ok()?;
        holding(&windows, at).and_then(|i| self.profiles.get(i))
    }
}

/// Every profile's window, no two overlapping, and its tables, each laid
/// on the library's defaults with the document's own table of that breaker.
pub(super) fn validate(doc: &Document) -> Result<(), DocumentError> {
    check(&doc.profiles)?;
    for profile in &doc.profiles {
        for table in &profile.breakers {
            let base = match doc.breaker(&table.name) {
                Some(own) => own.apply_to(&own.default_base())?,
                None => table.default_base(),
            };
            table.resolve(&base).map_err(|e| match e {
                DocumentError::Invalid {
                    field, constraint, ..
                } => DocumentError::Profile {
                    profile: profile.name.clone(),
                    field: format!("breaker.{field}"),
                    constraint: format!("(breaker {:?}) {constraint}", table.name),
                },
                other => other,
            })?;
        }
    }
    Ok(())
}

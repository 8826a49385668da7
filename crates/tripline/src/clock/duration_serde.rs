//! Durations in config files, written as people write them (`"5s"`,
//! `"250ms"`, `"1m30s"`), with errors that say what a duration looks like.
//!
//! The same text form as `humantime-serde`, which these functions replace
//! in every tripline config, because its errors speak of parser positions
//! (`"-5s"` gave `expected number at 0`): here a negative duration is called
//! one, and anything else unreadable is shown with examples of what reads.
//!
//! ```
//! use std::time::Duration;
//!
//! #[derive(serde::Deserialize)]
//! struct Config {
//!     #[serde(with = "tripline::clock::duration_serde")]
//!     open_duration: Duration,
//! }
//!
//! let c: Config = toml::from_str(r#"open_duration = "1m30s""#).unwrap();
//! assert_eq!(c.open_duration, Duration::from_secs(90));
//! let e = toml::from_str::<Config>(r#"open_duration = "-5s""#).err().unwrap();
//! assert!(e.to_string().contains("cannot be negative"));
//! ```

use std::time::Duration;

use serde::{Deserialize, Deserializer, Serializer};

/// Parses a duration as a config writes it, with a readable error.
pub fn parse(text: &str) -> Result<Duration, String> {
    let trimmed = text.trim();
    if trimmed.starts_with('-') {
        return Err(format!(
            "{text:?}: a duration cannot be negative (write it like \"5s\" or \"250ms\")"
        ));
    }
    if trimmed.is_empty() {
        return Err("an empty string is not a duration (write it like \"5s\" or \"250ms\")".into());
    }
    humantime::parse_duration(trimmed).map_err(|e| {
        format!(
            "{text:?} is not a duration: write a number and a unit, like \"5s\", \"250ms\" or \"1m30s\" ({e})"
        )
    })
}

/// Serialises as `humantime`'s text (`"1m 30s"`), which [`parse`] reads back.
pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&humantime::format_duration(*d).to_string())
}

/// Deserialises from text, with [`parse`]'s errors.
pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
    let text = String::deserialize(d)?;
    parse(&text).map_err(serde::de::Error::custom)
}

/// `Option<Duration>`: absent or null is `None`.
pub mod option {
    use super::*;

    /// Serialises `Some` as text, `None` as null (TOML leaves the key out).
    pub fn serialize<S: Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
        match d {
            Some(d) => super::serialize(d, s),
            None => s.serialize_none(),
        }
    }

    /// Deserialises text or null.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
        match Option::<String>::deserialize(d)? {
            Some(text) => parse(&text).map(Some).map_err(serde::de::Error::custom),
            None => Ok(None),
        }
    }
}

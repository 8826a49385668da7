//! Wall-clock instants in serde as RFC 3339 text (`2026-12-01T06:35:03.5Z`),
//! which a person and every log tool read, instead of serde's default
//! `{secs_since_epoch, nanos_since_epoch}`. The default form is still
//! accepted when reading, so state written by earlier versions restores.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Deserializer, Serializer};

#[derive(Deserialize)]
#[serde(untagged)]
enum Written {
    Text(String),
    Legacy {
        secs_since_epoch: u64,
        nanos_since_epoch: u32,
    },
}

/// A `SystemTime` as RFC 3339 text.
pub(crate) fn serialize<S: Serializer>(t: &SystemTime, s: S) -> Result<S::Ok, S::Error> {
    option::serialize(&Some(*t), s)
}

/// A `SystemTime` from RFC 3339 text (or serde's older struct form).
pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<SystemTime, D::Error> {
    option::deserialize(d)?.ok_or_else(|| serde::de::Error::custom("a time is required"))
}

/// `Option<SystemTime>` as RFC 3339 text or null.
pub(crate) mod option {
    use super::*;

    pub(crate) fn serialize<S: Serializer>(
        t: &Option<SystemTime>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        match t {
            Some(t) => s.serialize_str(&humantime::format_rfc3339_nanos(*t).to_string()),
            None => s.serialize_none(),
        }
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Option<SystemTime>, D::Error> {
        match Option::<Written>::deserialize(d)? {
            None => Ok(None),
            Some(Written::Text(text)) => {
                humantime::parse_rfc3339_weak(&text).map(Some).map_err(|e| {
                    serde::de::Error::custom(format!(
                        "{text:?} is not an RFC 3339 time (like 2026-12-01T06:35:03Z): {e}"
                    ))
                })
            }
            Some(Written::Legacy {
                secs_since_epoch,
                nanos_since_epoch,
            }) => UNIX_EPOCH
                .checked_add(Duration::new(secs_since_epoch, nanos_since_epoch))
                .map(Some)
                .ok_or_else(|| serde::de::Error::custom("time out of range")),
        }
    }
}

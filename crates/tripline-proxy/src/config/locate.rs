//! Finding a field path (`routes[1].timeout.per_try`) in the TOML or YAML
//! text, so an error names the line to fix.
//!
//! The text is parsed a second time, only when there is an error to
//! place: the happy path pays nothing. TOML is parsed into toml's spanned
//! document ([`DeTable`]). YAML has no spanned document in
//! `serde_yaml_ng`, but its errors carry the position of the event being
//! read: a probe walks the document along the path and fails on purpose
//! at the key it looks for, and the failure's position is the key's. The
//! same parser that read the config places the error, so anchors, flow
//! and block style are followed exactly as they were read.
//!
//! A path is followed as far as the document goes; a key that was never
//! written (a default that `validate` refused, say) is placed at its
//! nearest written ancestor, which is where it would go.

use std::fmt;
use std::ops::Range;

use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use toml::Spanned;
use toml::de::{DeTable, DeValue};

use super::ConfigError;

/// The 1-based line and column of the key at `field` in `text`, or of its
/// nearest written ancestor; `None` if not even the first segment is there.
pub(crate) fn locate(text: &str, field: &str) -> Option<(usize, usize)> {
    let document = DeTable::parse(text).ok()?;
    let mut table = document.get_ref();
    let mut value: Option<&DeValue<'_>> = None;
    let mut found: Option<Range<usize>> = None;
    for segment in segments(field) {
        let next = match (segment, value) {
            (Segment::Key(key), None) => table
                .iter()
                .find(|(k, _)| k.get_ref().as_ref() == key)
                .map(|(k, v)| (k.span(), v)),
            (Segment::Key(key), Some(DeValue::Table(t))) => t
                .iter()
                .find(|(k, _)| k.get_ref().as_ref() == key)
                .map(|(k, v)| (k.span(), v)),
            (Segment::Index(i), Some(DeValue::Array(items))) => {
                items.get(i).map(|item| (item.span(), item))
            }
            _ => None,
        };
        let Some((span, next)) = next else { break };
        found = Some(span);
        match next.get_ref() {
            DeValue::Table(t) => {
                table = t;
                value = None;
            }
            other => value = Some(other),
        }
    }
    found.map(|span| line_column(text, span.start))
}

/// The dotted path (`routes[0].breaker.minimum_calls`) of the key or value
/// written at byte `offset`: the reverse of [`locate`], for a parse error
/// that has a position but no field.
pub(crate) fn path_at(text: &str, offset: usize) -> Option<String> {
    let document = DeTable::parse(text).ok()?;
    let mut path = String::new();
    table_path(document.get_ref(), offset, &mut path).then_some(path)
}

fn table_path(table: &DeTable<'_>, offset: usize, path: &mut String) -> bool {
    for (key, value) in table.iter() {
        let mark = path.len();
        if !path.is_empty() {
            path.push('.');
        }
        path.push_str(key.get_ref());
        if key.span().contains(&offset) || value_path(value, offset, path) {
            return true;
        }
        path.truncate(mark);
    }
    false
}

fn value_path(value: &Spanned<DeValue<'_>>, offset: usize, path: &mut String) -> bool {
    match value.get_ref() {
        DeValue::Table(t) => table_path(t, offset, path),
        DeValue::Array(items) => items.iter().enumerate().any(|(i, item)| {
            let mark = path.len();
            path.push_str(&format!("[{i}]"));
            let found = value_path(item, offset, path);
            if !found {
                path.truncate(mark);
            }
            found
        }),
        _ => value.span().contains(&offset),
    }
}

/// The name of the breaker that the key at `path` belongs to, for a path
/// inside `routes[i].breaker` or `clusters.NAME.breaker`: the breaker's own
/// `name`, else its route's or cluster's name, which is what the proxy runs
/// it under. `doc` is the text read leniently (TOML or YAML, as JSON
/// values), so the name is known even when the config does not deserialise.
pub(crate) fn breaker_of(doc: &serde_json::Value, path: &str) -> Option<String> {
    let segments = segments(path);
    let named = |t: &serde_json::Value| t.get("name").and_then(|n| n.as_str()).map(str::to_owned);
    let (owner, breaker) = match segments.as_slice() {
        [
            Segment::Key("routes"),
            Segment::Index(i),
            Segment::Key("breaker"),
            ..,
        ] => {
            let route = doc.get("routes")?.as_array()?.get(*i)?;
            (named(route), route.get("breaker"))
        }
        [
            Segment::Key("clusters"),
            Segment::Key(name),
            Segment::Key("breaker"),
            ..,
        ] => {
            let cluster = doc.get("clusters")?.get(*name)?;
            (Some((*name).to_owned()), cluster.get("breaker"))
        }
        _ => return None,
    };
    let default = tripline::CircuitBreakerConfig::default().name;
    breaker
        .and_then(named)
        .filter(|n| !n.is_empty() && *n != default)
        .or(owner)
}

/// The error of a YAML text that did not deserialise: its message, at its
/// line and column, with the field it is about (`routes[0].retry.attempts`)
/// when serde_yaml_ng names one, as validation errors do.
pub(crate) fn yaml_error(text: &str, e: &serde_yaml_ng::Error) -> ConfigError {
    let location = e.location().map(|l| (l.line(), l.column()));
    let mut message = e.to_string();
    // The position is kept as data; a syntax error's context ("while
    // parsing a block mapping at line 3 column 1") stays in the message.
    if let Some((line, column)) = location {
        message = message.replacen(&format!(" at line {line} column {column}"), "", 1);
    }
    // serde_yaml_ng writes `path: message`. A message has ": " of its own
    // ("invalid type: string"), so a prefix is taken as a path only if the
    // document has a key there.
    let mut field = String::new();
    if let Some((path, rest)) = message.split_once(": ")
        && probe_yaml(text, &segments(path)).is_some()
    {
        field = path.to_owned();
        message = rest.to_owned();
    }
    // A key's own error (misspelt, missing, twice) is about that key.
    let key = ["unknown field `", "missing field `", "duplicate field `"]
        .iter()
        .find_map(|kind| message.strip_prefix(kind)?.split_once('`'))
        .map(|(key, _)| key);
    if let Some(key) = key {
        field = if field.is_empty() {
            key.to_owned()
        } else {
            format!("{field}.{key}")
        };
    }
    let mut err = ConfigError::parse(None, message).at(location);
    if !field.is_empty() {
        // Read leniently, as TOML's is: the name is known even when the
        // config does not deserialise.
        let doc = serde_yaml_ng::from_str(text).ok();
        if let Some(name) = doc.and_then(|doc| breaker_of(&doc, &field)) {
            err.message = format!("{} (breaker {name:?})", err.message);
        }
        err.field = field;
    }
    err
}

/// The 1-based line and column of the key at `field` in the YAML `text`
/// (of the item, for an index), or of its nearest written ancestor;
/// `None` if not even the first segment is there.
pub(crate) fn locate_yaml(text: &str, field: &str) -> Option<(usize, usize)> {
    let path = segments(field);
    (1..=path.len())
        .rev()
        .find_map(|written| probe_yaml(text, &path[..written]))
}

/// Whether the YAML `text` is a mapping with the top-level `key`, written
/// before any syntax error the text has.
pub(crate) fn yaml_has_key(text: &str, key: &str) -> bool {
    probe_yaml(text, &[Segment::Key(key)]).is_some()
}

/// What a probe's deliberate failure says, to tell it from an error of the
/// text itself (which means the key is not there to find).
const FOUND: &str = "the probed field is here";

/// The position of exactly `path` in the YAML `text`, if it is written.
fn probe_yaml(text: &str, path: &[Segment<'_>]) -> Option<(usize, usize)> {
    if path.is_empty() {
        return None;
    }
    let error = Probe(path)
        .deserialize(serde_yaml_ng::Deserializer::from_str(text))
        .err()?;
    if !error.to_string().contains(FOUND) {
        return None;
    }
    error.location().map(|l| (l.line(), l.column()))
}

/// Walks a value along the rest of a path: skips what is off the path,
/// fails with [`FOUND`] where the path ends, and succeeds if it is not
/// written.
struct Probe<'p>(&'p [Segment<'p>]);

impl<'de> DeserializeSeed<'de> for Probe<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        if self.0.is_empty() {
            // Any visit fails with an error "expected" FOUND, positioned
            // at the value's first event (an index's item).
            deserializer.deserialize_any(Here).map(|_| ())
        } else {
            deserializer.deserialize_any(self)
        }
    }
}

impl<'de> Visitor<'de> for Probe<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any value")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let Some((Segment::Key(want), rest)) = self.0.split_first() else {
            while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
            return Ok(());
        };
        let key = Key {
            want,
            last: rest.is_empty(),
        };
        while let Some(on_path) = map.next_key_seed(key)? {
            if on_path {
                map.next_value_seed(Probe(rest))?;
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let Some((Segment::Index(want), rest)) = self.0.split_first() else {
            while seq.next_element::<IgnoredAny>()?.is_some() {}
            return Ok(());
        };
        let mut index = 0;
        loop {
            let more = if index == *want {
                seq.next_element_seed(Probe(rest))?.is_some()
            } else {
                seq.next_element::<IgnoredAny>()?.is_some()
            };
            if !more {
                return Ok(());
            }
            index += 1;
        }
    }

    // A scalar where the path goes on: the path is not written.
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<(), E> {
        Ok(())
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<(), E> {
        Ok(())
    }
    fn visit_i128<E: de::Error>(self, _: i128) -> Result<(), E> {
        Ok(())
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<(), E> {
        Ok(())
    }
    fn visit_u128<E: de::Error>(self, _: u128) -> Result<(), E> {
        Ok(())
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<(), E> {
        Ok(())
    }
    fn visit_str<E: de::Error>(self, _: &str) -> Result<(), E> {
        Ok(())
    }
    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_none<E: de::Error>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(IgnoredAny).map(|_| ())
    }
    fn visit_enum<A: de::EnumAccess<'de>>(self, data: A) -> Result<(), A::Error> {
        IgnoredAny.visit_enum(data).map(|_| ())
    }
}

/// A mapping key: whether it is the path's next key; the path's last key
/// fails with [`FOUND`], so the failure is positioned at the key itself.
#[derive(Clone, Copy)]
struct Key<'p> {
    want: &'p str,
    last: bool,
}

impl<'de> DeserializeSeed<'de> for Key<'_> {
    type Value = bool;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<bool, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Key<'_> {
    type Value = bool;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a key")
    }

    fn visit_str<E: de::Error>(self, key: &str) -> Result<bool, E> {
        match (key == self.want, self.last) {
            (true, true) => Err(E::custom(FOUND)),
            (on_path, _) => Ok(on_path),
        }
    }
    // Keys that are not strings are never on a path of field names.
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<bool, E> {
        Ok(false)
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<bool, E> {
        Ok(false)
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<bool, E> {
        Ok(false)
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<bool, E> {
        Ok(false)
    }
    fn visit_unit<E: de::Error>(self) -> Result<bool, E> {
        Ok(false)
    }
}

/// A value that is where the path ends: every visit is refused (serde's
/// default), with an error that "expected" [`FOUND`].
struct Here;

impl Visitor<'_> for Here {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(FOUND)
    }
}

/// One step of a field path.
#[derive(Debug, PartialEq)]
enum Segment<'a> {
    Key(&'a str),
    Index(usize),
}

/// `routes[1].timeout.per_try` → `routes`, `1`, `timeout`, `per_try`.
fn segments(field: &str) -> Vec<Segment<'_>> {
    let mut out = Vec::new();
    for part in field.split('.') {
        let (key, mut rest) = part.split_once('[').map_or((part, ""), |(k, r)| (k, r));
        if !key.is_empty() {
            out.push(Segment::Key(key));
        }
        while let Some((index, after)) = rest.split_once(']') {
            if let Ok(i) = index.parse() {
                out.push(Segment::Index(i));
            }
            rest = after.strip_prefix('[').unwrap_or(after);
        }
    }
    out
}

/// The 1-based line and column (in characters) of byte `offset`.
pub(crate) fn line_column(text: &str, offset: usize) -> (usize, usize) {
    let before = text.get(..offset).unwrap_or(text);
    let line = before.matches('\n').count() + 1;
    let start = before.rfind('\n').map_or(0, |i| i + 1);
    let column = before.get(start..).map_or(0, |s| s.chars().count()) + 1;
    (line, column)
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "[[listeners]]\naddress = \"127.0.0.1:0\"\n\n[[routes]]\nname = \"a\"\ncluster = \"c\"\n\n[[routes]]\nname = \"b\"\ncluster = \"c\"\ntimeout = { per_try = \"5s\", overall = \"1s\" }\n\n[clusters.c]\nendpoints = [\"127.0.0.1:1\", \"x\"]\n";

    #[test]
    fn paths_split_into_keys_and_indices() {
        assert_eq!(
            segments("routes[1].timeout.per_try"),
            vec![
                Segment::Key("routes"),
                Segment::Index(1),
                Segment::Key("timeout"),
                Segment::Key("per_try")
            ]
        );
    }

    #[test]
    fn keys_inside_arrays_of_tables_and_inline_tables_are_found() {
        assert_eq!(locate(TEXT, "routes[1].timeout.per_try"), Some((11, 13)));
        assert_eq!(locate(TEXT, "routes[0].cluster"), Some((6, 1)));
        assert_eq!(locate(TEXT, "clusters.c.endpoints[1]"), Some((14, 29)));
    }

    #[test]
    fn a_position_maps_back_to_its_path_and_breaker() {
        let text = "[[routes]]\nname = \"api\"\ncluster = \"c\"\n[routes.breaker]\nminimum_calls = \"x\"\n\n[clusters.c]\nendpoints = [\"127.0.0.1:1\"]\nbreaker = { name = \"edge\", window = { kind = \"count\", size = \"y\" } }\n";
        let x = text.find("\"x\"").expect("x");
        let path = path_at(text, x).expect("path");
        assert_eq!(path, "routes[0].breaker.minimum_calls");
        let doc: serde_json::Value = toml::from_str(text).expect("toml");
        assert_eq!(breaker_of(&doc, &path).as_deref(), Some("api"));
        let y = text.find("\"y\"").expect("y");
        let path = path_at(text, y).expect("path");
        assert_eq!(path, "clusters.c.breaker.window.size");
        assert_eq!(breaker_of(&doc, &path).as_deref(), Some("edge"));
        assert_eq!(breaker_of(&doc, "routes[0].cluster"), None);
    }

    #[test]
    fn an_unwritten_key_is_placed_at_its_nearest_written_ancestor() {
        assert_eq!(
            locate(TEXT, "routes[1].retry.attempts"),
            locate(TEXT, "routes[1]")
        );
        assert_eq!(locate(TEXT, "admin.address"), None);
    }

    const YAML: &str = "listeners:\n  - address: 127.0.0.1:0\nroutes:\n  - name: a\n    cluster: c\n  - name: b\n    cluster: c\n    timeout: { per_try: 5s, overall: 1s }\n    retry:\n      attempts: 0\nclusters:\n  c:\n    endpoints:\n      - 127.0.0.1:1\n      - x\n";

    #[test]
    fn yaml_keys_in_block_and_flow_style_are_found() {
        assert_eq!(
            locate_yaml(YAML, "routes[1].timeout.per_try"),
            Some((8, 16))
        );
        assert_eq!(locate_yaml(YAML, "routes[1].retry.attempts"), Some((10, 7)));
        assert_eq!(locate_yaml(YAML, "routes[0].cluster"), Some((5, 5)));
        assert_eq!(locate_yaml(YAML, "clusters.c.endpoints[1]"), Some((15, 9)));
        assert_eq!(locate_yaml(YAML, "listeners[0]"), Some((2, 5)));
    }

    #[test]
    fn an_unwritten_yaml_key_is_placed_at_its_nearest_written_ancestor() {
        assert_eq!(
            locate_yaml(YAML, "routes[0].retry.attempts"),
            locate_yaml(YAML, "routes[0]")
        );
        assert_eq!(locate_yaml(YAML, "routes[1].name"), Some((6, 5)));
        // A scalar where the path goes on, an index past the end.
        assert_eq!(
            locate_yaml(YAML, "routes[0].name.x"),
            locate_yaml(YAML, "routes[0].name")
        );
        assert_eq!(locate_yaml(YAML, "routes[7]"), Some((3, 1)));
        assert_eq!(locate_yaml(YAML, "admin.address"), None);
        // Keys are found as far as the text parses, and not beyond.
        assert_eq!(
            locate_yaml("here: [closed\nthere: 1\n", "here"),
            Some((1, 1))
        );
        assert_eq!(locate_yaml("here: [closed\nthere: 1\n", "there"), None);
    }

    #[test]
    fn a_yaml_parse_error_keeps_its_position_and_names_its_field() {
        let text = "routes:\n  - name: api\n    cluster: c\n    breaker:\n      minimum_calls: x\n";
        let e = serde_yaml_ng::from_str::<crate::config::ProxyConfig>(text).unwrap_err();
        let err = yaml_error(text, &e);
        assert_eq!(err.field, "routes[0].breaker.minimum_calls");
        assert_eq!((err.line, err.column), (Some(5), Some(22)));
        assert!(err.message.starts_with("invalid type"), "{}", err.message);
        assert!(
            err.message.ends_with("(breaker \"api\")"),
            "{}",
            err.message
        );
        assert!(!err.message.contains(" at line "), "{}", err.message);

        let text = "listeners: []\nlistener: x\n";
        let e = serde_yaml_ng::from_str::<crate::config::ProxyConfig>(text).unwrap_err();
        let err = yaml_error(text, &e);
        assert_eq!((err.field.as_str(), err.line), ("listener", Some(2)));

        let text = "listeners:\n  - header_read_timeout: 1s\n";
        let e = serde_yaml_ng::from_str::<crate::config::ProxyConfig>(text).unwrap_err();
        let err = yaml_error(text, &e);
        assert_eq!(
            (err.field.as_str(), err.line),
            ("listeners[0].address", Some(2))
        );
        assert!(err.message.starts_with("missing field"), "{}", err.message);
    }
}

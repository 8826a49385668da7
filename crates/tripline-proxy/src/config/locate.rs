//! Finding a field path (`routes[1].timeout.per_try`) in the TOML text,
//! so an error names the line to fix.
//!
//! The text is parsed a second time into toml's spanned document
//! ([`DeTable`]), only when there is an error to place: the happy path
//! pays nothing. A path is followed as far as the document goes; a key
//! that was never written (a default that `validate` refused, say) is
//! placed at its nearest written ancestor, which is where it would go.

use std::ops::Range;

use toml::Spanned;
use toml::de::{DeTable, DeValue};

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
/// it under.
pub(crate) fn breaker_of(text: &str, path: &str) -> Option<String> {
    let doc: toml::Table = toml::from_str(text).ok()?;
    let segments = segments(path);
    let named = |t: &toml::Table| t.get("name").and_then(|n| n.as_str()).map(str::to_owned);
    let (owner, breaker) = match segments.as_slice() {
        [
            Segment::Key("routes"),
            Segment::Index(i),
            Segment::Key("breaker"),
            ..,
        ] => {
            let route = doc.get("routes")?.as_array()?.get(*i)?.as_table()?;
            (named(route), route.get("breaker")?.as_table())
        }
        [
            Segment::Key("clusters"),
            Segment::Key(name),
            Segment::Key("breaker"),
            ..,
        ] => {
            let cluster = doc.get("clusters")?.as_table()?.get(*name)?.as_table()?;
            (Some((*name).to_owned()), cluster.get("breaker")?.as_table())
        }
        _ => return None,
    };
    let default = tripline::CircuitBreakerConfig::default().name;
    breaker
        .and_then(named)
        .filter(|n| !n.is_empty() && *n != default)
        .or(owner)
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
        assert_eq!(breaker_of(text, &path).as_deref(), Some("api"));
        let y = text.find("\"y\"").expect("y");
        let path = path_at(text, y).expect("path");
        assert_eq!(path, "clusters.c.breaker.window.size");
        assert_eq!(breaker_of(text, &path).as_deref(), Some("edge"));
        assert_eq!(breaker_of(text, "routes[0].cluster"), None);
    }

    #[test]
    fn an_unwritten_key_is_placed_at_its_nearest_written_ancestor() {
        assert_eq!(
            locate(TEXT, "routes[1].retry.attempts"),
            locate(TEXT, "routes[1]")
        );
        assert_eq!(locate(TEXT, "admin.address"), None);
    }
}

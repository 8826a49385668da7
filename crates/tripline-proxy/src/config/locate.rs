//! Finding a field path (`routes[1].timeout.per_try`) in the TOML text,
//! so an error names the line to fix.
//!
//! The text is parsed a second time into toml's spanned document
//! ([`DeTable`]), only when there is an error to place: the happy path
//! pays nothing. A path is followed as far as the document goes; a key
//! that was never written (a default that `validate` refused, say) is
//! placed at its nearest written ancestor, which is where it would go.

use std::ops::Range;

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
    fn an_unwritten_key_is_placed_at_its_nearest_written_ancestor() {
        assert_eq!(
            locate(TEXT, "routes[1].retry.attempts"),
            locate(TEXT, "routes[1]")
        );
        assert_eq!(locate(TEXT, "admin.address"), None);
    }
}

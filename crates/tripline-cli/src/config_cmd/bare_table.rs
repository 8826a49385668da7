//! A single breaker table taken as a document.
//!
//! `tripline tune --out` and hand-written breaker files are one table
//! (`name = "payments"`, `window = …`), the shape a route's `breaker =
//! {…}` takes. Pushing one should not need rewriting it as a document, so
//! a TOML file whose top level names a breaker and none of a document's
//! keys is read as a document holding that one `[[breaker]]` table.

use std::borrow::Cow;

use crate::kind::DOCUMENT_KEYS;

/// `bytes` as a document's bytes: unchanged, or a single breaker table
/// wrapped as the document's one `[[breaker]]` (and whether it was).
pub(crate) fn as_document(bytes: &[u8]) -> (Cow<'_, [u8]>, bool) {
    let Ok(text) = std::str::from_utf8(bytes) else {
        return (Cow::Borrowed(bytes), false);
    };
    let Ok(table) = text.parse::<toml::Table>() else {
        return (Cow::Borrowed(bytes), false);
    };
    let bare = table.get("name").is_some_and(toml::Value::is_str)
        && !DOCUMENT_KEYS.iter().any(|k| table.contains_key(*k));
    if !bare {
        return (Cow::Borrowed(bytes), false);
    }
    let mut document = toml::Table::new();
    document.insert(
        "breaker".to_owned(),
        toml::Value::Array(vec![toml::Value::Table(table)]),
    );
    match toml::to_string(&document) {
        Ok(text) => (Cow::Owned(text.into_bytes()), true),
        Err(_) => (Cow::Borrowed(bytes), false),
    }
}

#[cfg(test)]
mod tests {
    use super::as_document;

    #[test]
    fn a_named_table_is_wrapped_and_a_document_is_not() {
        let (bytes, wrapped) = as_document(b"name = \"api\"\nminimum_calls = 10\n");
        assert!(wrapped);
        let text = String::from_utf8(bytes.into_owned()).unwrap_or_default();
        assert!(text.contains("[[breaker]]"), "{text}");
        for document in [
            &b"[[breaker]]\nname = \"api\"\n"[..],
            b"minimum_calls = 10\n",
            b"{\"breaker\": []}",
        ] {
            assert!(!as_document(document).1);
        }
    }
}

//! Errors about a scenario file, located for a person to fix.
//!
//! Every error names the file, the table (`[traffic]`, `[[fault]] #2
//! "slow disk"`, `[[breaker]] #1 "balanced"`) and the field, with the line
//! and column wherever the TOML parser gave a byte span. Serde's messages
//! say *what* is wrong but not *where* in terms a person uses, so the table
//! and the dotted field path are recovered from the source text around the
//! span: the last table header before it, and the keys leading to it
//! (through inline tables such as `window = { kind = "count", size = 10 }`).

use std::fmt;
use std::ops::Range;

/// A scenario (or sweep grid) that cannot be simulated, and where it is wrong.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScenarioError {
    /// The file as the user named it.
    pub file: String,
    /// 1-based line and column of the offending text, when known.
    pub position: Option<(usize, usize)>,
    /// The table, such as `[[fault]] #2 "slow disk"`; `None` for top-level keys.
    pub table: Option<String>,
    /// The dotted field path, such as `window.size`, when known.
    pub field: Option<String>,
    /// What is wrong, lowercase.
    pub message: String,
}

impl fmt::Display for ScenarioError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file)?;
        if let Some((line, col)) = self.position {
            write!(f, ":{line}:{col}")?;
        }
        match (&self.table, &self.field) {
            (Some(t), Some(field)) => write!(f, ": in {t}, field `{field}`")?,
            (Some(t), None) => write!(f, ": in {t}")?,
            (None, Some(field)) => write!(f, ": at top level, field `{field}`")?,
            (None, None) => {}
        }
        write!(f, ": {}", self.message)
    }
}

impl std::error::Error for ScenarioError {}

/// Builds located errors against one source text.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Locator<'a> {
    pub(crate) file: &'a str,
    pub(crate) src: &'a str,
}

impl<'a> Locator<'a> {
    /// An error at `span` with an explicit table and field.
    pub(crate) fn at(
        &self,
        span: Option<Range<usize>>,
        table: Option<String>,
        field: Option<&str>,
        message: impl Into<String>,
    ) -> ScenarioError {
        let table = table.or_else(|| span.as_ref().and_then(|s| self.table_at(s.start)));
        ScenarioError {
            file: self.file.to_owned(),
            position: span.map(|s| self.line_col(s.start)),
            table,
            field: field.map(str::to_owned),
            message: message.into(),
        }
    }

    /// Translates a TOML/serde error, recovering the table and field from its span.
    pub(crate) fn toml_error(&self, e: &toml::de::Error) -> ScenarioError {
        let message = plain_type_names(e.message().trim());
        let Some(span) = e.span() else {
            return self.at(None, None, None, message);
        };
        if let Some(header) = self.unknown_table(&span, &message) {
            return header;
        }
        let mut path = self.key_path(span.start);
        if let Some(named) = named_field(&message)
            && path.last().is_none_or(|k| k != named)
        {
            path.push(named.to_owned());
        }
        let field = (!path.is_empty()).then(|| path.join("."));
        self.at(Some(span), None, field.as_deref(), message)
    }

    /// An unknown key written as a table header (`[[faults]]`): named as
    /// the table it is, with the tables a scenario has and the likely one.
    fn unknown_table(&self, span: &Range<usize>, message: &str) -> Option<ScenarioError> {
        let name = named_field(message)?;
        if !message.starts_with("unknown field") {
            return None;
        }
        let line_start = self.src[..floor_char(self.src, span.start)]
            .rfind('\n')
            .map_or(0, |i| i + 1);
        let line = self.src[line_start..].lines().next()?.trim_start();
        let header = if line.starts_with("[[") {
            format!("[[{name}]]")
        } else if line.starts_with('[') {
            format!("[{name}]")
        } else {
            return None;
        };
        let known = [
            ("traffic", "[traffic]"),
            ("fault", "[[fault]]"),
            ("breaker", "[[breaker]]"),
        ];
        let guess = known.iter().find(|(k, _)| {
            name.trim_end_matches('s') == *k || name.starts_with(k) || k.starts_with(name)
        });
        let mut text = format!(
            "unknown table `{header}`: a scenario has [traffic], [[fault]] and [[breaker]] tables"
        );
        if let Some((_, table)) = guess {
            text.push_str(&format!("; did you mean `{table}`?"));
        }
        Some(ScenarioError {
            file: self.file.to_owned(),
            position: Some(self.line_col(line_start)),
            table: None,
            field: None,
            message: text,
        })
    }

    /// 1-based line and column (in characters) of byte offset `pos`.
    pub(crate) fn line_col(&self, pos: usize) -> (usize, usize) {
        let before = &self.src[..floor_char(self.src, pos)];
        let line = before.matches('\n').count() + 1;
        let line_start = before.rfind('\n').map_or(0, |i| i + 1);
        (line, before[line_start..].chars().count() + 1)
    }

    /// The table whose body contains `pos`, as `[traffic]` or
    /// `[[breaker]] #2 "payments"`: an array table is named by its `name`
    /// key wherever the table writes it, before or after `pos`, so that an
    /// error the parser found names the breaker (or fault) as validation
    /// errors do.
    pub(crate) fn table_at(&self, pos: usize) -> Option<String> {
        let before = &self.src[..floor_char(self.src, pos)];
        let mut current = None;
        let mut counts: Vec<(String, usize)> = Vec::new();
        let mut offset = 0;
        let mut body_start = None;
        for line in before.split_inclusive('\n') {
            let l = line.trim();
            offset += line.len();
            if let Some(rest) = l.strip_prefix("[[") {
                let name = rest.split("]]").next().unwrap_or("").trim().to_owned();
                let n = match counts.iter_mut().find(|(k, _)| *k == name) {
                    Some((_, c)) => {
                        *c += 1;
                        *c
                    }
                    None => {
                        counts.push((name.clone(), 1));
                        1
                    }
                };
                current = Some(format!("[[{name}]] #{n}"));
                body_start = Some(offset);
            } else if let Some(rest) = l.strip_prefix('[') {
                let name = rest.split(']').next().unwrap_or("").trim();
                current = Some(format!("[{name}]"));
                body_start = None;
            }
        }
        match (current, body_start) {
            (Some(table), Some(start)) => match self.name_in_body(start) {
                Some(name) => Some(format!("{table} {name:?}")),
                None => Some(table),
            },
            (current, _) => current,
        }
    }

    /// The `name = "…"` of the table whose body starts at byte `start`, up
    /// to the next table header.
    fn name_in_body(&self, start: usize) -> Option<String> {
        self.src[start..]
            .lines()
            .take_while(|l| !l.trim_start().starts_with('['))
            .filter(|l| l.trim_start().starts_with("name"))
            .find_map(|l| {
                let t: toml::Table = toml::from_str(l).ok()?;
                t.get("name")?.as_str().map(str::to_owned)
            })
    }

    /// The keys leading to the value or key at `pos`, outermost first, for
    /// the part of the path written on that line (inline tables included).
    fn key_path(&self, pos: usize) -> Vec<String> {
        let pos = floor_char(self.src, pos);
        let mut path = Vec::new();
        if let Some(key) = key_starting_at(self.src, pos) {
            path.push(key);
        } else if let Some((key, key_start)) = key_before(self.src, pos) {
            path.push(key);
            return self.parents(key_start, path);
        }
        self.parents(pos, path)
    }

    /// Prepends the keys of the inline tables and arrays enclosing `pos` on
    /// its line.
    fn parents(&self, mut pos: usize, mut path: Vec<String>) -> Vec<String> {
        let bytes = self.src.as_bytes();
        let mut depth = 0i32;
        while pos > 0 {
            pos -= 1;
            match bytes[pos] {
                b'\n' if depth == 0 => break,
                b'}' | b']' => depth += 1,
                b'{' | b'[' if depth > 0 => depth -= 1,
                // The inline table or array holding `pos` is the value of
                // the key before it (`window = { .. }`, `at = [ .. ]`).
                b'{' | b'[' => {
                    if let Some((key, key_start)) = key_before(self.src, pos) {
                        path.insert(0, key);
                        pos = key_start;
                    }
                }
                _ => {}
            }
        }
        path
    }
}

/// The field named in a serde message such as "unknown field `x`, expected ...".
/// Serde names Rust types ("expected f64", "expected u32"); a scenario's
/// author writes TOML, where those are numbers and whole numbers.
fn plain_type_names(message: &str) -> String {
    let Some((head, expected)) = message.rsplit_once("expected ") else {
        return message.to_owned();
    };
    let plain = match expected {
        "f32" | "f64" => "a number",
        "u8" | "u16" | "u32" | "u64" | "usize" => "a whole number, 0 or more",
        "i8" | "i16" | "i32" | "i64" | "isize" => "a whole number",
        "a boolean" | "bool" => "true or false",
        _ => return message.to_owned(),
    };
    format!("{head}expected {plain}")
}

pub(crate) fn named_field(message: &str) -> Option<&str> {
    ["unknown field `", "missing field `"]
        .iter()
        .find_map(|p| message.strip_prefix(p))
        .and_then(|rest| rest.split('`').next())
}

fn is_key_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b'-'
}

/// A bare key starting at `pos` and followed by `=`.
fn key_starting_at(src: &str, pos: usize) -> Option<String> {
    let bytes = src.as_bytes();
    let end = pos + bytes[pos..].iter().take_while(|b| is_key_byte(**b)).count();
    if end == pos {
        return None;
    }
    let rest = src[end..].trim_start_matches([' ', '\t']);
    rest.starts_with('=').then(|| src[pos..end].to_owned())
}

/// The bare key of the `key = <value at pos>` pair, and where the key starts.
fn key_before(src: &str, pos: usize) -> Option<(String, usize)> {
    let head = src[..pos].trim_end_matches([' ', '\t']);
    let head = head.strip_suffix('=')?.trim_end_matches([' ', '\t']);
    let start = head.len() - head.bytes().rev().take_while(|b| is_key_byte(*b)).count();
    (start < head.len()).then(|| (head[start..].to_owned(), start))
}

fn floor_char(s: &str, mut pos: usize) -> usize {
    pos = pos.min(s.len());
    while !s.is_char_boundary(pos) {
        pos -= 1;
    }
    pos
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn type_errors_name_toml_kinds_not_rust_types() {
        assert_eq!(
            plain_type_names("invalid type: string \"fast\", expected f64"),
            "invalid type: string \"fast\", expected a number"
        );
        assert_eq!(
            plain_type_names("invalid type: string \"x\", expected u32"),
            "invalid type: string \"x\", expected a whole number, 0 or more"
        );
        assert_eq!(
            plain_type_names("missing field `rate`"),
            "missing field `rate`"
        );
    }

    #[test]
    fn paths_through_inline_tables_and_headers() {
        let src = "name = 'x'\n[[breaker]]\nname = 'a'\n[[breaker]]\nwindow = { kind = \"count\", size = \"x\" }\nname = \"payments\"\n[[fault]]\n";
        let loc = Locator {
            file: "f.toml",
            src,
        };
        let pos = src.find("\"x\"").expect("value present");
        assert_eq!(loc.key_path(pos), ["window", "size"]);
        assert_eq!(
            loc.table_at(pos).as_deref(),
            Some("[[breaker]] #2 \"payments\""),
            "named by a `name` written after the error"
        );
        let first = src.find("'a'").expect("first breaker");
        assert_eq!(loc.table_at(first).as_deref(), Some("[[breaker]] #1 \"a\""));
        assert_eq!(loc.line_col(pos), (5, 35));
        let brace = src.find('{').expect("inline table");
        assert_eq!(loc.key_path(brace), ["window"]);
    }
}

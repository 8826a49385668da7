//! Config text from bytes, with a located error for bytes that are not
//! UTF-8.
//!
//! `std::str::from_utf8` says only *that* a file is not UTF-8 (and
//! `read_to_string` only "stream did not contain valid UTF-8"); a person
//! fixing a config needs the line. Every reader of config-like text — the
//! library's config files, the simulator's scenarios, the CLI's `check`
//! and stdin — reports the same position the same way through this.

use std::fmt;

/// Where bytes stop being UTF-8.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InvalidUtf8 {
    /// Byte offset of the first byte that is not part of valid UTF-8.
    pub offset: usize,
    /// Its 1-based line.
    pub line: usize,
    /// Its 1-based column, in characters of the valid text before it.
    pub column: usize,
}

impl fmt::Display for InvalidUtf8 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "invalid UTF-8 at byte offset {} (line {}, column {})",
            self.offset, self.line, self.column
        )
    }
}

impl std::error::Error for InvalidUtf8 {}

/// `bytes` as text, or where the first byte that is not UTF-8 sits.
///
/// ```
/// use tripline::breaker::utf8_text;
///
/// assert_eq!(utf8_text(b"name = \"a\"\n"), Ok("name = \"a\"\n"));
/// let err = utf8_text(b"name = \"a\"\nminimum_calls = \xff\n").unwrap_err();
/// assert_eq!((err.offset, err.line, err.column), (27, 2, 17));
/// assert_eq!(err.to_string(), "invalid UTF-8 at byte offset 27 (line 2, column 17)");
/// ```
pub fn utf8_text(bytes: &[u8]) -> Result<&str, InvalidUtf8> {
    std::str::from_utf8(bytes).map_err(|e| {
        let offset = e.valid_up_to();
        let good = std::str::from_utf8(&bytes[..offset]).unwrap_or_default();
        let line = good.matches('\n').count() + 1;
        let column = good.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
        InvalidUtf8 {
            offset,
            line,
            column,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_count_characters_and_lines_start_at_one() {
        let err = utf8_text(b"\xff").unwrap_err();
        assert_eq!((err.offset, err.line, err.column), (0, 1, 1));
        let err = utf8_text(
            "é\nxé"
                .as_bytes()
                .iter()
                .copied()
                .chain([0xc3])
                .collect::<Vec<_>>()
                .as_slice(),
        )
        .unwrap_err();
        assert_eq!((err.offset, err.line, err.column), (6, 2, 3));
    }
}

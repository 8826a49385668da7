//! Why a config was refused, naming the file, the line and the field.

use std::fmt;
use std::path::{Path, PathBuf};

/// A config that cannot be used: unreadable, malformed, or contradictory.
///
/// The Display says where to look, as an editor jumps to it:
/// `proxy.toml:12: routes[0].timeout.per_try: must not exceed
/// timeout.overall (5s > 2s)`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError {
    /// The file, when the config came from one.
    pub file: Option<PathBuf>,
    /// The line (from 1) of the offending key in the text, when the
    /// config was parsed from text and the key (or its nearest enclosing
    /// table) is written there; `None` for a default that was never
    /// written, or a config built in code.
    pub line: Option<usize>,
    /// The column (from 1, in characters) of that key.
    pub column: Option<usize>,
    /// The offending key, dotted (`routes[1].retry.attempts`); empty for
    /// errors of the whole file (unreadable, not TOML or YAML).
    pub field: String,
    /// What is wrong.
    pub message: String,
}

impl ConfigError {
    /// A contradiction or impossible value at `field`.
    pub(crate) fn invalid(field: impl Into<String>, message: impl Into<String>) -> Self {
        ConfigError {
            file: None,
            line: None,
            column: None,
            field: field.into(),
            message: message.into(),
        }
    }

    pub(crate) fn parse(file: Option<&Path>, message: String) -> Self {
        ConfigError {
            file: file.map(Path::to_path_buf),
            line: None,
            column: None,
            field: String::new(),
            message,
        }
    }

    pub(crate) fn read(file: &Path, e: &std::io::Error) -> Self {
        ConfigError::parse(Some(file), format!("cannot read: {e}"))
    }

    /// The same error, naming `file`.
    pub fn in_file(mut self, file: &Path) -> Self {
        self.file = Some(file.to_path_buf());
        self
    }

    /// The same error, at `(line, column)` of the text.
    pub(crate) fn at(mut self, position: Option<(usize, usize)>) -> Self {
        if let Some((line, column)) = position {
            self.line = Some(line);
            self.column = Some(column);
        }
        self
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.file, self.line) {
            (Some(file), Some(line)) => write!(f, "{}:{line}: ", file.display())?,
            (Some(file), None) => write!(f, "{}: ", file.display())?,
            (None, Some(line)) => write!(f, "line {line}: ")?,
            (None, None) => {}
        }
        if self.field.is_empty() {
            write!(f, "{}", self.message.trim_end())
        } else {
            write!(f, "{}: {}", self.field, self.message)
        }
    }
}

impl std::error::Error for ConfigError {}

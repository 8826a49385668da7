//! Why a config was refused, naming the file and the field.

use std::fmt;
use std::path::{Path, PathBuf};

/// A config that cannot be used: unreadable, malformed, or contradictory.
///
/// The Display says where to look: `proxy.toml: routes[0].timeout.per_try:
/// must not exceed timeout.overall (5s > 2s)`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError {
    /// The file, when the config came from one.
    pub file: Option<PathBuf>,
    /// The offending key, dotted (`routes[1].retry.attempts`); empty for
    /// errors of the whole file (unreadable, not TOML).
    pub field: String,
    /// What is wrong; for parse errors, the parser's message with line and column.
    pub message: String,
}

impl ConfigError {
    /// A contradiction or impossible value at `field`.
    pub(crate) fn invalid(field: impl Into<String>, message: impl Into<String>) -> Self {
        ConfigError {
            file: None,
            field: field.into(),
            message: message.into(),
        }
    }

    pub(crate) fn parse(file: Option<&Path>, message: String) -> Self {
        ConfigError {
            file: file.map(Path::to_path_buf),
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
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(file) = &self.file {
            write!(f, "{}: ", file.display())?;
        }
        if self.field.is_empty() {
            write!(f, "{}", self.message.trim_end())
        } else {
            write!(f, "`{}` {}", self.field, self.message)
        }
    }
}

impl std::error::Error for ConfigError {}

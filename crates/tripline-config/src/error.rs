//! Why a document was refused: one error for every part of it.
//!
//! The document and the parts it holds (breaker tables, overrides,
//! profiles, the rollout plan) all refuse with [`DocumentError`], so it
//! sits below them: [`rollout`](crate::rollout) validates its plan without
//! importing the [`document`](crate::document) that contains it. Its
//! public path is the crate root's `DocumentError`.

/// Why a document was refused. Every variant names what to fix.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum DocumentError {
    /// The document is larger than the limit.
    #[error("document is {len} bytes, over the {limit}-byte limit")]
    TooLarge {
        /// Its size.
        len: usize,
        /// The limit ([`MAX_DOCUMENT_BYTES`](crate::MAX_DOCUMENT_BYTES)).
        limit: usize,
    },
    /// The document is not UTF-8 text.
    #[error("document is not UTF-8: invalid byte at offset {offset}")]
    NotUtf8 {
        /// Where the first invalid byte is.
        offset: usize,
    },
    /// TOML or JSON syntax, an unknown key or a value of the wrong type;
    /// the message carries the line and key.
    #[error("document does not parse: {0}")]
    Syntax(String),
    /// One breaker's config fails validation.
    #[error("breaker {breaker:?}: `{field}` {constraint}")]
    Invalid {
        /// The breaker at fault.
        breaker: String,
        /// The field, dotted for nested values.
        field: String,
        /// What it must satisfy, and what it was.
        constraint: String,
    },
    /// Two tables share one name (metrics and events key breakers by name).
    #[error("breaker {0:?} appears twice")]
    Duplicate(String),
    /// An `[[override]]` table is unusable.
    #[error("`override[{index}].{field}` {constraint}")]
    Override {
        /// Its place among the document's overrides, from 0.
        index: usize,
        /// The field.
        field: &'static str,
        /// What it must satisfy, and what it was.
        constraint: String,
    },
    /// A `[[profile]]` is unusable, or overlaps another.
    #[error("profile {profile:?}: `{field}` {constraint}")]
    Profile {
        /// The profile's name.
        profile: String,
        /// The field, dotted (`when.from`, `breaker.minimum_calls`).
        field: String,
        /// What it must satisfy.
        constraint: String,
    },
    /// The rollout plan is unusable.
    #[error("`rollout.{field}` {constraint}")]
    Rollout {
        /// The rollout field.
        field: &'static str,
        /// What it must satisfy.
        constraint: String,
    },
}

impl DocumentError {
    /// The breaker at fault, when one is.
    pub fn breaker(&self) -> Option<&str> {
        match self {
            DocumentError::Invalid { breaker, .. } | DocumentError::Duplicate(breaker) => {
                Some(breaker)
            }
            _ => None,
        }
    }
}

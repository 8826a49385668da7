//! What the exporter refuses, and the checks behind it.
//!
//! Prometheus rejects a whole scrape for one bad name or one duplicate
//! series, so everything that could produce either is refused when the
//! exporter is built or a source is registered, with the offending value in
//! the message — never discovered by a failing scrape in production.
//! Label *values* are never refused: the encoder escapes `\`, `"` and
//! newlines, so a breaker named `say "hi"\n` is exported as written.

use crate::source::SourceKind;

/// Why the exporter refused a setting or a registration.
///
/// ```
/// use tripline_prometheus::{ExportError, Exporter};
///
/// let err = Exporter::builder().prefix("my-app").build().unwrap_err();
/// assert!(matches!(err, ExportError::InvalidPrefix { .. }));
/// assert!(err.to_string().contains("my-app"));
/// ```
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ExportError {
    /// The metric name prefix is not a valid Prometheus metric name.
    #[error("metric name prefix `{prefix}` is invalid: {reason}")]
    InvalidPrefix {
        /// The prefix given.
        prefix: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// A constant label name is not a valid Prometheus label name, or is
    /// one the exporter sets itself.
    #[error("label name `{label}` is invalid: {reason}")]
    InvalidLabel {
        /// The label name given.
        label: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// The histogram bucket bounds are not finite, positive and increasing.
    #[error("histogram buckets are invalid: {reason}")]
    InvalidBuckets {
        /// What is wrong with them.
        reason: &'static str,
    },
    /// The source, or another one exported under the same name, is
    /// registered already: registering it again would duplicate series.
    #[error("{kind} `{name}` is already registered with this exporter")]
    AlreadyRegistered {
        /// What kind of source.
        kind: SourceKind,
        /// Its name (a breaker's name, a registry's family, a policy's name).
        name: String,
    },
}

/// Label names the exporter writes itself: a constant label may not take
/// one of them (the series would carry it twice).
pub(crate) const RESERVED_LABELS: [&str; 13] = [
    "name", "state", "kind", "outcome", "reason", "from", "to", "result", "detector", "family",
    "cluster", "le", "quantile",
];

/// Checks a metric name prefix: `[a-zA-Z_][a-zA-Z0-9_]*`. Colons are valid
/// in Prometheus names but reserved for recording rules, so an exporter
/// must not use them.
pub(crate) fn check_prefix(prefix: &str) -> Result<(), ExportError> {
    let err = |reason| {
        Err(ExportError::InvalidPrefix {
            prefix: prefix.to_string(),
            reason,
        })
    };
    let Some(first) = prefix.chars().next() else {
        return err("it is empty");
    };
    if prefix.contains(':') {
        return err("colons are reserved for recording rules");
    }
    if !(first.is_ascii_alphabetic() || first == '_') {
        return err("it must start with a letter or an underscore");
    }
    if !prefix
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '_')
    {
        return err("only ASCII letters, digits and underscores are allowed");
    }
    Ok(())
}

/// Checks a constant label name: `[a-zA-Z_][a-zA-Z0-9_]*`, not starting
/// with `__` (reserved for Prometheus' own use), and not one the exporter
/// writes itself.
pub(crate) fn check_label(label: &str) -> Result<(), ExportError> {
    let err = |reason| {
        Err(ExportError::InvalidLabel {
            label: label.to_string(),
            reason,
        })
    };
    let Some(first) = label.chars().next() else {
        return err("it is empty");
    };
    if !(first.is_ascii_alphabetic() || first == '_') {
        return err("it must start with a letter or an underscore");
    }
    if !label.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return err("only ASCII letters, digits and underscores are allowed");
    }
    if label.starts_with("__") {
        return err("names starting with `__` are reserved for Prometheus");
    }
    if RESERVED_LABELS.contains(&label) {
        return err("the exporter sets this label itself");
    }
    Ok(())
}

/// Checks histogram bucket bounds (seconds): finite, positive, strictly
/// increasing, at least one. The `+Inf` bucket is added by the exporter.
pub(crate) fn check_buckets(bounds: &[f64]) -> Result<(), ExportError> {
    let err = |reason| Err(ExportError::InvalidBuckets { reason });
    if bounds.is_empty() {
        return err("at least one bound is needed");
    }
    if bounds.iter().any(|b| !b.is_finite() || *b <= 0.0) {
        return err("every bound must be a finite number of seconds above zero");
    }
    if bounds.windows(2).any(|w| w[0] >= w[1]) {
        return err("bounds must be strictly increasing");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes() {
        for good in ["tripline", "my_app_tripline", "_x", "A9"] {
            assert_eq!(check_prefix(good), Ok(()), "{good}");
        }
        for bad in ["", "9lives", "my-app", "a:b", "é", "a b"] {
            assert!(check_prefix(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn labels() {
        for good in ["service", "_x", "zone2"] {
            assert_eq!(check_label(good), Ok(()), "{good}");
        }
        for bad in ["", "__name__", "2x", "a-b", "name", "le", "state", "a.b"] {
            let e = check_label(bad).unwrap_err();
            assert!(e.to_string().contains(&format!("`{bad}`")), "{e}");
        }
    }

    #[test]
    fn buckets() {
        assert_eq!(check_buckets(&[0.1, 1.0]), Ok(()));
        for bad in [
            &[][..],
            &[0.0],
            &[1.0, 1.0],
            &[2.0, 1.0],
            &[f64::NAN],
            &[f64::INFINITY],
        ] {
            assert!(check_buckets(bad).is_err(), "{bad:?}");
        }
    }
}

//! Building an [`Exporter`]: prefix, constant labels, compat names and
//! histogram buckets, validated once.

use std::sync::Arc;

use super::{Exporter, Shared};
use crate::error::{ExportError, check_buckets, check_label, check_prefix};
use crate::histogram::DEFAULT_BUCKETS;

/// Settings of an [`Exporter`]; [`build`](Self::build) refuses any name
/// Prometheus would reject, naming it.
///
/// ```
/// use tripline_prometheus::Exporter;
///
/// let exporter = Exporter::builder()
///     .prefix("shop_tripline")
///     .label("service", "checkout")
///     .compat(true)
///     .build()
///     .unwrap();
/// assert!(exporter.metric_names().contains(&"shop_tripline_breaker_state_code".to_string()));
/// assert!(Exporter::builder().label("__name__", "x").build().is_err());
/// ```
#[derive(Clone, Debug)]
pub struct ExporterBuilder {
    prefix: String,
    labels: Vec<(String, String)>,
    compat: bool,
    buckets: Vec<f64>,
}

impl Default for ExporterBuilder {
    fn default() -> Self {
        ExporterBuilder {
            prefix: "tripline".into(),
            labels: Vec::new(),
            compat: false,
            buckets: DEFAULT_BUCKETS.to_vec(),
        }
    }
}

impl ExporterBuilder {
    /// The metric name prefix (default `tripline`): names are
    /// `<prefix>_<family>`. The shipped alert rules and dashboard query
    /// `tripline_*`; change it only with them.
    pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self
    }

    /// Adds a label with a fixed value to every series (a service or zone
    /// name, when the scrape config does not add it). Its name must be a
    /// valid Prometheus label name and not one the exporter writes.
    pub fn label(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.labels.push((name.into(), value.into()));
        self
    }

    /// Also writes every breaker under the names existing dashboards query:
    /// `circuit_breaker_state`, `circuit_breaker_requests_total` and
    /// Resilience4j's Micrometer names (see [`names`](crate::names)).
    /// Off by default: it roughly doubles the series per breaker.
    pub fn compat(mut self, on: bool) -> Self {
        self.compat = on;
        self
    }

    /// The upper bounds, in seconds, of the call-duration histogram of
    /// [`TimedBreaker`](crate::TimedBreaker)s (default 1 ms to 10 s); the
    /// `+Inf` bucket is added.
    pub fn duration_buckets(mut self, bounds: impl IntoIterator<Item = f64>) -> Self {
        self.buckets = bounds.into_iter().collect();
        self
    }

    /// Validates the settings and builds the exporter.
    pub fn build(self) -> Result<Exporter, ExportError> {
        check_prefix(&self.prefix)?;
        for (i, (name, _)) in self.labels.iter().enumerate() {
            check_label(name)?;
            if self.labels[..i].iter().any(|(n, _)| n == name) {
                return Err(ExportError::InvalidLabel {
                    label: name.clone(),
                    reason: "it is given twice",
                });
            }
        }
        check_buckets(&self.buckets)?;
        Ok(Exporter {
            shared: Arc::new(Shared::new(
                self.prefix,
                self.labels,
                self.compat,
                self.buckets.into(),
            )),
        })
    }
}

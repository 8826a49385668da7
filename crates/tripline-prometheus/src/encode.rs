//! Writing families through prometheus-client's encoder.
//!
//! Every family is written as a descriptor (name, help, type) and then one
//! sample per label set. Label sets are a small fixed-size value on the
//! stack — the exporter's constant labels, then at most four of the
//! family's own — so a scrape allocates nothing per series; values are
//! escaped by prometheus-client's encoder.

mod breaker;
mod cluster;
mod compat;
mod policy;

pub(crate) use breaker::breakers;
pub(crate) use cluster::{clusters, failbacks};
pub(crate) use compat::compat;
pub(crate) use policy::{budgets, bulkheads, registries, retries, throttles};

use std::fmt;

use prometheus_client::encoding::{
    DescriptorEncoder, EncodeLabel, EncodeLabelSet, LabelSetEncoder, MetricEncoder, NoLabelSet,
};
use prometheus_client::metrics::MetricType;

use crate::names::{MetricFamily, MetricKind};

/// One series' labels: the constant ones, then up to four of its own.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Labels<'a> {
    constant: &'a [(String, String)],
    pairs: [(&'static str, &'a str); 4],
    len: usize,
}

impl<'a> Labels<'a> {
    /// Adds `key="value"`.
    pub(crate) fn with(mut self, key: &'static str, value: &'a str) -> Self {
        debug_assert!(self.len < 4, "at most four labels of a family's own");
        if let Some(slot) = self.pairs.get_mut(self.len) {
            *slot = (key, value);
            self.len += 1;
        }
        self
    }
}

impl EncodeLabelSet for Labels<'_> {
    fn encode(&self, encoder: &mut LabelSetEncoder) -> Result<(), fmt::Error> {
        for (k, v) in self.constant {
            (k.as_str(), v.as_str()).encode(encoder.encode_label())?;
        }
        for (k, v) in &self.pairs[..self.len] {
            (*k, *v).encode(encoder.encode_label())?;
        }
        Ok(())
    }
}

/// The encoder of one scrape, with the exporter's naming.
pub(crate) struct Out<'e, 'c> {
    pub(crate) encoder: DescriptorEncoder<'e>,
    pub(crate) prefix: &'c str,
    pub(crate) constant: &'c [(String, String)],
    /// Reused for family names.
    name: String,
}

impl<'e, 'c> Out<'e, 'c> {
    pub(crate) fn new(
        encoder: DescriptorEncoder<'e>,
        prefix: &'c str,
        constant: &'c [(String, String)],
    ) -> Self {
        Out {
            encoder,
            prefix,
            constant,
            name: String::new(),
        }
    }

    /// A label set with only the constant labels.
    pub(crate) fn labels(&self) -> Labels<'c> {
        Labels {
            constant: self.constant,
            pairs: [("", ""); 4],
            len: 0,
        }
    }

    /// Starts family `f` under the prefix.
    pub(crate) fn family(&mut self, f: &MetricFamily) -> Result<Family<'_>, fmt::Error> {
        self.start(f, true)
    }

    /// Starts compat family `f`, whose name is taken whole.
    pub(crate) fn compat_family(&mut self, f: &MetricFamily) -> Result<Family<'_>, fmt::Error> {
        self.start(f, false)
    }

    fn start(&mut self, f: &MetricFamily, prefixed: bool) -> Result<Family<'_>, fmt::Error> {
        self.name.clear();
        if prefixed {
            self.name.push_str(self.prefix);
            self.name.push('_');
        }
        self.name.push_str(f.name);
        let ty = match f.kind {
            MetricKind::Counter => MetricType::Counter,
            MetricKind::Gauge => MetricType::Gauge,
            MetricKind::Histogram => MetricType::Histogram,
        };
        let metric = self
            .encoder
            .encode_descriptor(&self.name, f.help, None, ty)?;
        Ok(Family { metric })
    }
}

/// A family being written.
pub(crate) struct Family<'a> {
    metric: MetricEncoder<'a>,
}

impl Family<'_> {
    /// A gauge sample.
    pub(crate) fn gauge(&mut self, labels: &Labels<'_>, value: f64) -> Result<(), fmt::Error> {
        self.metric.encode_family(labels)?.encode_gauge(&value)
    }

    /// A gauge sample of a count.
    pub(crate) fn count(&mut self, labels: &Labels<'_>, value: u64) -> Result<(), fmt::Error> {
        self.metric.encode_family(labels)?.encode_gauge(&value)
    }

    /// A counter sample (the encoder adds `_total`).
    pub(crate) fn counter(&mut self, labels: &Labels<'_>, value: u64) -> Result<(), fmt::Error> {
        self.metric
            .encode_family(labels)?
            .encode_counter::<NoLabelSet, _, u64>(&value, None)
    }

    /// A histogram sample: `buckets` as (upper bound, count), not
    /// cumulative, the last bound `+Inf`.
    pub(crate) fn histogram(
        &mut self,
        labels: &Labels<'_>,
        sum: f64,
        buckets: &[(f64, u64)],
    ) -> Result<(), fmt::Error> {
        let count = buckets.iter().map(|(_, c)| c).sum();
        self.metric
            .encode_family(labels)?
            .encode_histogram::<NoLabelSet>(sum, count, buckets, None)
    }
}

/// Something exported under a name (a label value).
pub(crate) trait Named {
    fn name(&self) -> &str;
}

impl<T> Named for (String, T) {
    fn name(&self) -> &str {
        &self.0
    }
}

impl<T, U> Named for (String, T, U) {
    fn name(&self) -> &str {
        &self.0
    }
}

/// Writes `fam` with one `write` per item, keyed by `label` = its name;
/// nothing at all (not even the descriptor) when there are no items.
pub(crate) fn each<T: Named>(
    out: &mut Out<'_, '_>,
    items: &[T],
    fam: &MetricFamily,
    label: &'static str,
    mut write: impl FnMut(&mut Family<'_>, Labels<'_>, &T) -> fmt::Result,
) -> fmt::Result {
    if items.is_empty() {
        return Ok(());
    }
    let base = out.labels();
    let mut family = out.family(fam)?;
    for item in items {
        write(&mut family, base.with(label, item.name()), item)?;
    }
    Ok(())
}

/// `1.0` or `0.0`.
pub(crate) fn flag(b: bool) -> f64 {
    if b { 1.0 } else { 0.0 }
}

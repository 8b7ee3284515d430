//! `budget_top_edge_latency_seconds`: a histogram read from each edge's latency sketch
//! ([`HistogramValues::of`]), its buckets ([`LATENCY_BUCKETS_MS`]) where the sketch is exact or
//! within its 1 %; [`SketchHistogram`] holds them, each count only raised.

use std::sync::Mutex;

use deadline_budget::analysis::Sketch;
use prometheus_client::encoding::{EncodeMetric, MetricEncoder, NoLabelSet};
use prometheus_client::metrics::{MetricType, TypedMetric};

use super::LATENCY_BUCKETS_MS;
use super::lock;

/// A histogram whose buckets are set from a sketch: cumulative counts per bound, each only
/// raised.
#[derive(Debug, Default)]
pub(super) struct SketchHistogram {
    values: Mutex<HistogramValues>,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub(super) struct HistogramValues {
    /// Values at or below each bound of [`LATENCY_BUCKETS_MS`], cumulative.
    at_or_below: [u64; LATENCY_BUCKETS_MS.len()],
    count: u64,
    sum_seconds: f64,
}

impl HistogramValues {
    pub(super) fn of(sketch: &Sketch) -> Self {
        let count = sketch.len();
        let mut at_or_below = [0; LATENCY_BUCKETS_MS.len()];
        for (slot, bound) in at_or_below.iter_mut().zip(LATENCY_BUCKETS_MS) {
            *slot = count.saturating_sub(sketch.count_above(bound));
        }
        let sum_ms: f64 = sketch.buckets().map(|(ms, n)| ms as f64 * n as f64).sum();
        HistogramValues {
            at_or_below,
            count,
            sum_seconds: sum_ms / 1000.0,
        }
    }

    pub(super) fn add(&mut self, other: &HistogramValues) {
        for (a, b) in self.at_or_below.iter_mut().zip(other.at_or_below) {
            *a += b;
        }
        self.count += other.count;
        self.sum_seconds += other.sum_seconds;
    }
}

impl SketchHistogram {
    pub(super) fn raise(&self, to: &HistogramValues) {
        let mut values = lock(&self.values);
        for (a, b) in values.at_or_below.iter_mut().zip(to.at_or_below) {
            *a = (*a).max(b);
        }
        values.count = values.count.max(to.count);
        values.sum_seconds = values.sum_seconds.max(to.sum_seconds);
    }
}

impl TypedMetric for SketchHistogram {
    const TYPE: MetricType = MetricType::Histogram;
}

impl EncodeMetric for SketchHistogram {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        let values = lock(&self.values).clone();
        // The encoder wants each bucket's own count; the +Inf bucket is the rest.
        let mut buckets = Vec::with_capacity(LATENCY_BUCKETS_MS.len() + 1);
        let mut below = 0;
        for (bound, at_or_below) in LATENCY_BUCKETS_MS.iter().zip(values.at_or_below) {
            buckets.push((*bound as f64 / 1000.0, at_or_below.saturating_sub(below)));
            below = below.max(at_or_below);
        }
        buckets.push((f64::INFINITY, values.count.saturating_sub(below)));
        encoder.encode_histogram::<NoLabelSet>(
            values.sum_seconds,
            values.count.max(below),
            &buckets,
            None,
        )
    }

    fn metric_type(&self) -> MetricType {
        Self::TYPE
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::metrics::Metrics;
    use crate::api::metrics::labels::EdgeLabels;

    #[test]
    fn a_histogram_reads_its_buckets_from_the_sketch() {
        let mut sketch = Sketch::new();
        for ms in [1, 3, 3, 40, 900, 70_000] {
            sketch.add(ms);
        }
        let values = HistogramValues::of(&sketch);
        assert_eq!(values.count, 6);
        assert_eq!(values.at_or_below[0], 1, "<= 1 ms");
        assert_eq!(values.at_or_below[2], 3, "<= 5 ms");
        assert_eq!(values.at_or_below[5], 4, "<= 50 ms");
        assert_eq!(values.at_or_below[9], 5, "<= 1 s");
        assert_eq!(values.at_or_below[14], 5, "<= 60 s");
        let metrics = Metrics::new(10);
        metrics
            .latency
            .get_or_create(&EdgeLabels {
                caller: "a".into(),
                callee: "b".into(),
            })
            .raise(&values);
        let (text, _) = metrics.encode(false);
        assert!(
            text.contains(
                "budget_top_edge_latency_seconds_bucket{caller=\"a\",callee=\"b\",le=\"0.05\"} 4\n"
            ),
            "{text}"
        );
        assert!(
            text.contains(
                "budget_top_edge_latency_seconds_bucket{caller=\"a\",callee=\"b\",le=\"+Inf\"} 6\n"
            ),
            "{text}"
        );
        assert!(
            text.contains("budget_top_edge_latency_seconds_count{caller=\"a\",callee=\"b\"} 6\n"),
            "{text}"
        );
    }
}

//! Latency percentiles that merge: a quantile sketch of millisecond values with a stated
//! relative error, that totals can fold a chain into, take it back out of (a chain judged again
//! replaces its contribution), add to another (reports merge), and write into the JSON report.
//!
//! Backed by an HdrHistogram (`hdrhistogram`, the HdrHistogram project's Rust port) with two
//! significant digits: every value is kept in a bucket no wider than 1/128 of it (values below
//! 256 ms exactly), so a percentile read back is within [`Sketch::RELATIVE_ERROR`] of the true
//! nearest-rank percentile. HDR rather than DDSketch: its buckets are counts that can be
//! subtracted exactly (DDSketch's Rust port has no removal), its bucket boundaries are fixed by
//! the configuration alone (two sketches always add bucket by bucket), and it needs no floats.
//!
//! In JSON a sketch is its non-empty buckets, `[[value, count], ...]` by ascending value, where
//! `value` is the bucket's highest value: readable by anyone, and recorded back into the same
//! buckets when a report is read to be merged.

use std::fmt;

use hdrhistogram::Histogram;
use serde::de::{self, Deserializer, SeqAccess, Visitor};
use serde::ser::{SerializeSeq as _, Serializer};
use serde::{Deserialize, Serialize};

/// Significant digits kept: two, so a bucket is at most 1/128 of its values wide.
const SIGNIFICANT_DIGITS: u8 = 2;

/// The largest value a sketch keeps apart; larger values are counted at this one (about 11.6
/// days in ms: no call's latency is longer that is worth telling apart).
pub const SKETCH_MAX_MS: i64 = 1 << 30;

/// A mergeable quantile sketch of millisecond values; see the module documentation.
#[derive(Clone, Default)]
pub struct Sketch {
    /// `None` until a value arrives: most sketches of a small report hold a few values, and an
    /// empty one costs nothing.
    histogram: Option<Box<Histogram<u64>>>,
    /// The smallest and largest values added, exactly (after a removal, bounds that still hold
    /// every value, perhaps loosely): a percentile is never read outside them, so a sketch of
    /// one distinct value (a budget every call forwards) reads it back exactly.
    bounds: Option<(i64, i64)>,
}

impl Sketch {
    /// The largest relative error of a percentile read back: 1 %.
    pub const RELATIVE_ERROR: f64 = 0.01;

    /// An empty sketch.
    pub fn new() -> Self {
        Sketch::default()
    }

    fn clamp(ms: i64) -> u64 {
        ms.clamp(0, SKETCH_MAX_MS) as u64
    }

    fn histogram(&mut self) -> &mut Histogram<u64> {
        self.histogram.get_or_insert_with(|| {
            // Bounds 1..=2 with auto-resize: the counts grow with the largest value seen.
            let mut h = Histogram::new(SIGNIFICANT_DIGITS)
                .unwrap_or_else(|_| unreachable!("two significant digits are valid"));
            h.auto(true);
            Box::new(h)
        })
    }

    /// Add one value (negative values count as 0).
    pub fn add(&mut self, ms: i64) {
        self.add_n(ms, 1);
    }

    /// Add `n` occurrences of one value.
    pub fn add_n(&mut self, ms: i64, n: u64) {
        if n == 0 {
            return;
        }
        let value = Self::clamp(ms);
        Self::record(self.histogram(), value, n);
        self.widen(value as i64, value as i64);
    }

    fn widen(&mut self, low: i64, high: i64) {
        self.bounds = Some(match self.bounds {
            Some((l, h)) => (l.min(low), h.max(high)),
            None => (low, high),
        });
    }

    /// Records `n` of `value`, growing the histogram to take it (`saturating_record_n` would
    /// clamp it to the current top instead).
    fn record(h: &mut Histogram<u64>, value: u64, n: u64) {
        if h.record_n(value, n).is_err() {
            h.saturating_record_n(value, n);
        }
    }

    /// Remove one occurrence of a value added before: the exact inverse of [`add`](Self::add)
    /// (nothing happens when no value of its bucket is there).
    pub fn remove(&mut self, ms: i64) {
        let Some(h) = self.histogram.as_mut() else {
            return;
        };
        let value = Self::clamp(ms);
        if h.count_at(value) == 0 {
            return;
        }
        let mut one = Histogram::new_from(h.as_ref());
        Self::record(&mut one, value, 1);
        // Cannot fail: `one` has `h`'s configuration and a count `h` holds.
        let _ = h.subtract(&one);
        if h.is_empty() {
            self.histogram = None;
            self.bounds = None;
        }
    }

    /// Add every value of another sketch.
    pub fn merge(&mut self, other: &Sketch) {
        let (Some(o), Some((low, high))) = (other.histogram.as_ref(), other.bounds) else {
            return;
        };
        for v in o.iter_recorded() {
            Self::record(self.histogram(), v.value_iterated_to(), v.count_at_value());
        }
        self.widen(low, high);
    }

    /// Take every value of another sketch out (the inverse of [`merge`](Self::merge)).
    pub fn unmerge(&mut self, other: &Sketch) {
        let (Some(h), Some(o)) = (self.histogram.as_mut(), other.histogram.as_ref()) else {
            return;
        };
        let mut taken = Histogram::new_from(h.as_ref());
        for v in o.iter_recorded() {
            let value = v.value_iterated_to();
            Self::record(&mut taken, value, v.count_at_value().min(h.count_at(value)));
        }
        let _ = h.subtract(&taken);
        if h.is_empty() {
            self.histogram = None;
            self.bounds = None;
        }
    }

    /// How many values it holds.
    pub fn len(&self) -> u64 {
        self.histogram.as_ref().map_or(0, |h| h.len())
    }

    /// Whether it holds no value.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The nearest-rank percentile `q` (0.0..=1.0), within [`Sketch::RELATIVE_ERROR`]: the
    /// highest value of the bucket holding the smallest value with at least `q` of the values at
    /// or below it. `None` when empty.
    pub fn percentile(&self, q: f64) -> Option<i64> {
        let h = self.histogram.as_ref().filter(|h| !h.is_empty())?;
        let (low, high) = self.bounds?;
        let q = q.clamp(0.0, 1.0);
        let value = h.value_at_quantile(q.max(f64::MIN_POSITIVE)) as i64;
        Some(value.clamp(low, high))
    }

    /// The median.
    pub fn p50(&self) -> Option<i64> {
        self.percentile(0.50)
    }

    /// The 99th percentile.
    pub fn p99(&self) -> Option<i64> {
        self.percentile(0.99)
    }

    /// The largest value.
    pub fn max(&self) -> Option<i64> {
        self.percentile(1.0)
    }

    /// How many values lie above `ms` (values in `ms`'s own bucket count as not above).
    pub fn count_above(&self, ms: i64) -> u64 {
        let Some(h) = self.histogram.as_ref() else {
            return 0;
        };
        let value = Self::clamp(ms);
        let at_or_below = h.count_between(0, value);
        h.len().saturating_sub(at_or_below)
    }

    /// The non-empty buckets, ascending: (the bucket's highest value, its count).
    pub fn buckets(&self) -> impl Iterator<Item = (i64, u64)> + '_ {
        self.histogram
            .iter()
            .flat_map(|h| h.iter_recorded())
            .map(|v| (v.value_iterated_to() as i64, v.count_at_value()))
    }
}

impl PartialEq for Sketch {
    fn eq(&self, other: &Self) -> bool {
        self.buckets().eq(other.buckets())
    }
}

impl Eq for Sketch {}

impl fmt::Debug for Sketch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.buckets()).finish()
    }
}

/// The buckets alone, as a JSON list.
struct Buckets<'a>(&'a Sketch);

impl Serialize for Buckets<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut seq = serializer.serialize_seq(None)?;
        for bucket in self.0.buckets() {
            seq.serialize_element(&bucket)?;
        }
        seq.end()
    }
}

impl Serialize for Sketch {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct as _;
        let mut out = serializer.serialize_struct("Sketch", 3)?;
        out.serialize_field("min", &self.bounds.map(|b| b.0))?;
        out.serialize_field("max", &self.bounds.map(|b| b.1))?;
        out.serialize_field("buckets", &Buckets(self))?;
        out.end()
    }
}

/// A sketch as JSON holds it.
#[derive(Deserialize)]
struct SketchJson {
    #[serde(default)]
    min: Option<i64>,
    #[serde(default)]
    max: Option<i64>,
    buckets: BucketList,
}

/// The buckets read back into a sketch (bounds from the buckets' own values).
struct BucketList(Sketch);

impl<'de> Deserialize<'de> for BucketList {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Buckets;
        impl<'de> Visitor<'de> for Buckets {
            type Value = Sketch;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a list of [value_ms, count] buckets")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Sketch, A::Error> {
                let mut sketch = Sketch::new();
                while let Some((value, count)) = seq.next_element::<(i64, u64)>()? {
                    if !(0..=SKETCH_MAX_MS).contains(&value) {
                        return Err(de::Error::custom(format!(
                            "bucket value {value} ms is outside 0..={SKETCH_MAX_MS}"
                        )));
                    }
                    sketch.add_n(value, count);
                }
                Ok(sketch)
            }
        }
        deserializer.deserialize_seq(Buckets).map(BucketList)
    }
}

impl<'de> Deserialize<'de> for Sketch {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let json = SketchJson::deserialize(deserializer)?;
        let mut sketch = json.buckets.0;
        if let (Some(min), Some(max), Some((low, high))) = (json.min, json.max, sketch.bounds) {
            // The exact bounds, when they agree with the buckets (a bucket's value is its
            // highest: the true minimum lies at or below the lowest bucket's value).
            if min <= max && min <= low && max <= high {
                sketch.bounds = Some((min, max));
            }
        }
        Ok(sketch)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The exact nearest-rank percentile of sorted values.
    fn exact(sorted: &[i64], q: f64) -> i64 {
        let rank = ((q * sorted.len() as f64).ceil() as usize).max(1);
        sorted[rank - 1]
    }

    #[test]
    fn small_values_are_exact_and_large_ones_within_one_percent() {
        let mut s = Sketch::new();
        let mut values: Vec<i64> = (0..1000).map(|i| (i * i * 37) % 90_000).collect();
        for &v in &values {
            s.add(v);
        }
        values.sort_unstable();
        for q in [0.0, 0.01, 0.1, 0.5, 0.9, 0.99, 0.999, 1.0] {
            let truth = exact(&values, q);
            let got = s.percentile(q).expect("values held");
            let err = (got - truth).abs() as f64 / truth.max(1) as f64;
            assert!(err <= Sketch::RELATIVE_ERROR, "q {q}: {got} vs {truth}");
            if truth < 256 {
                assert_eq!(got, truth, "q {q}");
            }
        }
        assert_eq!(s.len(), 1000);
    }

    #[test]
    fn remove_is_the_exact_inverse_of_add_and_merge_of_adding() {
        let mut a = Sketch::new();
        let mut b = Sketch::new();
        for v in [5, 967, 968, 3000, 40_000] {
            a.add(v);
        }
        for v in [7, 968, 120_000] {
            b.add(v);
        }
        let mut both = a.clone();
        both.merge(&b);
        assert_eq!(both.len(), 8);
        let mut again = Sketch::new();
        for v in [5, 967, 968, 3000, 40_000, 7, 968, 120_000] {
            again.add(v);
        }
        assert_eq!(both, again);
        for v in [7, 968, 120_000] {
            both.remove(v);
        }
        assert_eq!(both, a);
        both.unmerge(&a);
        assert!(both.is_empty());
        assert_eq!(both.p50(), None);
    }

    #[test]
    fn json_round_trip_keeps_every_bucket() {
        let mut s = Sketch::new();
        for v in 0..5000 {
            s.add(v * 3);
        }
        let json = serde_json::to_string(&s).expect("serialises");
        let back: Sketch = serde_json::from_str(&json).expect("reads back");
        assert_eq!(back, s);
        assert_eq!(back.p99(), s.p99());
        assert!(serde_json::from_str::<Sketch>("[[-1, 2]]").is_err());
    }

    #[test]
    fn count_above_counts_values_past_a_bucket() {
        let mut s = Sketch::new();
        for v in [10, 20, 30, 40] {
            s.add(v);
        }
        assert_eq!(s.count_above(25), 2);
        assert_eq!(s.count_above(40), 0);
        assert_eq!(s.count_above(0), 4);
    }
}

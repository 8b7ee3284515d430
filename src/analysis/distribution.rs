//! An exact distribution of millisecond values that supports removal: the per-edge figures
//! that take few distinct values (budgets, declared timeouts, attempts), kept as a count per
//! distinct value so that a chain taken back out of the totals leaves them exactly as before.

use std::collections::BTreeMap;

/// An exact distribution of millisecond values that supports removal. In JSON, its distinct
/// values ascending: `[[value_ms, count], ...]`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Distribution {
    counts: BTreeMap<i64, u64>,
    len: u64,
}

impl Distribution {
    /// Add one value.
    pub fn add(&mut self, value: i64) {
        *self.counts.entry(value).or_insert(0) += 1;
        self.len += 1;
    }

    /// Remove one occurrence of `value` (nothing happens if it is absent).
    pub fn remove(&mut self, value: i64) {
        if let Some(n) = self.counts.get_mut(&value) {
            *n -= 1;
            self.len -= 1;
            if *n == 0 {
                self.counts.remove(&value);
            }
        }
    }

    /// How many values it holds.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether it holds no value.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The nearest-rank percentile `q` (0.0..=1.0): the smallest value with at least `q` of the
    /// values at or below it. `None` when empty.
    pub fn percentile(&self, q: f64) -> Option<i64> {
        if self.len == 0 {
            return None;
        }
        let rank = ((q.clamp(0.0, 1.0) * self.len as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (&v, &n) in &self.counts {
            seen += n;
            if seen >= rank {
                return Some(v);
            }
        }
        self.counts.keys().next_back().copied()
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
        self.counts.keys().next_back().copied()
    }

    /// The value that at least `min_group` values lie near (within 2 % or 5 ms of each other,
    /// whichever is larger): the median of the largest such group, the larger group's on a tie.
    /// How a timeout nobody declared is read from the calls that ran into it.
    pub fn cluster(&self, min_group: u64) -> Option<i64> {
        let values: Vec<(i64, u64)> = self.counts.iter().map(|(&v, &n)| (v, n)).collect();
        let mut best: Option<(u64, usize, usize)> = None;
        let (mut end, mut in_window) = (0usize, 0u64);
        for start in 0..values.len() {
            if end < start {
                end = start;
                in_window = 0;
            }
            let band = (values[start].0.saturating_abs() / 50).max(5);
            let limit = values[start].0.saturating_add(band);
            while end < values.len() && values[end].0 <= limit {
                in_window += values[end].1;
                end += 1;
            }
            if best.is_none_or(|(n, _, _)| in_window >= n) {
                best = Some((in_window, start, end));
            }
            in_window -= values[start].1;
        }
        let (n, a, z) = best?;
        if n < min_group {
            return None;
        }
        let rank = n.div_ceil(2);
        let mut seen = 0;
        for &(v, c) in &values[a..z] {
            seen += c;
            if seen >= rank {
                return Some(v);
            }
        }
        None
    }
}

impl Distribution {
    /// Add every value of another distribution.
    pub fn merge(&mut self, other: &Distribution) {
        for (&v, &n) in &other.counts {
            *self.counts.entry(v).or_insert(0) += n;
            self.len += n;
        }
    }
}

impl Distribution {
    /// Its distinct values ascending, with their counts.
    pub fn values(&self) -> impl Iterator<Item = (i64, u64)> + '_ {
        self.counts.iter().map(|(&v, &n)| (v, n))
    }

    /// How many values lie below `ms`.
    pub fn count_below(&self, ms: i64) -> u64 {
        self.counts.range(..ms).map(|(_, &n)| n).sum()
    }
}

impl serde::Serialize for Distribution {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.values())
    }
}

impl<'de> serde::Deserialize<'de> for Distribution {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let pairs = Vec::<(i64, u64)>::deserialize(d)?;
        let mut out = Distribution::default();
        for (v, n) in pairs {
            *out.counts.entry(v).or_insert(0) += n;
            out.len += n;
        }
        Ok(out)
    }
}

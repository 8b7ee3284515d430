//! `--max-series`: each family gives a series of their own to at most that many label sets, the
//! first seen ([`Admitted`]); the figures of the sets past it are summed under `other`
//! ([`bounded`], [`Summed`]).

use std::collections::HashSet;
use std::sync::Mutex;

use super::counters::Traced;
use super::exemplars::latest;
use super::histogram::HistogramValues;
use super::labels::Labels;
use super::lock;
use crate::store::exemplars::{Exemplar, LATENCY_BUCKETS};

/// The label sets a family has given a series of their own: at most `max`, the first seen.
#[derive(Debug)]
pub(super) struct Admitted<L> {
    pub(super) sets: HashSet<L>,
    max: usize,
}

impl<L: Labels> Admitted<L> {
    pub(super) fn new(max: usize) -> Self {
        Admitted {
            sets: HashSet::new(),
            max,
        }
    }

    /// The labels a figure of `labels` is recorded under: its own, or `other`'s past `max`.
    pub(super) fn place(&mut self, labels: L) -> Option<L> {
        if self.sets.contains(&labels) {
            return Some(labels);
        }
        if self.sets.len() < self.max {
            self.sets.insert(labels.clone());
            return Some(labels);
        }
        None
    }
}

/// Records each `(labels, value)` with `record` under its own labels while the family has room
/// (see [`Admitted`]), and the sum of the rest under `other`; returns how many sets went to
/// `other`.
pub(super) fn bounded<L: Labels, V: Summed>(
    admitted: &Mutex<Admitted<L>>,
    figures: impl Iterator<Item = (L, V)>,
    record: impl Fn(&L, V),
) -> u64 {
    let mut admitted = lock(admitted);
    let mut other: Option<V> = None;
    let mut overflow = 0;
    for (labels, value) in figures {
        match admitted.place(labels) {
            Some(labels) => record(&labels, value),
            None => {
                overflow += 1;
                other.get_or_insert_with(V::default).add(&value);
            }
        }
    }
    drop(admitted);
    if let Some(value) = other {
        record(&L::other(), value);
    }
    overflow
}

/// Values that add up when sets share `other`.
pub(super) trait Summed: Default {
    fn add(&mut self, other: &Self);
}

impl<V: Summed + Default> Summed for Traced<V> {
    fn add(&mut self, other: &Self) {
        self.value.add(&other.value);
        self.exemplar = latest(self.exemplar, other.exemplar);
    }
}

/// A histogram's figure and its buckets' exemplars: `other`'s are the latest of its sets.
impl Summed
    for (
        Traced<HistogramValues>,
        Option<[Option<Exemplar>; LATENCY_BUCKETS]>,
    )
{
    fn add(&mut self, other: &Self) {
        self.0.add(&other.0);
        if let Some(theirs) = &other.1 {
            let ours = self.1.get_or_insert([None; LATENCY_BUCKETS]);
            for (slot, new) in ours.iter_mut().zip(theirs) {
                *slot = latest(*slot, *new);
            }
        }
    }
}

impl Summed for u64 {
    fn add(&mut self, other: &Self) {
        *self += other;
    }
}

impl Summed for f64 {
    fn add(&mut self, other: &Self) {
        *self += other;
    }
}

impl Summed for HistogramValues {
    fn add(&mut self, other: &Self) {
        HistogramValues::add(self, other);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::metrics::labels::EdgeLabels;

    #[test]
    fn sets_past_the_bound_go_to_other() {
        let admitted = Mutex::new(Admitted::new(2));
        let record = Mutex::new(Vec::new());
        let sets = (0..5).map(|i| {
            (
                EdgeLabels {
                    caller: format!("a{i}"),
                    callee: "b".into(),
                },
                1u64 + i,
            )
        });
        let overflow = bounded(&admitted, sets, |l, v| {
            record.lock().unwrap().push((l.caller.clone(), v))
        });
        assert_eq!(overflow, 3);
        assert_eq!(
            record.into_inner().unwrap(),
            vec![
                ("a0".into(), 1),
                ("a1".into(), 2),
                ("other".into(), 3 + 4 + 5)
            ]
        );
    }
}

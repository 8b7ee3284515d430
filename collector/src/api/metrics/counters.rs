//! Counters raised to absolute totals: a counter only grows, so each is raised to its figure and
//! never lowered ([`raise`], [`raise_each`]); one with an exemplar takes the rise's last part as
//! the exemplar's own ([`raise_traced`]). [`SecondsCounter`]: a counter of seconds with one.

use std::hash::Hash;
use std::ops::Sub;
use std::sync::atomic::AtomicU64;

use prometheus_client::encoding::{EncodeMetric, MetricEncoder};
use prometheus_client::metrics::counter::{Atomic, Counter};
use prometheus_client::metrics::exemplar::CounterWithExemplar;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::{MetricType, TypedMetric};

use super::exemplars::exemplar_parts;
use super::labels::TraceLabel;
use crate::store::exemplars::Exemplar;

/// Raises a counter to `value` (never lowers it).
pub(super) fn raise(counter: &Counter, value: u64) {
    let current = counter.get();
    if value > current {
        counter.inc_by(value - current);
    }
}

/// Raises each counter of `family` to its figure: `(name, value)`, labelled `label(name)`.
pub(super) fn raise_each<L: Clone + Hash + Eq>(
    family: &Family<L, Counter>,
    label: impl Fn(&'static str) -> L,
    figures: impl IntoIterator<Item = (&'static str, u64)>,
) {
    for (name, value) in figures {
        raise(&family.get_or_create(&label(name)), value);
    }
}

/// A figure and the chain behind its latest rise, when known.
#[derive(Clone, Debug, Default)]
pub(super) struct Traced<V> {
    pub(super) value: V,
    pub(super) exemplar: Option<Exemplar>,
}

/// What a counter with an exemplar counts: findings, or seconds.
pub(super) trait Counted: Copy + PartialOrd + Sub<Output = Self> {
    /// The part of a rise of `rise` that is the exemplar's chain's own (at most the rise).
    fn own(exemplar: &Exemplar, rise: Self) -> Self;
}

impl Counted for u64 {
    fn own(exemplar: &Exemplar, rise: Self) -> Self {
        (exemplar.value as u64).clamp(1, rise)
    }
}

/// Seconds: the exemplar's value is its chain's ms.
impl Counted for f64 {
    fn own(exemplar: &Exemplar, rise: Self) -> Self {
        (exemplar.value / 1000.0).min(rise)
    }
}

/// Raises a counter with an exemplar to `to`: the rise's last part is the exemplar's own (what
/// its chain added, at most the rise), the rest before it, so the exemplar shows the chain
/// behind the rise with its own value.
pub(super) fn raise_traced<N: Counted, A: Atomic<N>>(
    counter: &CounterWithExemplar<TraceLabel, N, A>,
    to: &Traced<N>,
) {
    let current = counter.get().0;
    if to.value <= current {
        return;
    }
    let rise = to.value - current;
    match &to.exemplar {
        Some(e) => {
            let own = N::own(e, rise);
            if rise > own {
                counter.inc_by(rise - own, None, None);
            }
            let (labels, at) = exemplar_parts(e);
            counter.inc_by(own, Some(labels), at);
        }
        None => {
            counter.inc_by(rise, None, None);
        }
    }
}

/// `budget_top_wasted_seconds_total`: a counter of seconds with an exemplar (prometheus-client
/// types only its whole-number one).
#[derive(Debug, Default)]
pub(super) struct SecondsCounter(pub(super) CounterWithExemplar<TraceLabel, f64, AtomicU64>);

impl TypedMetric for SecondsCounter {
    const TYPE: MetricType = MetricType::Counter;
}

impl EncodeMetric for SecondsCounter {
    fn encode(&self, encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        self.0.encode(encoder)
    }

    fn metric_type(&self) -> MetricType {
        Self::TYPE
    }
}

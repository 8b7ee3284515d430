//! The label sets of the §7 families, and the one each takes past `--max-series`: every label
//! `other` ([`Labels::other`]).

use std::hash::Hash;

use prometheus_client::encoding::EncodeLabelSet;

/// The label value every label of a set past `--max-series` takes.
pub const OTHER: &str = "other";

/// An exemplar's labels: the trace of the chain behind it.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct TraceLabel {
    pub(super) trace_id: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct ResultLabel {
    pub(super) result: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct ReasonLabel {
    pub(super) reason: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct OutcomeLabel {
    pub(super) outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct BudgetLabel {
    pub(super) budget: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct FindingLabels {
    pub(super) kind: String,
    pub(super) severity: String,
    pub(super) service: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct EdgeLabels {
    pub(super) caller: String,
    pub(super) callee: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, PartialOrd, Ord, EncodeLabelSet)]
pub(super) struct TimeoutLabels {
    pub(super) caller: String,
    pub(super) callee: String,
    pub(super) inferred: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct FamilyLabel {
    pub(super) family: &'static str,
}

/// A set of labels that can stand for every set past `--max-series`.
pub(super) trait Labels: Clone + Hash + Eq {
    /// The same labels, each `other`.
    fn other() -> Self;
}

impl Labels for FindingLabels {
    fn other() -> Self {
        FindingLabels {
            kind: OTHER.into(),
            severity: OTHER.into(),
            service: OTHER.into(),
        }
    }
}

impl Labels for EdgeLabels {
    fn other() -> Self {
        EdgeLabels {
            caller: OTHER.into(),
            callee: OTHER.into(),
        }
    }
}

impl Labels for TimeoutLabels {
    fn other() -> Self {
        TimeoutLabels {
            caller: OTHER.into(),
            callee: OTHER.into(),
            inferred: OTHER.into(),
        }
    }
}

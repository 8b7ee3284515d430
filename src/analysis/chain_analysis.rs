//! What the analysis of one chain yields: a summary for the chain list, rows for a waterfall,
//! the findings, and the edge samples the per-edge aggregates are fed with.

use std::sync::Arc;

use serde::Serialize;

use super::chain::Link;
use super::edges::EdgeSample;
use super::model::{
    BudgetSource, Finding, FindingKind, Severity, SeverityCounts, Span, SpanId, TraceId,
};

/// The knobs of the rules of `CONVENTIONS.md` section 3. `Options::default()` is the contract.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Options {
    /// `tol`: slack for comparing budgets and times, in ms. Default 5.
    pub tolerance_ms: i64,
    /// Extra slack when a hop's budget came from `x-request-deadline`, in ms. Default 1000: an
    /// absolute deadline carries the difference between two hosts' clocks (and fractional-second
    /// rounding), and differences under the `clock_skew` threshold are blamed on clocks, not on
    /// a reset. (`grpc-timeout` gets 1 ms for its unit rounding; the other carriers are exact.)
    pub absolute_deadline_tolerance_ms: i64,
    /// `clock_skew`: how far an absolute deadline may differ from the relative view, in ms.
    /// Default 1000.
    pub skew_threshold_ms: i64,
    /// `clock_skew`: how far a child may start before its parent, in ms. Default 1.
    pub parent_start_tolerance_ms: i64,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            tolerance_ms: 5,
            absolute_deadline_tolerance_ms: 1000,
            skew_threshold_ms: 1000,
            parent_start_tolerance_ms: 1,
        }
    }
}

impl Options {
    /// `tol` for a budget that arrived through `source`: the base tolerance plus the carrier's
    /// rounding.
    pub fn tolerance_for(&self, source: Option<BudgetSource>) -> i64 {
        self.tolerance_ms
            + match source {
                Some(s) if s.is_absolute() => self.absolute_deadline_tolerance_ms,
                Some(BudgetSource::GrpcTimeout) => 1,
                Some(BudgetSource::Header(form)) => form.rounding_ms(),
                _ => 0,
            }
    }
}

/// A set of [`FindingKind`]s (one bit each): which findings sit on a row, without allocating.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct KindSet(u16);

// One bit per kind.
const _: () = assert!(FindingKind::COUNT <= 16);

impl KindSet {
    /// Add a kind.
    pub fn insert(&mut self, kind: FindingKind) {
        self.0 |= 1 << kind as u16;
    }
    /// Whether the set holds `kind`.
    pub fn contains(self, kind: FindingKind) -> bool {
        self.0 & (1 << kind as u16) != 0
    }
    /// Whether the set is empty.
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }
    /// The kinds in the set, in contract order.
    pub fn iter(self) -> impl Iterator<Item = FindingKind> {
        FindingKind::ALL
            .into_iter()
            .filter(move |&k| self.contains(k))
    }
    /// The worst severity in the set.
    pub fn worst(self) -> Option<Severity> {
        self.iter().map(FindingKind::severity).max()
    }
}

/// One line of the waterfall: one span, in depth-first order (children by start time). The
/// span itself stays in the chain: `chain.span(row.span as usize)` gives it (the analysis of a
/// chain is held beside the chain, and sharing the spans keeps a row at 20 bytes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Row {
    /// The span's position in the chain, in arrival order ([`Chain::span`](super::Chain::span)).
    pub span: u32,
    /// Depth in the tree; roots are 0.
    pub depth: u32,
    /// The row of its parent, when it hangs under one.
    pub parent_row: Option<u32>,
    /// How it hangs (root, child, orphan, cut cycle).
    pub link: Link,
    /// The finding kinds on this span.
    pub findings: KindSet,
    /// A hop's dead work, ms: the last `dead_ms` of its work were done after everyone above it
    /// had stopped waiting (`CONVENTIONS.md` section 3). Zero for other spans.
    pub dead_ms: u32,
    /// The part of this span's own bar (its work, for a hop) that lies after its hop's give-up
    /// time, ms, when that hop has dead work: what a waterfall paints as work for nobody.
    pub late_ms: u32,
}

impl Row {
    /// The worst severity of the findings on this span.
    pub fn worst(&self) -> Option<Severity> {
        self.findings.worst()
    }
}

/// The chain at a glance, for the chain list.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ChainSummary {
    /// The service of the root span (the earliest-starting root).
    pub root_service: Arc<str>,
    /// The name of the root span.
    pub root_name: Arc<str>,
    /// Earliest span start, Unix ns.
    pub start_unix_nano: u64,
    /// Latest span end, Unix ns.
    pub end_unix_nano: u64,
    /// `end - start` in ms.
    pub duration_ms: i64,
    /// The budget at the edge: what the first hop received, or its default.
    pub edge_budget_ms: Option<i64>,
    /// Where that budget came from.
    pub edge_budget_source: Option<BudgetSource>,
    /// Distinct spans.
    pub spans: u32,
    /// Hops (SERVER/CONSUMER spans).
    pub hops: u32,
    /// Hops whose budget is known: received, defaulted, or read from a captured carrier.
    pub hops_with_budget: u32,
    /// Spans whose parent is not in the chain.
    pub orphans: u32,
    /// Parent loops cut (a self-parent counts as one).
    pub cycles_cut: u32,
    /// Findings by severity.
    pub findings: SeverityCounts,
    /// The worst severity found, if any finding.
    pub worst: Option<Severity>,
    /// The chain's wasted ms: the sum of its hops' dead work (service time spent for nobody).
    pub wasted_ms: i64,
    /// How the request ended for its user, read from the root hop.
    pub outcome: ChainOutcome,
}

/// How a request ended for its user (`CONVENTIONS.md` section 3, "Chain outcome"), read from
/// the root hop.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ChainOutcome {
    /// The root hop has not arrived (or not ended): nothing is final yet.
    #[default]
    InFlight,
    /// Answered.
    Ok,
    /// 504, gRPC `DEADLINE_EXCEEDED`, or `budget.outcome = "deadline_exceeded"`.
    DeadlineExceeded,
    /// 503, gRPC `RESOURCE_EXHAUSTED`, `shed_full` or `shed_expired`.
    Shed,
    /// The caller went away (gRPC `CANCELLED`).
    Cancelled,
    /// Any other failure.
    Error,
}

impl ChainOutcome {
    /// Every outcome, in the report's order.
    pub const ALL: [ChainOutcome; 6] = [
        ChainOutcome::InFlight,
        ChainOutcome::Ok,
        ChainOutcome::DeadlineExceeded,
        ChainOutcome::Shed,
        ChainOutcome::Cancelled,
        ChainOutcome::Error,
    ];

    /// The contract's name (`summary.outcomes` keys).
    pub fn as_str(self) -> &'static str {
        match self {
            ChainOutcome::InFlight => "in_flight",
            ChainOutcome::Ok => "ok",
            ChainOutcome::DeadlineExceeded => "deadline_exceeded",
            ChainOutcome::Shed => "shed",
            ChainOutcome::Cancelled => "cancelled",
            ChainOutcome::Error => "error",
        }
    }

    /// Whether the user got no answer they could use.
    pub fn failed(self) -> bool {
        !matches!(self, ChainOutcome::InFlight | ChainOutcome::Ok)
    }
}

impl std::fmt::Display for ChainOutcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl ChainSummary {
    /// When `span` started, in ms after the chain's start.
    pub fn offset_ms(&self, span: &Span) -> i64 {
        (span.start_unix_nano as i128 - self.start_unix_nano as i128).div_euclid(1_000_000) as i64
    }
}

/// The analysis of one chain; see [`Chain::analyse`](super::Chain::analyse).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChainAnalysis {
    /// The trace.
    pub trace_id: TraceId,
    /// The chain at a glance.
    pub summary: ChainSummary,
    /// Every span, depth-first.
    pub rows: Vec<Row>,
    /// Every finding, ordered by span start, then span id, then kind.
    pub findings: Vec<Finding>,
    /// One sample per call that reached a callee hop, for [`EdgeStats`](super::EdgeStats).
    pub edges: Vec<EdgeSample>,
    /// The services of hops whose budget is not known (coverage), sorted, once each.
    pub services_without_budget: Vec<Arc<str>>,
}

impl ChainAnalysis {
    /// The findings about one span.
    pub fn findings_on(&self, span_id: SpanId) -> impl Iterator<Item = &Finding> {
        self.findings.iter().filter(move |f| f.span_id == span_id)
    }

    /// Whether any finding reaches `severity`.
    pub fn has_at_least(&self, severity: Severity) -> bool {
        self.summary.worst.is_some_and(|w| w >= severity)
    }
}

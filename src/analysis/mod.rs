//! The pure analysis: spans in, request chains, findings and per-edge aggregates out. It knows
//! neither tokio nor ratatui, so the collector, the check command and the tests all get the
//! same answer from the same spans and options.
//!
//! A [`Chain`] collects the [`Span`]s of one trace in any order; [`Chain::analyse`] applies the
//! rules of `CONVENTIONS.md` section 3: a [`ChainAnalysis`] (summary, rows, findings, edge
//! samples). [`EdgeStats`] sums edge samples over chains; [`Report`] is section 4's report.
//!
//! ```
//! use std::collections::HashMap;
//! use deadline_budget::analysis::{Chain, EdgeStats, Options, Report, Span};
//! # fn spans() -> Vec<Span> { Vec::new() }
//! let options = Options::default();
//! let mut chains = HashMap::new();
//! for span in spans() {
//!     chains.entry(span.trace_id).or_insert_with(|| Chain::new(span.trace_id)).insert(span);
//! }
//! let analyses: Vec<_> = chains.values().map(|c| c.analyse(&options)).collect();
//! let mut edges = EdgeStats::new(); // the screen's per-edge table
//! for a in &analyses {
//!     edges.add(a);
//! }
//! let report = Report::from_analyses(&analyses); // section 4, for `budget-top check`
//! assert_eq!(report.summary.traces, 0);
//! ```

mod advice;
mod cause;
mod chain;
mod chain_analysis;
mod clocks;
mod context;
mod distribution;
mod edges;
mod finding_kind;
mod finding_list;
mod model;
mod report;
mod rules;
mod sketch;
mod totals;

pub use advice::{ADVICE_QUANTILE, MIN_ADVICE_CALLS, round_up_two_figures};
pub use cause::{Cause, cause_named, failure_cause};
pub use chain::{Chain, Inserted, Link, chains_from_spans};
pub use chain_analysis::{
    CALLEE_GRACE_NS, ChainAnalysis, ChainSummary, EdgeSample, Options, RootLeft, Row, WaitSlack,
};
pub use context::{LostContext, lost_contexts};
pub use distribution::Distribution;
pub use edges::{
    EdgeAggregate, EdgeStats, EdgeTimeouts, MIN_INFERRED_CALLS, MIN_OVERSIZED_CALLS,
    OVERSIZED_FACTOR,
};
pub use finding_kind::{FindingKind, KindCounts, KindSet, Severity, SeverityCounts};
pub use finding_list::{DEFAULT_MAX_FINDINGS, FindingList};
pub use model::*;
pub use sketch::{SKETCH_MAX_MS, Sketch};
pub use totals::{HopSample, MAX_TOTALS_KEYS, OTHER, ServiceTotals, Totals};

#[cfg(test)]
mod tests;

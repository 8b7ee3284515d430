//! The pure analysis: spans in, request chains, findings and per-edge aggregates out.
//!
//! Knows neither tokio nor ratatui: it is a function of the spans it is given (and of the
//! options), so the collector, the check command and the tests all get the same answer.
//!
//! Data enters as [`Span`]s: a [`Chain`] collects the spans of one trace in any order
//! ([`Chain::insert`]); [`Chain::analyse`] applies the rules of `CONVENTIONS.md` section 3 and
//! gives a [`ChainAnalysis`] (summary, waterfall rows, findings, edge samples). An [`EdgeStats`]
//! sums edge samples over chains (and takes them back out), and [`Report::from_analyses`] gives
//! the JSON report of section 4.
//!
//! ```
//! use deadline_budget::analysis::{Chain, Options, Report};
//! # fn spans() -> Vec<deadline_budget::analysis::Span> { Vec::new() }
//! let report = Report::from_spans(spans(), &Options::default());
//! assert_eq!(report.summary.traces, 0);
//! ```

mod chain;
mod chain_analysis;
mod edges;
mod model;
mod report;
mod rules;

pub use chain::{Chain, Inserted, Link, chains_from_spans};
pub use chain_analysis::{ChainAnalysis, ChainSummary, KindSet, Options, Row};
pub use edges::{Distribution, EdgeAggregate, EdgeSample, EdgeStats, KindCounts};
pub use model::*;

#[cfg(test)]
mod tests;

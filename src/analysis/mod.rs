//! The pure analysis: spans in, request chains, findings and per-edge aggregates out.
//!
//! Knows neither tokio nor ratatui: it is a function of the spans it is given (and of the
//! options), so the collector, the check command and the tests all get the same answer.

mod model;

pub use model::*;

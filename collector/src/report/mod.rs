//! The reports: [`json`] for scripts and merging (`check`, `merge`, `serve`'s `--report` and
//! `/api/report`), [`text`] for a terminal or a CI log, [`html`] for the people who were not
//! there. They read the analysed store and the library's `deadline_budget::analysis::Report`
//! and judge nothing; the text's and the page's words, glyphs and numbers come from
//! [`crate::view_model`], as the screen's do. What every report says beside the analysis (where
//! the spans came from, the link to a chain's trace) is one [`Context`].

pub mod html;
pub mod json;
pub mod text;

use crate::ingest::IngestCounts;
use crate::jaeger;
use crate::view_model::trace_url::TraceUrl;

/// What a report says beside the analysis.
#[derive(Clone, Copy, Debug, Default)]
pub struct Context<'a> {
    /// The receivers' counters, when the spans were received.
    pub ingest: Option<&'a IngestCounts>,
    /// What was asked of Jaeger and what came back, when the spans were read from it.
    pub source: Option<&'a jaeger::Summary>,
    /// The link from a chain to its trace (`--trace-url`, or Jaeger's own).
    pub links: Option<&'a TraceUrl>,
}

//! The JSON report of `CONVENTIONS.md` section 4, built as one value and written once.
//!
//! The library's [`Report`] (summary, findings, edges), and beside it what the run counted:
//! the `ingest` object (the receivers' counts when listening, a file's last line cut short,
//! the store's chains let go and spans after their verdict), the `source` object (what was
//! asked of Jaeger and what came back), each finding's `trace_url`, and the forwarding
//! stage's `forward` object. `check`, `merge`, `serve`'s `--report` and `/api/report` all
//! write it here.

use anyhow::Context as _;
use deadline_budget::analysis::{Report, TraceId};
use serde_json::{Map, Value};

use super::Context;
use crate::store::StoreCounters;

/// What only the JSON report says, beside the analysis and its [`Context`].
#[derive(Clone, Debug, Default)]
pub struct Additions<'a> {
    /// A file's last line, cut short and skipped: `ingest.lines_torn` (when above 0).
    pub lines_torn: u64,
    /// The store's counts: `ingest.spans_after_verdict` and `ingest.chains_evicted`. `check`
    /// gives them when a chain was let go or a span came after its verdict; `serve` always.
    pub store: Option<&'a StoreCounters>,
    /// The `forward` object, when forwarding (`serve --forward`).
    pub forward: Option<Value>,
}

/// The report as pretty-printed JSON, ending with a newline.
pub fn render(
    report: &Report,
    context: &Context<'_>,
    additions: Additions<'_>,
) -> anyhow::Result<String> {
    let mut value = serde_json::to_value(report).context("cannot serialise the report")?;
    if let Some(object) = value.as_object_mut() {
        let ingest = ingest(context, &additions)?;
        if !ingest.is_empty() {
            object.insert("ingest".into(), Value::Object(ingest));
        }
        if let Some(source) = context.source {
            object.insert("source".into(), serde_json::to_value(source)?);
        }
        if let Some(links) = context.links
            && let Some(findings) = object.get_mut("findings").and_then(|f| f.as_array_mut())
        {
            for (finding, f) in findings.iter_mut().zip(&report.findings) {
                if let Some(finding) = finding.as_object_mut()
                    && f.trace_id != TraceId::default()
                {
                    finding.insert("trace_url".into(), links.link(f.trace_id).into());
                }
            }
        }
        if let Some(forward) = additions.forward {
            object.insert("forward".into(), forward);
        }
    }
    let mut out = serde_json::to_string_pretty(&value)?;
    out.push('\n');
    Ok(out)
}

/// The `ingest` object: the receivers' counts, the torn line, the store's counts.
fn ingest(context: &Context<'_>, additions: &Additions<'_>) -> anyhow::Result<Map<String, Value>> {
    let mut ingest = match context.ingest {
        Some(counts) => match serde_json::to_value(counts)? {
            Value::Object(counts) => counts,
            _ => Map::new(),
        },
        None => Map::new(),
    };
    if additions.lines_torn > 0 {
        ingest.insert("lines_torn".into(), additions.lines_torn.into());
    }
    if let Some(counters) = additions.store {
        ingest.insert(
            "spans_after_verdict".into(),
            counters.spans_after_verdict.into(),
        );
        ingest.insert("chains_evicted".into(), counters.chains_evicted.into());
    }
    Ok(ingest)
}

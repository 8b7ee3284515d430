//! `GET /api/chains?kind=K&limit=N`: the newest judged chains (by first arrival) with a
//! finding of that kind (any finding without one), one chain a line as OTLP/JSON: what
//! `check --input` and `replay` read, written as the screen's "export chain" writes a chain
//! ([`crate::chain_export`]): the raw attributes when the receivers kept them, else the
//! contract's attributes from each span's budget facts, so `check` finds what `serve` found.
//! With `--trace-url`, each line also carries the chain's link as `trace_url`, beside
//! `resourceSpans` (a field OTLP/JSON readers, `check --input` among them, pass over).

use deadline_budget::analysis::FindingKind;

use crate::chain_export::chain_request;
use crate::store::Store;
use crate::view_model::trace_url::TraceUrl;

/// At most `limit` lines, newest chain first, each with its `trace_url` when `links`.
pub fn newest(
    store: &Store,
    kind: Option<FindingKind>,
    limit: usize,
    links: Option<&TraceUrl>,
) -> String {
    let mut out = Vec::new();
    let mut written = 0;
    for entry in store.chains() {
        if written == limit {
            break;
        }
        if entry.summary.findings.total() == 0 || !store.is_judged(entry.trace_id) {
            continue;
        }
        let Some(analysis) = store.latest_analysis(entry.trace_id) else {
            continue;
        };
        if !analysis
            .findings
            .iter()
            .any(|f| kind.is_none_or(|k| f.kind == k))
        {
            continue;
        }
        let Some(chain) = store.chain(entry.trace_id) else {
            continue;
        };
        let attributes = store.chain_attributes(entry.trace_id);
        let request = chain_request(chain, |span| attributes.get(&span).cloned());
        // Writing a request of plain strings and numbers into a Vec cannot fail.
        let line = match links {
            None => serde_json::to_writer(&mut out, &request),
            Some(links) => serde_json::to_value(&request).and_then(|mut value| {
                if let Some(object) = value.as_object_mut() {
                    object.insert("trace_url".into(), links.link(entry.trace_id).into());
                }
                serde_json::to_writer(&mut out, &value)
            }),
        };
        if line.is_ok() {
            out.push(b'\n');
            written += 1;
        }
    }
    String::from_utf8(out).unwrap_or_default()
}

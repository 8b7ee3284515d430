//! The collector's path after the wire decode, shared by the two OTLP targets (a library of
//! the fuzz package, so the targets share it without including its file): an
//! `ExportTraceServiceRequest` -> `decode_request` -> the store -> the analysis and the report.

use budget_top::batch::Batch;
use budget_top::ingest::decode::{count_spans, decode_request};
use budget_top::ingest::decode::interner::Interner;
use budget_top::store::Store;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;

/// Small enough that the fuzzer reaches eviction with a handful of spans.
const MAX_SPANS: usize = 64;

/// Runs a decoded request through everything the collector does with it and checks the
/// accounting: every span is either decoded or rejected, never lost or duplicated.
pub fn ingest(mut request: ExportTraceServiceRequest) {
    let total = count_spans(&request);
    let mut interner = Interner::default();
    let decoded = decode_request(&mut request, &mut interner, true);
    assert_eq!(
        decoded.spans.len() as u64 + decoded.rejected,
        total,
        "decoded + rejected must equal the spans sent"
    );
    assert_eq!(decoded.spans.len(), decoded.attributes.len());
    assert_eq!(decoded.rejected > 0, decoded.first_error.is_some());

    let mut store = Store::new(MAX_SPANS);
    let batch = Batch {
        spans: decoded.spans.clone(),
        attributes: decoded.attributes,
        raw: None,
    };
    store.insert_batch(batch);
    // The same spans again: an exporter that re-sends a batch.
    store.insert_spans(decoded.spans.clone());
    store.analyse_dirty();
    let report = store.report();
    let json = budget_top::commands::check::json_report(&report, None, 0).expect("a report always serialises");
    assert!(json.ends_with('\n'));

    let direct = deadline_budget::analysis::Report::from_spans(
        decoded.spans,
        &deadline_budget::analysis::Options::default(),
    );
    let _ = serde_json::to_string(&direct).expect("a report always serialises");
}

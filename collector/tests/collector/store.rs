//! The store: chains assembled in any order across batches, re-analysed when spans join,
//! judged once and counted once (`CONVENTIONS.md` section 6): bounded retention, and totals
//! that stay exact over what was evicted.

use budget_top::ingest::decode::decode_request;
use budget_top::ingest::interner::Interner;
use budget_top::store::Store;
use deadline_budget::analysis::{Span, TraceId};

use crate::support::reset_chain;

fn spans(t: u8) -> Vec<Span> {
    decode_request(&mut reset_chain(t), &mut Interner::default(), false).spans
}

#[test]
fn a_chain_assembles_in_any_order_and_is_reanalysed_when_spans_join() {
    let mut store = Store::new(100);
    let mut chain = spans(1);
    chain.reverse();
    // Child first: the call with the reset arrives before its parents.
    let rest = chain.split_off(2);
    store.insert_spans(chain);
    assert_eq!(store.analyse_dirty(), 1);
    let id = TraceId([1; 16]);
    assert!(store.chains().next().is_some());
    store.insert_spans(rest.clone());
    assert!(store.chains().next().unwrap().stale);
    assert_eq!(store.analyse_dirty(), 1);
    let analysis = store.analysis(id).unwrap();
    assert_eq!(analysis.summary.spans, 5);
    assert_eq!(&*analysis.summary.root_service, "frontend");
    assert_eq!(analysis.findings.len(), 1);
    // Counted once judged (quiet for --settle, evicted, or at a report), not before.
    assert_eq!(store.finding_counts().error, 0);
    store.judge_all();
    assert_eq!(store.finding_counts().error, 1);
    // The same spans again: duplicates, not new spans; the chain is judged again and its
    // contribution replaced, so the counts do not double.
    store.insert_spans(rest);
    store.analyse_dirty();
    assert_eq!(store.counters().chains_rejudged, 1);
    assert_eq!(store.counters().spans_held, 5);
    assert_eq!(store.counters().spans_duplicate, 3);
    assert_eq!(store.finding_counts().error, 1);
    let edge = store
        .edges()
        .into_iter()
        .find(|e| &*e.caller == "orders")
        .unwrap();
    assert_eq!((edge.calls, &*edge.callee), (1, "inventory"));
}

#[test]
fn retention_is_bounded_and_evicts_the_oldest_chains_first() {
    let mut store = Store::new(12);
    for t in 1..=10u8 {
        store.insert_spans(spans(t));
        store.analyse_dirty();
        assert!(store.counters().spans_held <= 12);
    }
    let held: Vec<TraceId> = store.chains().map(|c| c.trace_id).collect();
    assert_eq!(
        held,
        vec![TraceId([10; 16]), TraceId([9; 16])],
        "newest first, oldest evicted"
    );
    let counters = store.counters();
    assert_eq!(
        (
            counters.chains_evicted,
            counters.spans_evicted,
            counters.chains_held
        ),
        (8, 40, 2)
    );
    // Every chain counted once: the eight evicted were judged as they left and stay in the
    // totals; the two held are judged by the report.
    assert_eq!(store.finding_counts().error, 8);
    let report = store.report();
    assert_eq!(
        (
            report.summary.traces,
            report.summary.spans,
            report.findings.len()
        ),
        (10, 50, 10)
    );
    let edge = store
        .edges()
        .into_iter()
        .find(|e| &*e.caller == "orders")
        .unwrap();
    assert_eq!(edge.calls, 10);
    // The same as holding everything.
    let mut all = Store::new(1000);
    for t in 1..=10u8 {
        all.insert_spans(spans(t));
    }
    assert_eq!(all.report(), report);
}

/// A span for a chain judged and evicted is counted, not judged as a new chain; one for a chain
/// judged and still held judges it again.
#[test]
fn a_span_after_the_verdict_is_counted_or_judges_again() {
    let mut store = Store::new(5);
    store.insert_spans(spans(1));
    store.insert_spans(spans(2)); // evicts chain 1, judged as it goes
    assert_eq!(store.counters().chains_evicted, 1);
    store.insert_spans(spans(1).into_iter().take(2));
    assert_eq!(store.counters().spans_after_verdict, 2);
    assert!(store.chain(TraceId([1; 16])).is_none());
    let report = store.report();
    assert_eq!((report.summary.traces, report.summary.spans), (2, 10));
}

#[test]
fn one_chain_bigger_than_the_limit_is_capped_not_grown() {
    let mut store = Store::new(3);
    store.insert_spans(spans(1));
    assert_eq!(store.counters().spans_held, 3);
    assert_eq!(store.counters().spans_over_limit, 2);
}

#[test]
fn raw_attributes_are_kept_for_the_detail_view() {
    let mut request = reset_chain(1);
    let decoded = decode_request(&mut request, &mut Interner::default(), true);
    let span = decoded.spans[3].clone();
    let mut store = Store::new(100);
    store.insert_batch(budget_top::batch::Batch {
        spans: decoded.spans,
        attributes: decoded.attributes,
        raw: None,
    });
    let attrs = store.attributes(span.trace_id, span.span_id).unwrap();
    assert!(attrs.iter().any(|kv| kv.key == "budget.forwarded_ms"));
}

#[test]
fn a_resent_span_at_capacity_evicts_nothing() {
    let mut store = Store::new(10);
    store.insert_spans(spans(1));
    store.insert_spans(spans(2));
    assert_eq!(store.counters().spans_held, 10);
    // The exporter retries chain 2: same spans, no new room needed, chain 1 stays.
    store.insert_spans(spans(2));
    assert_eq!(store.counters().chains_evicted, 0);
    assert_eq!(store.counters().spans_duplicate, 5);
    assert!(store.chain(TraceId([1; 16])).is_some());
}

/// The screen analyses a burst a slice per frame: a slice with no time left still analyses a
/// few chains, the oldest first; the rest wait their turn, and once all are done the totals are
/// exactly those of one full pass.
#[test]
fn a_burst_is_analysed_a_slice_at_a_time_oldest_first_with_the_same_totals() {
    let mut sliced = Store::new(10_000);
    let mut whole = Store::new(10_000);
    for t in 1..=100u8 {
        sliced.insert_spans(spans(t));
        whole.insert_spans(spans(t));
    }
    assert_eq!(whole.analyse_dirty(), 100);
    let first = sliced.analyse_dirty_for(std::time::Duration::ZERO);
    assert!((1..100).contains(&first), "one slice, not all: {first}");
    assert!(sliced.has_dirty());
    // The oldest chains were analysed; the newest wait.
    assert!(sliced.analysis(TraceId([1; 16])).is_some());
    assert!(sliced.analysis(TraceId([100; 16])).is_none());
    let mut slices = 1;
    while sliced.has_dirty() {
        assert!(sliced.analyse_dirty_for(std::time::Duration::ZERO) > 0);
        slices += 1;
        assert!(slices <= 100, "every slice makes progress");
    }
    assert!(slices > 1);
    assert_eq!(sliced.finding_counts(), whole.finding_counts());
    assert_eq!(sliced.edge_reports(), whole.edge_reports());
    assert_eq!(sliced.report(), whole.report());
}

/// Issue 14, item 1: spans carrying megabyte attributes cost the screen at most what
/// `--max-attribute-bytes` allows. Each value is cut to 4 KiB, each span keeps 16 KiB, and past
/// the budget the oldest chains' attributes go first; the spans themselves stay, and the
/// detail view is told what happened.
#[test]
fn raw_attributes_held_stay_under_the_byte_budget_oldest_chains_dropped_first() {
    use budget_top::batch::Batch;
    use budget_top::ingest::decode::decode_protobuf;
    use deadline_budget::analysis::SpanId;
    use prost::Message as _;

    let budget = 200 * 1024;
    let mut store = Store::new(1_000_000).with_attribute_budget(budget);
    let mut interner = Interner::default();
    for t in 1..=40u8 {
        let mut request = reset_chain(t);
        for resource in &mut request.resource_spans {
            for span in &mut resource.scope_spans[0].spans {
                // ~1 MB a span, in one value and in many small ones.
                span.attributes
                    .push(crate::support::string("blob", &"x".repeat(1 << 20)));
                for i in 0..40 {
                    span.attributes
                        .push(crate::support::string(&format!("k{i}"), &"y".repeat(2000)));
                }
            }
        }
        let decoded = decode_protobuf(&request.encode_to_vec(), &mut interner, true).unwrap();
        store.insert_batch(Batch {
            spans: decoded.spans,
            attributes: decoded.attributes,
            raw: None,
        });
        let held = store.counters().attribute_bytes;
        assert!(held as usize <= budget, "{held} bytes held after chain {t}");
    }
    assert_eq!(store.counters().spans_held, 200, "every span is kept");
    assert!(store.counters().attribute_chains_dropped > 0);
    let (newest, oldest) = (TraceId([40; 16]), TraceId([1; 16]));
    let kept = store.attributes(newest, SpanId([1; 8])).unwrap();
    assert!(kept.iter().any(|kv| kv.key == "budget.default_ms"));
    let note = store.attribute_note(newest, SpanId([1; 8])).unwrap();
    assert!(
        note.contains("1 value(s) cut to 4 KiB") && note.contains("not kept"),
        "{note}"
    );
    assert!(store.attributes(oldest, SpanId([1; 8])).is_none());
    assert_eq!(
        store.attribute_note(oldest, SpanId([1; 8])).as_deref(),
        Some("attributes dropped to stay under --max-attribute-bytes (oldest chains first)")
    );
}

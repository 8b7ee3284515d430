//! The store's own unit tests.

use super::two_threads::ANALYSED_AT_ONCE;
use super::*;
use crate::batch::{Batch, RawAttributes};
use deadline_budget::analysis::{
    BudgetFacts, FindingKind, Severity, Span, SpanId, SpanKind, SpanStatus,
};
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value::Value};

fn span(t: u32) -> Span {
    let mut trace = [1u8; 16];
    trace[..4].copy_from_slice(&t.to_be_bytes());
    Span {
        trace_id: TraceId(trace),
        span_id: SpanId([2; 8]),
        parent_span_id: None,
        service: Arc::from("svc"),
        name: Arc::from("op"),
        kind: SpanKind::Server,
        start_unix_nano: 1,
        end_unix_nano: 2,
        status: SpanStatus::Unset,
        budget: BudgetFacts::default(),
    }
}

fn edge_calls(store: &Store) -> Vec<(String, String, u64)> {
    store
        .edges()
        .iter()
        .map(|e| (e.caller.to_string(), e.callee.to_string(), e.calls))
        .collect()
}

#[test]
fn a_copy_that_moves_a_span_to_another_service_moves_its_edge_too() {
    let hop = |id: u8, parent: Option<u8>, service: &str, kind, end| Span {
        span_id: SpanId([id; 8]),
        parent_span_id: parent.map(|p| SpanId([p; 8])),
        service: Arc::from(service),
        kind,
        end_unix_nano: end,
        ..span(1)
    };
    let first = [
        hop(1, None, "frontend", SpanKind::Server, 100),
        hop(2, Some(1), "frontend", SpanKind::Client, 90),
        hop(3, Some(2), "bff", SpanKind::Server, 80),
    ];
    let mut store = Store::new(100);
    store.insert_spans(first.clone());
    store.analyse_dirty();
    // Counted once judged, not before.
    assert_eq!(edge_calls(&store), []);
    store.judge_all();
    assert_eq!(edge_calls(&store), [("frontend".into(), "bff".into(), 1)]);
    // A later copy of the callee, from another service, wins by content: the judged chain
    // is judged again, its contribution replaced.
    let moved = hop(3, Some(2), "orders", SpanKind::Server, 85);
    store.insert_spans([moved.clone()]);
    store.analyse_dirty();
    assert_eq!(store.counters().chains_rejudged, 1);
    let mut fresh = Store::new(100);
    fresh.insert_spans([first[0].clone(), first[1].clone(), moved]);
    fresh.analyse_dirty();
    fresh.judge_all();
    assert_eq!(
        edge_calls(&store),
        [("frontend".into(), "orders".into(), 1)]
    );
    assert_eq!(edge_calls(&store), edge_calls(&fresh));
    let id = TraceId(span(1).trace_id.0);
    assert_eq!(store.analysis(id), fresh.analysis(id));
}

#[test]
fn chains_evicted_with_attributes_leave_no_trace_behind() {
    let attrs = RawAttributes::from_key_values(&[KeyValue {
        key: "k".into(),
        value: Some(AnyValue {
            value: Some(Value::StringValue("v".into())),
        }),
        ..Default::default()
    }]);
    let mut store = Store::new(5);
    for t in 0..20_000 {
        store.insert_span(span(t), Some(&attrs), None);
        assert!(store.attribute_order.len() <= 2 * store.chains.len() + 1025);
    }
    let held: usize = store.chains.values().map(|e| e.attribute_bytes).sum();
    assert_eq!(
        store.counters().attribute_bytes,
        (held + store.dictionary.bytes()) as u64
    );
    let arenas: usize = store
        .chains
        .values()
        .map(|e| e.attributes.bytes_held())
        .sum();
    assert_eq!(held, arenas);
    // Five chains of one span each, the attribute numbered once for all of them.
    assert_eq!(store.chains.len(), 5);
    assert_eq!(store.dictionary.len(), 1);
    for id in store.order.iter() {
        assert_eq!(store.attributes(*id, SpanId([2; 8])), Some(attrs.decode()));
    }
}

/// Go's `context.Background()`: the edge's hop (trace 1) made no call; its call is the root
/// of trace 2, with pricing under it. Judged across the chains held when trace 2 is judged,
/// folded into its analysis (the screen shows it), counted once; not found when the edge's
/// hop made a call of its own before trace 2 was judged.
#[test]
fn lost_contexts_are_folded_into_their_chain_when_it_is_judged() {
    let at = |t: u32, id: u8, parent: Option<u8>, service: &str, kind, start: u64, end: u64| Span {
        span_id: SpanId([id; 8]),
        parent_span_id: parent.map(|p| SpanId([p; 8])),
        service: Arc::from(service),
        kind,
        start_unix_nano: start * 1_000_000,
        end_unix_nano: end * 1_000_000,
        ..span(t)
    };
    let pair = [
        at(1, 1, None, "edge", SpanKind::Server, 1000, 1300),
        at(2, 2, None, "edge", SpanKind::Client, 1010, 1290),
        at(2, 3, Some(2), "pricing", SpanKind::Server, 1012, 1285),
    ];
    let mut store = Store::new(100);
    store.insert_spans(pair.clone());
    store.analyse_dirty();
    let fragment = span(2).trace_id;
    assert_eq!(store.finding_counts().warning, 0, "not judged yet");
    store.judge_all();
    let a = store.analysis(fragment).unwrap();
    assert_eq!(
        a.findings.iter().map(|f| f.kind).collect::<Vec<_>>(),
        vec![FindingKind::ContextLost]
    );
    assert_eq!(a.findings[0].linked_trace_id, Some(span(1).trace_id));
    assert!(a.rows[0].findings.contains(FindingKind::ContextLost));
    assert_eq!(a.summary.worst, Some(Severity::Warning));
    assert_eq!(store.finding_counts().warning, 1);
    let report = store.report();
    assert_eq!(report.summary.findings.warning, 1);
    assert_eq!(report.findings.len(), 1);
    assert_eq!(
        report.edges[0].findings.get(&FindingKind::ContextLost),
        Some(&1),
        "{report:?}"
    );
    // A span joining the fragment judges it again: still once.
    store.insert_spans([at(2, 5, Some(3), "pricing", SpanKind::Internal, 1013, 1280)]);
    store.analyse_dirty();
    assert_eq!(store.finding_counts().warning, 1);
    assert_eq!(store.report().summary.findings.warning, 1);

    // The edge's hop made a call of its own before the fragment was judged: that call was
    // its work; the root call is not one it lost.
    let mut other = Store::new(100);
    other.insert_spans(pair);
    other.insert_spans([at(1, 4, Some(1), "edge", SpanKind::Client, 1001, 1002)]);
    assert_eq!(other.report().summary.findings.warning, 0);
}

#[test]
fn many_chains_analysed_on_two_threads_report_as_one_thread_does() {
    // Chains of a hop, its call and the callee, each a little different (budgets, ends,
    // services, a failed call now and then), more than one slice of `ANALYSED_AT_ONCE`.
    let chain = |t: u32| {
        let hop = |id: u8, parent: Option<u8>, service: &str, kind, end: u64| Span {
            span_id: SpanId([id; 8]),
            parent_span_id: parent.map(|p| SpanId([p; 8])),
            service: Arc::from(service),
            kind,
            end_unix_nano: end,
            budget: BudgetFacts {
                received_ms: (id != 2).then_some(i64::from(t % 700)),
                forwarded_ms: (id == 2).then_some(i64::from(t % 500)),
                ..BudgetFacts::default()
            },
            status: if t.is_multiple_of(7) && id == 2 {
                SpanStatus::Error
            } else {
                SpanStatus::Unset
            },
            ..span(t)
        };
        let callee = ["bff", "orders", "stock"][t as usize % 3];
        let ms = u64::from(t % 900) * 1_000_000;
        [
            hop(1, None, "frontend", SpanKind::Server, 10 + 3 * ms),
            hop(2, Some(1), "frontend", SpanKind::Client, 9 + 2 * ms),
            hop(3, Some(2), callee, SpanKind::Server, 8 + ms),
        ]
    };
    let chains = 2 * ANALYSED_AT_ONCE as u32 + 1_000;
    // Analysed first on this thread (with a time limit), judged there (a store kept on one
    // thread), or both on two threads.
    let report = |analysed_first: bool, one_thread: bool| {
        let mut store = Store::new(10 * chains as usize);
        if one_thread {
            store = store.with_analyses_on_one_thread();
        }
        for t in 0..chains {
            store.insert_spans(chain(t));
        }
        if analysed_first {
            store.analyse_dirty_for(std::time::Duration::from_secs(3600));
        }
        serde_json::to_string(&store.report()).unwrap()
    };
    let two = report(false, false);
    assert!(two.contains(r#""findings_omitted":5660"#), "{two:.600}");
    assert_eq!(two, report(true, false));
    assert_eq!(two, report(false, true));
}

/// A batch of `spans` with each span's bytes as received (its ids, and `span-<n>` for a name),
/// under one scope.
fn received_batch(spans: Vec<Span>) -> Batch {
    let scope = Arc::new(batch::Scope {
        resource: b"resource".as_slice().into(),
        scope: b"scope".as_slice().into(),
    });
    let mut bytes = Vec::new();
    let mut received = Vec::new();
    for (i, s) in spans.iter().enumerate() {
        let start = bytes.len() as u32;
        let otlp = opentelemetry_proto::tonic::trace::v1::Span {
            trace_id: s.trace_id.0.to_vec(),
            span_id: s.span_id.0.to_vec(),
            name: format!("span-{i}"),
            ..Default::default()
        };
        prost::Message::encode(&otlp, &mut bytes).unwrap();
        received.push(batch::ReceivedSpan {
            start,
            len: bytes.len() as u32 - start,
            scope: 0,
        });
    }
    Batch {
        spans,
        attributes: Vec::new(),
        raw: None,
        received: Some(Box::new(batch::Received {
            bytes: bytes.into(),
            spans: received,
            scopes: vec![scope],
        })),
    }
}

#[test]
fn spans_as_received_are_handed_on_once_at_the_first_verdict_and_late_ones_alone() {
    let mut store = Store::new(100).keep_received(1 << 20, Box::new(|_, _| true));
    let two = |t: u32| {
        vec![
            span(t),
            Span {
                span_id: SpanId([3; 8]),
                parent_span_id: Some(SpanId([2; 8])),
                ..span(t)
            },
        ]
    };
    store.insert_batch(received_batch([two(1), two(2)].concat()));
    assert!(store.counters().received_bytes > 0);
    assert!(store.take_handoffs().is_empty(), "nothing judged yet");
    store.judge_all();
    let handed = store.take_handoffs();
    assert_eq!(handed.len(), 2);
    for handoff in &handed {
        let Handoff::Chain(chain) = handoff else {
            panic!("{handoff:?}");
        };
        let spans: Vec<&[u8]> = chain.spans.spans().map(|(s, _)| s).collect();
        assert_eq!(spans.len(), 2);
        for span in &spans {
            let span: opentelemetry_proto::tonic::trace::v1::Span =
                prost::Message::decode(*span).unwrap();
            assert_eq!(span.trace_id, chain.trace_id.0, "{span:?}");
        }
        assert_eq!(chain.spans.missing(), 0);
    }
    // Judged, they let their batch go.
    drop(handed);
    assert_eq!(store.counters().received_bytes, 0);
    // A span joining a judged chain is handed on alone; judging it again hands nothing on.
    let late = Span {
        span_id: SpanId([4; 8]),
        parent_span_id: Some(SpanId([2; 8])),
        ..span(1)
    };
    store.insert_batch(received_batch(vec![late]));
    let handed = store.take_handoffs();
    assert!(
        matches!(&handed[..], [Handoff::Late { trace_id, spans }] if *trace_id == span(1).trace_id && spans.len() == 1),
        "{handed:?}"
    );
    store.analyse_dirty();
    store.judge_all();
    assert!(store.take_handoffs().is_empty());
}

#[test]
fn spans_past_the_bound_are_not_held_and_counted_on_their_chain() {
    let mut store = Store::new(100).keep_received(200, Box::new(|_, _| true));
    let spans: Vec<Span> = (0..20)
        .map(|i| Span {
            span_id: SpanId([i + 1; 8]),
            ..span(7)
        })
        .collect();
    store.insert_batch(received_batch(spans));
    let counters = store.counters();
    assert!(counters.received_not_held > 0, "{counters:?}");
    assert!(counters.received_bytes <= 200, "{counters:?}");
    store.judge_all();
    let [Handoff::Chain(chain)] = &store.take_handoffs()[..] else {
        panic!("one chain");
    };
    assert_eq!(
        u64::from(chain.spans.len() + chain.spans.missing()),
        20,
        "every span held or counted"
    );
    assert_eq!(u64::from(chain.spans.missing()), counters.received_not_held);
}

#[test]
fn a_batch_stays_until_its_last_chain_is_judged_and_chains_not_kept_are_not_handed_on() {
    // Keeps trace 1 only.
    let keep: Keep = Box::new(|trace, _| trace == span(1).trace_id);
    let mut store = Store::new(100).keep_received(1 << 20, keep);
    store.insert_batch(received_batch(vec![span(1), span(2)]));
    let held = store.counters().received_bytes;
    assert!(held > 0);
    store.evict(span(2).trace_id);
    assert!(store.take_handoffs().is_empty(), "trace 2 is not kept");
    assert_eq!(
        store.counters().received_bytes,
        held,
        "trace 1 still waits on the batch"
    );
    store.judge_all();
    let handed = store.take_handoffs();
    assert!(
        matches!(&handed[..], [Handoff::Chain(c)] if c.trace_id == span(1).trace_id && c.spans.len() == 1),
        "{handed:?}"
    );
    assert_eq!(store.counters().received_bytes, 0);
}

//! `budget-demo load`'s traffic reaches a real OTLP/gRPC receiver whole: every span, unique ids,
//! the contract's attributes, and a correctly propagated budget (no findings).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;

use crate::support::sink::{Sink, to_analysis};
use budget_demo::otlp_load::{FloodPlan, Pacing, Target, flood};
use deadline_budget::analysis::{Options, Report};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_span_arrives_once_in_whole_correct_chains() {
    let sink = Sink::start().await;
    let result = flood(FloodPlan {
        target: Target::Grpc(sink.addr),
        spans: 2000,
        batch: 256,
        depth: 4,
        connections: 2,
        rate: None,
        max_time: None,
        pacing: Pacing::Closed,
    })
    .await
    .unwrap();
    assert_eq!(result.requests_failed, 0);
    assert_eq!(result.spans_sent, 2048, "8 requests of 256 spans");
    let spans = sink.spans();
    assert_eq!(spans.len(), 2048);
    let ids: BTreeSet<(Vec<u8>, Vec<u8>)> = spans
        .iter()
        .map(|s| (s.trace_id.clone(), s.span_id.clone()))
        .collect();
    assert_eq!(ids.len(), 2048, "no span id repeats within a trace");
    let services: BTreeSet<&str> = spans.iter().map(|s| s.service.as_str()).collect();
    assert_eq!(
        services,
        BTreeSet::from(["bff", "gateway", "inventory", "orders"])
    );
    let report = Report::from_spans(spans.iter().map(to_analysis), &Options::default());
    assert_eq!(report.summary.traces, 256);
    assert_eq!(report.summary.hops, 1024);
    assert!(report.findings.is_empty(), "{:?}", report.findings.first());
}

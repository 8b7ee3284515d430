//! What budget-top receives behind the OpenTelemetry Collector's `loadbalancing` exporter
//! (docs/scale.md): the exporter splits each batch by trace ID and re-batches per backend, so a
//! request carries many resources (the same service once per trace), several scopes each, several
//! traces mixed, and one trace's spans may arrive in different requests, children first. Its
//! `otlp` sub-exporter compresses gRPC with gzip by default; `otlp_http` posts gzip protobuf.
//! Two `budget-top check` instances each get whole traces and report exactly theirs.

use std::io::Write as _;
use std::time::Duration;

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::collector::trace::v1::trace_service_client::TraceServiceClient;
use opentelemetry_proto::tonic::common::v1::InstrumentationScope;
use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans};
use prost::Message as _;

use crate::support::{
    Finished, check_json, json_line, listen, merge_reports, reset_chain, scratch, string,
};

/// Splits each trace's chain the way the loadbalancing exporter does: one ResourceSpans per
/// (trace, service), its spans spread over two scopes (server and client instrumentation).
/// Returns (parents: frontend and orders of every trace, children: inventory of every trace).
fn routed(traces: &[u8]) -> (ExportTraceServiceRequest, ExportTraceServiceRequest) {
    let mut parents = ExportTraceServiceRequest::default();
    let mut children = ExportTraceServiceRequest::default();
    for &t in traces {
        for resource_spans in reset_chain(t).resource_spans {
            let service_is_leaf = resource_spans.resource.as_ref().unwrap().attributes
                == vec![string("service.name", "inventory")];
            let spans = resource_spans.scope_spans.into_iter().flat_map(|s| s.spans);
            let (server, client): (Vec<_>, Vec<_>) = spans.partition(|s| s.kind == 2);
            let scope = |name: &str, spans| ScopeSpans {
                scope: Some(InstrumentationScope {
                    name: name.into(),
                    version: "1.2.0".into(),
                    ..Default::default()
                }),
                spans,
                ..Default::default()
            };
            let reshaped = ResourceSpans {
                resource: resource_spans.resource,
                scope_spans: vec![scope("http-server", server), scope("http-client", client)],
                schema_url: "https://opentelemetry.io/schemas/1.26.0".into(),
            };
            if service_is_leaf {
                children.resource_spans.push(reshaped);
            } else {
                parents.resource_spans.push(reshaped);
            }
        }
    }
    (parents, children)
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(bytes).unwrap();
    gz.finish().unwrap()
}

/// The trace ids of the findings, sorted; every finding must be a `budget_reset` at `orders`.
#[track_caller]
fn reset_traces(finished: &Finished) -> Vec<String> {
    assert_eq!(finished.code, Some(1), "{finished:?}");
    let report = finished.json();
    let mut traces: Vec<String> = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            assert_eq!(
                (&f["kind"], &f["service"], &f["span_name"]),
                (
                    &"budget_reset".into(),
                    &"orders".into(),
                    &"GET inventory".into()
                ),
                "{report:#}"
            );
            f["trace_id"].as_str().unwrap().to_string()
        })
        .collect();
    traces.sort();
    let spans = report["summary"]["spans"].as_u64().unwrap();
    assert_eq!(spans, 5 * traces.len() as u64, "{report:#}");
    traces
}

#[test]
fn batches_routed_by_trace_id_over_gzip_grpc_and_gzip_http_reach_their_own_instance() {
    // Instance A gets traces 1, 3 (gRPC, gzip); instance B gets 2, 4 (HTTP protobuf, gzip).
    let a = listen(&["check", "--idle", "1s", "--format", "json"]);
    let b = listen(&["check", "--idle", "1s", "--format", "json"]);
    let runtime = crate::support::runtime();
    runtime.block_on(async {
        let (parents, children) = routed(&[1, 3]);
        let mut grpc = TraceServiceClient::connect(format!("http://{}", a.grpc))
            .await
            .unwrap()
            .send_compressed(tonic::codec::CompressionEncoding::Gzip);
        // Children before parents: another Collector's batch can overtake.
        for request in [children, parents] {
            let response = grpc.export(request).await.unwrap().into_inner();
            assert_eq!(response.partial_success, None, "all spans accepted");
        }

        let (parents, children) = routed(&[2, 4]);
        let http = reqwest::Client::new();
        for request in [children, parents] {
            let response = http
                .post(format!("http://{}/v1/traces", b.http))
                .header("content-type", "application/x-protobuf")
                .header("content-encoding", "gzip")
                .body(gzip(&request.encode_to_vec()))
                .send()
                .await
                .unwrap();
            assert_eq!(response.status(), 200);
        }
    });
    let hex = |t: u8| format!("{t:02x}").repeat(16);
    let a = a.wait(Duration::from_secs(60));
    let b = b.wait(Duration::from_secs(60));
    assert_eq!(reset_traces(&a), vec![hex(1), hex(3)]);
    assert_eq!(reset_traces(&b), vec![hex(2), hex(4)]);
    merged_shards_equal_one_unsharded_check(&[a, b]);
}

/// `budget-top merge` turns the shards' reports into the report one instance would have
/// written for all their traces (findings in any order).
fn merged_shards_equal_one_unsharded_check(shards: &[Finished]) {
    let dir = scratch("loadbalancing_merge");
    let mut merged = merge_reports(&dir, shards);

    let all = dir.join("all.jsonl");
    let lines: Vec<String> = (1..=4).map(|t| json_line(&reset_chain(t))).collect();
    std::fs::write(&all, lines.join("\n")).unwrap();
    let mut whole = check_json(&all).json();
    for report in [&mut merged, &mut whole] {
        report["findings"]
            .as_array_mut()
            .unwrap()
            .sort_by_key(|f| f["trace_id"].as_str().unwrap().to_string());
    }
    assert_eq!(merged, whole);
}

//! The real `opentelemetry-otlp` exporter (gRPC, HTTP protobuf, HTTP JSON) sends hand-built
//! chains to the real `budget-top check` on port 0; the JSON report names exactly the expected
//! findings.

use std::time::{Duration, SystemTime};

use deadline_budget::semconv as k;
use opentelemetry::trace::{SpanKind, TraceContextExt as _, Tracer as _, TracerProvider as _};
use opentelemetry::{Context, KeyValue};
use opentelemetry_otlp::{Protocol, WithExportConfig as _};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::SdkTracerProvider;

use crate::support::{finding_names, first_finding, listen};

#[derive(Clone, Copy, Debug)]
enum Transport {
    Grpc,
    HttpProtobuf,
    HttpJson,
}

fn provider(service: &str, transport: Transport, grpc: &str, http: &str) -> SdkTracerProvider {
    let exporter = match transport {
        Transport::Grpc => opentelemetry_otlp::SpanExporter::builder()
            .with_tonic()
            .with_endpoint(format!("http://{grpc}"))
            .build(),
        Transport::HttpProtobuf | Transport::HttpJson => {
            opentelemetry_otlp::SpanExporter::builder()
                .with_http()
                .with_protocol(if matches!(transport, Transport::HttpJson) {
                    Protocol::HttpJson
                } else {
                    Protocol::HttpBinary
                })
                // Used verbatim: the full path (STACK.md trap 2).
                .with_endpoint(format!("http://{http}/v1/traces"))
                .build()
        }
    }
    .unwrap();
    SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource(
            Resource::builder()
                .with_service_name(service.to_string())
                .build(),
        )
        .build()
}

/// frontend -> orders -> inventory, where orders forwards 3000 ms with 700 ms left
/// (`budget_reset`), and a second chain without any budget attribute where `slow` keeps
/// working 200 ms after `gateway` gave up (`orphaned_work`).
fn export_chains(transport: Transport, grpc: &str, http: &str) {
    let providers: Vec<(&str, SdkTracerProvider)> =
        ["frontend", "orders", "inventory", "gateway", "slow"]
            .into_iter()
            .map(|s| (s, provider(s, transport, grpc, http)))
            .collect();
    let tracer = |name: &str| {
        providers
            .iter()
            .find(|(s, _)| *s == name)
            .unwrap()
            .1
            .tracer("e2e")
    };
    let t0 = SystemTime::now() - Duration::from_secs(2);
    let at = |ms: u64| t0 + Duration::from_millis(ms);
    let start = |service: &str,
                 name: &str,
                 kind: SpanKind,
                 ms: u64,
                 parent: &Context,
                 attrs: Vec<KeyValue>| {
        let tracer = tracer(service);
        let builder = tracer
            .span_builder(name.to_string())
            .with_kind(kind)
            .with_start_time(at(ms))
            .with_attributes(attrs);
        let span = tracer.build_with_context(builder, parent);
        Context::new().with_span(span)
    };
    let remote =
        |cx: &Context| Context::new().with_remote_span_context(cx.span().span_context().clone());

    let front = start(
        "frontend",
        "GET /checkout",
        SpanKind::Server,
        0,
        &Context::new(),
        vec![
            KeyValue::new(k::SOURCE, "default"),
            KeyValue::new(k::DEFAULT_MS, 1000),
            KeyValue::new(k::REMAINING_AT_START_MS, 1000),
            KeyValue::new(k::OUTCOME, "ok"),
        ],
    );
    let call_orders = start(
        "frontend",
        "GET orders",
        SpanKind::Client,
        5,
        &front,
        vec![
            KeyValue::new(k::REMAINING_MS, 995),
            KeyValue::new(k::FORWARDED_MS, 995),
            KeyValue::new(k::TIMEOUT_MS, 995),
        ],
    );
    let orders = start(
        "orders",
        "GET /orders",
        SpanKind::Server,
        10,
        &remote(&call_orders),
        vec![
            KeyValue::new(k::RECEIVED_MS, 995),
            KeyValue::new(k::SOURCE, "x-budget-ms"),
            KeyValue::new(k::REMAINING_AT_START_MS, 990),
            KeyValue::new(k::OUTCOME, "ok"),
        ],
    );
    let call_inventory = start(
        "orders",
        "GET inventory",
        SpanKind::Client,
        20,
        &orders,
        vec![
            KeyValue::new(k::REMAINING_MS, 700),
            KeyValue::new(k::FORWARDED_MS, 3000),
            KeyValue::new(k::TIMEOUT_MS, 3000),
        ],
    );
    let inventory = start(
        "inventory",
        "GET /stock",
        SpanKind::Server,
        25,
        &remote(&call_inventory),
        vec![
            KeyValue::new(k::RECEIVED_MS, 3000),
            KeyValue::new(k::SOURCE, "x-budget-ms"),
            KeyValue::new(k::REMAINING_AT_START_MS, 2995),
            KeyValue::new(k::OUTCOME, "ok"),
        ],
    );
    for (cx, end) in [
        (&inventory, 75),
        (&call_inventory, 80),
        (&orders, 90),
        (&call_orders, 95),
        (&front, 100),
    ] {
        cx.span().end_with_timestamp(at(end));
    }

    let gateway = start(
        "gateway",
        "GET /report",
        SpanKind::Server,
        0,
        &Context::new(),
        vec![],
    );
    let call_slow = start("gateway", "GET slow", SpanKind::Client, 5, &gateway, vec![]);
    let slow = start(
        "slow",
        "GET /slow",
        SpanKind::Server,
        10,
        &remote(&call_slow),
        vec![],
    );
    for (cx, end) in [(&call_slow, 105), (&gateway, 110), (&slow, 305)] {
        cx.span().end_with_timestamp(at(end));
    }
    drop((
        front,
        call_orders,
        orders,
        call_inventory,
        inventory,
        gateway,
        call_slow,
        slow,
    ));

    for (service, provider) in providers {
        provider
            .force_flush()
            .unwrap_or_else(|e| panic!("{service}: flush failed: {e}"));
        provider.shutdown().unwrap();
    }
}

fn run(transport: Transport) {
    let check = listen(&["check", "--idle", "2s", "--format", "json"]);
    let (grpc, http) = (check.grpc.to_string(), check.http.to_string());
    // The tonic exporter wants a runtime around it (STACK.md trap 4); flush and shutdown block,
    // so they run on a blocking thread (trap 3).
    let runtime = crate::support::threaded_runtime(2);
    runtime.block_on(async move {
        tokio::task::spawn_blocking(move || export_chains(transport, &grpc, &http))
            .await
            .unwrap();
    });
    let finished = check.wait(Duration::from_secs(60));
    assert_eq!(
        finished.code,
        Some(1),
        "an error finding fails the check: {finished:?}"
    );
    let report = finished.json();
    assert_eq!(
        finding_names(&report),
        vec![
            (
                "budget_reset".into(),
                "orders".into(),
                "GET inventory".into()
            ),
            ("orphaned_work".into(), "slow".into(), "GET /slow".into()),
        ],
        "{transport:?}: {report:#}"
    );
    let reset = first_finding(&report, "budget_reset");
    assert_eq!(
        (
            reset["remaining_ms"].as_i64(),
            reset["forwarded_ms"].as_i64()
        ),
        (Some(700), Some(3000))
    );
    assert_eq!(reset["trace_id"].as_str().unwrap().len(), 32);
    let orphan = first_finding(&report, "orphaned_work");
    assert_eq!(orphan["wasted_ms"].as_i64(), Some(200), "{orphan}");
    assert_eq!(report["summary"]["traces"], 2);
    assert_eq!(report["summary"]["spans"], 8);
    assert_eq!(report["summary"]["findings"]["error"], 2);
    let edge = report["edges"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["caller"] == "orders" && e["callee"] == "inventory")
        .unwrap_or_else(|| panic!("no orders -> inventory edge: {report:#}"));
    assert_eq!(edge["calls"], 1);
    assert_eq!(edge["findings"]["budget_reset"], 1);
    assert_eq!(report["ingest"]["spans_accepted"], 8);
    assert_eq!(report["ingest"]["spans_refused"], 0);
}

#[test]
fn opentelemetry_otlp_over_grpc_is_classified() {
    run(Transport::Grpc);
}

#[test]
fn opentelemetry_otlp_over_http_protobuf_is_classified() {
    run(Transport::HttpProtobuf);
}

#[test]
fn opentelemetry_otlp_over_http_json_is_classified() {
    run(Transport::HttpJson);
}

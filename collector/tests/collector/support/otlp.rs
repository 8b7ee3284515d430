//! OTLP requests built by hand: spans of fixed traces at fixed times, their budget attributes,
//! and the chain with one `budget_reset` most tests send.

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value::Value};
use opentelemetry_proto::tonic::resource::v1::Resource;
use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans, Span};

pub fn int(key: &str, v: i64) -> KeyValue {
    KeyValue {
        key: key.into(),
        value: Some(AnyValue {
            value: Some(Value::IntValue(v)),
        }),
        ..Default::default()
    }
}

pub fn string(key: &str, v: &str) -> KeyValue {
    KeyValue {
        key: key.into(),
        value: Some(AnyValue {
            value: Some(Value::StringValue(v.into())),
        }),
        ..Default::default()
    }
}

pub const SERVER: i32 = 2;
pub const CLIENT: i32 = 3;
/// A fixed base time: 2026-11-29T00:00:00Z in ns.
pub const T0: u64 = 1_764_374_400_000_000_000;
pub const MS: u64 = 1_000_000;

/// One OTLP span: trace `t`, span `s`, parent `p` (0 = none), start/end in ms after [`T0`].
pub fn span(
    t: u8,
    s: u8,
    p: u8,
    name: &str,
    kind: i32,
    start_ms: u64,
    end_ms: u64,
    attrs: Vec<KeyValue>,
) -> Span {
    Span {
        trace_id: vec![t; 16],
        span_id: vec![s; 8],
        parent_span_id: if p == 0 { Vec::new() } else { vec![p; 8] },
        name: name.into(),
        kind,
        start_time_unix_nano: T0 + start_ms * MS,
        end_time_unix_nano: T0 + end_ms * MS,
        attributes: attrs,
        ..Default::default()
    }
}

/// A request with one resource per (service, spans).
pub fn request(services: Vec<(&str, Vec<Span>)>) -> ExportTraceServiceRequest {
    ExportTraceServiceRequest {
        resource_spans: services
            .into_iter()
            .map(|(service, spans)| ResourceSpans {
                resource: Some(Resource {
                    attributes: vec![string("service.name", service)],
                    ..Default::default()
                }),
                scope_spans: vec![ScopeSpans {
                    spans,
                    ..Default::default()
                }],
                ..Default::default()
            })
            .collect(),
    }
}

/// The budget attributes of an edge hop that set `budget_ms` itself (source `default`) and
/// answered ok.
pub fn edge_budget(budget_ms: i64) -> Vec<KeyValue> {
    use deadline_budget::semconv as k;
    vec![
        string(k::SOURCE, "default"),
        int(k::DEFAULT_MS, budget_ms),
        int(k::REMAINING_AT_START_MS, budget_ms),
        string(k::OUTCOME, "ok"),
    ]
}

/// The budget attributes of a call made with `remaining_ms` left, forwarding `forwarded_ms`
/// (its timeout too).
pub fn call_budget(remaining_ms: i64, forwarded_ms: i64) -> Vec<KeyValue> {
    use deadline_budget::semconv as k;
    vec![
        int(k::REMAINING_MS, remaining_ms),
        int(k::FORWARDED_MS, forwarded_ms),
        int(k::TIMEOUT_MS, forwarded_ms),
    ]
}

/// The budget attributes of a hop that received `received_ms` in `x-budget-ms`, had
/// `remaining_ms` left when its work started, and answered ok.
pub fn hop_budget(received_ms: i64, remaining_ms: i64) -> Vec<KeyValue> {
    use deadline_budget::semconv as k;
    vec![
        int(k::RECEIVED_MS, received_ms),
        string(k::SOURCE, "x-budget-ms"),
        int(k::REMAINING_AT_START_MS, remaining_ms),
        string(k::OUTCOME, "ok"),
    ]
}

/// A chain whose `orders` forwards 3000 ms with only 700 ms left: exactly one `budget_reset`.
pub fn reset_chain(t: u8) -> ExportTraceServiceRequest {
    request(vec![
        (
            "frontend",
            vec![
                span(t, 1, 0, "GET /checkout", SERVER, 0, 100, edge_budget(1000)),
                span(t, 2, 1, "GET orders", CLIENT, 5, 95, call_budget(995, 995)),
            ],
        ),
        (
            "orders",
            vec![
                span(t, 3, 2, "GET /orders", SERVER, 10, 90, hop_budget(995, 990)),
                span(
                    t,
                    4,
                    3,
                    "GET inventory",
                    CLIENT,
                    20,
                    80,
                    call_budget(700, 3000),
                ),
            ],
        ),
        (
            "inventory",
            vec![span(
                t,
                5,
                4,
                "GET /stock",
                SERVER,
                25,
                75,
                hop_budget(3000, 2995),
            )],
        ),
    ])
}

/// The same chain as one OTLP/JSON line.
pub fn json_line(request: &ExportTraceServiceRequest) -> String {
    serde_json::to_string(request).unwrap()
}

//! One request chain back out as OTLP: what the screen's "export chain" key writes, so a chain
//! seen live can be kept, attached to a bug report, and read again with `check --input` or
//! `replay`.
//!
//! In: a [`Chain`] from the store and, per span, the raw attributes the receiver kept (when it
//! kept them). Out: one `ExportTraceServiceRequest` (one resource per service), written as one
//! OTLP/JSON line, the format `record` writes and `check --input` reads.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use deadline_budget::analysis::{BudgetFacts, Chain, Span, SpanId, SpanKind, SpanStatus};
use deadline_budget::semconv;

use crate::otlp_lines::{RecordingError, Writer};
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{
    AnyValue, InstrumentationScope, KeyValue, any_value::Value,
};
use opentelemetry_proto::tonic::resource::v1::Resource;
use opentelemetry_proto::tonic::trace::v1::{
    ResourceSpans, ScopeSpans, Span as OtlpSpan, Status, span, status,
};

/// The chain as one export request. `attributes` gives a span's raw attributes when the
/// receiver kept them; otherwise the span's decoded budget facts are written back under the
/// contract's keys, so the analysis of the file finds what the screen found.
pub fn chain_request(
    chain: &Chain,
    attributes: impl Fn(SpanId) -> Option<Vec<KeyValue>>,
) -> ExportTraceServiceRequest {
    let mut by_service: BTreeMap<Arc<str>, Vec<OtlpSpan>> = BTreeMap::new();
    for s in chain.spans() {
        let attributes = match attributes(s.span_id) {
            Some(raw) => raw,
            None => fact_attributes(&s.budget),
        };
        by_service
            .entry(s.service.clone())
            .or_default()
            .push(otlp_span(&s, attributes));
    }
    ExportTraceServiceRequest {
        resource_spans: by_service
            .into_iter()
            .map(|(service, spans)| ResourceSpans {
                resource: Some(Resource {
                    attributes: vec![string("service.name", &service)],
                    ..Resource::default()
                }),
                scope_spans: vec![ScopeSpans {
                    scope: Some(InstrumentationScope {
                        name: "budget-top export".into(),
                        ..InstrumentationScope::default()
                    }),
                    spans,
                    ..ScopeSpans::default()
                }],
                ..ResourceSpans::default()
            })
            .collect(),
    }
}

/// Append the chain to the recording at `path` as one line (created when missing).
pub fn write_chain(
    path: &Path,
    chain: &Chain,
    attributes: impl Fn(SpanId) -> Option<Vec<KeyValue>>,
) -> Result<(), RecordingError> {
    Writer::append(path)?.write(&chain_request(chain, attributes))
}

fn otlp_span(s: &Span, attributes: Vec<KeyValue>) -> OtlpSpan {
    let kind = match s.kind {
        SpanKind::Internal => span::SpanKind::Internal,
        SpanKind::Server => span::SpanKind::Server,
        SpanKind::Client => span::SpanKind::Client,
        SpanKind::Producer => span::SpanKind::Producer,
        SpanKind::Consumer => span::SpanKind::Consumer,
    };
    let code = match s.status {
        SpanStatus::Unset => status::StatusCode::Unset,
        SpanStatus::Ok => status::StatusCode::Ok,
        SpanStatus::Error => status::StatusCode::Error,
    };
    OtlpSpan {
        trace_id: s.trace_id.0.to_vec(),
        span_id: s.span_id.0.to_vec(),
        parent_span_id: s.parent_span_id.map(|p| p.0.to_vec()).unwrap_or_default(),
        name: s.name.to_string(),
        kind: kind as i32,
        start_time_unix_nano: s.start_unix_nano,
        end_time_unix_nano: s.end_unix_nano,
        attributes,
        // What the analysis read of a failure beyond its attributes: that it failed, and that
        // its words named another cause than a missing answer.
        events: if s.budget.exception_event {
            vec![span::Event {
                time_unix_nano: s.end_unix_nano,
                name: semconv::EXCEPTION_EVENT.into(),
                ..span::Event::default()
            }]
        } else {
            Vec::new()
        },
        status: Some(Status {
            code: code as i32,
            message: if s.budget.other_cause {
                "failed for another cause".into()
            } else {
                String::new()
            },
        }),
        ..OtlpSpan::default()
    }
}

/// The decoded facts under the contract's keys.
fn fact_attributes(f: &BudgetFacts) -> Vec<KeyValue> {
    let mut out = Vec::new();
    let ints = [
        (semconv::RECEIVED_MS, f.received_ms),
        (semconv::DEFAULT_MS, f.default_ms),
        (semconv::QUEUE_WAIT_MS, f.queue_wait_ms),
        (semconv::REMAINING_AT_START_MS, f.remaining_at_start_ms),
        (semconv::REMAINING_MS, f.remaining_ms),
        (semconv::FORWARDED_MS, f.forwarded_ms),
        (semconv::TIMEOUT_MS, f.timeout_ms),
        (semconv::SLA_MS, f.sla_ms),
        (semconv::ATTEMPT, f.attempt),
        (semconv::HTTP_RESPONSE_STATUS_CODE, f.http_status),
        (semconv::RPC_GRPC_STATUS_CODE, f.rpc_status),
    ];
    for (key, value) in ints {
        if let Some(v) = value {
            out.push(KeyValue {
                key: key.into(),
                value: Some(AnyValue {
                    value: Some(Value::IntValue(v)),
                }),
                ..KeyValue::default()
            });
        }
    }
    if let Some(source) = f.source {
        out.push(string(semconv::SOURCE, source.as_str()));
    }
    if let Some(outcome) = f.outcome {
        out.push(string(semconv::OUTCOME, outcome.as_str()));
    }
    if let Some(deadline) = f.deadline_unix_ms {
        out.push(string(
            semconv::HTTP_HEADER_REQUEST_DEADLINE,
            &deadline.to_string(),
        ));
    }
    if let Some(error) = &f.error_type {
        out.push(string(semconv::ERROR_TYPE, error));
    }
    if let Some(callee) = &f.callee_name {
        out.push(string(semconv::CALLEE_NAME_KEYS[0], callee));
    }
    out
}

fn string(key: &str, value: &str) -> KeyValue {
    KeyValue {
        key: key.into(),
        value: Some(AnyValue {
            value: Some(Value::StringValue(value.into())),
        }),
        ..KeyValue::default()
    }
}

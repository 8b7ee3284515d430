use super::*;
use crate::ingest::decode::facts::budget_facts;
use deadline_budget::analysis::{BudgetFacts, BudgetSource, SpanKind};
use opentelemetry_proto::tonic::common::v1::{AnyValue, any_value::Value};
use prost::Message as _;

/// The facts of a SERVER span with these attributes, read with the built-in carriers.
fn hop_facts(attributes: &[KeyValue], start_unix_nano: u64) -> BudgetFacts {
    budget_facts(
        attributes,
        SpanKind::Server,
        start_unix_nano,
        Carriers::builtin(),
    )
}

fn kv(key: &str, value: Value) -> KeyValue {
    KeyValue {
        key: key.into(),
        value: Some(AnyValue { value: Some(value) }),
        ..Default::default()
    }
}

#[test]
fn budget_attributes_win_over_captured_headers() {
    let facts = hop_facts(
        &[
            kv(semconv::RECEIVED_MS, Value::IntValue(800)),
            kv(semconv::SOURCE, Value::StringValue("x-budget-ms".into())),
            kv(
                semconv::HTTP_HEADER_BUDGET_MS,
                Value::StringValue("5".into()),
            ),
        ],
        0,
    );
    assert_eq!(facts.received_ms, Some(800));
    assert_eq!(facts.source, Some(BudgetSource::XBudgetMs));
}

#[test]
fn captured_headers_give_a_budget_without_budget_attributes() {
    let facts = hop_facts(
        &[kv(
            semconv::HTTP_HEADER_BUDGET_MS,
            Value::StringValue("750".into()),
        )],
        0,
    );
    assert_eq!(
        (facts.received_ms, facts.source),
        (Some(750), Some(BudgetSource::XBudgetMs))
    );

    let array = Value::ArrayValue(opentelemetry_proto::tonic::common::v1::ArrayValue {
        values: vec![AnyValue {
            value: Some(Value::StringValue("250m".into())),
        }],
    });
    let facts = hop_facts(&[kv(semconv::RPC_METADATA_GRPC_TIMEOUT, array)], 0);
    assert_eq!(
        (facts.received_ms, facts.source),
        (Some(250), Some(BudgetSource::GrpcTimeout))
    );

    let facts = hop_facts(
        &[kv(
            semconv::HTTP_HEADER_GRPC_TIMEOUT,
            Value::StringValue("2S".into()),
        )],
        0,
    );
    assert_eq!(facts.received_ms, Some(2000));

    let start_ns = 1_764_430_000_000 * 1_000_000;
    let facts = hop_facts(
        &[kv(
            semconv::HTTP_HEADER_REQUEST_DEADLINE,
            Value::StringValue("1764430000.25".into()),
        )],
        start_ns,
    );
    assert_eq!(facts.received_ms, Some(250));
    assert_eq!(facts.deadline_unix_ms, Some(1_764_430_000_250));
    assert_eq!(facts.source, Some(BudgetSource::XRequestDeadline));
}

fn own(pairs: &[(&str, deadline_budget::carrier::Form)]) -> Carriers {
    Carriers::with_own(
        pairs
            .iter()
            .map(|(n, f)| deadline_budget::carrier::Carrier::own(n, *f).unwrap()),
    )
}

fn string(key: &str, v: &str) -> KeyValue {
    kv(key, Value::StringValue(v.into()))
}

#[test]
fn a_team_carrier_is_read_from_captured_headers_before_the_built_in_ones() {
    use deadline_budget::carrier::Form;
    let carriers = own(&[("X-Prazo-Restante-Ms", Form::Ms)]);
    // As Node's instrumentation writes it (`-` kept), as Python's does (`_`), as an array.
    for key in [
        "http.request.header.x-prazo-restante-ms",
        "http.request.header.x_prazo_restante_ms",
        "rpc.request.metadata.x-prazo-restante-ms",
        "rpc.grpc.request.metadata.x-prazo-restante-ms",
    ] {
        let facts = budget_facts(
            &[
                string(key, "480"),
                string(semconv::HTTP_HEADER_BUDGET_MS, "9000"),
            ],
            SpanKind::Server,
            0,
            &carriers,
        );
        assert_eq!(facts.received_ms, Some(480), "{key}");
        assert_eq!(facts.source, Some(BudgetSource::Header(Form::Ms)), "{key}");
    }
    let array = Value::ArrayValue(opentelemetry_proto::tonic::common::v1::ArrayValue {
        values: vec![AnyValue {
            value: Some(Value::StringValue("1.5".into())),
        }],
    });
    let facts = budget_facts(
        &[kv("http.request.header.x-timeout-s", array)],
        SpanKind::Server,
        0,
        &own(&[("x-timeout-s", Form::Seconds)]),
    );
    assert_eq!(facts.received_ms, Some(1500));
    // Unknown to the built-in table: not read at all.
    let facts = hop_facts(
        &[string("http.request.header.x-prazo-restante-ms", "480")],
        0,
    );
    assert_eq!((facts.received_ms, facts.source), (None, None));
    // An absolute deadline of a team's own, in seconds, on the hop's clock.
    let start = 1_764_430_000_000u64 * 1_000_000;
    let facts = budget_facts(
        &[string("http.request.header.x-deadline", "1764430000.75")],
        SpanKind::Server,
        start,
        &own(&[("x-deadline", Form::DeadlineSeconds)]),
    );
    assert_eq!(facts.received_ms, Some(750));
    assert_eq!(facts.deadline_unix_ms, Some(1_764_430_000_750));
    assert!(facts.source.is_some_and(BudgetSource::is_absolute));
    // `budget.source = "header:<name>"` written by a service knows its carrier's form.
    let facts = budget_facts(
        &[
            string(semconv::SOURCE, "header:x-deadline"),
            kv(semconv::RECEIVED_MS, Value::IntValue(70)),
        ],
        SpanKind::Server,
        0,
        &own(&[("x-deadline", Form::DeadlineMs)]),
    );
    assert_eq!(facts.source, Some(BudgetSource::Header(Form::DeadlineMs)));
}

#[test]
fn a_captured_carrier_on_a_client_span_is_the_budget_forwarded() {
    let facts = budget_facts(
        &[string(semconv::HTTP_HEADER_BUDGET_MS, "930")],
        SpanKind::Client,
        0,
        Carriers::builtin(),
    );
    assert_eq!(
        (facts.forwarded_ms, facts.received_ms, facts.source),
        (Some(930), None, None)
    );
    // Every built-in carrier is read, connect-timeout-ms and Envoy's too.
    for (key, value, ms) in [
        ("http.request.header.connect-timeout-ms", "1200", 1200),
        (
            "http.request.header.x-envoy-expected-rq-timeout-ms",
            "800",
            800,
        ),
        ("rpc.request.metadata.grpc-timeout", "2S", 2000),
    ] {
        let facts = budget_facts(
            &[string(key, value)],
            SpanKind::Client,
            0,
            Carriers::builtin(),
        );
        assert_eq!(facts.forwarded_ms, Some(ms), "{key}");
        let facts = hop_facts(&[string(key, value)], 0);
        assert_eq!(facts.received_ms, Some(ms), "{key}");
    }
    // The contract's own attribute wins.
    let facts = budget_facts(
        &[
            kv(semconv::FORWARDED_MS, Value::IntValue(40)),
            string(semconv::HTTP_HEADER_BUDGET_MS, "930"),
        ],
        SpanKind::Client,
        0,
        Carriers::builtin(),
    );
    assert_eq!(facts.forwarded_ms, Some(40));
}

#[test]
fn statuses_and_errors_are_read_as_the_stock_sdks_write_them() {
    // Python's SDK still writes the older key; the newer one wins when both are there.
    let facts = hop_facts(&[kv("http.status_code", Value::IntValue(503))], 0);
    assert_eq!(facts.http_status, Some(503));
    let facts = hop_facts(
        &[
            kv("http.status_code", Value::IntValue(503)),
            kv(semconv::HTTP_RESPONSE_STATUS_CODE, Value::IntValue(504)),
        ],
        0,
    );
    assert_eq!(facts.http_status, Some(504));
    // The newest RPC conventions name the gRPC code.
    let facts = hop_facts(
        &[string("rpc.response.status_code", "DEADLINE_EXCEEDED")],
        0,
    );
    assert_eq!(facts.rpc_status, Some(4));
    let facts = hop_facts(&[kv("rpc.grpc.status_code", Value::IntValue(8))], 0);
    assert_eq!(facts.rpc_status, Some(8));
    // undici writes its timeout as an integer.
    let facts = hop_facts(&[kv(semconv::ERROR_TYPE, Value::IntValue(23))], 0);
    assert_eq!(facts.error_type.as_deref(), Some("23"));
    let facts = hop_facts(&[string(semconv::ERROR_TYPE, "ReadTimeout")], 0);
    assert_eq!(facts.error_type.as_deref(), Some("ReadTimeout"));
}

#[test]
fn an_exception_event_is_read_on_both_decoding_paths() {
    let span = otlp::Span {
        trace_id: vec![1; 16],
        span_id: vec![2; 8],
        name: "GET worker".into(),
        kind: 3,
        start_time_unix_nano: 1,
        end_time_unix_nano: 2,
        events: vec![
            otlp::span::Event {
                name: "retry".into(),
                ..Default::default()
            },
            otlp::span::Event {
                name: "exception".into(),
                ..Default::default()
            },
        ],
        ..Default::default()
    };
    use super::hostile_tests::one_span;
    let mut request = one_span(span.clone(), "edge");
    let body = request.encode_to_vec();
    let slow = decode_request(&mut request, &mut Interner::default(), false);
    let fast = decode_protobuf(&body, &mut Interner::default(), false).unwrap();
    assert!(slow.spans[0].budget.exception_event);
    assert_eq!(fast.spans, slow.spans);
    let mut quiet = span;
    quiet.events.truncate(1);
    let decoded = decode_protobuf(
        &one_span(quiet, "edge").encode_to_vec(),
        &mut Interner::default(),
        false,
    )
    .unwrap();
    assert!(!decoded.spans[0].budget.exception_event);
}

/// A CLIENT span failing as `exception` says, with `status` as its message and `attributes`.
fn failed_call(attributes: Vec<KeyValue>, exception: &[(&str, &str)], status: &str) -> otlp::Span {
    otlp::Span {
        trace_id: vec![1; 16],
        span_id: vec![2; 8],
        name: "SELECT".into(),
        kind: 3,
        start_time_unix_nano: 1,
        end_time_unix_nano: 2,
        attributes,
        events: vec![otlp::span::Event {
            name: "exception".into(),
            attributes: exception.iter().map(|(k, v)| string(k, v)).collect(),
            ..Default::default()
        }],
        status: Some(otlp::Status {
            code: 2,
            message: status.into(),
        }),
        ..Default::default()
    }
}

/// The span's facts as the prost path, the in-place protobuf path and the in-place JSON path
/// read them: all three the same.
fn facts_on_every_path(span: otlp::Span) -> BudgetFacts {
    use super::hostile_tests::one_span;
    let mut request = one_span(span, "app");
    let body = request.encode_to_vec();
    let line = serde_json::to_string(&request).unwrap();
    let slow = decode_request(&mut request, &mut Interner::default(), false);
    let fast = decode_protobuf(&body, &mut Interner::default(), false).unwrap();
    let json = crate::ingest::decode::json_lines::decode_line(&line, &mut Interner::default())
        .expect("read in place");
    assert_eq!(fast.spans, slow.spans);
    assert_eq!(json.spans, slow.spans, "{line}");
    slow.spans[0].budget.clone()
}

#[test]
fn a_failure_names_its_cause_and_a_call_its_callee_on_every_decoding_path() {
    // Stock psycopg2: db.system and net.peer.name, the exception's type and message; the
    // callee is named in the contract's order (server.address / net.peer.name before
    // db.system), whatever order the attributes come in.
    let facts = facts_on_every_path(failed_call(
        vec![
            string("db.system", "postgresql"),
            string("net.peer.name", "127.0.0.1"),
        ],
        &[
            ("exception.type", "UniqueViolation"),
            (
                "exception.message",
                "duplicate key value violates unique constraint \"k\"",
            ),
        ],
        "UniqueViolation: duplicate key",
    ));
    assert_eq!(facts.callee_name.as_deref(), Some("127.0.0.1"));
    // No error.type: the exception's type stands for it.
    assert_eq!(facts.error_type.as_deref(), Some("UniqueViolation"));
    assert!(facts.exception_event && facts.other_cause);
    let facts = facts_on_every_path(failed_call(
        vec![
            string("db.system", "postgresql"),
            string("peer.service", "ledger-db"),
        ],
        &[("exception.type", "QueryCanceled")],
        "QueryCanceled: canceling statement due to statement timeout",
    ));
    assert_eq!(facts.callee_name.as_deref(), Some("ledger-db"));
    assert!(!facts.other_cause);
    // Go's *url.Error says nothing by its type; its message says the connection was refused.
    let facts = facts_on_every_path(failed_call(
        vec![string(semconv::ERROR_TYPE, "*url.Error")],
        &[("exception.type", "*url.Error")],
        "Get \"http://127.0.0.1:1/\": dial tcp 127.0.0.1:1: connect: connection refused",
    ));
    assert_eq!(facts.error_type.as_deref(), Some("*url.Error"));
    assert!(facts.other_cause);
    // A timeout named anywhere wins: such a call got no answer.
    let facts = facts_on_every_path(failed_call(
        vec![string("db.system.name", "postgresql")],
        &[("exception.message", "connection refused after a timeout")],
        "",
    ));
    assert_eq!(facts.callee_name.as_deref(), Some("postgresql"));
    assert!(!facts.other_cause);
}

#[test]
fn invalid_captured_headers_are_flagged_not_trusted() {
    for bad in ["-5", "12abc", "99999999999999", ""] {
        let facts = hop_facts(
            &[kv(
                semconv::HTTP_HEADER_BUDGET_MS,
                Value::StringValue(bad.into()),
            )],
            0,
        );
        assert_eq!(facts.received_ms, None, "{bad}");
        assert_eq!(facts.source, Some(BudgetSource::Invalid), "{bad}");
    }
    for bad in ["123456789S", "10x", "S", "1.5S"] {
        let facts = hop_facts(
            &[kv(
                semconv::RPC_METADATA_GRPC_TIMEOUT,
                Value::StringValue(bad.into()),
            )],
            0,
        );
        assert_eq!(facts.source, Some(BudgetSource::Invalid), "{bad}");
    }
    // A deadline more than 24 h away is absurd.
    let facts = hop_facts(
        &[kv(
            semconv::HTTP_HEADER_REQUEST_DEADLINE,
            Value::StringValue("9999999999999".into()),
        )],
        1_000_000,
    );
    assert_eq!(facts.source, Some(BudgetSource::Invalid));
}

#[test]
fn spans_with_wrong_id_lengths_are_rejected_and_counted() {
    let good = otlp::Span {
        trace_id: vec![1; 16],
        span_id: vec![2; 8],
        name: "ok".into(),
        kind: 2,
        ..Default::default()
    };
    let bad_trace = otlp::Span {
        trace_id: vec![1; 15],
        ..good.clone()
    };
    let bad_parent = otlp::Span {
        parent_span_id: vec![3; 4],
        ..good.clone()
    };
    let mut request = ExportTraceServiceRequest {
        resource_spans: vec![otlp::ResourceSpans {
            scope_spans: vec![otlp::ScopeSpans {
                spans: vec![good, bad_trace, bad_parent],
                ..Default::default()
            }],
            ..Default::default()
        }],
    };
    let decoded = decode_request(&mut request, &mut Interner::default(), false);
    assert_eq!(decoded.spans.len(), 1);
    assert_eq!(decoded.rejected, 2);
    assert!(
        decoded
            .first_error
            .unwrap()
            .contains("trace_id must be 16 bytes, got 15")
    );
    assert_eq!(&*decoded.spans[0].service, "unknown_service");
    assert_eq!(decoded.spans[0].kind, SpanKind::Server);
}

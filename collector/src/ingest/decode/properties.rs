use super::*;
use crate::batch::MAX_KEPT_ATTRIBUTES;
use crate::ingest::decode::interner::MAX_NAME_BYTES;
use deadline_budget::analysis::SpanId;
use opentelemetry_proto::tonic::common::v1::{AnyValue, any_value::Value};
use proptest::prelude::*;
use prost::Message as _;

fn any_value() -> impl Strategy<Value = Value> {
    prop_oneof![
        any::<String>().prop_map(Value::StringValue),
        any::<i64>().prop_map(Value::IntValue),
        any::<f64>().prop_map(Value::DoubleValue),
        any::<bool>().prop_map(Value::BoolValue),
        proptest::collection::vec(any::<String>(), 0..3).prop_map(|v| {
            Value::ArrayValue(opentelemetry_proto::tonic::common::v1::ArrayValue {
                values: v
                    .into_iter()
                    .map(|s| AnyValue {
                        value: Some(Value::StringValue(s)),
                    })
                    .collect(),
            })
        }),
    ]
}

fn key() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(semconv::RECEIVED_MS.to_string()),
        Just(semconv::SOURCE.to_string()),
        Just(semconv::FORWARDED_MS.to_string()),
        Just(semconv::OUTCOME.to_string()),
        Just(semconv::HTTP_HEADER_BUDGET_MS.to_string()),
        Just(semconv::RPC_METADATA_GRPC_TIMEOUT.to_string()),
        Just(semconv::HTTP_HEADER_REQUEST_DEADLINE.to_string()),
        any::<String>(),
    ]
}

fn span() -> impl Strategy<Value = otlp::Span> {
    // Mostly well-formed ids, so the attribute paths are exercised too.
    let id = |len: usize| {
        prop_oneof![
            8 => proptest::collection::vec(any::<u8>(), len..=len),
            1 => proptest::collection::vec(any::<u8>(), 0..20),
        ]
    };
    let parent = prop_oneof![
        2 => Just(Vec::new()),
        6 => proptest::collection::vec(any::<u8>(), 8..=8),
        1 => proptest::collection::vec(any::<u8>(), 0..12),
    ];
    (
        id(16),
        id(8),
        parent,
        any::<String>(),
        any::<i32>(),
        any::<u64>(),
        any::<u64>(),
        proptest::collection::vec((key(), any_value()), 0..6),
    )
        .prop_map(
            |(trace_id, span_id, parent_span_id, name, kind, start, end, attrs)| otlp::Span {
                trace_id,
                span_id,
                parent_span_id,
                name,
                kind,
                start_time_unix_nano: start,
                end_time_unix_nano: end,
                attributes: attrs
                    .into_iter()
                    .map(|(key, v)| KeyValue {
                        key,
                        value: Some(AnyValue { value: Some(v) }),
                        ..Default::default()
                    })
                    .collect(),
                ..Default::default()
            },
        )
}

/// A length-delimited field, by hand (prost never writes a field twice; other encoders may).
fn len_field(tag: u32, bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    prost::encoding::encode_key(tag, prost::encoding::WireType::LengthDelimited, &mut out);
    prost::encoding::encode_varint(bytes.len() as u64, &mut out);
    out.extend_from_slice(bytes);
    out
}

#[test]
fn repeated_value_fields_merge_as_prost_merges_them() {
    let kv = |key: &str, value: Value| {
        KeyValue {
            key: key.into(),
            value: Some(AnyValue { value: Some(value) }),
            ..Default::default()
        }
        .encode_to_vec()
    };
    let header = |v: &str| {
        Value::ArrayValue(opentelemetry_proto::tonic::common::v1::ArrayValue {
            values: vec![AnyValue {
                value: Some(Value::StringValue(v.into())),
            }],
        })
    };
    // Concatenated encodings are one message with each field twice.
    let attributes = [
        [
            kv(semconv::RECEIVED_MS, Value::StringValue("x".into())),
            kv(semconv::RECEIVED_MS, Value::IntValue(800)),
        ]
        .concat(),
        [
            kv(semconv::HTTP_HEADER_GRPC_TIMEOUT, header("2S")),
            kv(semconv::HTTP_HEADER_GRPC_TIMEOUT, header("9S")),
        ]
        .concat(),
        [
            kv(semconv::FORWARDED_MS, Value::IntValue(5)),
            kv(semconv::FORWARDED_MS, Value::BoolValue(true)),
        ]
        .concat(),
    ];
    let mut span = otlp::Span {
        trace_id: vec![1; 16],
        span_id: vec![2; 8],
        name: "GET /".into(),
        kind: 2,
        ..Default::default()
    }
    .encode_to_vec();
    for a in &attributes {
        span.extend(len_field(9, a));
    }
    let body = len_field(1, &len_field(2, &len_field(2, &span)));
    let fast = decode_protobuf(&body, &mut Interner::default(), true).unwrap();
    let mut request = ExportTraceServiceRequest::decode(body.as_slice()).unwrap();
    let slow = decode_request(&mut request, &mut Interner::default(), true);
    assert_eq!(fast.spans, slow.spans);
    assert_eq!(fast.attributes, slow.attributes);
    assert_eq!(fast.spans[0].budget.received_ms, Some(800));
    assert_eq!(fast.spans[0].budget.forwarded_ms, None);
}

proptest! {

    #[test]
    fn any_request_decodes_without_panicking_and_every_span_is_counted(
        spans in proptest::collection::vec(span(), 0..12)
    ) {
        let total = spans.len();
        let valid = spans
            .iter()
            .filter(|s| {
                s.trace_id.len() == 16
                    && s.trace_id.iter().any(|b| *b != 0)
                    && s.span_id.len() == 8
                    && s.span_id.iter().any(|b| *b != 0)
                    && matches!(s.parent_span_id.len(), 0 | 8)
            })
            .count();
        let mut request = ExportTraceServiceRequest {
            resource_spans: vec![otlp::ResourceSpans {
                scope_spans: vec![otlp::ScopeSpans { spans, ..Default::default() }],
                ..Default::default()
            }],
        };
        let decoded = decode_request(&mut request, &mut Interner::default(), true);
        prop_assert_eq!(decoded.spans.len(), valid);
        prop_assert_eq!(decoded.spans.len() as u64 + decoded.rejected, total as u64);
        prop_assert_eq!(decoded.attributes.len(), valid);
        for s in &decoded.spans {
            prop_assert!(s.name.len() <= MAX_NAME_BYTES);
            prop_assert!(s.parent_span_id != Some(SpanId([0; 8])));
        }
    }

    #[test]
    fn reading_the_bytes_in_place_gives_what_prost_then_decode_request_give(
        spans in proptest::collection::vec(
            (span(), proptest::option::of(0i32..4)), 0..12),
        service in proptest::option::of("[a-z]{1,8}"),
        split in 0usize..12,
        keep in any::<bool>(),
    ) {
        let spans: Vec<otlp::Span> = spans
            .into_iter()
            .map(|(mut s, code)| {
                s.status = code.map(|code| otlp::Status { code, ..Default::default() });
                s
            })
            .collect();
        let resource = service.map(|name| opentelemetry_proto::tonic::resource::v1::Resource {
            attributes: vec![KeyValue {
                key: "service.name".into(),
                value: Some(AnyValue { value: Some(Value::StringValue(name)) }),
                ..Default::default()
            }],
            ..Default::default()
        });
        // Two scopes, so spans of one resource come from more than one list.
        let split = split.min(spans.len());
        let (a, b) = spans.split_at(split);
        let request = ExportTraceServiceRequest {
            resource_spans: vec![otlp::ResourceSpans {
                resource,
                scope_spans: vec![
                    otlp::ScopeSpans { spans: a.to_vec(), ..Default::default() },
                    otlp::ScopeSpans { spans: b.to_vec(), ..Default::default() },
                ],
                ..Default::default()
            }],
        };
        let bytes = request.encode_to_vec();
        let mut interner = Interner::default();
        let fast = decode_protobuf(&bytes, &mut interner, keep).unwrap();
        let mut decoded = ExportTraceServiceRequest::decode(bytes.as_slice()).unwrap();
        let slow = decode_request(&mut decoded, &mut interner, keep);
        prop_assert_eq!(&fast.spans, &slow.spans);
        prop_assert_eq!(&fast.attributes, &slow.attributes);
        if keep {
            // What is kept decodes to exactly the valid spans' attributes, in order.
            let expected: Vec<Vec<KeyValue>> = request
                .resource_spans
                .iter()
                .flat_map(|r| &r.scope_spans)
                .flat_map(|s| &s.spans)
                .filter(|s| decode_span(s, &Arc::from("x"), &mut Interner::default(), Carriers::builtin()).is_ok())
                .map(|s| s.attributes.iter().take(MAX_KEPT_ATTRIBUTES).cloned().collect())
                .collect();
            let kept: Vec<Vec<KeyValue>> =
                fast.attributes.iter().map(RawAttributes::decode).collect();
            prop_assert_eq!(kept, expected);
        }
        prop_assert_eq!(fast.rejected, slow.rejected);
        prop_assert_eq!(&fast.first_error, &slow.first_error);
        prop_assert_eq!(fast.total(), count_spans(&request));
    }

    #[test]
    fn arbitrary_bytes_never_panic_the_in_place_path(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        let fast = decode_protobuf(&bytes, &mut Interner::default(), true);
        // Whatever prost reads in full, the in-place path reads too, with the same spans.
        if let Ok(mut request) = ExportTraceServiceRequest::decode(bytes.as_slice()) {
            let slow = decode_request(&mut request, &mut Interner::default(), true);
            let fast = fast.unwrap();
            prop_assert_eq!(fast.spans, slow.spans);
            prop_assert_eq!(fast.rejected, slow.rejected);
        }
    }

    #[test]
    fn arbitrary_bytes_never_panic_the_protobuf_path(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        if let Ok(mut request) = ExportTraceServiceRequest::decode(bytes.as_slice()) {
            let decoded = decode_request(&mut request, &mut Interner::default(), false);
            prop_assert_eq!(decoded.spans.len() as u64 + decoded.rejected, count_spans(&request));
        }
    }
}

//! Inputs found by the cargo-fuzz targets in `fuzz/`, kept as regression tests.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use budget_top::ingest::decode::interner::Interner;
use budget_top::ingest::decode::{decode_protobuf, decode_request};
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value::Value};
use opentelemetry_proto::tonic::resource::v1::Resource;
use opentelemetry_proto::tonic::trace::v1 as otlp;
use prost::Message as _;

/// A request with one valid span, encoded by prost.
fn one_span() -> Vec<u8> {
    let service = KeyValue {
        key: "service.name".into(),
        value: Some(AnyValue {
            value: Some(Value::StringValue("checkout".into())),
        }),
        ..Default::default()
    };
    ExportTraceServiceRequest {
        resource_spans: vec![otlp::ResourceSpans {
            resource: Some(Resource {
                attributes: vec![service],
                ..Default::default()
            }),
            scope_spans: vec![otlp::ScopeSpans {
                spans: vec![otlp::Span {
                    trace_id: vec![1; 16],
                    span_id: vec![2; 8],
                    name: "GET /checkout".into(),
                    kind: 2,
                    start_time_unix_nano: 1_764_430_000_000_000_000,
                    end_time_unix_nano: 1_764_430_000_100_000_000,
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        }],
    }
    .encode_to_vec()
}

/// Found by `fuzz/fuzz_targets/otlp_protobuf.rs` (minimised input: the two bytes `st`).
/// `0x73` is field 14 with wire type 3 (start group), `0x74` its end group (wire type 4): an
/// unknown field in protobuf's deprecated group encoding. Protobuf readers skip unknown
/// fields whatever their wire type, and prost does; `decode_protobuf` refused the whole body
/// with "unsupported wire type", so a sender whose newer schema has such a field would have
/// every request answered 400 once the receivers use the in-place path.
#[test]
fn an_unknown_field_encoded_as_a_group_is_skipped_as_prost_skips_it() {
    for body in [b"st".to_vec(), [one_span(), b"st".to_vec()].concat()] {
        let mut request = ExportTraceServiceRequest::decode(body.as_slice())
            .expect("prost skips the unknown group");
        let slow = decode_request(&mut request, &mut Interner::default(), true);
        let fast = decode_protobuf(&body, &mut Interner::default(), true)
            .expect("the in-place path skips it too");
        assert_eq!(fast.spans, slow.spans);
        assert_eq!(fast.attributes, slow.attributes);
        assert_eq!((fast.rejected, fast.first_error), (0, None));
    }
    // Nested groups (field 14 holding field 15) are skipped whole; an end tag that closes
    // the wrong group is malformed for both readers.
    let nested = [one_span(), vec![0x73, 0x7b, 0x08, 0x01, 0x7c, 0x74]].concat();
    let mut request = ExportTraceServiceRequest::decode(nested.as_slice()).unwrap();
    let slow = decode_request(&mut request, &mut Interner::default(), true);
    let fast = decode_protobuf(&nested, &mut Interner::default(), true).unwrap();
    assert_eq!((fast.spans.len(), fast.spans), (1, slow.spans));
    let crossed = [one_span(), vec![0x73, 0x7b, 0x74, 0x7c]].concat();
    assert!(ExportTraceServiceRequest::decode(crossed.as_slice()).is_err());
    assert!(decode_protobuf(&crossed, &mut Interner::default(), true).is_err());
    // An end group without its start is malformed for both.
    let lone_end = [one_span(), b"t".to_vec()].concat();
    assert!(ExportTraceServiceRequest::decode(lone_end.as_slice()).is_err());
    assert!(decode_protobuf(&lone_end, &mut Interner::default(), true).is_err());
}

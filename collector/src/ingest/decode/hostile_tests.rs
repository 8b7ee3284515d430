use super::*;
use crate::batch::{MAX_KEPT_ATTRIBUTES, MAX_SPAN_ATTRIBUTE_BYTES, MAX_VALUE_BYTES};
use crate::ingest::decode::interner::MAX_NAME_BYTES;
use deadline_budget::analysis::BudgetSource;
use opentelemetry_proto::tonic::common::v1::{AnyValue, any_value::Value};
use prost::Message as _;

pub(super) fn one_span(span: otlp::Span, service: &str) -> ExportTraceServiceRequest {
    ExportTraceServiceRequest {
        resource_spans: vec![otlp::ResourceSpans {
            resource: Some(opentelemetry_proto::tonic::resource::v1::Resource {
                attributes: vec![KeyValue {
                    key: "service.name".into(),
                    value: Some(AnyValue {
                        value: Some(Value::StringValue(service.into())),
                    }),
                    ..Default::default()
                }],
                ..Default::default()
            }),
            scope_spans: vec![otlp::ScopeSpans {
                spans: vec![span],
                ..Default::default()
            }],
            ..Default::default()
        }],
    }
}

#[test]
fn absurd_content_is_bounded_not_trusted() {
    let attrs: Vec<KeyValue> = (0..100_000)
        .map(|i| KeyValue {
            key: format!("k{i}"),
            ..Default::default()
        })
        .collect();
    let span = otlp::Span {
        trace_id: vec![1; 16],
        span_id: vec![2; 8],
        parent_span_id: vec![2; 8], // its own parent: kept, the analysis cuts the loop
        name: "é".repeat(10_000),
        start_time_unix_nano: u64::MAX, // the year 2554
        end_time_unix_nano: 0,          // ends before it starts
        attributes: attrs,
        ..Default::default()
    };
    let mut request = one_span(span, &"s".repeat(100_000));
    let decoded = decode_request(&mut request, &mut Interner::default(), true);
    let span = &decoded.spans[0];
    assert!(span.name.len() <= MAX_NAME_BYTES && span.name.chars().all(|c| c == 'é'));
    assert!(span.service.len() <= MAX_NAME_BYTES);
    assert_eq!(span.duration_ms(), 0);
    assert_eq!(decoded.attributes[0].decode().len(), MAX_KEPT_ATTRIBUTES);
}

fn string(key: &str, value: &str) -> KeyValue {
    KeyValue {
        key: key.into(),
        value: Some(AnyValue {
            value: Some(Value::StringValue(value.into())),
        }),
        ..Default::default()
    }
}

fn good_span(attributes: Vec<KeyValue>) -> otlp::Span {
    otlp::Span {
        trace_id: vec![1; 16],
        span_id: vec![2; 8],
        name: "GET /x".into(),
        kind: 2,
        attributes,
        ..Default::default()
    }
}

#[test]
fn an_all_zero_span_id_is_rejected_like_other_invalid_ids() {
    let span = otlp::Span {
        span_id: vec![0; 8],
        ..good_span(vec![])
    };
    let body = one_span(span, "svc").encode_to_vec();
    let decoded = decode_protobuf(&body, &mut Interner::default(), false).unwrap();
    assert_eq!((decoded.spans.len(), decoded.rejected), (0, 1));
    assert!(
        decoded.first_error.unwrap().contains("span_id is all zero"),
        "the message names the field"
    );
}

#[test]
fn kept_attributes_are_bounded_per_value_and_per_span_and_say_so() {
    let mut attributes = vec![
        string("budget.source", "default"),
        string("blob", &"é".repeat(2_000_000)), // 4 MB
    ];
    // 30 values of 1 KiB: the span's 16 KiB budget keeps the first ones, then one fits no
    // more; the small attribute after them still does.
    attributes.extend((0..30).map(|i| string(&format!("k{i}"), &"x".repeat(1024))));
    attributes.push(string("last", "small"));
    let request = one_span(good_span(attributes), "svc");
    let body = request.encode_to_vec();
    let fast = decode_protobuf(&body, &mut Interner::default(), true).unwrap();
    let slow = decode_request(&mut request.clone(), &mut Interner::default(), true);
    assert_eq!(fast.attributes, slow.attributes, "both paths keep the same");
    let kept = &fast.attributes[0];
    let values = kept.decode();
    let blob = values.iter().find(|kv| kv.key == "blob").unwrap();
    let Some(Value::StringValue(blob)) = blob.value.as_ref().and_then(|v| v.value.as_ref()) else {
        panic!("the blob is kept as a string");
    };
    assert!(blob.len() < MAX_VALUE_BYTES + 64, "{}", blob.len());
    assert!(
        blob.ends_with("… [3995904 more bytes cut]"),
        "{}",
        &blob[blob.len() - 40..]
    );
    assert_eq!(kept.cut(), 1);
    assert!(kept.bytes_held() <= MAX_SPAN_ATTRIBUTE_BYTES + 64);
    assert!(kept.dropped() > 0);
    assert_eq!(values.len() + usize::from(kept.dropped()), 33);
    assert!(values.iter().any(|kv| kv.key == "last"));
    // The facts were read from every attribute, kept or not.
    assert_eq!(fast.spans[0].budget.source, Some(BudgetSource::Default));
}

/// The bytes of `request` with `from` (which must occur once) replaced by `to`, same length.
fn patched(request: &ExportTraceServiceRequest, from: &[u8], to: &[u8]) -> Vec<u8> {
    let mut body = request.encode_to_vec();
    let at = body.windows(from.len()).position(|w| w == from).unwrap();
    body[at..at + to.len()].copy_from_slice(to);
    body
}

#[test]
fn invalid_utf8_is_kept_with_replacement_characters_and_counted_on_every_path() {
    let request = one_span(good_span(vec![string("http.url", "/p?q=ok")]), "orders");
    let cases: [(&[u8], &[u8], &str); 3] = [
        (b"orders", b"ord\xffrs", "service.name"),
        (b"GET /x", b"GET \xff", "span name"),
        (b"/p?q=ok", b"/p?q=\xfe", "attribute \"http.url\""),
    ];
    for (from, to, what) in cases {
        let body = patched(&request, from, to);
        assert!(ExportTraceServiceRequest::decode(body.as_slice()).is_err());
        for keep in [false, true] {
            let fast = decode_protobuf(&body, &mut Interner::default(), keep)
                .unwrap_or_else(|e| panic!("{what}, keep {keep}: {e}"));
            assert_eq!((fast.spans.len(), fast.rejected), (1, 0), "{what}");
            assert_eq!(fast.repaired.count, 1, "{what}");
            let message = fast.message();
            assert!(
                message.contains("U+FFFD") && message.contains(what),
                "{message}"
            );
            // record's path: repair, then prost, then the same spans.
            let repaired = super::utf8::repair(&body, super::utf8::Message::Request).unwrap();
            assert_eq!(repaired.count, 1);
            let mut request = ExportTraceServiceRequest::decode(repaired.bytes.as_slice()).unwrap();
            let slow = decode_request(&mut request, &mut Interner::default(), keep);
            assert_eq!(fast.spans, slow.spans, "{what}");
            assert_eq!(fast.attributes, slow.attributes, "{what}");
        }
    }
    let fast = decode_protobuf(
        &patched(&request, b"GET /x", b"GET \xff"),
        &mut Interner::default(),
        false,
    )
    .unwrap();
    assert_eq!(&*fast.spans[0].name, "GET \u{fffd}x");
}

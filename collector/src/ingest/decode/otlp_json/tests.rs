use super::proto_form::proto_form;
use super::*;

/// A span in canonical OTLP/JSON (camelCase names, enums as numbers, 64-bit integers as
/// strings); shared with `json_lines`'s tests.
pub(in crate::ingest) const CANONICAL: &str = r#"{"resourceSpans":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"orders"}}]},
        "scopeSpans":[{"scope":{"name":"s"},"spans":[{"traceId":"0102030405060708090a0b0c0d0e0f10","spanId":"0102030405060708",
        "parentSpanId":"","name":"GET /x","kind":2,"startTimeUnixNano":"1764374400000000000","endTimeUnixNano":"1764374400100000000",
        "attributes":[{"key":"budget.received_ms","value":{"intValue":"800"}},{"key":"d","value":{"doubleValue":1.5}},
        {"key":"b","value":{"bytesValue":"aGk="}},{"key":"a","value":{"arrayValue":{"values":[{"stringValue":"x"}]}}}],
        "status":{"code":2,"message":"boom"}}]}]}]}"#;

/// The same span in the proto-name form receivers take too.
pub(in crate::ingest) const PROTO_NAMES: &str = r#"{"resource_spans":[{"resource":{"attributes":[{"key":"service.name","value":{"string_value":"orders"}}]},
        "scope_spans":[{"scope":{"name":"s"},"spans":[{"trace_id":"0102030405060708090A0B0C0D0E0F10","span_id":"0102030405060708",
        "name":"GET /x","kind":"SPAN_KIND_SERVER","start_time_unix_nano":1764374400000000000,"end_time_unix_nano":1764374400100000000,
        "attributes":[{"key":"budget.received_ms","value":{"int_value":800}},{"key":"d","value":{"double_value":"1.5"}},
        {"key":"b","value":{"bytes_value":"aGk"}},{"key":"a","value":{"array_value":{"values":[{"string_value":"x"}]}}}],
        "status":{"code":"STATUS_CODE_ERROR","message":"boom"}}]}]}]}"#;

#[test]
fn proto_names_enum_names_and_numbers_read_as_the_canonical_form() {
    let canonical = parse_request(CANONICAL.as_bytes()).unwrap();
    let proto = parse_request(PROTO_NAMES.as_bytes()).unwrap();
    assert_eq!(canonical, proto);
    let span = &canonical.resource_spans[0].scope_spans[0].spans[0];
    assert_eq!(span.kind, 2);
    assert_eq!(span.status.as_ref().unwrap().code, 2);
    assert_eq!(span.start_time_unix_nano, 1_764_374_400_000_000_000);
    assert_eq!(span.trace_id, (1..=16).collect::<Vec<u8>>());
    // And it reads what opentelemetry-proto's serde reads, for the canonical form.
    let serde: ExportTraceServiceRequest = serde_json::from_str(CANONICAL).unwrap();
    assert_eq!(canonical, serde);
}

#[test]
fn a_bad_id_or_enum_is_an_error_that_names_the_field() {
    let bad_id = CANONICAL.replace("\"spanId\":\"0102030405060708\"", "\"spanId\":\"xyz\"");
    let error = parse_request(bad_id.as_bytes()).unwrap_err().to_string();
    assert!(
        error.contains("resourceSpans[0].scopeSpans[0].spans[0].spanId") && error.contains("hex"),
        "{error}"
    );
    let error = parse_request(
        PROTO_NAMES
            .replace("SPAN_KIND_SERVER", "SERVERISH")
            .as_bytes(),
    )
    .unwrap_err()
    .to_string();
    assert!(
        error.contains("resource_spans[0].scope_spans[0].spans[0].kind")
            && error.contains("SERVERISH"),
        "{error}"
    );
    let error = parse_request(
        br#"{"resourceSpans":[{"scopeSpans":[{"spans":[{"startTimeUnixNano":"-1"}]}]}]}"#,
    )
    .unwrap_err()
    .to_string();
    assert!(error.contains("startTimeUnixNano"), "{error}");
    assert!(parse_request(b"{} trailing").is_err());
}

#[test]
fn an_error_names_no_field_it_cannot_name_and_says_where_without_a_line() {
    // A map key that is not a string: no `?` for the field, the byte where it was found.
    let error = parse_request(b"{1:2}").unwrap_err();
    assert_eq!(error.field, None);
    assert_eq!(error.message, "key must be a string");
    assert_eq!(error.offset, Some(1));
    assert_eq!(error.to_string(), "key must be a string");
    let error =
        parse_request(br#"{"resourceSpans":[{"scopeSpans":[{"spans":[{1:2}]}]}]}"#).unwrap_err();
    assert_eq!(
        error.field.as_deref(),
        Some("resourceSpans[0].scopeSpans[0].spans[0]")
    );
    assert!(!error.to_string().contains('?'), "{error}");
    assert!(!error.to_string().contains("line 1"), "{error}");
}

#[test]
fn nulls_and_unknown_fields_read_as_absent() {
    let r = parse_request(
            br#"{"resourceSpans":[{"resource":null,"scopeSpans":[{"spans":[{"traceId":null,"attributes":null,"novel":{"a":1}}]}]}],"extra":1}"#,
        )
        .unwrap();
    let span = &r.resource_spans[0].scope_spans[0].spans[0];
    assert!(span.trace_id.is_empty() && span.attributes.is_empty());
}

#[test]
fn the_last_value_field_wins_and_unknown_ones_are_skipped() {
    let r = parse_request(
        br#"{"resourceSpans":[{"scopeSpans":[{"spans":[{"attributes":[
            {"key":"a","value":{"stringValue":"x","intValue":5,"novel":[1],"boolValue":null}},
            {"key":"b","key_strindex":3,"value":{"int_value":"7","intValue":"8"}}]}]}]}]}"#,
    )
    .unwrap();
    let attributes = &r.resource_spans[0].scope_spans[0].spans[0].attributes;
    use common::any_value::Value;
    assert_eq!(
        attributes[0].value.as_ref().unwrap().value,
        Some(Value::IntValue(5))
    );
    assert_eq!(
        attributes[1].value.as_ref().unwrap().value,
        Some(Value::IntValue(8))
    );
    assert_eq!(attributes[1].key_strindex, 3);
}

/// An attribute of `key` holding `value`.
fn key_value(key: String, value: common::any_value::Value) -> common::KeyValue {
    common::KeyValue {
        key,
        value: Some(common::AnyValue { value: Some(value) }),
        ..Default::default()
    }
}

fn any_value() -> impl proptest::strategy::Strategy<Value = common::any_value::Value> {
    use common::any_value::Value;
    use proptest::prelude::*;
    let leaf = prop_oneof![
        any::<String>().prop_map(Value::StringValue),
        any::<bool>().prop_map(Value::BoolValue),
        any::<i64>().prop_map(Value::IntValue),
        any::<f64>().prop_map(Value::DoubleValue),
        proptest::collection::vec(any::<u8>(), 0..6).prop_map(Value::BytesValue),
    ];
    leaf.prop_recursive(2, 8, 3, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..3).prop_map(|v| {
                Value::ArrayValue(common::ArrayValue {
                    values: v
                        .into_iter()
                        .map(|v| common::AnyValue { value: Some(v) })
                        .collect(),
                })
            }),
            proptest::collection::vec(("[a-z]{0,3}", inner), 0..3).prop_map(|kvs| {
                Value::KvlistValue(common::KeyValueList {
                    values: kvs.into_iter().map(|(key, v)| key_value(key, v)).collect(),
                })
            }),
        ]
    })
}

proptest::proptest! {
    /// Whatever opentelemetry-proto's reader reads from canonical OTLP/JSON, this reader
    /// reads the same; and the proto-name form of it reads the same again.
    #[test]
    fn canonical_json_reads_as_opentelemetry_proto_reads_it_and_so_does_its_proto_form(
        spans in proptest::collection::vec(
            (
                proptest::collection::vec(proptest::prelude::any::<u8>(), 0..17),
                proptest::collection::vec(proptest::prelude::any::<u8>(), 0..9),
                proptest::prelude::any::<String>(),
                0i32..6,
                proptest::prelude::any::<u64>(),
                proptest::collection::vec(("[a-z.]{0,6}", any_value()), 0..4),
                proptest::option::of((proptest::prelude::any::<String>(), 0i32..3)),
            ),
            0..4,
        )
    ) {
        let request = ExportTraceServiceRequest {
            resource_spans: vec![trace::ResourceSpans {
                scope_spans: vec![trace::ScopeSpans {
                    spans: spans
                        .into_iter()
                        .map(|(trace_id, span_id, name, kind, start, attributes, status)| trace::Span {
                            trace_id,
                            span_id,
                            name,
                            kind,
                            start_time_unix_nano: start,
                            attributes: attributes
                                .into_iter()
                                .map(|(key, v)| key_value(key, v))
                                .collect(),
                            status: status.map(|(message, code)| trace::Status { message, code }),
                            ..Default::default()
                        })
                        .collect(),
                    ..Default::default()
                }],
                ..Default::default()
            }],
        };
        use prost::Message as _;
        let json = serde_json::to_vec(&request).unwrap();
        let theirs: ExportTraceServiceRequest = serde_json::from_slice(&json).unwrap();
        let ours = parse_request(&json).unwrap();
        // Compared encoded: a NaN double is not equal to itself.
        proptest::prop_assert_eq!(ours.encode_to_vec(), theirs.encode_to_vec());
        // Through serde_json's `Value` (which may move a double by one ulp, both forms alike).
        let value: serde_json::Value = serde_json::from_slice(&json).unwrap();
        let canonical: ExportTraceServiceRequest =
            serde_json::from_str(&value.to_string()).unwrap();
        let proto = proto_form(&value).to_string();
        let again = parse_request(proto.as_bytes()).unwrap();
        proptest::prop_assert_eq!(again.encode_to_vec(), canonical.encode_to_vec());
    }
}

#[test]
fn base64_reads_both_alphabets_with_or_without_padding() {
    assert_eq!(base64("aGk=").unwrap(), b"hi");
    assert_eq!(base64("aGk").unwrap(), b"hi");
    assert_eq!(base64("-_8").unwrap(), [0xfb, 0xff]);
    assert_eq!(base64("+/8=").unwrap(), [0xfb, 0xff]);
    assert_eq!(base64("").unwrap(), b"");
    assert!(base64("a").is_none() && base64("a!==").is_none() && base64("aa===").is_none());
}

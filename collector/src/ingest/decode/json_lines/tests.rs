use super::*;
use crate::ingest::decode::otlp_json::proto_form::proto_form;
use crate::ingest::decode::otlp_json::tests::{CANONICAL, PROTO_NAMES};
use crate::ingest::decode::{self, otlp_json};
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1 as common;
use opentelemetry_proto::tonic::resource::v1 as resource;
use opentelemetry_proto::tonic::trace::v1 as trace;

/// What the general path reads from `line`: parsed, then decoded.
fn general(line: &str) -> Option<String> {
    let mut request = otlp_json::parse_request_str(line).ok()?;
    let mut interner = Interner::default();
    Some(shown(&decode::decode_request(
        &mut request,
        &mut interner,
        false,
    )))
}

/// What this reader reads from `line`.
fn fast(line: &str) -> Option<String> {
    decode_line(line, &mut Interner::default()).map(|out| shown(&out))
}

fn shown(out: &DecodedRequest) -> String {
    format!("{:?} {} {:?}", out.spans, out.rejected, out.first_error)
}

/// This reader takes `line` and reads what the general path reads.
#[track_caller]
fn same(line: &str) {
    let general = general(line).unwrap_or_else(|| panic!("the general reader fails: {line}"));
    let fast = fast(line).unwrap_or_else(|| panic!("left to the general reader: {line}"));
    assert_eq!(fast, general, "{line}");
}

/// This reader leaves `line` to the general one.
#[track_caller]
fn left(line: &str) {
    assert_eq!(fast(line), None, "{line}");
}

/// A span of `budget-demo load` with its attributes, as `record` writes it.
const DEMO: &str = r#"{"resourceSpans":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"gateway"}},{"key":"telemetry.sdk.language","value":{"stringValue":"rust"}}],"droppedAttributesCount":0,"entityRefs":[]},"scopeSpans":[{"scope":{"name":"budget-demo-load","version":"","attributes":[],"droppedAttributesCount":0},"spans":[{"traceId":"b71d9e42000000000000000000000000","spanId":"0000000000000001","traceState":"","parentSpanId":"","flags":0,"name":"GET /gateway","kind":2,"startTimeUnixNano":"1764547200000000000","endTimeUnixNano":"1764547200048000000","attributes":[{"key":"http.request.method","value":{"stringValue":"GET"}},{"key":"http.response.status_code","value":{"intValue":"200"}},{"key":"budget.outcome","value":{"stringValue":"ok"}},{"key":"budget.remaining_at_start_ms","value":{"intValue":"1200"}},{"key":"budget.source","value":{"stringValue":"default"}},{"key":"budget.default_ms","value":{"intValue":"1200"}}],"droppedAttributesCount":0,"events":[],"droppedEventsCount":0,"links":[],"droppedLinksCount":0,"status":null},{"traceId":"b71d9e42000000000000000000000000","spanId":"0000000000000002","traceState":"","parentSpanId":"0000000000000001","flags":0,"name":"GET bff","kind":3,"startTimeUnixNano":"1764547200005000000","endTimeUnixNano":"1764547200047000000","attributes":[{"key":"server.port","value":{"intValue":"8080"}},{"key":"budget.remaining_ms","value":{"intValue":"1195"}},{"key":"budget.forwarded_ms","value":{"intValue":"1185"}},{"key":"budget.timeout_ms","value":{"intValue":"1185"}},{"key":"budget.sla_ms","value":{"intValue":"2000"}},{"key":"budget.attempt","value":{"intValue":"1"}}],"droppedAttributesCount":0,"events":[],"droppedEventsCount":0,"links":[],"droppedLinksCount":0,"status":null}]}]}]}"#;

#[test]
fn the_usual_forms_read_as_the_general_path_reads_them() {
    same(CANONICAL);
    same(PROTO_NAMES);
    same(DEMO);
    same("{}");
    same(r#"{"resourceSpans":null}"#);
    same(r#" { "resourceSpans" : [ ] } "#);
    // Nulls and unknown fields read as absent; the last value field wins.
    same(
        r#"{"resourceSpans":[{"resource":null,"scopeSpans":[{"spans":[{"traceId":null,"attributes":null,"novel":{"a":[1,-2.5e3,true,false,null,"x\"y"]}}]}]}],"extra":1}"#,
    );
    same(
        r#"{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"0102030405060708090a0b0c0d0e0f10","spanId":"0102030405060708","attributes":[
            {"key":"budget.received_ms","value":{"stringValue":"x","intValue":5,"novel":[1],"boolValue":null}},
            {"key":"budget.forwarded_ms","key_strindex":3,"value":{"int_value":"7","intValue":"-8"}},
            {"key":"budget.timeout_ms","value":{"doubleValue":"NaN"}},
            {"key":"budget.sla_ms","value":{"doubleValue":2.5e3}},
            {"key":"http.request.header.x-budget-ms","value":{"arrayValue":{"values":[{"stringValue":"250"},{"intValue":1}]}}},
            {"key":"kv","value":{"kvlistValue":{"values":[{"key":"a","value":{"boolValue":true}}]}}},
            {"key":"url.path","value":{"stringValue":"http://x/\"quoted\"\u00e9\n"}}]}]}]}]}"#,
    );
    // The resource after the spans still names their service; events, links and statuses.
    same(
        r#"{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"0102030405060708090a0b0c0d0e0f10","spanId":"0102030405060708","kind":"SPAN_KIND_CLIENT",
            "events":[{"name":"retry"},{"name":"exception","timeUnixNano":5,"attributes":[{"key":"exception.message","value":{"stringValue":"a\tb"}}]}],
            "links":[{"traceId":"0102030405060708090a0b0c0d0e0f10","spanId":"0102030405060708","flags":1}],"status":{}}]}],
            "resource":{"attributes":[{"key":"service.name","value":{"stringValue":"late"}}]}}]}"#,
    );
    // Rejected spans are counted with the first reason, as the general path counts them.
    same(
        r#"{"resourceSpans":[{"scopeSpans":[{"spans":[{"name":"no ids"},{"traceId":"00000000000000000000000000000000","spanId":"0102030405060708"},
            {"traceId":"0102","spanId":"0102030405060708"},{"traceId":"0102030405060708090a0b0c0d0e0f10","spanId":"0102030405060708","parentSpanId":"01"}]}]}]}"#,
    );
    // A service name that is not a string, and a second one after it, say nothing.
    same(
        r#"{"resourceSpans":[{"resource":{"attributes":[{"key":"service.name","value":{"intValue":1}},{"key":"service.name","value":{"stringValue":"b"}}]},
            "scopeSpans":[{"spans":[{"traceId":"0102030405060708090a0b0c0d0e0f10","spanId":"0102030405060708"}]}]}]}"#,
    );
}

#[test]
fn what_this_reader_does_not_take_is_left_to_the_general_one() {
    for line in [
        // Not JSON, not a request, or more after it.
        "",
        "[]",
        r#"{"resourceSpans":[}"#,
        r#"{"resourceSpans":[],}"#,
        "{} x",
        r#"{"a":01}"#,
        r#"{"a":1.}"#,
        r#"{"a":"tab	inside"}"#,
        r#"{"a":"\x"}"#,
        // A field twice (camelCase and snake_case are one field).
        r#"{"resourceSpans":[],"resource_spans":[]}"#,
        // Escapes where the analysis reads the text; a lone surrogate anywhere.
        r#"{"resourceSpans":[{"scopeSpans":[{"spans":[{"name":"a\"b"}]}]}]}"#,
        r#"{"resourceSpans":[{"scopeSpans":[{"spans":[{"attributes":[{"key":"budget.source","value":{"stringValue":"\u0064efault"}}]}]}]}]}"#,
        r#"{"resourceSpans\u0000":[]}"#,
        r#"{"x":"\ud800"}"#,
        // Integers the general reader reads another way, or rejects.
        r#"{"resourceSpans":[{"scopeSpans":[{"spans":[{"startTimeUnixNano":1e3}]}]}]}"#,
        r#"{"resourceSpans":[{"scopeSpans":[{"spans":[{"startTimeUnixNano":"-1"}]}]}]}"#,
        r#"{"resourceSpans":[{"scopeSpans":[{"spans":[{"flags":4294967296}]}]}]}"#,
        r#"{"resourceSpans":[{"scopeSpans":[{"spans":[{"kind":"SERVERISH"}]}]}]}"#,
        r#"{"resourceSpans":[{"scopeSpans":[{"spans":[{"spanId":"xyz"}]}]}]}"#,
        // A byte that is not a hex digit, high or low in its pair, first or last.
        r#"{"resourceSpans":[{"scopeSpans":[{"spans":[{"spanId":"g102030405060708"}]}]}]}"#,
        r#"{"resourceSpans":[{"scopeSpans":[{"spans":[{"spanId":"010203040506070:"}]}]}]}"#,
        r#"{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"0102030405060708090a0b0c0d0e0f1G"}]}]}]}"#,
        // Past u64 (20 digits), and past 20 digits.
        r#"{"resourceSpans":[{"scopeSpans":[{"spans":[{"startTimeUnixNano":"18446744073709551616"}]}]}]}"#,
        r#"{"resourceSpans":[{"scopeSpans":[{"spans":[{"startTimeUnixNano":"100000000000000000000"}]}]}]}"#,
    ] {
        left(line);
    }
}

#[test]
fn integers_and_ids_at_their_edges_read_as_the_general_path_reads_them() {
    for start in [
        "0",
        "9999999999999999999", // 19 digits: the most a u64 sums without overflow
        "10000000000000000000", // 20 digits
        "18446744073709551615", // u64::MAX
    ] {
        same(&format!(
            r#"{{"resourceSpans":[{{"scopeSpans":[{{"spans":[{{"traceId":"0102030405060708090A0B0C0D0E0F10","spanId":"abcdefABCDEF0099","startTimeUnixNano":"{start}","endTimeUnixNano":{start}}}]}}]}}]}}"#
        ));
    }
    // 20 digits with leading zeros (a string: a JSON number cannot have them).
    same(
        r#"{"resourceSpans":[{"scopeSpans":[{"spans":[{"startTimeUnixNano":"00000000000000000001"}]}]}]}"#,
    );
}

/// A JSON text of nested arrays `depth` deep.
fn nested(depth: usize) -> String {
    format!(r#"{{"x":{}{}}}"#, "[".repeat(depth), "]".repeat(depth))
}

#[test]
fn deep_nesting_is_left_to_the_general_reader() {
    same(&nested(50));
    left(&nested(200));
}

proptest::proptest! {
    /// Any line this reader takes, the general reader takes and reads alike: a valid request
    /// with a byte changed, taken out or put in.
    #[test]
    fn what_this_reader_takes_the_general_reader_reads_alike(
        base in 0usize..3,
        at in proptest::prelude::any::<proptest::sample::Index>(),
        byte in proptest::prelude::any::<u8>(),
        how in 0u8..3,
    ) {
        let line = [CANONICAL, PROTO_NAMES, DEMO][base];
        let mut bytes = line.as_bytes().to_vec();
        let i = at.index(bytes.len());
        match how {
            0 => bytes[i] = byte,
            1 => { bytes.remove(i); }
            _ => bytes.insert(i, byte),
        }
        if let Ok(line) = std::str::from_utf8(&bytes)
            && let Some(fast) = fast(line)
        {
            proptest::prop_assert_eq!(Some(fast), general(line), "{}", line);
        }
    }
}

fn text() -> impl proptest::strategy::Strategy<Value = String> {
    use proptest::prelude::*;
    prop_oneof![
        4 => "[a-z /._-]{0,12}",
        1 => any::<String>(),
    ]
}

fn attribute() -> impl proptest::strategy::Strategy<Value = common::KeyValue> {
    use common::any_value::Value as V;
    use proptest::prelude::*;
    let key = prop_oneof![
        Just(semconv::RECEIVED_MS.to_owned()),
        Just(semconv::SOURCE.to_owned()),
        Just(semconv::FORWARDED_MS.to_owned()),
        Just(semconv::OUTCOME.to_owned()),
        Just(semconv::ERROR_TYPE.to_owned()),
        Just(semconv::HTTP_HEADER_BUDGET_MS.to_owned()),
        Just(semconv::RPC_METADATA_GRPC_TIMEOUT.to_owned()),
        text(),
    ];
    let value = prop_oneof![
        text().prop_map(V::StringValue),
        "-?[0-9]{1,4}".prop_map(V::StringValue),
        any::<i64>().prop_map(V::IntValue),
        any::<bool>().prop_map(V::BoolValue),
        any::<f64>().prop_map(V::DoubleValue),
        (-1000i32..1000).prop_map(|n| V::DoubleValue(f64::from(n) / 4.0)),
        proptest::collection::vec(any::<u8>(), 0..5).prop_map(V::BytesValue),
        proptest::collection::vec(text(), 0..3).prop_map(|v| {
            V::ArrayValue(common::ArrayValue {
                values: v
                    .into_iter()
                    .map(|s| common::AnyValue {
                        value: Some(V::StringValue(s)),
                    })
                    .collect(),
            })
        }),
    ];
    (key, proptest::option::of(value)).prop_map(|(key, value)| common::KeyValue {
        key,
        value: Some(common::AnyValue { value }),
        ..Default::default()
    })
}

fn otlp_span() -> impl proptest::strategy::Strategy<Value = trace::Span> {
    use proptest::prelude::*;
    let id = |len: usize| {
        prop_oneof![
            8 => proptest::collection::vec(any::<u8>(), len..=len),
            1 => proptest::collection::vec(any::<u8>(), 0..20),
        ]
    };
    (
        (id(16), id(8), proptest::option::of(id(8))),
        text(),
        0i32..7,
        (any::<u64>(), any::<u64>()),
        proptest::collection::vec(attribute(), 0..6),
        proptest::collection::vec(prop_oneof![Just("exception".to_owned()), text()], 0..2),
        proptest::option::of((text(), 0i32..3)),
    )
        .prop_map(
            |(
                (trace_id, span_id, parent),
                name,
                kind,
                (start, end),
                attributes,
                events,
                status,
            )| {
                trace::Span {
                    trace_id,
                    span_id,
                    parent_span_id: parent.unwrap_or_default(),
                    name,
                    kind,
                    start_time_unix_nano: start,
                    end_time_unix_nano: end,
                    attributes,
                    events: events
                        .into_iter()
                        .map(|name| trace::span::Event {
                            name,
                            ..Default::default()
                        })
                        .collect(),
                    status: status.map(|(message, code)| trace::Status { message, code }),
                    ..Default::default()
                }
            },
        )
}

proptest::proptest! {
    /// Requests as opentelemetry-proto writes them, and in their proto-name form: this reader
    /// reads what the general path reads, or leaves the line to it; and it takes the plain ones.
    #[test]
    fn requests_read_as_the_general_path_reads_them(
        resources in proptest::collection::vec(
            (proptest::option::of(text()), proptest::collection::vec(otlp_span(), 0..4)),
            0..3,
        )
    ) {
        let request = ExportTraceServiceRequest {
            resource_spans: resources
                .into_iter()
                .map(|(service, spans)| trace::ResourceSpans {
                    resource: service.map(|name| resource::Resource {
                        attributes: vec![common::KeyValue {
                            key: "service.name".into(),
                            value: Some(common::AnyValue {
                                value: Some(common::any_value::Value::StringValue(name)),
                            }),
                            ..Default::default()
                        }],
                        ..Default::default()
                    }),
                    scope_spans: vec![trace::ScopeSpans {
                        spans,
                        ..Default::default()
                    }],
                    ..Default::default()
                })
                .collect(),
        };
        let canonical = serde_json::to_string(&request).unwrap();
        let value: serde_json::Value = serde_json::from_str(&canonical).unwrap();
        let proto = proto_form(&value).to_string();
        for line in [&canonical, &proto] {
            let general = general(line);
            proptest::prop_assert!(general.is_some(), "{}", line);
            match fast(line) {
                Some(fast) => proptest::prop_assert_eq!(Some(fast), general, "{}", line),
                // Only for an escape, a double as an exponent, or a long integer.
                None => proptest::prop_assert!(
                    line.contains('\\') || line.contains("doubleValue") || line.contains("double_value")
                        || line.contains("e+") || line.contains("e-"),
                    "left: {}", line
                ),
            }
        }
    }
}

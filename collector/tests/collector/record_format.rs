//! `budget-top record` writes what the OpenTelemetry Collector's file exporter writes, so a
//! recording can go back into a Collector (`otlpjsonfile` receiver) or any OTLP/JSON tool: one
//! ExportTraceServiceRequest per line, camelCase keys, lowercase hex ids, times and `intValue`
//! as strings, `kind` as a number, every attribute value type kept.

use std::time::Duration;

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use prost::Message as _;
use serde_json::Value as Json;

use crate::collector_file::file_exporter_lines;
use crate::support::{listen, scratch};

#[track_caller]
fn assert_hex(value: &Json, len: usize, what: &str) {
    let text = value
        .as_str()
        .unwrap_or_else(|| panic!("{what} is a string: {value}"));
    assert!(
        text.len() == len && text.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')),
        "{what} is {len} lowercase hex digits: {text}"
    );
}

#[track_caller]
fn assert_decimal_string(value: &Json, what: &str) {
    let text = value
        .as_str()
        .unwrap_or_else(|| panic!("{what} is a string: {value}"));
    assert!(
        !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()),
        "{what}: {text}"
    );
}

#[test]
fn a_recording_is_in_the_collector_file_exporters_spelling() {
    let dir = scratch("record_format");
    let path = dir.join("rec.jsonl");
    let recorder = listen(&["record", "--output", path.to_str().unwrap()]);
    // Sent as protobuf, so the JSON on disk is budget-top's own writing, not an echo.
    let [first, _] = file_exporter_lines();
    let request: ExportTraceServiceRequest = serde_json::from_str(&first).unwrap();
    recorder.post("application/x-protobuf", request.encode_to_vec());
    let finished = recorder.terminate(Duration::from_secs(30));
    assert_eq!(finished.code, Some(0), "{finished:?}");
    let text = std::fs::read_to_string(&path).unwrap();
    assert_eq!(text.lines().count(), 1, "one request, one line");
    let recorded: Json = serde_json::from_str(text.lines().next().unwrap()).unwrap();

    let resources = recorded["resourceSpans"].as_array().expect("resourceSpans");
    assert_eq!(resources.len(), 2, "{recorded:#}");
    let mut spans = 0;
    for resource in resources {
        assert_eq!(
            resource["resource"]["attributes"][0]["key"], "service.name",
            "{resource:#}"
        );
        assert!(resource["resource"]["attributes"][0]["value"]["stringValue"].is_string());
        for scope in resource["scopeSpans"].as_array().expect("scopeSpans") {
            assert_eq!(scope["scope"]["version"], "1.2.0", "{scope:#}");
            for span in scope["spans"].as_array().expect("spans") {
                spans += 1;
                assert_hex(&span["traceId"], 32, "traceId");
                assert_hex(&span["spanId"], 16, "spanId");
                match span.get("parentSpanId") {
                    None => {}
                    Some(Json::String(p)) if p.is_empty() => {}
                    Some(p) => assert_hex(p, 16, "parentSpanId"),
                }
                assert!(span["kind"].is_u64(), "kind is a number: {span:#}");
                assert_decimal_string(&span["startTimeUnixNano"], "startTimeUnixNano");
                assert_decimal_string(&span["endTimeUnixNano"], "endTimeUnixNano");
                for attribute in span["attributes"].as_array().expect("attributes") {
                    if let Some(int) = attribute["value"].get("intValue") {
                        assert_decimal_string(int, "intValue");
                    }
                }
            }
        }
    }
    assert_eq!(spans, 5, "{recorded:#}");

    // Every value type of the search span survives as the Collector spells it.
    let search = resources[0]["scopeSpans"][0]["spans"][1].clone();
    assert_eq!(search["name"], "GET /search");
    let value = |key: &str| {
        search["attributes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|a| a["key"] == key)
            .unwrap_or_else(|| panic!("{key} kept: {search:#}"))["value"]
            .clone()
    };
    assert_eq!(
        value("budget.default_ms"),
        serde_json::json!({"intValue": "500"})
    );
    assert_eq!(value("ratio"), serde_json::json!({"doubleValue": 0.5}));
    assert_eq!(value("raw"), serde_json::json!({"bytesValue": "AAEC"}));
    assert_eq!(
        value("tags"),
        serde_json::json!({"arrayValue": {"values": [{"stringValue": "a"}, {"intValue": "7"}]}})
    );
    assert_eq!(
        value("nested"),
        serde_json::json!({"kvlistValue": {"values": [{"key": "k", "value": {"stringValue": "v"}}]}})
    );
    assert_eq!(search["events"][0]["name"], "cache miss");
    assert_decimal_string(&search["events"][0]["timeUnixNano"], "event timeUnixNano");
    assert_hex(&search["links"][0]["traceId"], 32, "link traceId");
    assert_eq!(search["status"]["code"], 1);
}

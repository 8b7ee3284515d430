//! `check --input` reads what the OpenTelemetry Collector's `file` exporter writes
//! (`format: json`): one ExportTraceServiceRequest per line in the Collector's own OTLP/JSON
//! spelling (pdata's marshaler), written here as text rather than by our own serializer:
//! `resourceSpans`/`scopeSpans`, hex ids, an empty `parentSpanId` on roots, `kind` as a number,
//! times and `intValue` as strings, `flags`, `status: {}`, events, links, every attribute value
//! type, `schemaUrl`, and fields newer than our decoder (`entityRefs`). Plain, gzip, and gzip
//! appended member by member (`gzip -c part >> file.gz`).

#![allow(clippy::too_many_arguments)]

use std::io::Write as _;

use crate::support::{check_json, finding_names, scratch};

/// One span in pdata's JSON spelling. `attrs` is the inside of the attributes array.
fn span(
    trace: &str,
    id: &str,
    parent: &str,
    name: &str,
    kind: u8,
    start_ms: u64,
    end_ms: u64,
    attrs: &str,
) -> String {
    const T0_MS: u64 = 1_764_374_400_000;
    format!(
        r#"{{"traceId":"{trace}","spanId":"{id}","parentSpanId":"{parent}","flags":257,"name":"{name}","kind":{kind},"startTimeUnixNano":"{}","endTimeUnixNano":"{}","attributes":[{attrs}],"status":{{}}}}"#,
        (T0_MS + start_ms) * 1_000_000,
        (T0_MS + end_ms) * 1_000_000,
    )
}

fn int(key: &str, v: i64) -> String {
    format!(r#"{{"key":"{key}","value":{{"intValue":"{v}"}}}}"#)
}

fn text(key: &str, v: &str) -> String {
    format!(r#"{{"key":"{key}","value":{{"stringValue":"{v}"}}}}"#)
}

fn resource(service: &str, scopes: &[String]) -> String {
    format!(
        r#"{{"resource":{{"attributes":[{},{{"key":"host.cores","value":{{"intValue":"2"}}}}],"droppedAttributesCount":0}},"scopeSpans":[{}],"schemaUrl":"https://opentelemetry.io/schemas/1.26.0","entityRefs":[{{"type":"service","idKeys":["service.name"]}}]}}"#,
        text("service.name", service),
        scopes.join(",")
    )
}

fn scope(name: &str, spans: &[String]) -> String {
    format!(
        r#"{{"scope":{{"name":"{name}","version":"1.2.0","attributes":[{{"key":"lib","value":{{"boolValue":true}}}}]}},"spans":[{}],"schemaUrl":""}}"#,
        spans.join(",")
    )
}

const A: &str = "0af7651916cd43dd8448eb211c80319c";
const B: &str = "4bf92f3577b34da6a3ce929d0e0e4736";

/// Two lines, as the file exporter writes two exports: trace A (frontend -> orders ->
/// inventory, where orders forwards 3000 ms with 700 left) split over both, trace B (one clean
/// edge hop with every kind of attribute value, an event and a link) in the first.
pub fn file_exporter_lines() -> [String; 2] {
    let checkout = span(
        A,
        "b7ad6b7169203331",
        "",
        "GET /checkout",
        2,
        0,
        100,
        &[
            text("budget.source", "default"),
            int("budget.default_ms", 1000),
            int("budget.remaining_at_start_ms", 1000),
            text("budget.outcome", "ok"),
        ]
        .join(","),
    );
    let call_orders = span(
        A,
        "b7ad6b7169203332",
        "b7ad6b7169203331",
        "GET orders",
        3,
        5,
        95,
        &[
            int("budget.remaining_ms", 995),
            int("budget.forwarded_ms", 995),
            int("budget.timeout_ms", 995),
        ]
        .join(","),
    );
    let orders = span(
        A,
        "b7ad6b7169203333",
        "b7ad6b7169203332",
        "GET /orders",
        2,
        10,
        90,
        &[
            int("budget.received_ms", 995),
            text("budget.source", "x-budget-ms"),
            int("budget.remaining_at_start_ms", 990),
            text("budget.outcome", "ok"),
        ]
        .join(","),
    );
    let call_inventory = span(
        A,
        "b7ad6b7169203334",
        "b7ad6b7169203333",
        "GET inventory",
        3,
        20,
        80,
        &[
            int("budget.remaining_ms", 700),
            int("budget.forwarded_ms", 3000),
            int("budget.timeout_ms", 3000),
        ]
        .join(","),
    );
    let inventory = span(
        A,
        "b7ad6b7169203335",
        "b7ad6b7169203334",
        "GET /stock",
        2,
        25,
        75,
        &[
            int("budget.received_ms", 3000),
            text("budget.source", "x-budget-ms"),
            int("budget.remaining_at_start_ms", 2995),
            text("budget.outcome", "ok"),
        ]
        .join(","),
    );
    // Every value type the Collector writes, an event, a link, and a status with a code.
    let every_type = [
        text("budget.source", "default"),
        int("budget.default_ms", 500),
        int("budget.remaining_at_start_ms", 500),
        text("budget.outcome", "ok"),
        r#"{"key":"ratio","value":{"doubleValue":0.5}}"#.to_string(),
        r#"{"key":"tags","value":{"arrayValue":{"values":[{"stringValue":"a"},{"intValue":"7"}]}}}"#
            .to_string(),
        r#"{"key":"raw","value":{"bytesValue":"AAEC"}}"#.to_string(),
        r#"{"key":"nested","value":{"kvlistValue":{"values":[{"key":"k","value":{"stringValue":"v"}}]}}}"#
            .to_string(),
    ]
    .join(",");
    let search = span(B, "00f067aa0ba902b7", "", "GET /search", 2, 0, 40, &every_type)
        .replace(
            r#""status":{}"#,
            r#""events":[{"timeUnixNano":"1764374400020000000","name":"cache miss","attributes":[]}],"links":[{"traceId":"0af7651916cd43dd8448eb211c80319c","spanId":"b7ad6b7169203331","attributes":[],"flags":256}],"status":{"code":1}"#,
        );
    [
        format!(
            r#"{{"resourceSpans":[{},{}]}}"#,
            resource(
                "frontend",
                &[
                    scope("http-server", &[checkout, search]),
                    scope("http-client", &[call_orders])
                ]
            ),
            resource(
                "orders",
                &[
                    scope("http-server", &[orders]),
                    scope("http-client", &[call_inventory])
                ]
            ),
        ),
        format!(
            r#"{{"resourceSpans":[{}]}}"#,
            resource("inventory", &[scope("http-server", &[inventory])])
        ),
    ]
}

#[track_caller]
fn assert_classified(path: &std::path::Path) {
    let out = check_json(path);
    assert_eq!(out.code, Some(1), "{out:?}");
    assert!(out.stderr.is_empty(), "no warnings: {}", out.stderr);
    let report = out.json();
    assert_eq!(report["summary"]["traces"], 2, "{report:#}");
    assert_eq!(report["summary"]["spans"], 6, "{report:#}");
    assert_eq!(
        finding_names(&report),
        vec![(
            "budget_reset".to_string(),
            "orders".to_string(),
            "GET inventory".to_string()
        )],
        "{report:#}"
    );
    let finding = &report["findings"][0];
    assert_eq!(finding["trace_id"], A);
    assert_eq!(finding["span_id"], "b7ad6b7169203334");
    assert_eq!(
        (
            finding["remaining_ms"].as_i64(),
            finding["forwarded_ms"].as_i64()
        ),
        (Some(700), Some(3000))
    );
}

#[test]
fn the_collector_file_exporters_json_lines_are_read_plain_and_gzipped() {
    let dir = scratch("collector_file_exporter");
    let lines = file_exporter_lines();

    let plain = dir.join("traces.json");
    std::fs::write(&plain, format!("{}\n{}\n", lines[0], lines[1])).unwrap();
    assert_classified(&plain);

    let gzipped = dir.join("traces.json.gz");
    let mut gz = flate2::write::GzEncoder::new(
        std::fs::File::create(&gzipped).unwrap(),
        flate2::Compression::default(),
    );
    writeln!(gz, "{}\n{}", lines[0], lines[1]).unwrap();
    gz.finish().unwrap();
    assert_classified(&gzipped);

    // A rotated file compressed a part at a time: one gzip member per line.
    let members = dir.join("appended.json.gz");
    let mut file = std::fs::File::create(&members).unwrap();
    for line in &lines {
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        writeln!(gz, "{line}").unwrap();
        file.write_all(&gz.finish().unwrap()).unwrap();
    }
    drop(file);
    assert_classified(&members);
}

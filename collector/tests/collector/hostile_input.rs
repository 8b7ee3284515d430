//! Issue 14's second round of hostile input, on every path that reads spans: the receivers
//! (as `check` and the screen configure them, and as `record` does), `check --input`, and the
//! text report. Plus issue 13's OTLP/JSON as the Collector reads it.

use budget_top::ingest::decode::otlp_json::proto_form::proto_form;
use budget_top::ingest::{Ingest, IngestConfig};
use prost::Message as _;
use serde_json::Value as Json;

use crate::support::receivers::{export_bytes, next_batch, receivers};
use crate::support::{SERVER, json_line, request, reset_chain, run, scratch, span, string};

fn write(name: &str, bytes: &[u8]) -> String {
    let dir = scratch(name);
    let path = dir.join("input.jsonl");
    std::fs::write(&path, bytes).unwrap();
    path.to_string_lossy().into_owned()
}

#[test]
fn an_empty_input_says_nothing_was_read_and_fail_on_empty_makes_it_fail() {
    let empty = write("hostile_empty", b"");
    for input in [empty.as_str(), "-"] {
        let out = run(&["check", "--input", input]);
        assert_eq!(out.code, Some(0), "{out:?}");
        assert!(out.stderr.contains("no span was read"), "{out:?}");
        let out = run(&["check", "--input", input, "--fail-on", "empty"]);
        assert_eq!(out.code, Some(1), "{out:?}");
        let out = run(&["check", "--input", input, "--fail-on", "warning,empty"]);
        assert_eq!(out.code, Some(1), "{out:?}");
    }
    // Not empty: `empty` changes nothing, errors still fail.
    let chain = write("hostile_not_empty", json_line(&reset_chain(1)).as_bytes());
    let out = run(&["check", "--input", &chain, "--fail-on", "empty"]);
    assert_eq!(out.code, Some(1), "the reset is an error: {out:?}");
    assert!(!out.stderr.contains("no span was read"), "{out:?}");
}

#[test]
fn a_file_starting_with_a_byte_order_mark_is_read() {
    let mut bytes = "\u{feff}".as_bytes().to_vec();
    bytes.extend(json_line(&reset_chain(1)).as_bytes());
    let path = write("hostile_bom", &bytes);
    let out = run(&["check", "--input", &path, "--format", "json"]);
    assert_eq!(out.code, Some(1), "{out:?}");
    assert_eq!(out.json()["summary"]["spans"], 5, "{out:?}");
}

fn with_status(
    mut request: opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest,
) -> opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest {
    request.resource_spans[0].scope_spans[0].spans[0].status =
        Some(opentelemetry_proto::tonic::trace::v1::Status {
            code: 2,
            message: "boom".into(),
        });
    request
}

#[test]
fn the_same_chain_in_canonical_and_in_proto_name_form_gives_the_same_report() {
    let canonical = json_line(&with_status(reset_chain(1)));
    let proto: Json = proto_form(&serde_json::from_str(&canonical).unwrap());
    let proto = proto.to_string();
    assert!(proto.contains("\"resource_spans\"") && proto.contains("SPAN_KIND_SERVER"));
    assert!(proto.contains("STATUS_CODE_ERROR") && proto.contains("\"start_time_unix_nano\":1764"));
    let a = run(&[
        "check",
        "--input",
        &write("hostile_canonical", canonical.as_bytes()),
        "--format",
        "json",
    ]);
    let b = run(&[
        "check",
        "--input",
        &write("hostile_proto_form", proto.as_bytes()),
        "--format",
        "json",
    ]);
    assert_eq!(a.json()["summary"]["spans"], 5, "{a:?}");
    assert_eq!(a.json(), b.json(), "{b:?}");
    assert_eq!((a.code, b.code), (Some(1), Some(1)));
    // A non-hex id is refused, naming the field and the line.
    let bad = proto.replacen("\"span_id\":\"", "\"span_id\":\"zz", 1);
    let out = run(&["check", "--input", &write("hostile_bad_id", bad.as_bytes())]);
    assert_eq!(out.code, Some(2), "{out:?}");
    assert!(
        out.stderr.contains("line 1")
            && out
                .stderr
                .contains("resource_spans[0].scope_spans[0].spans[0].span_id"),
        "{out:?}"
    );
}

async fn post(ingest: &Ingest, content_type: &str, body: Vec<u8>) -> (u16, String) {
    let response = reqwest::Client::new()
        .post(format!("http://{}/v1/traces", ingest.http_addr.unwrap()))
        .header("content-type", content_type)
        .body(body)
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    (status, response.text().await.unwrap_or_default())
}

#[tokio::test]
async fn the_http_receiver_reads_proto_names_as_the_canonical_form() {
    let mut ingest = receivers(IngestConfig::default()).await;
    let canonical = json_line(&with_status(reset_chain(1)));
    let proto = proto_form(&serde_json::from_str(&canonical).unwrap()).to_string();
    let (status, body) = post(&ingest, "application/json", canonical.into_bytes()).await;
    assert_eq!((status, body.as_str()), (200, "{}"));
    let a = next_batch(&mut ingest).await;
    let (status, body) = post(&ingest, "application/json", proto.into_bytes()).await;
    assert_eq!(
        (status, body.as_str()),
        (200, "{}"),
        "zero spans answered 200 before"
    );
    let b = next_batch(&mut ingest).await;
    assert_eq!(a.spans.len(), 5);
    assert_eq!(a.spans, b.spans);
    assert_eq!(a.attributes, b.attributes);
    let (status, body) = post(
        &ingest,
        "application/json",
        br#"{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"not hex"}]}]}]}"#.to_vec(),
    )
    .await;
    assert_eq!(status, 400);
    assert!(body.contains("traceId") && body.contains("hex"), "{body}");
}

/// `bytes` with the first `from` replaced by `to` (the same length).
fn patched(bytes: &[u8], from: &[u8], to: &[u8]) -> Vec<u8> {
    let mut out = bytes.to_vec();
    let at = out.windows(from.len()).position(|w| w == from).unwrap();
    out[at..at + to.len()].copy_from_slice(to);
    out
}

/// Issue 14, item 4: invalid UTF-8 in `service.name`, in a span name or in an attribute value
/// got three different answers (a renamed service, a 400 from `record`, a batch rejected by
/// the screen). Now every path keeps the span with U+FFFD in place of the bad bytes and says so
/// in `partial_success`.
#[tokio::test]
async fn invalid_utf8_gets_one_answer_on_every_path() {
    let mut chain = reset_chain(1);
    chain.resource_spans[0].scope_spans[0].spans[0]
        .attributes
        .push(string("http.url", "/checkout?x=ok"));
    let good = chain.encode_to_vec();
    let cases: [(&str, &[u8], &[u8]); 3] = [
        ("service.name", b"frontend", b"fr\xffntend"),
        ("span name", b"GET /checkout", b"GET /ch\xfeckout"),
        (
            "attribute \"http.url\"",
            b"/checkout?x=ok",
            b"/checkout?x=\xff\xff",
        ),
    ];
    let paths = [
        (
            "check",
            IngestConfig {
                keep_attributes: false,
                ..IngestConfig::default()
            },
        ),
        ("screen", IngestConfig::default()),
        (
            "record",
            IngestConfig {
                keep_attributes: false,
                keep_raw: true,
                ..IngestConfig::default()
            },
        ),
    ];
    for (path, config) in paths {
        let mut ingest = receivers(config).await;
        for (what, from, to) in cases {
            let body = patched(&good, from, to);
            // OTLP/HTTP protobuf.
            let (status, answer) = post(&ingest, "application/x-protobuf", body.clone()).await;
            assert_eq!(status, 200, "{path}, {what}: {answer}");
            let batch = next_batch(&mut ingest).await;
            assert_eq!(batch.spans.len(), 5, "{path}, {what}");
            if what == "span name" {
                assert_eq!(&*batch.spans[0].name, "GET /ch\u{fffd}ckout", "{path}");
            }
            if what == "service.name" {
                assert_eq!(&*batch.spans[0].service, "fr\u{fffd}ntend", "{path}");
            }
            if path == "screen" && what.starts_with("attribute") {
                let url = batch.attributes[0]
                    .decode()
                    .into_iter()
                    .find(|kv| kv.key == "http.url")
                    .unwrap();
                assert_eq!(
                    format!("{:?}", url.value.unwrap().value.unwrap()),
                    "StringValue(\"/checkout?x=\u{fffd}\u{fffd}\")"
                );
            }
            if path == "record" {
                // The request record writes: valid UTF-8, the bad bytes replaced.
                let raw = batch.raw.expect("record keeps the request");
                assert!(
                    serde_json::to_string(&raw).unwrap().contains('\u{fffd}'),
                    "{what}"
                );
            }
            // OTLP/gRPC: the same, and partial_success says what was repaired.
            let response = export_bytes(&ingest, body.clone())
                .await
                .unwrap_or_else(|e| panic!("{path}, {what}: {e:?}"));
            let partial = response.partial_success.expect("partial_success says so");
            assert_eq!(partial.rejected_spans, 0, "{path}, {what}");
            assert!(
                partial.error_message.contains("U+FFFD")
                    && partial.error_message.contains("not valid UTF-8"),
                "{path}, {what}: {}",
                partial.error_message
            );
            if path != "record" {
                assert!(
                    partial.error_message.contains(what),
                    "{path}: {}",
                    partial.error_message
                );
            }
            assert_eq!(next_batch(&mut ingest).await.spans.len(), 5);
        }
        // OTLP/JSON with a raw invalid byte in a string: the same rule.
        let json = json_line(&chain).into_bytes();
        let (status, answer) = post(
            &ingest,
            "application/json",
            patched(&json, b"GET /checkout", b"GET /ch\xfeckout"),
        )
        .await;
        assert_eq!(status, 200, "{path}: {answer}");
        let answer: Json = serde_json::from_str(&answer).unwrap();
        assert_eq!(answer["partialSuccess"]["rejectedSpans"], 0, "{answer}");
        assert!(
            answer["partialSuccess"]["errorMessage"]
                .as_str()
                .unwrap()
                .contains("U+FFFD"),
            "{answer}"
        );
        let batch = next_batch(&mut ingest).await;
        assert_eq!(&*batch.spans[0].name, "GET /ch\u{fffd}ckout");
        let counts = ingest.stats.snapshot();
        assert_eq!(
            (counts.requests_rejected, counts.spans_rejected),
            (0, 0),
            "{path}"
        );
    }

    // check --input: the line is read, the name repaired, with a warning naming the line.
    let line = patched(
        json_line(&chain).as_bytes(),
        b"GET /checkout",
        b"GET /ch\xfeckout",
    );
    let out = run(&[
        "check",
        "--input",
        &write("hostile_utf8_line", &line),
        "--format",
        "json",
    ]);
    assert_eq!(out.code, Some(1), "{out:?}");
    assert_eq!(out.json()["summary"]["spans"], 5);
    assert!(
        out.stderr.contains("line 1") && out.stderr.contains("U+FFFD"),
        "{out:?}"
    );
}

/// Issue 14, item 5: an all-zero span id is rejected like any invalid id (a child naming it
/// as parent used to be taken for a root).
#[tokio::test]
async fn an_all_zero_span_id_is_rejected_with_a_message() {
    let mut ingest = receivers(IngestConfig::default()).await;
    let mut zero = span(1, 9, 0, "zero", SERVER, 0, 10, vec![]);
    zero.span_id = vec![0; 8];
    let child = span(1, 2, 0, "child", SERVER, 1, 5, vec![]);
    let req = request(vec![("svc", vec![zero, child])]);
    let (status, answer) = post(&ingest, "application/json", json_line(&req).into_bytes()).await;
    assert_eq!(status, 200);
    let answer: Json = serde_json::from_str(&answer).unwrap();
    assert_eq!(answer["partialSuccess"]["rejectedSpans"], 1, "{answer}");
    assert!(
        answer["partialSuccess"]["errorMessage"]
            .as_str()
            .unwrap()
            .contains("span_id is all zero"),
        "{answer}"
    );
    assert_eq!(next_batch(&mut ingest).await.spans.len(), 1);
    let out = run(&[
        "check",
        "--input",
        &write("hostile_zero_id", json_line(&req).as_bytes()),
    ]);
    assert!(out.stderr.contains("span_id is all zero"), "{out:?}");
}

/// Issue 14, item 5: bidirectional overrides and zero-width characters in names no longer
/// reach the text report, where they reordered and misaligned its columns.
#[test]
fn bidi_and_zero_width_characters_do_not_reach_the_text_report() {
    let mut chain = reset_chain(1);
    chain.resource_spans[1]
        .resource
        .as_mut()
        .unwrap()
        .attributes[0] = string("service.name", "ord\u{202e}sre\u{202c}\u{200b}");
    chain.resource_spans[1].scope_spans[0].spans[1].name =
        "GET \u{2066}inventory\u{2069}\u{feff}".into();
    let out = run(&[
        "check",
        "--input",
        &write("hostile_bidi", json_line(&chain).as_bytes()),
    ]);
    assert_eq!(out.code, Some(1), "{out:?}");
    for c in [
        '\u{202e}', '\u{202c}', '\u{200b}', '\u{2066}', '\u{2069}', '\u{feff}',
    ] {
        assert!(!out.stdout.contains(c), "{c:?} in {}", out.stdout);
    }
    assert!(out.stdout.contains("ordsre"), "{}", out.stdout);
}

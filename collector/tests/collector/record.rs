//! `budget-top record`, stopped by SIGTERM, then `check --input` on the recording.

use std::time::Duration;

use prost::Message as _;

use crate::support::{check_json, listen, reset_chain, scratch};

#[test]
fn record_then_check_the_recording() {
    let dir = scratch("record_then_check");
    let path = dir.join("rec.jsonl");
    let recorder = listen(&["record", "--output", path.to_str().unwrap()]);
    recorder.post("application/x-protobuf", reset_chain(1).encode_to_vec());
    crate::support::runtime().block_on(async {
        let mut grpc = opentelemetry_proto::tonic::collector::trace::v1::trace_service_client::TraceServiceClient::connect(
            format!("http://{}", recorder.grpc),
        )
        .await
        .unwrap();
        grpc.export(reset_chain(2)).await.unwrap();
    });
    let finished = recorder.terminate(Duration::from_secs(30));
    assert_eq!(
        finished.code,
        Some(0),
        "SIGTERM flushes and exits 0: {finished:?}"
    );
    assert!(
        finished
            .stderr
            .contains("recorded 2 request(s), 10 span(s)"),
        "{}",
        finished.stderr
    );
    let text = std::fs::read_to_string(&path).unwrap();
    assert_eq!(text.lines().count(), 2, "one OTLP/JSON line per request");

    let out = check_json(&path);
    assert_eq!(out.code, Some(1));
    let report = out.json();
    assert_eq!(report["summary"]["traces"], 2);
    assert_eq!(report["summary"]["spans"], 10);
    assert_eq!(report["summary"]["findings"]["error"], 2);
}

#[test]
fn ctrl_c_flushes_the_recording_too() {
    let dir = scratch("record_ctrl_c");
    let path = dir.join("rec.jsonl");
    let recorder = listen(&["record", "--output", path.to_str().unwrap()]);
    recorder.post(
        "application/json",
        crate::support::json_line(&reset_chain(3)),
    );
    let finished = recorder.signal("-INT", Duration::from_secs(30));
    assert_eq!(finished.code, Some(0), "{finished:?}");
    let text = std::fs::read_to_string(&path).unwrap();
    assert_eq!(text.lines().count(), 1);
    assert!(
        text.contains("\"traceId\":\"03030303030303030303030303030303\""),
        "{text}"
    );
}

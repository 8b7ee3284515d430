//! The receivers against bad input and overload: the right status with a message, and the
//! next good request still served.

use std::time::Duration;

use budget_top::ingest::{self, Batch, Ingest, IngestConfig};
use opentelemetry_proto::tonic::collector::trace::v1::trace_service_client::TraceServiceClient;
use prost::Message as _;
use reqwest::StatusCode;
use tokio::sync::mpsc::error::TryRecvError;

use crate::support::{CLIENT, SERVER, json_line, request, reset_chain, span};

async fn start(max_body: usize, channel_capacity: usize) -> Ingest {
    ingest::start(IngestConfig {
        grpc: Some("127.0.0.1:0".parse().unwrap()),
        http: Some("127.0.0.1:0".parse().unwrap()),
        max_body,
        channel_capacity,
        ..IngestConfig::default()
    })
    .await
    .unwrap()
}

fn url(ingest: &Ingest) -> String {
    format!("http://{}/v1/traces", ingest.http_addr.unwrap())
}

async fn post(
    url: &str,
    content_type: &str,
    encoding: Option<&str>,
    body: Vec<u8>,
) -> (StatusCode, reqwest::header::HeaderMap, String) {
    let mut request = reqwest::Client::new()
        .post(url)
        .header("content-type", content_type)
        .body(body);
    if let Some(encoding) = encoding {
        request = request.header("content-encoding", encoding);
    }
    let response = tokio::time::timeout(Duration::from_secs(30), request.send())
        .await
        .unwrap()
        .unwrap();
    let status = response.status();
    let headers = response.headers().clone();
    let body = response.bytes().await.unwrap();
    (status, headers, String::from_utf8_lossy(&body).into_owned())
}

async fn next_batch(ingest: &mut Ingest) -> Batch {
    tokio::time::timeout(Duration::from_secs(10), ingest.receiver.recv())
        .await
        .unwrap()
        .unwrap()
}

/// A good protobuf request answers 200 with an empty protobuf response and delivers 5 spans.
async fn assert_good_request_served(ingest: &mut Ingest, t: u8) {
    let (status, headers, body) = post(
        &url(ingest),
        "application/x-protobuf",
        None,
        reset_chain(t).encode_to_vec(),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(headers["content-type"], "application/x-protobuf");
    assert_eq!(next_batch(ingest).await.spans.len(), 5);
}

#[tokio::test]
async fn malformed_bodies_get_400_with_a_message_and_the_receiver_keeps_serving() {
    let mut ingest = start(ingest::DEFAULT_MAX_BODY, 16).await;
    let (status, _, body) = post(
        &url(&ingest),
        "application/x-protobuf",
        None,
        vec![0xff, 0xff, 0xff, 0x0f],
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(
        body.contains("invalid protobuf ExportTraceServiceRequest"),
        "{body}"
    );
    assert_good_request_served(&mut ingest, 1).await;

    let (status, headers, body) = post(
        &url(&ingest),
        "application/json",
        None,
        b"{\"resourceSpans\": [".to_vec(),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(headers["content-type"], "application/json");
    assert!(body.contains("invalid OTLP/JSON"), "{body}");
    // Wrongly typed JSON is malformed too.
    let (status, _, body) = post(
        &url(&ingest),
        "application/json",
        None,
        br#"{"resourceSpans": 7}"#.to_vec(),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert_good_request_served(&mut ingest, 2).await;

    let (status, _, body) = post(
        &url(&ingest),
        "application/x-protobuf",
        Some("gzip"),
        b"not gzip".to_vec(),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(body.contains("invalid gzip body"), "{body}");
    assert_eq!(ingest.stats.snapshot().requests_rejected, 4);
    assert_good_request_served(&mut ingest, 3).await;
}

#[tokio::test]
async fn an_unknown_content_type_gets_415() {
    let mut ingest = start(ingest::DEFAULT_MAX_BODY, 16).await;
    let (status, _, body) = post(&url(&ingest), "text/plain", None, b"hello".to_vec()).await;
    assert_eq!(status, StatusCode::UNSUPPORTED_MEDIA_TYPE);
    assert!(
        body.contains("unsupported content type \"text/plain\""),
        "{body}"
    );
    let (status, _, body) = post(
        &url(&ingest),
        "application/json",
        Some("br"),
        json_line(&reset_chain(1)).into_bytes(),
    )
    .await;
    assert_eq!(status, StatusCode::UNSUPPORTED_MEDIA_TYPE);
    assert!(body.contains("unsupported content encoding"), "{body}");
    assert_good_request_served(&mut ingest, 2).await;
}

#[tokio::test]
async fn an_oversized_body_and_a_gzip_bomb_get_413_and_the_receiver_keeps_serving() {
    let max = 64 * 1024;
    let mut ingest = start(max, 16).await;
    let (status, _, body) = post(
        &url(&ingest),
        "application/x-protobuf",
        None,
        vec![0u8; max + 1],
    )
    .await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
    assert!(
        body.contains("over the limit of 65536 bytes (--max-body)"),
        "{body}"
    );
    assert_good_request_served(&mut ingest, 1).await;

    // 16 MiB of zeros gzips to ~16 KiB: small on the wire, a bomb once inflated.
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    std::io::Write::write_all(&mut encoder, &vec![0u8; 16 << 20]).unwrap();
    let bomb = encoder.finish().unwrap();
    assert!(bomb.len() < max);
    let (status, _, body) = post(&url(&ingest), "application/x-protobuf", Some("gzip"), bomb).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
    assert!(
        body.contains("decompressed body is over the limit"),
        "{body}"
    );
    assert_good_request_served(&mut ingest, 2).await;
}

#[tokio::test]
async fn gzip_json_is_accepted_and_answered_in_json() {
    let mut ingest = start(ingest::DEFAULT_MAX_BODY, 16).await;
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    std::io::Write::write_all(&mut encoder, json_line(&reset_chain(7)).as_bytes()).unwrap();
    let (status, headers, body) = post(
        &url(&ingest),
        "application/json; charset=utf-8",
        Some("gzip"),
        encoder.finish().unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(headers["content-type"], "application/json");
    assert_eq!(body, "{}");
    let batch = next_batch(&mut ingest).await;
    assert_eq!(batch.spans.len(), 5);
    assert_eq!(&*batch.spans[0].service, "frontend");
    // The raw attributes travel for the detail view.
    assert!(
        batch.attributes[0]
            .iter()
            .any(|kv| kv.key == "budget.default_ms")
    );
}

#[tokio::test]
async fn spans_with_bad_ids_are_reported_in_partial_success() {
    let mut ingest = start(ingest::DEFAULT_MAX_BODY, 16).await;
    let mut bad = span(1, 9, 0, "bad", SERVER, 0, 1, vec![]);
    bad.span_id = vec![9; 3];
    let good = span(1, 1, 0, "good", CLIENT, 0, 1, vec![]);
    let req = request(vec![("svc", vec![good, bad])]);
    let (status, _, body) = post(
        &url(&ingest),
        "application/json",
        None,
        json_line(&req).into_bytes(),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let json: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(json["partialSuccess"]["rejectedSpans"], 1, "{body}");
    assert!(
        json["partialSuccess"]["errorMessage"]
            .as_str()
            .unwrap()
            .contains("span_id must be 8 bytes, got 3")
    );
    assert_eq!(next_batch(&mut ingest).await.spans.len(), 1);

    // The same over gRPC.
    let mut client = TraceServiceClient::connect(format!("http://{}", ingest.grpc_addr.unwrap()))
        .await
        .unwrap();
    let response = client.export(req).await.unwrap().into_inner();
    let partial = response.partial_success.unwrap();
    assert_eq!(partial.rejected_spans, 1);
    assert!(partial.error_message.contains("span_id must be 8 bytes"));
    assert_eq!(ingest.stats.snapshot().spans_rejected, 2);
}

#[tokio::test]
async fn a_full_channel_throttles_with_503_retry_after_and_resource_exhausted_and_counts_the_refused()
 {
    let mut ingest = start(ingest::DEFAULT_MAX_BODY, 1).await;
    let body = reset_chain(1).encode_to_vec();
    let (status, _, _) = post(&url(&ingest), "application/x-protobuf", None, body.clone()).await;
    assert_eq!(status, StatusCode::OK);
    // Nobody reads the channel: the next request must be refused, not queued without bound.
    let (status, headers, text) = post(&url(&ingest), "application/x-protobuf", None, body).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(headers["retry-after"], "1");
    assert!(text.contains("retry later"), "{text}");

    let mut client = TraceServiceClient::connect(format!("http://{}", ingest.grpc_addr.unwrap()))
        .await
        .unwrap();
    let error = client.export(reset_chain(2)).await.unwrap_err();
    assert_eq!(error.code(), tonic::Code::ResourceExhausted);
    assert!(
        !error.details().is_empty(),
        "RetryInfo travels in the status details"
    );

    let counts = ingest.stats.snapshot();
    assert_eq!(
        (
            counts.spans_accepted,
            counts.spans_refused,
            counts.requests_refused
        ),
        (5, 10, 2)
    );
    // Everything answered with success is in the channel; nothing refused is.
    assert_eq!(ingest.receiver.recv().await.unwrap().spans.len(), 5);
    assert!(matches!(
        ingest.receiver.try_recv(),
        Err(TryRecvError::Empty)
    ));
    // Drained: accepted again.
    assert_good_request_served(&mut ingest, 3).await;
}

#[tokio::test]
async fn a_port_in_use_names_the_address_and_the_flag() {
    let taken = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = taken.local_addr().unwrap();
    let error = ingest::start(IngestConfig {
        grpc: Some(addr),
        http: None,
        ..IngestConfig::default()
    })
    .await
    .unwrap_err();
    let message = format!("{error:#}");
    assert!(
        message.contains(&addr.to_string()) && message.contains("--grpc"),
        "{message}"
    );
}

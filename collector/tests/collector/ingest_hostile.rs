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
            .decode()
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

#[tokio::test]
async fn a_body_that_trickles_in_gets_408_and_others_are_served_meanwhile() {
    let mut ingest = ingest::start(IngestConfig {
        grpc: None,
        http: Some("127.0.0.1:0".parse().unwrap()),
        body_timeout: Duration::from_millis(300),
        ..IngestConfig::default()
    })
    .await
    .unwrap();
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let mut slow = tokio::net::TcpStream::connect(ingest.http_addr.unwrap())
        .await
        .unwrap();
    slow.write_all(
        b"POST /v1/traces HTTP/1.1\r\nhost: x\r\ncontent-type: application/x-protobuf\r\ncontent-length: 1000\r\n\r\nabc",
    )
    .await
    .unwrap();
    // While the slow client holds its request open, a good one is served.
    assert_good_request_served(&mut ingest, 1).await;
    let mut answer = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(30), slow.read_to_end(&mut answer)).await;
    let answer = String::from_utf8_lossy(&answer);
    assert!(read.is_ok(), "the slow request was never answered");
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(
        answer.contains("request body not received within"),
        "{answer}"
    );
}

#[tokio::test]
async fn a_grpc_gzip_bomb_is_refused_and_the_receiver_keeps_serving() {
    use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
    let mut ingest = start(64 * 1024, 16).await;
    let mut client = TraceServiceClient::connect(format!("http://{}", ingest.grpc_addr.unwrap()))
        .await
        .unwrap()
        .send_compressed(tonic::codec::CompressionEncoding::Gzip);
    // 16 MiB of one letter: tiny once gzipped, far over the 64 KiB limit once inflated.
    let mut bomb: ExportTraceServiceRequest = request(vec![(
        "svc",
        vec![span(1, 1, 0, "x", SERVER, 0, 1, vec![])],
    )]);
    bomb.resource_spans[0].scope_spans[0].spans[0].name = "a".repeat(16 << 20);
    let error = client.export(bomb).await.unwrap_err();
    assert!(
        matches!(
            error.code(),
            tonic::Code::ResourceExhausted | tonic::Code::OutOfRange | tonic::Code::Internal
        ),
        "{error:?}"
    );
    // The same connection, gzip, a good request: served.
    client.export(reset_chain(2)).await.unwrap();
    assert_eq!(next_batch(&mut ingest).await.spans.len(), 5);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_pressure_every_span_answered_with_success_reaches_the_store() {
    let mut ingest = start(ingest::DEFAULT_MAX_BODY, 2).await;
    let url = url(&ingest);
    // A slow owner loop: every accepted batch goes into the store.
    let receiver = std::mem::replace(&mut ingest.receiver, tokio::sync::mpsc::channel(1).1);
    let (stop, mut stopped) = tokio::sync::oneshot::channel::<()>();
    let owner = tokio::spawn(async move {
        let mut receiver = receiver;
        let mut store = budget_top::store::Store::new(1_000_000);
        loop {
            tokio::select! {
                batch = receiver.recv() => match batch {
                    Some(batch) => store.insert_batch(batch),
                    None => break,
                },
                _ = &mut stopped => {
                    // Like `check` at the end: close, then take whatever was accepted.
                    receiver.close();
                    while let Some(batch) = receiver.recv().await {
                        store.insert_batch(batch);
                    }
                    break;
                }
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        store.counters().spans_held
    });
    let client = reqwest::Client::new();
    let mut sends = Vec::new();
    for t in 1..=120u8 {
        let (client, url) = (client.clone(), url.clone());
        sends.push(tokio::spawn(async move {
            let response = client
                .post(url)
                .header("content-type", "application/x-protobuf")
                .body(reset_chain(t).encode_to_vec())
                .send()
                .await
                .unwrap();
            response.status()
        }));
    }
    let mut ok = 0u64;
    let mut refused = 0u64;
    for send in sends {
        match tokio::time::timeout(Duration::from_secs(60), send)
            .await
            .unwrap()
            .unwrap()
        {
            StatusCode::OK => ok += 1,
            StatusCode::SERVICE_UNAVAILABLE => refused += 1,
            other => panic!("unexpected status {other}"),
        }
    }
    let counts = ingest.stats.snapshot();
    stop.send(()).unwrap();
    let held = tokio::time::timeout(Duration::from_secs(60), owner)
        .await
        .unwrap()
        .unwrap();
    eprintln!("under pressure: {ok} accepted, {refused} refused");
    assert_eq!(ok + refused, 120);
    assert_eq!(
        held,
        ok * 5,
        "every span answered 200 is in the store, nothing else"
    );
    assert_eq!(counts.spans_accepted, ok * 5);
    assert_eq!(counts.requests_refused, refused);
    // A request refused before it was read (too many at once) has no span count.
    assert_eq!(
        counts.spans_refused,
        (refused - counts.requests_refused_unread) * 5
    );
}

#[tokio::test]
async fn connections_past_the_limit_wait_for_a_free_slot() {
    let mut ingest = ingest::start(IngestConfig {
        grpc: None,
        http: Some("127.0.0.1:0".parse().unwrap()),
        max_connections: 2,
        ..IngestConfig::default()
    })
    .await
    .unwrap();
    let addr = ingest.http_addr.unwrap();
    let idle_a = tokio::net::TcpStream::connect(addr).await.unwrap();
    let idle_b = tokio::net::TcpStream::connect(addr).await.unwrap();
    let url = url(&ingest);
    let third = tokio::spawn(async move {
        post(
            &url,
            "application/x-protobuf",
            None,
            reset_chain(1).encode_to_vec(),
        )
        .await
        .0
    });
    // Both slots are held by idle clients: the third is not served yet.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !third.is_finished(),
        "a third connection was served past the limit of 2"
    );
    drop(idle_a);
    let status = tokio::time::timeout(Duration::from_secs(30), third)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(status, StatusCode::OK);
    assert_eq!(next_batch(&mut ingest).await.spans.len(), 5);
    drop(idle_b);
}

#[tokio::test]
async fn a_client_that_never_finishes_its_headers_loses_its_slot() {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let mut ingest = ingest::start(IngestConfig {
        grpc: None,
        http: Some("127.0.0.1:0".parse().unwrap()),
        max_connections: 1,
        idle_timeout: Duration::from_millis(300),
        ..IngestConfig::default()
    })
    .await
    .unwrap();
    let mut slow = tokio::net::TcpStream::connect(ingest.http_addr.unwrap())
        .await
        .unwrap();
    slow.write_all(b"POST /v1/traces HTTP/1.1\r\nhost")
        .await
        .unwrap();
    // The only slot is taken; the good request waits until the silent client is cut off.
    assert_good_request_served(&mut ingest, 1).await;
    let mut rest = Vec::new();
    let closed = tokio::time::timeout(Duration::from_secs(30), slow.read_to_end(&mut rest)).await;
    assert!(closed.is_ok(), "the silent connection was never closed");
}

/// The overload case of issue 7 with the real open-loop load generator: the owner loop takes
/// nothing until the load is over, so the small span queue fills after a few requests and every
/// later one is throttled, whatever the timing. Every span the generator saw accepted is in the
/// store, and the receivers counted exactly those; the refused got OTLP's throttling answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_open_loop_past_capacity_is_throttled_and_every_accepted_span_is_held() {
    use budget_demo::otlp_load::{FloodPlan, Pacing, Target, flood};
    use tonic_types::StatusExt as _;

    let ingest = ingest::start(IngestConfig {
        grpc: Some("127.0.0.1:0".parse().unwrap()),
        http: Some("127.0.0.1:0".parse().unwrap()),
        max_queued_spans: 1024,
        ..IngestConfig::default()
    })
    .await
    .unwrap();
    let plan = |target| FloodPlan {
        target,
        spans: 64 * 256,
        batch: 256,
        depth: 4,
        connections: 2,
        // 256 requests a second: quick, and a loaded machine still sends every one.
        rate: Some(64.0 * 256.0 * 4.0),
        max_time: Some(Duration::from_secs(120)),
        pacing: Pacing::Open { max_inflight: 64 },
    };
    let grpc = flood(plan(Target::Grpc(ingest.grpc_addr.unwrap())))
        .await
        .unwrap();
    let http = flood(plan(Target::Http(ingest.http_addr.unwrap())))
        .await
        .unwrap();
    eprintln!("open loop, gRPC: {grpc:?}\nopen loop, HTTP: {http:?}");
    for (name, r) in [("gRPC", grpc), ("HTTP", http)] {
        assert_eq!(r.requests_offered(), 64, "{name}");
        assert_eq!((r.requests_failed, r.requests_unsent), (0, 0), "{name}");
        assert!(r.requests_throttled > 0, "{name}: nothing was throttled");
    }
    // The queue holds 1024 spans: 4 requests of 256, all from the first flood (gRPC).
    assert_eq!(grpc.spans_sent, 1024);
    assert_eq!(http.spans_sent, 0);

    // Still full: the answers carry the advice to retry later.
    let mut client = TraceServiceClient::connect(format!("http://{}", ingest.grpc_addr.unwrap()))
        .await
        .unwrap();
    let error = client.export(reset_chain(1)).await.unwrap_err();
    assert_eq!(error.code(), tonic::Code::ResourceExhausted);
    let retry = error
        .get_details_retry_info()
        .expect("RetryInfo in the details");
    assert_eq!(retry.retry_delay, Some(ingest::RETRY_AFTER));
    let (status, headers, _) = post(
        &url(&ingest),
        "application/x-protobuf",
        None,
        reset_chain(2).encode_to_vec(),
    )
    .await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(headers["retry-after"], "1");

    // What `check` does at the end: stop, take everything accepted, compare.
    let mut store = budget_top::store::Store::new(1_000_000);
    let counts = budget_top::check::finish(ingest, &mut store).await;
    let accepted = grpc.spans_sent + http.spans_sent;
    assert_eq!(counts.spans_accepted, accepted);
    assert_eq!(
        store.counters().spans_held,
        accepted,
        "nothing accepted is lost"
    );
    let throttled = grpc.requests_throttled + http.requests_throttled;
    assert_eq!(counts.requests_refused, throttled + 2);
    // Refused once read (they passed the first gate while the queue still had room): counted
    // with their spans. The two probes above were refused unread (the queue was full).
    assert_eq!(
        counts.spans_refused,
        (counts.requests_refused - counts.requests_refused_unread) * 256
    );
    assert!(counts.requests_refused_unread >= 2);
}

/// Past `max_inflight`, a request is refused before its body is read: a client that holds the
/// only slot with a body that never ends makes the next request get 503 and RESOURCE_EXHAUSTED
/// at once, counted as refused unread; once the slot is free, requests are served again.
#[tokio::test]
async fn a_request_past_the_inflight_limit_is_refused_before_its_body_is_read() {
    use tokio::io::AsyncWriteExt as _;
    let mut ingest = ingest::start(IngestConfig {
        grpc: Some("127.0.0.1:0".parse().unwrap()),
        http: Some("127.0.0.1:0".parse().unwrap()),
        max_inflight: 1,
        ..IngestConfig::default()
    })
    .await
    .unwrap();
    // A request whose body never ends holds the only slot once the server has read its
    // headers. Until then a probe may take the slot itself (and the slow one is refused): then
    // start over with a new slow client (bounded).
    let body = reset_chain(1).encode_to_vec();
    let mut refused = None;
    let mut slow = None;
    for _ in 0..50 {
        let mut stream = tokio::net::TcpStream::connect(ingest.http_addr.unwrap())
            .await
            .unwrap();
        stream
            .write_all(
                b"POST /v1/traces HTTP/1.1\r\nhost: x\r\ncontent-type: application/x-protobuf\r\n\
                  content-length: 1000\r\n\r\n0123456789",
            )
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(50)).await;
        let (status, headers, _) =
            post(&url(&ingest), "application/x-protobuf", None, body.clone()).await;
        if status == StatusCode::SERVICE_UNAVAILABLE {
            refused = Some(headers);
            slow = Some(stream);
            break;
        }
        assert_eq!(status, StatusCode::OK);
        next_batch(&mut ingest).await;
    }
    let headers = refused.expect("a request past the in-flight limit was refused");
    assert_eq!(headers["retry-after"], "1");
    let mut client = TraceServiceClient::connect(format!("http://{}", ingest.grpc_addr.unwrap()))
        .await
        .unwrap();
    let error = client.export(reset_chain(2)).await.unwrap_err();
    assert_eq!(error.code(), tonic::Code::ResourceExhausted);
    let counts = ingest.stats.snapshot();
    assert!(counts.requests_refused_unread >= 2);
    assert_eq!(counts.requests_refused, counts.requests_refused_unread);
    assert_eq!(counts.spans_refused, 0, "never read, so no spans counted");

    // The slow client goes away: its slot is free again.
    drop(slow);
    let mut served = false;
    for _ in 0..100 {
        let (status, _, _) =
            post(&url(&ingest), "application/x-protobuf", None, body.clone()).await;
        if status == StatusCode::OK {
            served = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(served, "the freed slot was never given back");
}

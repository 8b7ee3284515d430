//! Overload: a full span queue throttles with OTLP's retry advice, a lagging store makes a
//! request wait, and the limits on requests and bytes in flight refuse before reading.

use std::time::Duration;

use budget_top::ingest::{self, IngestConfig};
use prost::Message as _;
use reqwest::StatusCode;
use tokio::sync::mpsc::error::TryRecvError;

use super::{assert_good_request_served, post_protobuf, post_to, start};
use crate::support::receivers::{
    POST_PROTOBUF, grpc_client, next_batch, receivers, sent, traces_url,
};
use crate::support::reset_chain;

#[tokio::test]
async fn a_full_channel_throttles_with_503_retry_after_and_resource_exhausted_and_counts_the_refused()
 {
    let mut ingest = start(ingest::DEFAULT_MAX_BODY, 1).await;
    let body = reset_chain(1).encode_to_vec();
    let (status, _, _) = post_protobuf(&ingest, body.clone()).await;
    assert_eq!(status, StatusCode::OK);
    // Nobody reads the channel: the next request must be refused (once it has waited
    // `ADMISSION_WAIT` for room, unread), not queued without bound.
    let (status, headers, text) = post_protobuf(&ingest, body).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(headers["retry-after"], "1");
    assert!(text.contains("retry later"), "{text}");

    let mut client = grpc_client(&ingest).await;
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
            counts.requests_refused,
            counts.requests_refused_unread
        ),
        (5, 0, 2, 2),
        "refused before they were read: their spans never seen"
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

/// The store's passing lag costs a client a moment, not a retry: a request that arrives while
/// the channel is full waits, unread, and is served once the owner loop takes a batch (within
/// `ADMISSION_WAIT`); nothing is refused. Before, it was refused at once and its client had to
/// send it again a second later.
#[tokio::test]
async fn a_request_arriving_while_the_store_lags_waits_for_room_and_is_served() {
    let mut ingest = start(ingest::DEFAULT_MAX_BODY, 1).await;
    let mut conclusive = false;
    for attempt in 1..=5u8 {
        let body = reset_chain(attempt).encode_to_vec();
        let (status, _, _) = post_protobuf(&ingest, body.clone()).await;
        assert_eq!(status, StatusCode::OK);
        let refused_before = ingest.stats.snapshot().requests_refused;
        let target = traces_url(&ingest);
        let sent = std::time::Instant::now();
        let waiting =
            tokio::spawn(
                async move { post_to(&target, "application/x-protobuf", None, body).await },
            );
        tokio::time::sleep(Duration::from_millis(20)).await;
        let answered_early = waiting.is_finished();
        next_batch(&mut ingest).await;
        let drained_after = sent.elapsed();
        let (status, _, _) = waiting.await.unwrap();
        if status == StatusCode::SERVICE_UNAVAILABLE && drained_after >= ingest::ADMISSION_WAIT {
            // This machine stalled past the wait itself: inconclusive, try again.
            continue;
        }
        assert!(
            !answered_early,
            "answered before there was room: refused at once"
        );
        assert_eq!(status, StatusCode::OK, "served once the loop took a batch");
        assert_eq!(ingest.stats.snapshot().requests_refused, refused_before);
        assert_eq!(next_batch(&mut ingest).await.spans.len(), 5);
        conclusive = true;
        break;
    }
    assert!(conclusive, "five attempts stalled past ADMISSION_WAIT");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_pressure_every_span_answered_with_success_reaches_the_store() {
    let mut ingest = start(ingest::DEFAULT_MAX_BODY, 2).await;
    let url = traces_url(&ingest);
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

/// The overload case of issue 7 with the real open-loop load generator: the owner loop takes
/// nothing until the load is over, so the small span queue fills after a few requests and every
/// later one is throttled, whatever the timing. Every span the generator saw accepted is in the
/// store, and the receivers counted exactly those; the refused got OTLP's throttling answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_open_loop_past_capacity_is_throttled_and_every_accepted_span_is_held() {
    use budget_demo::otlp_load::{FloodPlan, Pacing, Target, flood};
    use tonic_types::StatusExt as _;

    let ingest = receivers(IngestConfig {
        max_queued_spans: 1024,
        ..IngestConfig::default()
    })
    .await;
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
    let mut client = grpc_client(&ingest).await;
    let error = client.export(reset_chain(1)).await.unwrap_err();
    assert_eq!(error.code(), tonic::Code::ResourceExhausted);
    let retry = error
        .get_details_retry_info()
        .expect("RetryInfo in the details");
    assert_eq!(retry.retry_delay, Some(ingest::RETRY_AFTER));
    let (status, headers, _) = post_protobuf(&ingest, reset_chain(2).encode_to_vec()).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(headers["retry-after"], "1");

    // What `check` does at the end: stop, take everything accepted, compare.
    let mut store = budget_top::store::Store::new(1_000_000);
    let counts = budget_top::commands::listen::finish(ingest, &mut store).await;
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

/// `budget-demo load`'s closed loop does as an OTLP exporter does with "retry later": it waits
/// as the answer says (gRPC `RetryInfo`, HTTP `Retry-After`) and sends the same request again,
/// so a receiver behind for a moment loses nothing and the run counts each request once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_closed_loop_told_to_retry_later_resends_and_every_span_arrives() {
    use budget_demo::otlp_load::{FloodPlan, Pacing, Target, flood};

    let span_bytes = std::mem::size_of::<deadline_budget::analysis::Span>() as u64;
    for wire in ["grpc", "http"] {
        let mut ingest = receivers(IngestConfig {
            max_queued_spans: 1_000_000,
            // Room for the decoded spans of two requests of 256.
            max_queued_bytes: 2 * 256 * span_bytes,
            keep_attributes: false,
            ..IngestConfig::default()
        })
        .await;
        let target = match wire {
            "grpc" => Target::Grpc(ingest.grpc_addr.unwrap()),
            _ => Target::Http(ingest.http_addr.unwrap()),
        };
        // The store's loop, asleep for the first 1.5 s: the queue fills, and the third request
        // is refused once its wait for room (250 ms) is over.
        let (_, closed) = tokio::sync::mpsc::channel(1);
        let mut batches = std::mem::replace(&mut ingest.receiver, closed);
        let drained = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(1500)).await;
            let mut spans = 0;
            while let Ok(Some(batch)) =
                tokio::time::timeout(Duration::from_secs(3), batches.recv()).await
            {
                spans += batch.spans.len();
            }
            spans
        });
        let report = flood(FloodPlan {
            target,
            spans: 8 * 256,
            batch: 256,
            depth: 4,
            connections: 2,
            rate: None,
            max_time: Some(Duration::from_secs(60)),
            pacing: Pacing::Closed,
        })
        .await
        .unwrap();
        assert!(report.requests_resent > 0, "{wire}: nothing was resent");
        assert_eq!(
            (
                report.requests_accepted,
                report.requests_throttled,
                report.requests_failed
            ),
            (8, 0, 0),
            "{wire}: each request counted once, by its last answer"
        );
        let counts = ingest.stats.snapshot();
        assert_eq!(counts.requests_refused, report.requests_resent, "{wire}");
        assert_eq!(counts.spans_accepted, 8 * 256, "{wire}");
        assert_eq!(
            drained.await.unwrap(),
            8 * 256,
            "{wire}: every span arrived"
        );
        ingest.shutdown();
    }
}

/// The live screen's queue is bounded in bytes as well as in spans (its spans are decoded on the
/// runtime's workers, whose malloc arenas keep their high-water mark): with room for the
/// decoded spans of four requests, the fifth is throttled however many spans the span bound
/// allows, and every span accepted is held.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queue_bounded_in_bytes_throttles_past_them_and_every_accepted_span_is_held() {
    use budget_demo::otlp_load::{FloodPlan, Pacing, Target, flood};

    let span_bytes = std::mem::size_of::<deadline_budget::analysis::Span>() as u64;
    let ingest = receivers(IngestConfig {
        http: None,
        max_queued_spans: 1_000_000,
        max_queued_bytes: 4 * 256 * span_bytes,
        keep_attributes: false,
        ..IngestConfig::default()
    })
    .await;
    let report = flood(FloodPlan {
        target: Target::Grpc(ingest.grpc_addr.unwrap()),
        spans: 16 * 256,
        batch: 256,
        depth: 4,
        connections: 2,
        rate: Some(16.0 * 256.0 * 4.0),
        max_time: Some(Duration::from_secs(120)),
        pacing: Pacing::Open { max_inflight: 16 },
    })
    .await
    .unwrap();
    assert_eq!((report.requests_failed, report.requests_unsent), (0, 0));
    assert!(report.requests_throttled > 0, "nothing was throttled");
    // The owner loop took nothing: four requests of 256 spans fill the bytes.
    assert_eq!(report.spans_sent, 1024);
    let mut store = budget_top::store::Store::new(1_000_000);
    let counts = budget_top::commands::listen::finish(ingest, &mut store).await;
    assert_eq!(counts.spans_accepted, 1024);
    assert_eq!(
        store.counters().spans_held,
        1024,
        "nothing accepted is lost"
    );
}

/// Past `max_inflight`, a request is refused before its body is read: a client that holds the
/// only slot with a body that never ends makes the next request get 503 and RESOURCE_EXHAUSTED
/// once it has waited `ADMISSION_WAIT` for the slot, counted as refused unread; once the slot
/// is free, requests are served again.
#[tokio::test]
async fn a_request_past_the_inflight_limit_is_refused_before_its_body_is_read() {
    let mut ingest = receivers(IngestConfig {
        max_inflight: 1,
        ..IngestConfig::default()
    })
    .await;
    // A request whose body never ends holds the only slot once the server has read its
    // headers. Until then a probe may take the slot itself (and the slow one is refused): then
    // start over with a new slow client (bounded).
    let body = reset_chain(1).encode_to_vec();
    let mut refused = None;
    let mut slow = None;
    for _ in 0..50 {
        let head = format!("{POST_PROTOBUF}content-length: 1000\r\n\r\n0123456789");
        let stream = sent(ingest.http_addr.unwrap(), head).await;
        tokio::time::sleep(Duration::from_millis(50)).await;
        let (status, headers, _) = post_protobuf(&ingest, body.clone()).await;
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
    let mut client = grpc_client(&ingest).await;
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
        let (status, _, _) = post_protobuf(&ingest, body.clone()).await;
        if status == StatusCode::OK {
            served = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(served, "the freed slot was never given back");
}

/// `reset_chain(t)` with a `padding` attribute that makes its encoding about `bytes` long.
fn padded_chain(t: u8, bytes: usize) -> Vec<u8> {
    let mut request = reset_chain(t);
    request.resource_spans[0].scope_spans[0].spans[0]
        .attributes
        .push(crate::support::string("padding", &"x".repeat(bytes)));
    request.encode_to_vec()
}

/// The bodies being read hold at most `max_inflight_bytes` between them, counted as their
/// bytes arrive: a client that has sent most of a large body holds them, so the next request
/// whose body does not fit in what is left is cut off with OTLP's throttling answer (HTTP 503 +
/// Retry-After, gRPC RESOURCE_EXHAUSTED), counted as refused unread; the large body is still
/// served whole when it ends, and once it is done a request of the same size is served again.
#[tokio::test]
async fn a_body_past_the_bytes_in_flight_is_throttled_and_the_body_holding_them_is_served() {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let mut ingest = receivers(IngestConfig {
        max_body: 64 * 1024,
        max_inflight_bytes: 64 * 1024,
        ..IngestConfig::default()
    })
    .await;
    let large = padded_chain(1, 50_000);
    let probe = padded_chain(2, 30_000);
    let (head, tail) = large.split_at(45_000);
    // The large body's first 45,000 bytes, then a pause: once the server has read them, a
    // 30,000-byte body no longer fits in 64 KiB. Until then the probe may be served (then try
    // again with a fresh large client; bounded).
    let mut refused = None;
    for _ in 0..50 {
        let headers = format!("{POST_PROTOBUF}content-length: {}\r\n\r\n", large.len());
        let slow = sent(
            ingest.http_addr.unwrap(),
            [headers.as_bytes(), head].concat(),
        )
        .await;
        tokio::time::sleep(Duration::from_millis(100)).await;
        let (status, headers, body) = post_protobuf(&ingest, probe.clone()).await;
        if status == StatusCode::SERVICE_UNAVAILABLE {
            assert_eq!(headers["retry-after"], "1");
            assert!(body.contains("retry later"), "{body}");
            refused = Some(slow);
            break;
        }
        assert_eq!(status, StatusCode::OK, "{body}");
        next_batch(&mut ingest).await;
    }
    let mut slow = refused.expect("a body past the bytes in flight was throttled");
    // The same bound holds across receivers: over gRPC the probe is throttled too.
    let mut client = grpc_client(&ingest).await;
    let grpc_probe =
        opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest::decode(
            probe.as_slice(),
        )
        .unwrap();
    let error = client.export(grpc_probe.clone()).await.unwrap_err();
    assert_eq!(error.code(), tonic::Code::ResourceExhausted, "{error:?}");
    let counts = ingest.stats.snapshot();
    assert_eq!(counts.requests_refused_unread, 2);
    assert_eq!(counts.requests_refused, 2);
    assert_eq!(counts.requests_rejected, 0, "throttled, never rejected");

    // The large body ends: it is served whole, and its bytes are given back.
    slow.write_all(tail).await.unwrap();
    let mut answer = vec![0u8; 1024];
    let n = tokio::time::timeout(Duration::from_secs(10), slow.read(&mut answer))
        .await
        .unwrap()
        .unwrap();
    let answer = String::from_utf8_lossy(&answer[..n]);
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert_eq!(next_batch(&mut ingest).await.spans.len(), 5);
    drop(slow);
    let (status, _, body) = post_protobuf(&ingest, probe.clone()).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(next_batch(&mut ingest).await.spans.len(), 5);
    client.export(grpc_probe).await.unwrap();
    assert_eq!(next_batch(&mut ingest).await.spans.len(), 5);
}

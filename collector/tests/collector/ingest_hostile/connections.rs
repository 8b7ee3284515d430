//! The listener and its connections: a port in use, a body or headers that trickle in, idle
//! connections, and the connection cap that must not lock a good exporter out.

use std::time::Duration;

use budget_top::ingest::{self, IngestConfig};
use prost::Message as _;
use reqwest::StatusCode;

use super::{assert_good_request_served, post_protobuf, start};
use crate::support::receivers::{POST_PROTOBUF, grpc_client, next_batch, receivers, sent};
use crate::support::reset_chain;

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
    let mut ingest = receivers(IngestConfig {
        grpc: None,
        body_timeout: Duration::from_millis(300),
        ..IngestConfig::default()
    })
    .await;
    use tokio::io::AsyncReadExt as _;
    let head = format!("{POST_PROTOBUF}content-length: 1000\r\n\r\nabc");
    let mut slow = sent(ingest.http_addr.unwrap(), head).await;
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

/// Past the cap, a new connection is served at once: the connection that has gone longest
/// without a request makes room (it was queued behind idle ones before, for up to 120 s).
#[tokio::test]
async fn past_the_connection_cap_the_oldest_idle_connection_makes_room() {
    use tokio::io::AsyncReadExt as _;
    let mut ingest = receivers(IngestConfig {
        grpc: None,
        max_connections: 2,
        ..IngestConfig::default()
    })
    .await;
    let addr = ingest.http_addr.unwrap();
    let mut oldest = tokio::net::TcpStream::connect(addr).await.unwrap();
    tokio::time::sleep(Duration::from_millis(20)).await;
    let _newer = tokio::net::TcpStream::connect(addr).await.unwrap();
    tokio::time::sleep(Duration::from_millis(20)).await;
    let started = std::time::Instant::now();
    assert_good_request_served(&mut ingest, 1).await;
    assert!(started.elapsed() < Duration::from_secs(5));
    // The oldest idle connection was closed to make room.
    let mut rest = Vec::new();
    let closed = tokio::time::timeout(Duration::from_secs(5), oldest.read_to_end(&mut rest)).await;
    assert!(closed.is_ok(), "the oldest idle connection was not closed");
    assert!(ingest.stats.snapshot().connections_evicted >= 1);
}

#[tokio::test]
async fn a_client_that_never_finishes_its_headers_loses_its_slot() {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let ingest = receivers(IngestConfig {
        grpc: None,
        header_timeout: Duration::from_millis(500),
        ..IngestConfig::default()
    })
    .await;
    let mut slow = tokio::net::TcpStream::connect(ingest.http_addr.unwrap())
        .await
        .unwrap();
    let started = std::time::Instant::now();
    // One header byte every 100 ms: bytes keep coming, but no request ever starts.
    let mut closed = false;
    for byte in POST_PROTOBUF.as_bytes() {
        if slow.write_all(&[*byte]).await.is_err() {
            closed = true;
            break;
        }
        let mut one = [0u8; 1];
        if let Ok(Ok(0) | Err(_)) =
            tokio::time::timeout(Duration::from_millis(100), slow.read(&mut one)).await
        {
            closed = true;
            break;
        }
    }
    assert!(closed, "the slow client was never cut off");
    let after = started.elapsed();
    assert!(
        after >= Duration::from_millis(400) && after < Duration::from_secs(3),
        "{after:?}"
    );
}

/// A connection that has served its requests is closed after the idle timeout, and sooner
/// once three quarters of the slots are taken.
#[tokio::test]
async fn an_idle_connection_is_closed_sooner_when_the_cap_is_near() {
    use tokio::io::AsyncReadExt as _;
    let ingest = receivers(IngestConfig {
        grpc: None,
        max_connections: 4,
        idle_timeout: Duration::from_secs(60),
        idle_timeout_near_cap: Duration::from_millis(300),
        ..IngestConfig::default()
    })
    .await;
    let addr = ingest.http_addr.unwrap();
    let body = reset_chain(1).encode_to_vec();
    let head = format!("{POST_PROTOBUF}content-length: {}\r\n\r\n", body.len());
    let mut served = sent(addr, [head.as_bytes(), &body].concat()).await;
    let mut answer = [0u8; 12];
    served.read_exact(&mut answer).await.unwrap();
    assert_eq!(&answer, b"HTTP/1.1 200");
    // Alone (1 of 4), it stays open.
    let mut rest = [0u8; 4096];
    let read = tokio::time::timeout(Duration::from_millis(600), async {
        loop {
            if served.read(&mut rest).await.unwrap_or(0) == 0 {
                break;
            }
        }
    })
    .await;
    assert!(read.is_err(), "closed while the cap was far");
    // Two more connections: 3 of 4 open, the near-cap idle timeout applies.
    let _b = tokio::net::TcpStream::connect(addr).await.unwrap();
    let _c = tokio::net::TcpStream::connect(addr).await.unwrap();
    let started = std::time::Instant::now();
    let closed = tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            if served.read(&mut rest).await.unwrap_or(0) == 0 {
                break;
            }
        }
    })
    .await;
    assert!(closed.is_ok(), "not closed near the cap");
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
}

/// Issue 14, item 2: 600 idle connections and 200 clients sending a header byte a second hold
/// every slot of both receivers (512 each); a good OTLP/HTTP and OTLP/gRPC export is still
/// answered within 100 ms.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_and_slow_header_clients_cannot_lock_a_good_exporter_out() {
    use tokio::io::AsyncWriteExt as _;
    let mut ingest = start(ingest::DEFAULT_MAX_BODY, 64).await;
    let (http_addr, grpc_addr) = (ingest.http_addr.unwrap(), ingest.grpc_addr.unwrap());
    let stop = tokio_util::sync::CancellationToken::new();
    let mut held = Vec::new();
    let mut slow = Vec::new();
    for (addr, header) in [
        (http_addr, &b"POST /v1/traces HTTP/1.1\r\nhost: x\r\n"[..]),
        (grpc_addr, &b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"[..]),
    ] {
        for _ in 0..600 {
            held.push(tokio::net::TcpStream::connect(addr).await.unwrap());
        }
        for _ in 0..200 {
            let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
            let stop = stop.clone();
            slow.push(tokio::spawn(async move {
                for byte in header.iter().cycle().take(60) {
                    if stream.write_all(&[*byte]).await.is_err() {
                        return;
                    }
                    tokio::select! {
                        () = stop.cancelled() => return,
                        () = tokio::time::sleep(Duration::from_secs(1)) => {}
                    }
                }
            }));
        }
    }
    tokio::time::sleep(Duration::from_millis(1500)).await;

    let body = reset_chain(1).encode_to_vec();
    let mut http_times = Vec::new();
    let mut grpc_times = Vec::new();
    for t in 1..=3u8 {
        let started = std::time::Instant::now();
        let (status, _, text) = post_protobuf(&ingest, body.clone()).await;
        http_times.push(started.elapsed());
        assert_eq!(status, StatusCode::OK, "{text}");
        assert_eq!(next_batch(&mut ingest).await.spans.len(), 5);

        let started = std::time::Instant::now();
        let mut client = grpc_client(&ingest).await;
        client.export(reset_chain(t)).await.unwrap();
        grpc_times.push(started.elapsed());
        assert_eq!(next_batch(&mut ingest).await.spans.len(), 5);
    }
    let counts = ingest.stats.snapshot();
    eprintln!(
        "with 600 idle and 200 slow-header clients per receiver: HTTP answered in {http_times:?}, gRPC (connect + export) in {grpc_times:?}; {} connections closed to make room",
        counts.connections_evicted
    );
    stop.cancel();
    for task in slow {
        let _ = task.await;
    }
    drop(held);
    for (name, times) in [("HTTP", &http_times), ("gRPC", &grpc_times)] {
        assert!(
            times.iter().all(|t| *t < Duration::from_millis(100)),
            "{name}: {times:?}"
        );
    }
    assert!(counts.connections_evicted >= 2 * (800 - 512));
}

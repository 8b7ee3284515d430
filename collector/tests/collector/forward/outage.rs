//! When the backend is away or refuses: Jaeger stopped mid-run, a long outage, a 4xx and a
//! 503, and SIGTERM with a full queue.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use budget_top::ingest::decode::count_spans;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;

use super::{chain, forward_to, forward_when, post, read_report, settled, until_held_whole};
use crate::jaeger::{Jaeger, Ports, jaeger_or_skip};
use crate::support::{Serving, scratch};

/// Posts broken chains in waves of 100, each judged before the next: the chains waiting to be
/// judged fit their half of a small `--forward-buffer`, and the queue's half fills. Each
/// request is accepted at once, whatever the backend does.
fn in_waves(serving: &Serving, requests: &[ExportTraceServiceRequest]) {
    for (wave, requests) in requests.chunks(100).enumerate() {
        for request in requests {
            let took = post(serving.http, request);
            assert!(took < Duration::from_secs(2), "a request took {took:?}");
        }
        let judged = (100 * wave + requests.len()) as u64;
        forward_when(serving.api, Duration::from_secs(30), |f| {
            f["chains"]["finding"] == judged
        });
    }
}

#[test]
fn jaeger_stopped_mid_run_blocks_nothing_and_gets_what_was_queued_once_back() {
    let Some(bin) = jaeger_or_skip("forward: jaeger_stopped_mid_run") else {
        return;
    };
    let jaeger = Jaeger::start(&bin);
    let ports: Ports = jaeger.ports();
    let serving = forward_to(&format!("grpc://{}", jaeger.otlp_grpc), "300ms", "0", &[]);
    let before: Vec<ExportTraceServiceRequest> = (0..10).map(|n| chain(0xa1, n, true)).collect();
    for request in &before {
        post(serving.http, request);
    }
    forward_when(serving.api, Duration::from_secs(30), |f| {
        settled(f) && f["chains"]["finding"] == 10
    });
    jaeger.stop();
    // Down: every request is still accepted at once, and the chains wait in the queue.
    let during: Vec<ExportTraceServiceRequest> = (0..30).map(|n| chain(0xa2, n, true)).collect();
    for request in &during {
        let took = post(serving.http, request);
        assert!(took < Duration::from_secs(2), "a request took {took:?}");
    }
    let waiting = forward_when(serving.api, Duration::from_secs(60), |f| {
        f["chains"]["finding"] == 40 && f["spans"]["retried"].as_u64().unwrap() > 0
    });
    assert_eq!(waiting["spans"]["failed"], 0, "{waiting:#}");
    assert_eq!(waiting["spans"]["dropped"], 0, "{waiting:#}");
    let jaeger = Jaeger::start_on(&bin, ports, None);
    let forward = forward_when(serving.api, Duration::from_secs(90), settled);
    let kept = 40 * count_spans(&before[0]);
    assert_eq!(forward["spans"]["sent"], kept, "{forward:#}");
    for request in &during {
        until_held_whole(&jaeger, request, Duration::from_secs(30));
    }
    let (code, _) = serving.terminate(Duration::from_secs(60));
    assert_eq!(code, Some(0));
    jaeger.stop();
}

#[test]
fn a_long_outage_drops_and_fails_chains_and_the_counts_add_up_exactly() {
    // Nothing listens there: every attempt fails to connect.
    let nowhere = crate::otelcol_tier1::free_port();
    let dir = scratch("forward/outage");
    let report_path = dir.join("report.json");
    let serving = forward_to(
        &format!("grpc://{nowhere}"),
        "200ms",
        "0",
        &[
            "--forward-buffer",
            "200000",
            "--forward-retry-for",
            "3s",
            "--forward-timeout",
            "1s",
            "--report",
            report_path.to_str().unwrap(),
        ],
    );
    let requests: Vec<ExportTraceServiceRequest> = (0..300).map(|n| chain(0xb1, n, true)).collect();
    in_waves(&serving, &requests);
    let forward = forward_when(serving.api, Duration::from_secs(60), settled);
    let n = |k: &str| forward["spans"][k].as_u64().unwrap();
    assert!(n("dropped") > 0 && n("failed") > 0, "{forward:#}");
    assert_eq!(n("sent"), 0, "{forward:#}");
    let dropped = &forward["dropped"];
    assert!(dropped["queue"].as_u64().unwrap() > 0, "{forward:#}");
    assert_eq!(
        ["buffer", "queue", "stopped"]
            .map(|k| dropped[k].as_u64().unwrap())
            .iter()
            .sum::<u64>(),
        n("dropped"),
        "{forward:#}"
    );
    let (code, stderr) = serving.terminate(Duration::from_secs(60));
    assert_eq!(code, Some(0), "{stderr}");
    let report = read_report(&report_path);
    let spans = &report["forward"]["spans"];
    let get = |k: &str| spans[k].as_u64().unwrap();
    assert_eq!(get("kept"), 300 * count_spans(&requests[0]), "{spans}");
    assert_eq!(
        get("sent") + get("dropped") + get("failed"),
        get("kept"),
        "{spans}"
    );
    assert!(stderr.contains("forwarded 300 chain(s)"), "{stderr}");
}

/// A backend of our own on `addr`: answers each export with `answer(n)` (n counts from 0),
/// counting the requests.
fn fake_backend(
    answer: impl Fn(u64) -> (u16, Option<&'static str>) + Send + Sync + 'static,
) -> (SocketAddr, Arc<AtomicU64>, tokio::runtime::Runtime) {
    // Its own worker: the server runs while the test blocks on other runtimes.
    let runtime = crate::support::threaded_runtime(1);
    let requests = Arc::new(AtomicU64::new(0));
    let counted = requests.clone();
    let answer = Arc::new(answer);
    let listener = runtime
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let addr = listener.local_addr().unwrap();
    let app = axum::Router::new().route(
        "/v1/traces",
        axum::routing::post(move |body: axum::body::Bytes| {
            let n = counted.fetch_add(1, Ordering::SeqCst);
            let (status, retry_after) = answer(n);
            assert!(!body.is_empty());
            async move {
                let mut response = axum::http::Response::builder().status(status);
                if let Some(after) = retry_after {
                    response = response.header("retry-after", after);
                }
                response
                    .header("content-type", "application/x-protobuf")
                    .body(axum::body::Body::empty())
                    .unwrap()
            }
        }),
    );
    runtime.spawn(async move { axum::serve(listener, app).await });
    (addr, requests, runtime)
}

#[test]
fn a_4xx_is_never_retried_and_a_503_is_after_its_retry_after() {
    let (refusing, refused, _a) = fake_backend(|_| (400, None));
    let (busy, asked, _b) = fake_backend(|n| if n < 2 { (503, Some("1")) } else { (200, None) });
    for (backend, requests, expect_sent) in [(refusing, &refused, false), (busy, &asked, true)] {
        let url = format!("http://{backend}/v1/traces");
        let serving = forward_to(&url, "200ms", "0", &[]);
        let chains: Vec<ExportTraceServiceRequest> = (0..5).map(|n| chain(0xc1, n, true)).collect();
        for request in &chains {
            post(serving.http, request);
        }
        let forward = forward_when(serving.api, Duration::from_secs(60), |f| {
            settled(f) && f["chains"]["finding"] == 5
        });
        let kept = 5 * count_spans(&chains[0]);
        let batches = forward["requests"]["sent"].as_u64().unwrap()
            + forward["requests"]["failed"].as_u64().unwrap();
        if expect_sent {
            assert_eq!(forward["spans"]["sent"], kept, "{forward:#}");
            assert!(
                forward["spans"]["retried"].as_u64().unwrap() > 0,
                "{forward:#}"
            );
            // Every batch sent once, and each refusal retried once more.
            assert_eq!(requests.load(Ordering::SeqCst), batches + 2, "{forward:#}");
        } else {
            assert_eq!(forward["spans"]["failed"], kept, "{forward:#}");
            assert_eq!(forward["spans"]["retried"], 0, "{forward:#}");
            assert_eq!(requests.load(Ordering::SeqCst), batches, "{forward:#}");
            let error = forward["last_error"].as_str().unwrap();
            assert!(
                error.contains("400") && error.contains("not retried"),
                "{error}"
            );
        }
        let (code, _) = serving.terminate(Duration::from_secs(60));
        assert_eq!(code, Some(0));
    }
}

#[test]
fn sigterm_with_a_full_queue_stops_within_the_drain_and_says_what_was_left() {
    // A backend that takes connections and never answers.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let silent = listener.local_addr().unwrap();
    let holder = std::thread::spawn(move || {
        let mut held = Vec::new();
        listener.set_nonblocking(true).unwrap();
        let until = Instant::now() + Duration::from_secs(120);
        while Instant::now() < until {
            match listener.accept() {
                Ok((stream, _)) => held.push(stream),
                Err(_) => std::thread::sleep(Duration::from_millis(20)),
            }
            if held.len() > 64 {
                break;
            }
        }
    });
    let dir = scratch("forward/sigterm");
    let report_path = dir.join("report.json");
    let serving = forward_to(
        &format!("grpc://{silent}"),
        "200ms",
        "0",
        &[
            "--forward-timeout",
            "60s",
            "--forward-buffer",
            "200000",
            "--report",
            report_path.to_str().unwrap(),
        ],
    );
    let requests: Vec<ExportTraceServiceRequest> = (0..300).map(|n| chain(0xf1, n, true)).collect();
    in_waves(&serving, &requests);
    let waiting = forward_when(serving.api, Duration::from_secs(30), |f| {
        f["dropped"]["queue"].as_u64().unwrap() > 0
    });
    assert!(
        waiting["spans"]["queued"].as_u64().unwrap() > 0,
        "{waiting:#}"
    );
    let stopping = Instant::now();
    let (code, stderr) = serving.terminate(Duration::from_secs(60));
    let took = stopping.elapsed();
    assert_eq!(code, Some(0), "{stderr}");
    // The drain's 10 s, and the judging and writing beside it.
    assert!(took < Duration::from_secs(25), "stopped in {took:?}");
    let report = read_report(&report_path);
    let forward = &report["forward"];
    let get = |k: &str| forward["spans"][k].as_u64().unwrap();
    assert!(
        forward["dropped"]["stopped"].as_u64().unwrap() > 0,
        "{forward:#}"
    );
    assert_eq!(get("queued"), 0, "{forward:#}");
    assert_eq!(
        get("sent") + get("dropped") + get("failed"),
        get("kept"),
        "{forward:#}"
    );
    assert!(stderr.contains("left when serve stopped"), "{stderr}");
    drop(holder);
}

//! A measurement, not run by default: how many spans per second the receivers and one store
//! loop take over OTLP/HTTP protobuf and OTLP/gRPC on this machine, and that every span
//! answered with success is held. Run with
//! `cargo test --release -p budget-top --test collector throughput -- --ignored --nocapture`
//! (`BUDGET_TOP_MEASURE=grpc` or `http` for one transport only, so the RSS figure is its own;
//! `BUDGET_TOP_KEEP_ATTRIBUTES=0` to leave raw attributes out).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use budget_top::ingest::{self, IngestConfig};
use budget_top::store::Store;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::collector::trace::v1::trace_service_client::TraceServiceClient;
use prost::Message as _;

use crate::support::reset_chain;

/// 20 chains of 5 spans, ids made unique by `n` (never all zero: that trace id is invalid).
fn batch(n: u64) -> ExportTraceServiceRequest {
    let mut req = reset_chain(1);
    for rs in &mut req.resource_spans {
        for ss in &mut rs.scope_spans {
            let template = std::mem::take(&mut ss.spans);
            for chain in 0..20u64 {
                for s in &template {
                    let mut s = s.clone();
                    s.trace_id[..8].copy_from_slice(&n.to_be_bytes());
                    s.trace_id[8..].copy_from_slice(&chain.to_be_bytes());
                    ss.spans.push(s);
                }
            }
        }
    }
    req
}

fn rss_mib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines().find(|l| l.starts_with("VmRSS:")).and_then(|l| {
                l.split_whitespace()
                    .nth(1)
                    .and_then(|v| v.parse::<u64>().ok())
            })
        })
        .map_or(0, |kb| kb / 1024)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement: run in release with --ignored --nocapture"]
async fn throughput() {
    let only = std::env::var("BUDGET_TOP_MEASURE").unwrap_or_default();
    let keep_attributes = std::env::var("BUDGET_TOP_KEEP_ATTRIBUTES").as_deref() != Ok("0");
    for grpc in [false, true] {
        if (only == "grpc" && !grpc) || (only == "http" && grpc) {
            continue;
        }
        let mut ingest = ingest::start(IngestConfig {
            grpc: Some("127.0.0.1:0".parse().unwrap()),
            http: Some("127.0.0.1:0".parse().unwrap()),
            keep_attributes,
            ..IngestConfig::default()
        })
        .await
        .unwrap();
        let receiver = std::mem::replace(&mut ingest.receiver, tokio::sync::mpsc::channel(1).1);
        let (stop, mut stopped) = tokio::sync::oneshot::channel::<()>();
        let owner = tokio::spawn(async move {
            let mut receiver = receiver;
            let mut store = Store::new(1_000_000);
            let mut tick = tokio::time::interval(Duration::from_millis(100));
            loop {
                tokio::select! {
                    Some(batch) = receiver.recv() => store.insert_batch(batch),
                    _ = tick.tick() => { store.analyse_dirty(); }
                    _ = &mut stopped => break,
                }
            }
            receiver.close();
            while let Some(batch) = receiver.recv().await {
                store.insert_batch(batch);
            }
            store.analyse_dirty();
            store.counters()
        });
        let ok_spans = Arc::new(AtomicU64::new(0));
        let refused = Arc::new(AtomicU64::new(0));
        let next = Arc::new(AtomicU64::new(0));
        let started = Instant::now();
        let run_for = Duration::from_secs(5);
        let mut senders = Vec::new();
        for _ in 0..8 {
            let (ok_spans, refused, next) = (ok_spans.clone(), refused.clone(), next.clone());
            let (http, grpc_addr) = (ingest.http_addr.unwrap(), ingest.grpc_addr.unwrap());
            senders.push(tokio::spawn(async move {
                let client = reqwest::Client::new();
                let mut grpc_client = TraceServiceClient::connect(format!("http://{grpc_addr}"))
                    .await
                    .unwrap();
                while started.elapsed() < run_for {
                    let req = batch(next.fetch_add(1, Ordering::Relaxed) + 1);
                    let accepted = if grpc {
                        grpc_client.export(req).await.is_ok()
                    } else {
                        client
                            .post(format!("http://{http}/v1/traces"))
                            .header("content-type", "application/x-protobuf")
                            .body(req.encode_to_vec())
                            .send()
                            .await
                            .unwrap()
                            .status()
                            == 200
                    };
                    if accepted {
                        ok_spans.fetch_add(100, Ordering::Relaxed);
                    } else {
                        refused.fetch_add(100, Ordering::Relaxed);
                        tokio::time::sleep(Duration::from_millis(5)).await;
                    }
                }
            }));
        }
        for s in senders {
            s.await.unwrap();
        }
        let elapsed = started.elapsed().as_secs_f64();
        stop.send(()).unwrap();
        let counters = owner.await.unwrap();
        let ok = ok_spans.load(Ordering::Relaxed);
        eprintln!(
            "{} (raw attributes kept: {keep_attributes}): {:.0} spans/s accepted, {} refused, store holds {} spans in {} chains ({} evicted), RSS {} MiB",
            if grpc {
                "OTLP/gRPC"
            } else {
                "OTLP/HTTP protobuf"
            },
            ok as f64 / elapsed,
            refused.load(Ordering::Relaxed),
            counters.spans_held,
            counters.chains_held,
            counters.chains_evicted,
            rss_mib()
        );
        assert_eq!(
            counters.spans_held + counters.spans_evicted,
            ok,
            "every accepted span held"
        );
        ingest.shutdown();
    }
}

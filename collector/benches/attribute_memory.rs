//! The live screen's memory while spans with megabyte attributes arrive (not a criterion bench:
//! it prints RSS). Raw attributes kept for the detail popup are capped in bytes: a value is cut
//! at 4 KiB, a span keeps 16 KiB, and the store and the queue each hold at most
//! `--max-attribute-bytes`.
//!
//! The screen's own receivers (OTLP/HTTP on loopback, raw attributes kept, the queue's attribute
//! budget set as `budget-top` sets it) feed a store with that budget, analysed after every batch
//! as the screen does; `CLIENTS` senders post requests of 3 spans, each span with one 1 MiB
//! attribute and 30 of 1 KiB (so every span fills its 16 KiB), as fast as they are answered, for
//! `SECS` (default 60). RSS is sampled every second.
//!
//! `cargo bench -p budget-top --bench attribute_memory`; knobs: `SECS` (60), `BUDGET_MIB` (64),
//! `CLIENTS` (2).
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod support;
use support::{env, filtered_out, mib, rss};

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use budget_top::ingest::{self, IngestConfig};
use budget_top::store::Store;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value::Value};
use opentelemetry_proto::tonic::resource::v1::Resource;
use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans, Span};
use prost::Message as _;

fn string(key: &str, value: String) -> KeyValue {
    KeyValue {
        key: key.into(),
        value: Some(AnyValue {
            value: Some(Value::StringValue(value)),
        }),
        ..Default::default()
    }
}

/// Request `n`: one chain of 3 spans, each with ~1.03 MiB of attributes.
fn request(n: u64) -> Vec<u8> {
    let mut trace_id = [7u8; 16];
    trace_id[..8].copy_from_slice(&n.to_be_bytes());
    let spans = (1..=3u8)
        .map(|s| {
            let mut attributes = vec![string("blob", "x".repeat(1 << 20))];
            attributes.extend((0..30).map(|i| string(&format!("k{i}"), "y".repeat(1024))));
            Span {
                trace_id: trace_id.to_vec(),
                span_id: vec![s; 8],
                parent_span_id: if s == 1 { Vec::new() } else { vec![s - 1; 8] },
                name: format!("op {s}"),
                kind: if s == 1 { 2 } else { 1 },
                start_time_unix_nano: 1_764_374_400_000_000_000 + n * 1_000_000,
                end_time_unix_nano: 1_764_374_400_000_000_000 + n * 1_000_000 + 500_000,
                attributes,
                ..Default::default()
            }
        })
        .collect();
    ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            resource: Some(Resource {
                attributes: vec![string("service.name", "blobs".into())],
                ..Default::default()
            }),
            scope_spans: vec![ScopeSpans {
                spans,
                ..Default::default()
            }],
            ..Default::default()
        }],
    }
    .encode_to_vec()
}

fn main() {
    if filtered_out("attribute_memory") {
        return;
    }
    let secs: u64 = env("SECS", 60);
    let budget = env::<usize>("BUDGET_MIB", 64) * 1024 * 1024;
    let clients: usize = env("CLIENTS", 2);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async move {
        let mut ingest = ingest::start(IngestConfig {
            grpc: None,
            http: Some("127.0.0.1:0".parse().unwrap()),
            max_queued_attribute_bytes: budget,
            ..IngestConfig::default()
        })
        .await
        .unwrap();
        let url = format!("http://{}/v1/traces", ingest.http_addr.unwrap());
        let bodies: Arc<Vec<Vec<u8>>> = Arc::new((0..4).map(request).collect());
        let base = rss();

        // The screen's owner loop: batches into the store, analysed as they arrive.
        let held_max = Arc::new(AtomicU64::new(0));
        let owner = {
            let held_max = held_max.clone();
            let mut receiver = std::mem::replace(&mut ingest.receiver, tokio::sync::mpsc::channel(1).1);
            tokio::spawn(async move {
                let mut store = Store::new(1_000_000).with_attribute_budget(budget);
                while let Some(batch) = receiver.recv().await {
                    store.insert_batch(batch);
                    store.analyse_dirty();
                    held_max.fetch_max(store.counters().attribute_bytes, Ordering::Relaxed);
                }
                store.counters()
            })
        };

        let stop = Arc::new(AtomicBool::new(false));
        let sent = Arc::new(AtomicU64::new(0));
        let mut senders = Vec::new();
        for c in 0..clients {
            let (url, bodies, stop, sent) = (url.clone(), bodies.clone(), stop.clone(), sent.clone());
            senders.push(tokio::spawn(async move {
                let client = reqwest::Client::new();
                let mut i = c;
                while !stop.load(Ordering::Relaxed) {
                    // Each request its own trace: fresh chains keep arriving.
                    let mut body = bodies[i % bodies.len()].clone();
                    let n = (c as u64) << 40 | i as u64;
                    patch_trace(&mut body, n);
                    let response = client
                        .post(&url)
                        .header("content-type", "application/x-protobuf")
                        .body(body)
                        .send()
                        .await;
                    if response.is_ok_and(|r| r.status().is_success()) {
                        sent.fetch_add(3, Ordering::Relaxed);
                    }
                    i += clients;
                }
            }));
        }
        let started = Instant::now();
        let mut peak = base;
        let mut samples = Vec::new();
        while started.elapsed() < Duration::from_secs(secs) {
            tokio::time::sleep(Duration::from_secs(1)).await;
            let now = rss();
            peak = peak.max(now);
            samples.push(now);
        }
        stop.store(true, Ordering::Relaxed);
        for s in senders {
            let _ = s.await;
        }
        ingest.shutdown();
        drop(ingest);
        let counters = owner.await.unwrap();
        let spans = sent.load(Ordering::Relaxed);
        let half = &samples[samples.len() / 2..];
        println!(
            "{secs} s of spans with 1 MiB + 30 KiB of attributes each: {spans} spans ({:.0}/s, {:.0} MiB/s of attributes sent), --max-attribute-bytes {:.0} MiB",
            spans as f64 / secs as f64,
            spans as f64 * 1.03 / secs as f64,
            mib(budget as u64)
        );
        println!(
            "RSS {:.1} MiB before, peak {:.1} MiB (+{:.1} MiB), second half {:.1}..{:.1} MiB; attribute bytes held: at most {:.1} MiB, at the end {:.1} MiB in {} chains' worth dropped oldest first; {} spans held",
            mib(base),
            mib(peak),
            mib(peak.saturating_sub(base)),
            mib(*half.iter().min().unwrap_or(&0)),
            mib(*half.iter().max().unwrap_or(&0)),
            mib(held_max.load(Ordering::Relaxed)),
            mib(counters.attribute_bytes),
            counters.attribute_chains_dropped,
            counters.spans_held
        );
    });
}

/// Writes `n` into the trace id of every span of an encoded request (the ids are the 16-byte
/// runs of 7s the request was built with).
fn patch_trace(body: &mut [u8], n: u64) {
    let mut at = 0;
    while let Some(i) = body[at..].windows(16).position(|w| w[8..] == [7u8; 8]) {
        let start = at + i;
        body[start..start + 8].copy_from_slice(&n.to_be_bytes());
        at = start + 16;
    }
}

//! The ingest pipeline per span, stage by stage, on `budget-demo load`'s own requests (512
//! spans: chains of 4 hops, a SERVER and a CLIENT span each, ~10 attributes a span):
//! decode (prost + `decode_request`, and the in-place `decode_protobuf`), store insert, chain
//! analysis, and all three together. Throughput is in spans, so a regression shows per span.
//! Run: `cargo bench -p budget-top --bench ingest`.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::hint::black_box;

use budget_demo::otlp_load::Template;
use budget_top::ingest::decode::interner::Interner;
use budget_top::ingest::decode::{decode_protobuf, decode_request};
use budget_top::store::Store;
use bytes::Bytes;
use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use deadline_budget::analysis::Span;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use prost::Message as _;

/// Distinct requests cycled through: 256 x 512 spans is more than the store below holds, so
/// a request comes back only after its chains were evicted (steady state, evicting).
const REQUESTS: u32 = 256;
const MAX_SPANS: usize = 100_000;

fn requests() -> (u64, Vec<Bytes>) {
    let template = Template::new(512, 4);
    let requests = (1..=REQUESTS).map(|n| template.request(n)).collect();
    (template.spans(), requests)
}

fn decoded(requests: &[Bytes]) -> Vec<Vec<Span>> {
    let mut interner = Interner::default();
    requests
        .iter()
        .map(|r| decode_protobuf(r, &mut interner, false).unwrap().spans)
        .collect()
}

fn decode(c: &mut Criterion) {
    let (spans, requests) = requests();
    let mut group = c.benchmark_group("decode");
    group.throughput(Throughput::Elements(spans));
    let mut interner = Interner::default();
    let mut i = 0;
    group.bench_function("prost_then_decode_request", |b| {
        b.iter(|| {
            i = (i + 1) % requests.len();
            let mut request = ExportTraceServiceRequest::decode(requests[i].as_ref()).unwrap();
            black_box(decode_request(&mut request, &mut interner, false))
        })
    });
    group.bench_function("in_place", |b| {
        b.iter(|| {
            i = (i + 1) % requests.len();
            black_box(decode_protobuf(&requests[i], &mut interner, false).unwrap())
        })
    });
    group.bench_function("in_place_keeping_attributes", |b| {
        b.iter(|| {
            i = (i + 1) % requests.len();
            black_box(decode_protobuf(&requests[i], &mut interner, true).unwrap())
        })
    });
    group.finish();
}

fn store(c: &mut Criterion) {
    let (spans, requests) = requests();
    let batches = decoded(&requests);
    let mut group = c.benchmark_group("store");
    group.throughput(Throughput::Elements(spans));

    let mut store = Store::new(MAX_SPANS);
    let mut i = 0;
    group.bench_function("insert", |b| {
        b.iter_batched(
            || {
                i = (i + 1) % batches.len();
                batches[i].clone()
            },
            |batch| store.insert_spans(batch),
            BatchSize::SmallInput,
        )
    });

    let mut store = Store::new(MAX_SPANS);
    group.bench_function("insert_then_analyse", |b| {
        b.iter_batched(
            || {
                i = (i + 1) % batches.len();
                batches[i].clone()
            },
            |batch| {
                store.insert_spans(batch);
                black_box(store.analyse_dirty())
            },
            BatchSize::SmallInput,
        )
    });
    group.finish();
}

/// What one export request costs the receiver past the transport: bytes -> spans -> store ->
/// analysis, as `check` and the screen do it.
fn pipeline(c: &mut Criterion) {
    let (spans, requests) = requests();
    let mut group = c.benchmark_group("pipeline");
    group.throughput(Throughput::Elements(spans));
    let mut interner = Interner::default();
    let mut store = Store::new(MAX_SPANS);
    let mut i = 0;
    group.bench_function("decode_store_analyse", |b| {
        b.iter(|| {
            i = (i + 1) % requests.len();
            let decoded = decode_protobuf(&requests[i], &mut interner, false).unwrap();
            store.insert_spans(decoded.spans);
            black_box(store.analyse_dirty())
        })
    });
    group.finish();
}

criterion_group!(benches, decode, store, pipeline);
criterion_main!(benches);

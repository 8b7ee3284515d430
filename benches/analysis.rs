//! The analysis per span: chains of a typical shape assembled span by span and analysed, as
//! the collector's store does (insert every span, analyse each chain once per tick).
//!
//! `cargo bench -p deadline-budget --bench analysis`; throughput is in spans.

use std::hint::black_box;
use std::sync::Arc;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use deadline_budget::analysis::{
    BudgetFacts, BudgetSource, Chain, EdgeStats, Options, Outcome, Report, Span, SpanId, SpanKind,
    SpanStatus, TraceId,
};

const T0: u64 = 1_764_430_000_000_000_000;
const MS: u64 = 1_000_000;

/// One chain: a frontend hop calling `fan_out` services, each doing some internal work; one call
/// in three forwards more than remained, so findings (and their messages) are part of the cost.
fn chain(trace: u64, fan_out: u64, services: &[Arc<str>]) -> Vec<Span> {
    let mut tid = [0u8; 16];
    tid[..8].copy_from_slice(&trace.to_be_bytes());
    let trace_id = TraceId(tid);
    let mut next = trace << 20;
    let mut id = || {
        next += 1;
        SpanId(next.to_be_bytes())
    };
    let mk = |span_id, parent, service: &Arc<str>, kind, start: u64, end: u64, budget| Span {
        trace_id,
        span_id,
        parent_span_id: parent,
        service: service.clone(),
        name: service.clone(),
        kind,
        start_unix_nano: T0 + start * MS,
        end_unix_nano: T0 + end * MS,
        status: SpanStatus::Unset,
        budget,
    };
    let root = id();
    let mut spans = vec![mk(
        root,
        None,
        &services[0],
        SpanKind::Server,
        0,
        100 * fan_out + 10,
        BudgetFacts {
            received_ms: Some(1000),
            source: Some(BudgetSource::XBudgetMs),
            remaining_at_start_ms: Some(1000),
            outcome: Some(Outcome::Ok),
            ..BudgetFacts::default()
        },
    )];
    for k in 0..fan_out {
        let (c, h, w) = (id(), id(), id());
        let start = 5 + 100 * k;
        let remaining = 1000 - start as i64;
        let forwarded = if k % 3 == 2 { 3000 } else { remaining - 20 };
        let callee = &services[1 + (k as usize % (services.len() - 1))];
        spans.push(mk(
            c,
            Some(root),
            &services[0],
            SpanKind::Client,
            start,
            start + 90,
            BudgetFacts {
                remaining_ms: Some(remaining),
                forwarded_ms: Some(forwarded),
                timeout_ms: Some(forwarded),
                ..BudgetFacts::default()
            },
        ));
        spans.push(mk(
            h,
            Some(c),
            callee,
            SpanKind::Server,
            start + 1,
            start + 89,
            BudgetFacts {
                received_ms: Some(forwarded),
                source: Some(BudgetSource::XBudgetMs),
                remaining_at_start_ms: Some(forwarded),
                outcome: Some(Outcome::Ok),
                ..BudgetFacts::default()
            },
        ));
        spans.push(mk(
            w,
            Some(h),
            callee,
            SpanKind::Internal,
            start + 2,
            start + 80,
            BudgetFacts::default(),
        ));
    }
    spans
}

fn bench(c: &mut Criterion) {
    let services: Vec<Arc<str>> = ["frontend", "orders", "inventory", "payments"]
        .into_iter()
        .map(Arc::from)
        .collect();
    let options = Options::default();

    // 1000 chains of 1 + 3 * 5 = 16 spans, spans arriving child first.
    let small: Vec<Vec<Span>> = (1..=1000)
        .map(|t| {
            let mut s = chain(t, 5, &services);
            s.reverse();
            s
        })
        .collect();
    let spans: u64 = small.iter().map(|c| c.len() as u64).sum();
    let mut group = c.benchmark_group("analysis");
    group.throughput(Throughput::Elements(spans));
    group.bench_function("insert+analyse+edges, 16-span chains", |b| {
        b.iter(|| {
            let mut edges = EdgeStats::new();
            for spans in &small {
                let mut chain = Chain::new(spans[0].trace_id);
                for s in spans {
                    chain.insert(s.clone());
                }
                let a = chain.analyse(&options);
                edges.add(&a);
                black_box(&a);
            }
            black_box(edges.len())
        })
    });
    group.bench_function("report, 16-span chains", |b| {
        b.iter(|| {
            let report = Report::from_spans(small.iter().flatten().cloned(), &options);
            black_box(report.findings.len())
        })
    });

    let big = chain(1, 3333, &services);
    let mut big_chain = Chain::new(big[0].trace_id);
    for s in &big {
        big_chain.insert(s.clone());
    }
    group.throughput(Throughput::Elements(big.len() as u64));
    group.bench_function("analyse, one 10,000-span chain", |b| {
        b.iter(|| black_box(big_chain.analyse(&options).findings.len()))
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);

//! `check --html`: the page of 100,000 chains, rendered and written. Targets: under a second,
//! under 2 MB (issue 19). The report itself (`Store::report`, which `check` computes for the
//! text and JSON reports anyway) is outside the timing; the page's own work is inside: ranking
//! the chains per finding kind, the services table over every hop, the drawings, the file.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::hint::black_box;
use std::sync::Arc;

use budget_top::batch::Batch;
use budget_top::batch::RawAttributes;
use budget_top::report::html as report_html;
use budget_top::store::Store;
use criterion::{Criterion, criterion_group, criterion_main};
use deadline_budget::analysis::{
    BudgetFacts, BudgetSource, Outcome, Severity, Span, SpanId, SpanKind, SpanStatus, TraceId,
};
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value::Value};

const CHAINS: u64 = 100_000;

fn attribute(key: &str, value: &str) -> KeyValue {
    KeyValue {
        key: key.into(),
        value: Some(AnyValue {
            value: Some(Value::StringValue(value.into())),
        }),
        ..Default::default()
    }
}

/// One chain of 5 spans: gateway -> a service -> inventory; one in four resets the budget on
/// its second call (so inventory works for nobody), one in ten is shed.
fn chain(t: u64) -> Vec<Span> {
    let ms = 1_000_000u64;
    let t0 = 1_764_374_400_000 * ms + t * 3 * ms;
    let mut id = [0u8; 16];
    id[8..].copy_from_slice(&t.to_be_bytes());
    let trace = TraceId(id);
    let reset = t.is_multiple_of(4);
    let shed = t % 10 == 1;
    let callee = ["orders", "payments", "search", "accounts"][(t % 4) as usize];
    let span = |n: u64, parent: u64, service: &str, name: &str, kind, start: u64, end: u64| Span {
        trace_id: trace,
        span_id: SpanId(((t << 8) | n).to_be_bytes()),
        parent_span_id: (parent > 0).then(|| SpanId(((t << 8) | parent).to_be_bytes())),
        service: Arc::from(service),
        name: Arc::from(name),
        kind,
        start_unix_nano: t0 + start * ms,
        end_unix_nano: t0 + end * ms,
        status: SpanStatus::Unset,
        budget: BudgetFacts::default(),
    };
    let hop = |mut s: Span, received: i64, source| {
        s.budget.source = Some(source);
        if source == BudgetSource::Default {
            s.budget.default_ms = Some(received);
        } else {
            s.budget.received_ms = Some(received);
        }
        s.budget.remaining_at_start_ms = Some(received);
        s.budget.outcome = Some(Outcome::Ok);
        s
    };
    let call = |mut s: Span, remaining: i64, forwarded: i64| {
        s.budget.remaining_ms = Some(remaining);
        s.budget.forwarded_ms = Some(forwarded);
        s.budget.timeout_ms = Some(forwarded);
        s
    };
    let end = if reset { 1300 } else { 380 + t % 200 };
    let mut out = vec![
        hop(
            span(1, 0, "gateway", "POST /checkout", SpanKind::Server, 0, 400),
            1000,
            BudgetSource::Default,
        ),
        call(
            span(2, 1, "gateway", "POST call", SpanKind::Client, 5, 395),
            995,
            990,
        ),
        hop(
            span(3, 2, callee, "POST /work", SpanKind::Server, 8, end),
            990,
            BudgetSource::XBudgetMs,
        ),
        call(
            span(
                4,
                3,
                callee,
                "GET inventory",
                SpanKind::Client,
                100,
                end - 10,
            ),
            700,
            if reset { 3000 } else { 690 },
        ),
        hop(
            span(
                5,
                4,
                "inventory",
                "GET /stock",
                SpanKind::Server,
                105,
                end - 20,
            ),
            if reset { 3000 } else { 690 },
            BudgetSource::XBudgetMs,
        ),
    ];
    if shed {
        out[4].budget.outcome = Some(Outcome::ShedFull);
        out[4].budget.http_status = Some(503);
        out[4].end_unix_nano = out[4].start_unix_nano + ms;
    }
    out
}

fn page(c: &mut Criterion) {
    // What an OpenTelemetry SDK sends with a span, kept because --html asks for attributes.
    let attributes = RawAttributes::from_key_values(&[
        attribute("http.request.method", "GET"),
        attribute("url.full", "http://127.0.0.1:8080/stock?item=12345"),
        attribute("server.address", "127.0.0.1"),
        attribute("user_agent.original", "budget-demo/0.1"),
        attribute("budget.source", "x-budget-ms"),
    ]);
    let mut store = Store::new(10_000_000);
    for t in 0..CHAINS {
        let spans = chain(t);
        let kept = vec![attributes.clone(); spans.len()];
        store.insert_batch(Batch {
            spans,
            attributes: kept,
            raw: None,
            received: None,
        });
    }
    let report = store.report();
    let out = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("report_html_bench.html");
    let page = report_html::render(&store, &report, &Default::default(), Severity::Error);
    eprintln!(
        "{} chains, {} spans, {} findings: page of {} bytes ({})",
        report.summary.traces,
        report.summary.spans,
        report.findings.len(),
        page.len(),
        out.display()
    );
    assert!(page.len() < 2_000_000);
    c.bench_function(
        "check --html: render and write the page, 100k chains",
        |b| {
            b.iter(|| {
                let page = report_html::render(
                    black_box(&store),
                    &report,
                    &Default::default(),
                    Severity::Error,
                );
                std::fs::write(&out, page).unwrap();
            })
        },
    );
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(10).measurement_time(std::time::Duration::from_secs(10));
    targets = page
}
criterion_main!(benches);

//! What the library adds to one gRPC call (cargo feature `tonic`). Client side: a call through
//! `BudgetChannelLayer` under a deadline (plan the call, write `grpc-timeout` and `traceparent`,
//! arm the timeout, wrap the body and end the span when it is dropped) around a transport that
//! answers at once, against that transport called directly. Server side: `BudgetLayer` on a
//! gRPC request (`grpc-timeout` decoded, the handler raced against its deadline) around a
//! service that answers at once. No subscriber, then spans recorded through
//! tracing-opentelemetry into an in-memory exporter (`with_otel`).
//!
//! `cargo bench -p deadline-budget --features tonic --bench grpc_layer`

mod support;

use std::convert::Infallible;
use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use deadline_budget::{BudgetChannelLayer, BudgetLayer, CallOptions, Deadline};
use tower::{Layer as _, ServiceExt as _};

/// A transport (or a gRPC service) that answers at once with grpc-status 0.
fn instant() -> impl tower::Service<
    http::Request<String>,
    Response = http::Response<String>,
    Error = Infallible,
    Future = std::future::Ready<Result<http::Response<String>, Infallible>>,
> + Clone {
    tower::service_fn(|_request: http::Request<String>| {
        let mut response = http::Response::new(String::new());
        response
            .headers_mut()
            .insert("grpc-status", http::HeaderValue::from_static("0"));
        std::future::ready(Ok::<_, Infallible>(response))
    })
}

fn call() -> http::Request<String> {
    let mut request = http::Request::new(String::new());
    *request.uri_mut() = http::Uri::from_static("http://antifraud/budget.demo.Antifraud/Check");
    request.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/grpc"),
    );
    request
}

fn arriving() -> http::Request<String> {
    let mut request = call();
    request
        .headers_mut()
        .insert("grpc-timeout", http::HeaderValue::from_static("1200m"));
    request
}

fn groups(c: &mut Criterion, runtime: &tokio::runtime::Runtime, suffix: &str) {
    let layer = BudgetChannelLayer::new(CallOptions::new().sla(Duration::from_millis(400)));
    let channel = layer.layer(instant());
    let mut group = c.benchmark_group(format!("grpc_client{suffix}"));
    group.bench_function("without_layer", |b| {
        b.to_async(runtime)
            .iter(|| async { black_box(instant().oneshot(call()).await) });
    });
    group.bench_function("with_budget_channel_layer", |b| {
        b.to_async(runtime).iter(|| {
            let deadline = Deadline::after(Duration::from_millis(1200));
            let channel = channel.clone();
            // The response (and with it the body that holds the span) is dropped inside.
            deadline.scope(async move { black_box(channel.oneshot(call()).await.is_ok()) })
        });
    });
    group.finish();

    let server = BudgetLayer::new().layer(instant());
    let mut group = c.benchmark_group(format!("grpc_server{suffix}"));
    group.bench_function("without_layer", |b| {
        b.to_async(runtime)
            .iter(|| async { black_box(instant().oneshot(arriving()).await) });
    });
    group.bench_function("with_budget_layer", |b| {
        b.to_async(runtime)
            .iter(|| black_box(server.clone().oneshot(arriving())));
    });
    group.finish();
}

fn bench(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap_or_else(|e| panic!("runtime: {e}"));
    groups(c, &runtime, "");

    let spans = support::exporting();
    let exporter = &spans.exporter;
    // The exporter keeps every span: clear it between samples so memory stays flat.
    let reset = exporter.clone();
    std::thread::spawn(move || {
        for _ in 0..600 {
            reset.reset();
            std::thread::sleep(Duration::from_millis(100));
        }
    });
    groups(c, &runtime, "_with_otel");
}

criterion_group! {
    name = benches;
    config = support::criterion();
    targets = bench
}
criterion_main!(benches);

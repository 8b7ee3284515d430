//! What the library adds to one request. Server side: a oneshot axum router with and without
//! `BudgetLayer`, with a budget header to decode, and with the queue as well. Client side
//! (`client_side`): `BudgetClient::execute` under a deadline (plan the call, write `x-budget-ms`
//! and `traceparent`, the timeout) around a service that answers at once, against that service
//! called directly. No subscriber is installed, so this is the library's own cost (spans
//! disabled), the case of a service that does not export traces; `with_otel` adds the cost of
//! recording through tracing-opentelemetry.

mod support;

use std::hint::black_box;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::routing::get;
use criterion::{Criterion, criterion_group, criterion_main};
use deadline_budget::{BudgetLayer, DeadlineQueueLayer};
use tower::ServiceExt;

fn request() -> http::Request<Body> {
    let mut request = http::Request::new(Body::empty());
    *request.uri_mut() = http::Uri::from_static("/pay");
    request
        .headers_mut()
        .insert("x-budget-ms", http::HeaderValue::from_static("1200"));
    request
}

fn plain() -> Router {
    Router::new().route("/pay", get(|| async { "paid" }))
}

fn bench(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap_or_else(|e| panic!("runtime: {e}"));
    let routers = [
        ("without_layer", plain()),
        // Any layer on an axum Router boxes the route: the fair baseline for the layer's cost.
        (
            "with_noop_layer",
            plain().layer(tower::util::MapRequestLayer::new(
                |r: http::Request<Body>| r,
            )),
        ),
        ("with_budget_layer", plain().layer(BudgetLayer::new())),
        (
            "with_budget_layer_and_queue",
            plain()
                .layer(DeadlineQueueLayer::new(64, 64))
                .layer(BudgetLayer::new()),
        ),
    ];
    let mut group = c.benchmark_group("server_layer");
    for (name, router) in routers {
        group.bench_function(name, |b| {
            b.to_async(&runtime)
                .iter(|| black_box(router.clone().oneshot(request())));
        });
    }
    group.finish();

    // Client side: the same instant "transport" called directly and through BudgetClient.
    let answer = tower::service_fn(|_request: reqwest::Request| async {
        Ok::<_, std::convert::Infallible>(reqwest::Response::from(http::Response::new(
            reqwest::Body::from("paid"),
        )))
    });
    let url = reqwest::Url::parse("http://127.0.0.1:9/pay").unwrap_or_else(|e| panic!("{e}"));
    let client = deadline_budget::BudgetClient::with_service(answer);
    let options = deadline_budget::CallOptions::new().sla(Duration::from_millis(400));
    let mut group = c.benchmark_group("client_side");
    group.bench_function("without_budget_client", |b| {
        b.to_async(&runtime).iter(|| {
            let request = reqwest::Request::new(reqwest::Method::GET, url.clone());
            black_box(answer.oneshot(request))
        });
    });
    group.bench_function("with_budget_client", |b| {
        b.to_async(&runtime).iter(|| {
            let request = reqwest::Request::new(reqwest::Method::GET, url.clone());
            let deadline = deadline_budget::Deadline::after(Duration::from_millis(1200));
            black_box(deadline.scope(client.execute(request, &options)))
        });
    });
    group.finish();

    // The same with spans recorded and exported (to a no-op in-memory sink).
    let spans = support::exporting();
    let exporter = &spans.exporter;
    let mut group = c.benchmark_group("server_layer_with_otel");
    for (name, router) in [
        ("without_layer", plain()),
        ("with_budget_layer", plain().layer(BudgetLayer::new())),
    ] {
        group.bench_function(name, |b| {
            b.to_async(&runtime).iter(|| {
                exporter.reset();
                black_box(router.clone().oneshot(request()))
            });
        });
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = support::criterion();
    targets = bench
}
criterion_main!(benches);

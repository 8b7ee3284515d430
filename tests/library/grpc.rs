//! gRPC through tonic, both ways (cargo feature `tonic`). Server side: a real tonic server on
//! port 0 with `BudgetLayer` (and the queue) in `Server::builder().layer(..)`, called by a plain
//! tonic client: the handler sees the budget from `grpc-timeout` and passes it on to the HTTP
//! calls it makes (gRPC → HTTP), and a spent budget, a full queue or work past the deadline are
//! answered in gRPC's codes. Client side: the
//! `BudgetChannelLayer` on a real channel, and under paused time around a stub transport, as
//! `BudgetClient` is tested. Every test records its spans into an in-memory exporter (one
//! subscriber per test thread, set before its first span).

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use deadline_budget::carrier::parse_grpc_timeout;
use deadline_budget::{
    BudgetChannelLayer, BudgetClient, BudgetLayer, CallOptions, Deadline, DeadlineQueueLayer,
    Forward, HopBudget,
};
use http::HeaderMap;
use opentelemetry::Value;
use opentelemetry::trace::{SpanKind, TracerProvider as _};
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider, SpanData};
use tonic::Code;
use tonic::codegen::http::uri::PathAndQuery;
use tonic::server::NamedService;
use tonic_prost::ProstCodec;
use tower::{Layer as _, Service, ServiceExt as _};
use tracing_subscriber::layer::SubscriberExt as _;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// What the caller asks: work this long.
#[derive(Clone, PartialEq, prost::Message)]
struct Work {
    #[prost(uint64, tag = "1")]
    ms: u64,
}

/// What the handler saw of its budget.
#[derive(Clone, PartialEq, prost::Message)]
struct Seen {
    #[prost(int64, tag = "1")]
    remaining_ms: i64,
    #[prost(string, tag = "2")]
    source: String,
    /// What the HTTP service the handler called saw: "source remaining_ms".
    #[prost(string, tag = "3")]
    downstream: String,
}

const PATH: &str = "/test.Budgeted/Work";

/// A hand-written tonic service (what `tonic-build` would generate, without `protoc`): it counts
/// the calls that started and those dropped before they finished.
#[derive(Clone, Default)]
struct Budgeted {
    started: Arc<AtomicUsize>,
    cut: Arc<AtomicUsize>,
    /// An HTTP service each call also calls, through `BudgetClient`.
    downstream: Option<(BudgetClient, String)>,
}

impl NamedService for Budgeted {
    const NAME: &'static str = "test.Budgeted";
}

impl Budgeted {
    /// Calls dropped before they finished.
    fn cuts(&self) -> usize {
        self.cut.load(Ordering::SeqCst)
    }

    /// One call's handler was dropped before it finished.
    #[track_caller]
    fn assert_cut_once(&self) {
        assert_eq!(self.cuts(), 1, "the handler was dropped");
    }
}

/// Counts a handler dropped before it finished.
struct CutGuard(Option<Arc<AtomicUsize>>);

impl Drop for CutGuard {
    fn drop(&mut self) {
        if let Some(cut) = self.0.take() {
            cut.fetch_add(1, Ordering::SeqCst);
        }
    }
}

impl Budgeted {
    async fn work(
        self,
        request: tonic::Request<Work>,
    ) -> Result<tonic::Response<Seen>, tonic::Status> {
        self.started.fetch_add(1, Ordering::SeqCst);
        let mut guard = CutGuard(Some(self.cut.clone()));
        let source = request
            .extensions()
            .get::<HopBudget>()
            .map(|hop| hop.source.as_str().to_owned())
            .unwrap_or_default();
        let remaining_ms = Deadline::current().map_or(-1, |d| d.remaining_ms());
        tokio::time::sleep(ms(request.get_ref().ms)).await;
        let mut downstream = String::new();
        if let Some((client, url)) = &self.downstream {
            let options = CallOptions::new().margin(ms(10));
            let response = client
                .send(client.get(url), &options)
                .await
                .map_err(|e| tonic::Status::internal(e.to_string()))?;
            downstream = response.text().await.unwrap_or_default();
        }
        guard.0 = None;
        Ok(tonic::Response::new(Seen {
            remaining_ms,
            source,
            downstream,
        }))
    }
}

impl Service<http::Request<tonic::body::Body>> for Budgeted {
    type Response = http::Response<tonic::body::Body>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Infallible>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<tonic::body::Body>) -> Self::Future {
        let me = self.clone();
        Box::pin(async move {
            let mut grpc = tonic::server::Grpc::new(ProstCodec::<Seen, Work>::default());
            let handler = tower::service_fn(move |r| me.clone().work(r));
            Ok(grpc.unary(handler, request).await)
        })
    }
}

/// Spans of this test thread, exported at once when they end.
fn record_spans() -> (InMemorySpanExporter, tracing::subscriber::DefaultGuard) {
    let exporter = InMemorySpanExporter::default();
    let provider = SdkTracerProvider::builder()
        .with_simple_exporter(exporter.clone())
        .build();
    let subscriber = tracing_subscriber::registry().with(
        tracing_opentelemetry::layer()
            .with_tracer(provider.tracer("test"))
            .with_location(false)
            .with_threads(false)
            .with_target(false)
            .with_tracked_inactivity(false),
    );
    (exporter, crate::support::record_on_this_thread(subscriber))
}

fn attributes(span: &SpanData) -> BTreeMap<String, Value> {
    span.attributes
        .iter()
        .map(|kv| (kv.key.to_string(), kv.value.clone()))
        .collect()
}

fn int(span: &SpanData, key: &str) -> Option<i64> {
    match attributes(span).get(key) {
        Some(Value::I64(v)) => Some(*v),
        _ => None,
    }
}

fn text(span: &SpanData, key: &str) -> Option<String> {
    attributes(span).get(key).map(|v| v.as_str().into_owned())
}

/// The spans of `kind` exported so far, waiting (bounded) for `n` of them.
async fn spans(exporter: &InMemorySpanExporter, kind: SpanKind, n: usize) -> Vec<SpanData> {
    for _ in 0..300 {
        let found: Vec<SpanData> = exporter
            .get_finished_spans()
            .unwrap()
            .into_iter()
            .filter(|s| s.span_kind == kind)
            .collect();
        if found.len() >= n {
            return found;
        }
        tokio::time::sleep(ms(10)).await;
    }
    panic!("fewer than {n} {kind:?} spans were exported");
}

/// A tonic server on 127.0.0.1:0: `BudgetLayer` outside, the queue (when given) inside.
async fn serve(service: Budgeted, queue: Option<DeadlineQueueLayer>) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let incoming = tonic::transport::server::TcpIncoming::from(listener);
    let server = tonic::transport::Server::builder()
        .layer(BudgetLayer::new())
        .layer(tower::util::option_layer(queue))
        .add_service(service);
    tokio::spawn(server.serve_with_incoming(incoming));
    addr
}

async fn channel(addr: SocketAddr) -> tonic::transport::Channel {
    tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect()
        .await
        .unwrap()
}

/// One unary call of `work_ms` through any channel, with metadata and a tonic timeout.
async fn call<T>(
    channel: T,
    work_ms: u64,
    metadata: &[(&'static str, &'static str)],
    timeout: Option<Duration>,
) -> Result<Seen, tonic::Status>
where
    T: tonic::client::GrpcService<tonic::body::Body>,
    T::Error: Into<tonic::codegen::StdError>,
    T::ResponseBody: http_body::Body<Data = bytes::Bytes> + Send + 'static,
    <T::ResponseBody as http_body::Body>::Error: Into<tonic::codegen::StdError> + Send,
{
    let mut grpc = tonic::client::Grpc::new(channel);
    grpc.ready()
        .await
        .map_err(|e| tonic::Status::unknown(e.into().to_string()))?;
    let mut request = tonic::Request::new(Work { ms: work_ms });
    for (key, value) in metadata {
        request.metadata_mut().insert(*key, value.parse().unwrap());
    }
    if let Some(timeout) = timeout {
        request.set_timeout(timeout);
    }
    grpc.unary(
        request,
        PathAndQuery::from_static(PATH),
        ProstCodec::<Work, Seen>::default(),
    )
    .await
    .map(tonic::Response::into_inner)
}

#[tokio::test]
async fn a_tonic_handler_sees_the_budget_that_came_in_grpc_timeout() {
    let (exporter, _guard) = record_spans();
    let addr = serve(Budgeted::default(), None).await;
    let seen = call(channel(addr).await, 0, &[], Some(ms(800)))
        .await
        .unwrap();
    assert_eq!(seen.source, "grpc-timeout");
    assert!(
        (700..=800).contains(&seen.remaining_ms),
        "{}",
        seen.remaining_ms
    );
    let server = spans(&exporter, SpanKind::Server, 1).await;
    let server = &server[0];
    assert_eq!(server.name, "test.Budgeted/Work");
    assert_eq!(
        text(server, "budget.source").as_deref(),
        Some("grpc-timeout")
    );
    assert_eq!(text(server, "rpc.system").as_deref(), Some("grpc"));
    assert_eq!(text(server, "budget.outcome").as_deref(), Some("ok"));
    let received = int(server, "budget.received_ms").unwrap();
    assert!((700..=800).contains(&received), "{received}");
}

/// An axum service with the budget layer that answers with what it received.
async fn http_hop() -> String {
    async fn budget(hop: axum::Extension<HopBudget>) -> String {
        let remaining = Deadline::current().map_or(-1, |d| d.remaining_ms());
        format!("{} {remaining}", hop.source.as_str())
    }
    let app = axum::Router::new()
        .route("/budget", axum::routing::get(budget))
        .layer(BudgetLayer::new());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    format!("http://{addr}/budget")
}

#[tokio::test]
async fn a_tonic_handler_passes_its_budget_on_to_the_http_calls_it_makes() {
    let (_exporter, _guard) = record_spans();
    let service = Budgeted {
        downstream: Some((BudgetClient::new(reqwest::Client::new()), http_hop().await)),
        ..Budgeted::default()
    };
    let addr = serve(service, None).await;
    // gRPC in with 800 ms; the handler works 100 ms, then calls over HTTP with a 10 ms margin.
    let seen = call(channel(addr).await, 100, &[], Some(ms(800)))
        .await
        .unwrap();
    let (source, remaining) = seen.downstream.split_once(' ').unwrap();
    assert_eq!(source, "x-budget-ms", "{seen:?}");
    let remaining: i64 = remaining.parse().unwrap();
    assert!(
        (550..=690).contains(&remaining),
        "800 - 100 of work - 10 of margin, less transit: {seen:?}"
    );
}

#[tokio::test]
async fn a_spent_budget_is_deadline_exceeded_and_the_handler_never_runs() {
    let (exporter, _guard) = record_spans();
    let service = Budgeted::default();
    let addr = serve(service.clone(), None).await;
    let status = call(channel(addr).await, 0, &[("x-budget-ms", "0")], None)
        .await
        .unwrap_err();
    // Not UNAVAILABLE or UNKNOWN, as an HTTP 504 would read.
    assert_eq!(status.code(), Code::DeadlineExceeded, "{status:?}");
    assert_eq!(status.message(), "budget spent on arrival");
    assert_eq!(service.started.load(Ordering::SeqCst), 0);
    let server = spans(&exporter, SpanKind::Server, 1).await;
    assert_eq!(
        text(&server[0], "budget.outcome").as_deref(),
        Some("shed_expired")
    );
    assert_eq!(int(&server[0], "rpc.grpc.status_code"), Some(4));
    assert_eq!(int(&server[0], "http.response.status_code"), Some(200));
}

#[tokio::test]
async fn a_full_queue_is_resource_exhausted_and_an_expired_item_deadline_exceeded() {
    let (exporter, _guard) = record_spans();
    let service = Budgeted::default();
    let addr = serve(service.clone(), Some(DeadlineQueueLayer::new(1, 1))).await;
    let channel = channel(addr).await;
    // One runs 400 ms, one waits with 150 ms (it expires in line), the third finds no room.
    let running = tokio::spawn(call(channel.clone(), 400, &[], Some(ms(2000))));
    tokio::time::sleep(ms(100)).await;
    let queued = tokio::spawn(call(channel.clone(), 0, &[("x-budget-ms", "150")], None));
    tokio::time::sleep(ms(100)).await;
    let full = call(channel.clone(), 0, &[], Some(ms(2000)))
        .await
        .unwrap_err();
    assert_eq!(full.code(), Code::ResourceExhausted, "{full:?}");
    let expired = queued.await.unwrap().unwrap_err();
    assert_eq!(expired.code(), Code::DeadlineExceeded, "{expired:?}");
    assert_eq!(expired.message(), "budget spent while queued");
    running.await.unwrap().unwrap();
    assert_eq!(
        service.started.load(Ordering::SeqCst),
        1,
        "only one item ran"
    );
    let server = spans(&exporter, SpanKind::Server, 3).await;
    let outcomes: Vec<_> = server
        .iter()
        .map(|s| {
            (
                text(s, "budget.outcome").unwrap_or_default(),
                int(s, "rpc.grpc.status_code"),
            )
        })
        .collect();
    for expected in [
        ("shed_full".to_owned(), Some(8)),
        ("shed_expired".to_owned(), Some(4)),
        ("ok".to_owned(), None),
    ] {
        assert!(outcomes.contains(&expected), "{outcomes:?}");
    }
}

#[tokio::test]
async fn work_past_the_deadline_is_cut_with_deadline_exceeded() {
    let (exporter, _guard) = record_spans();
    let service = Budgeted::default();
    let addr = serve(service.clone(), None).await;
    // No client-side timeout: the answer is the server's own, at the budget it received.
    let started = std::time::Instant::now();
    let status = call(channel(addr).await, 5000, &[("x-budget-ms", "200")], None)
        .await
        .unwrap_err();
    let took = started.elapsed();
    assert_eq!(status.code(), Code::DeadlineExceeded, "{status:?}");
    assert_eq!(status.message(), "the budget ran out while working");
    assert!(took >= ms(200) && took < ms(1500), "{took:?}");
    service.assert_cut_once();
    let server = spans(&exporter, SpanKind::Server, 1).await;
    assert_eq!(
        text(&server[0], "budget.outcome").as_deref(),
        Some("deadline_exceeded")
    );
    assert_eq!(int(&server[0], "rpc.grpc.status_code"), Some(4));
}

#[tokio::test]
async fn cancellation_reaches_the_tonic_handler() {
    let (exporter, _guard) = record_spans();
    let service = Budgeted::default();
    let addr = serve(service.clone(), None).await;
    let channel = channel(addr).await;
    // The caller gives up after 150 ms (no budget was sent, so only the hang-up tells); its
    // channel stays open, as a service's does: the stream's reset is what reaches the handler.
    let budgeted = BudgetChannelLayer::default().layer(channel.clone());
    let mut pending = Box::pin(call(budgeted, 5000, &[], None));
    tokio::select! {
        // Dropped without a last poll, as a handler is when its own caller hangs up.
        biased;
        () = tokio::time::sleep(ms(150)) => {}
        _ = &mut pending => panic!("the call cannot finish in 150 ms"),
    }
    drop(pending);
    for _ in 0..200 {
        if service.cuts() == 1 {
            break;
        }
        tokio::time::sleep(ms(10)).await;
    }
    service.assert_cut_once();
    let server = spans(&exporter, SpanKind::Server, 1).await;
    assert_eq!(
        text(&server[0], "budget.outcome").as_deref(),
        Some("cancelled")
    );
    // The caller's CLIENT span ends when it gave up, not at its last poll: otherwise the
    // callee's work until the reset arrived would read as work for nobody.
    let client = &spans(&exporter, SpanKind::Client, 1).await[0];
    let waited = client
        .end_time
        .duration_since(client.start_time)
        .unwrap_or_default();
    assert!(waited >= ms(140), "the CLIENT span lasted {waited:?}");
}

#[tokio::test]
async fn the_channel_layer_carries_the_hop_budget_across_a_real_channel() {
    let (exporter, _guard) = record_spans();
    let addr = serve(Budgeted::default(), None).await;
    let options = CallOptions::new().sla(ms(400)).margin(ms(10));
    let raw = channel(addr).await;
    let channel = BudgetChannelLayer::new(options).layer(raw.clone());

    // 1 s left: the SLA is the smaller, and the callee reads it from grpc-timeout.
    let seen = Deadline::after(ms(1000))
        .scope(call(channel.clone(), 0, &[], None))
        .await
        .unwrap();
    assert_eq!(seen.source, "grpc-timeout");
    assert!(
        (350..=400).contains(&seen.remaining_ms),
        "{}",
        seen.remaining_ms
    );

    // 120 ms left, and a callee promised 5 s (a reset): its slowness is still cut by the
    // caller's own timeout, what remains minus the margin, as DEADLINE_EXCEEDED.
    let reset = CallOptions::new()
        .margin(ms(10))
        .forward(Forward::Fixed(ms(5000)));
    let resetting = BudgetChannelLayer::new(reset).layer(raw);
    let status = Deadline::after(ms(120))
        .scope(call(resetting, 2000, &[], None))
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::DeadlineExceeded, "{status:?}");

    // 30 ms left: not worth calling; refused without sending.
    let status = Deadline::after(ms(30))
        .scope(call(channel.clone(), 0, &[], None))
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::DeadlineExceeded, "{status:?}");
    assert!(status.message().contains("call refused"), "{status:?}");

    let clients = spans(&exporter, SpanKind::Client, 3).await;
    let outcomes: Vec<_> = clients.iter().map(|s| text(s, "budget.outcome")).collect();
    assert_eq!(
        outcomes,
        [
            None,
            Some("deadline_exceeded".into()),
            Some("refused".into())
        ]
    );
    assert_eq!(clients[0].name, "test.Budgeted/Work");
    assert_eq!(int(&clients[0], "budget.forwarded_ms"), Some(400));
    assert_eq!(int(&clients[0], "budget.sla_ms"), Some(400));
    assert_eq!(int(&clients[0], "budget.attempt"), Some(1));
    assert_eq!(int(&clients[0], "rpc.grpc.status_code"), Some(0));
    let timeout = int(&clients[1], "budget.timeout_ms").unwrap();
    assert!((90..=110).contains(&timeout), "{timeout}");
    assert_eq!(text(&clients[1], "error.type").as_deref(), Some("timeout"));
    // The callee's spans continue the caller's trace.
    let servers = spans(&exporter, SpanKind::Server, 2).await;
    assert!(
        servers.iter().all(|s| clients
            .iter()
            .any(|c| c.span_context.span_id() == s.parent_span_id)),
        "every SERVER span is the child of a CLIENT span"
    );
}

// Paused time around a stub transport: the exact figures, as for BudgetClient.

type Log = Arc<Mutex<Vec<HeaderMap>>>;

/// A transport that records each request's headers and answers after `delay` with `status`
/// in a trailers-only response (or plain 200 with no `grpc-status` when `None`).
#[derive(Clone)]
struct Stub {
    log: Log,
    delay: Duration,
    status: Option<i32>,
}

fn stub(log: Log, delay: Duration, status: Option<i32>) -> Stub {
    Stub { log, delay, status }
}

impl Service<http::Request<()>> for Stub {
    type Response = http::Response<String>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Infallible>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<()>) -> Self::Future {
        self.log.lock().unwrap().push(request.headers().clone());
        let (delay, status) = (self.delay, self.status);
        Box::pin(async move {
            tokio::time::sleep(delay).await;
            let mut response = http::Response::new(String::new());
            if let Some(code) = status {
                response
                    .headers_mut()
                    .insert("grpc-status", code.to_string().parse().unwrap());
            }
            Ok(response)
        })
    }
}

fn request(extensions: Option<CallOptions>) -> http::Request<()> {
    let mut request = http::Request::new(());
    *request.uri_mut() = http::Uri::from_static("http://callee/pkg.Antifraud/Check");
    if let Some(options) = extensions {
        request.extensions_mut().insert(options);
    }
    request
}

fn header(headers: &HeaderMap, name: &str) -> Option<String> {
    headers.get(name).map(|v| v.to_str().unwrap().to_owned())
}

fn as_status(error: deadline_budget::client::BoxError) -> tonic::Status {
    tonic::Status::from_error(error)
}

#[tokio::test(start_paused = true)]
async fn grpc_timeout_is_min_of_sla_and_remaining_minus_margin() {
    let (exporter, _guard) = record_spans();
    let log = Log::default();
    let layer = BudgetChannelLayer::new(CallOptions::new().sla(ms(400)).margin(ms(20)));
    let channel = layer.layer(stub(log.clone(), ms(0), None));
    let deadline = Deadline::after(ms(1000));
    deadline
        .scope(channel.clone().oneshot(request(None)))
        .await
        .unwrap();
    tokio::time::sleep(ms(700)).await;
    deadline
        .scope(channel.clone().oneshot(request(None)))
        .await
        .unwrap();
    // A caller-set tonic timeout caps the call like an SLA; a copied x-budget-ms is dropped.
    let mut capped = request(None);
    capped
        .headers_mut()
        .insert("grpc-timeout", "100m".parse().unwrap());
    capped
        .headers_mut()
        .insert("x-budget-ms", "99999".parse().unwrap());
    Deadline::after(ms(1000))
        .scope(channel.clone().oneshot(capped))
        .await
        .unwrap();
    // Per-call options in the request's extensions win over the layer's.
    let own = CallOptions::new()
        .forward(Forward::Fixed(ms(3000)))
        .attempt(2);
    Deadline::after(ms(1000))
        .scope(channel.clone().oneshot(request(Some(own))))
        .await
        .unwrap();

    let seen: Vec<_> = log
        .lock()
        .unwrap()
        .iter()
        .map(|h| {
            let value = header(h, "grpc-timeout").unwrap();
            assert_eq!(
                header(h, "x-budget-ms"),
                None,
                "gRPC carries grpc-timeout only"
            );
            parse_grpc_timeout(&value).unwrap()
        })
        .collect();
    assert_eq!(seen, [ms(400), ms(280), ms(100), ms(3000)]);
    let attempts: Vec<_> = spans(&exporter, SpanKind::Client, 4)
        .await
        .iter()
        .map(|s| int(s, "budget.attempt"))
        .collect();
    assert_eq!(attempts, [Some(1), Some(1), Some(1), Some(2)]);
}

#[tokio::test(start_paused = true)]
async fn a_grpc_call_is_refused_without_being_sent_when_too_little_remains() {
    let (exporter, _guard) = record_spans();
    let log = Log::default();
    let channel = BudgetChannelLayer::default().layer(stub(log.clone(), ms(0), None));
    let error = Deadline::after(ms(40))
        .scope(channel.clone().oneshot(request(None)))
        .await
        .unwrap_err();
    let status = as_status(error);
    assert_eq!(status.code(), Code::DeadlineExceeded);
    assert!(status.message().contains("40 ms left"), "{status:?}");
    assert!(log.lock().unwrap().is_empty(), "a refused call is not sent");
    let client = &spans(&exporter, SpanKind::Client, 1).await[0];
    assert_eq!(text(client, "budget.outcome").as_deref(), Some("refused"));
    assert_eq!(int(client, "budget.remaining_ms"), Some(40));
    assert_eq!(int(client, "budget.forwarded_ms"), None);
}

#[tokio::test(start_paused = true)]
async fn the_local_timeout_fires_at_the_budget_headers_or_body() {
    let (exporter, _guard) = record_spans();
    let log = Log::default();
    let slow = BudgetChannelLayer::default().layer(stub(log.clone(), ms(5000), None));
    let started = tokio::time::Instant::now();
    let error = Deadline::after(ms(250))
        .scope(slow.oneshot(request(None)))
        .await
        .unwrap_err();
    assert_eq!(as_status(error).code(), Code::DeadlineExceeded);
    assert_eq!(started.elapsed(), ms(250));

    // Headers at once, then a body that never ends: the body is cut at the same budget.
    let stalled = tower::service_fn(|_request: http::Request<()>| async {
        let body = http_body_util::StreamBody::new(futures::stream::pending::<
            Result<http_body::Frame<bytes::Bytes>, Infallible>,
        >());
        Ok::<_, Infallible>(http::Response::new(body))
    });
    let stalled = BudgetChannelLayer::default().layer(stalled);
    let started = tokio::time::Instant::now();
    let response = Deadline::after(ms(300))
        .scope(stalled.oneshot(request(None)))
        .await
        .unwrap();
    let error = http_body_util::BodyExt::collect(response.into_body())
        .await
        .unwrap_err();
    assert_eq!(as_status(error).code(), Code::DeadlineExceeded);
    assert_eq!(started.elapsed(), ms(300));

    let clients = spans(&exporter, SpanKind::Client, 2).await;
    for client in &clients {
        assert_eq!(
            text(client, "budget.outcome").as_deref(),
            Some("deadline_exceeded")
        );
        assert_eq!(int(client, "rpc.grpc.status_code"), Some(4));
    }
}

#[tokio::test(start_paused = true)]
async fn the_callee_answers_read_as_the_contract_outcomes() {
    let (exporter, _guard) = record_spans();
    for code in [8, 4, 13, 0] {
        let channel = BudgetChannelLayer::default().layer(stub(Log::default(), ms(0), Some(code)));
        Deadline::after(ms(500))
            .scope(channel.oneshot(request(None)))
            .await
            .unwrap();
    }
    let clients = spans(&exporter, SpanKind::Client, 4).await;
    let outcomes: Vec<_> = clients.iter().map(|s| text(s, "budget.outcome")).collect();
    assert_eq!(
        outcomes,
        [
            Some("shed_full".into()),
            Some("shed_expired".into()),
            Some("error".into()),
            None
        ]
    );
}

//! The wire and the spans: two real axum servers on port 0, real reqwest clients, and the
//! spans exported through tracing-opentelemetry into an in-memory exporter. Each test sets its
//! own thread's subscriber before its first span (see the crate's doc on sharing a binary).

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::routing::get;
use deadline_budget::analysis::FindingKind;
use deadline_budget::{BudgetClient, BudgetLayer, CallOptions, DeadlineQueueLayer, Forward};
use http::StatusCode;
use opentelemetry::trace::{SpanKind, TracerProvider as _};
use opentelemetry::{Key, Value};
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider, SpanData};
use tower::ServiceExt;
use tracing_subscriber::layer::SubscriberExt as _;

use crate::support::{ms, record_on_this_thread, settle};

/// The `budget.*` attributes of a span.
fn budget_attributes(span: &SpanData) -> BTreeMap<String, Value> {
    span.attributes
        .iter()
        .filter(|kv| kv.key.as_str().starts_with("budget."))
        .map(|kv| (kv.key.to_string(), kv.value.clone()))
        .collect()
}

fn int(attributes: &BTreeMap<String, Value>, key: &str) -> i64 {
    match attributes.get(key) {
        Some(Value::I64(v)) => *v,
        other => panic!("{key} is {other:?}, not an integer"),
    }
}

fn keys(attributes: &BTreeMap<String, Value>) -> Vec<&str> {
    attributes.keys().map(String::as_str).collect()
}

fn status(span: &SpanData) -> Option<i64> {
    span.attributes
        .iter()
        .find(|kv| kv.key == Key::from_static_str("http.response.status_code"))
        .and_then(|kv| match kv.value {
            Value::I64(v) => Some(v),
            _ => None,
        })
}

async fn serve(app: Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    format!("http://{address}")
}

/// Wait (bounded) until `n` spans were exported: the server span ends just after the
/// response is handed to hyper.
async fn exported(exporter: &InMemorySpanExporter, n: usize) -> Vec<SpanData> {
    for _ in 0..500 {
        let spans = exporter.get_finished_spans().unwrap();
        if spans.len() >= n {
            return spans;
        }
        tokio::time::sleep(ms(10)).await;
    }
    panic!(
        "expected {n} spans, got {:?}",
        exporter
            .get_finished_spans()
            .unwrap()
            .iter()
            .map(|s| s.name.clone())
            .collect::<Vec<_>>()
    );
}

fn server_named<'a>(spans: &'a [SpanData], name: &str) -> &'a SpanData {
    spans
        .iter()
        .find(|s| s.span_kind == SpanKind::Server && s.name == name)
        .unwrap_or_else(|| panic!("no SERVER span {name}"))
}

// Current-thread runtime: the thread-local default subscriber sees every task.
#[tokio::test(flavor = "current_thread")]
async fn spans_carry_the_contract_attributes() {
    let exporter = InMemorySpanExporter::default();
    let provider = SdkTracerProvider::builder()
        .with_simple_exporter(exporter.clone())
        .build();
    let otel = tracing_opentelemetry::layer()
        .with_tracer(provider.tracer("library-test"))
        .with_location(false)
        .with_threads(false)
        .with_target(false)
        .with_tracked_inactivity(false);
    let _subscriber = record_on_this_thread(tracing_subscriber::registry().with(otel));

    let back = serve(
        Router::new()
            .route("/charge", get(|| async { "charged" }))
            .route("/busy", get(|| async { StatusCode::SERVICE_UNAVAILABLE }))
            .route("/late", get(|| async { StatusCode::GATEWAY_TIMEOUT }))
            .route(
                "/slow",
                get(|| async {
                    tokio::time::sleep(ms(5000)).await;
                    "too late"
                }),
            )
            .layer(BudgetLayer::new()),
    )
    .await;
    let client = BudgetClient::new(reqwest::Client::new());
    let front = serve(
        Router::new()
            .route(
                "/pay",
                get(
                    |State((client, back)): State<(BudgetClient, String)>| async move {
                        let options = CallOptions::new().sla(ms(300));
                        let response = client
                            .send(client.get(format!("{back}/charge")), &options)
                            .await
                            .unwrap();
                        response.status().as_u16().to_string()
                    },
                ),
            )
            .route(
                "/broken",
                get(
                    |State((client, back)): State<(BudgetClient, String)>| async move {
                        for (name, forward) in [
                            ("reset", Forward::Fixed(ms(3000))),
                            ("drop", Forward::Nothing),
                        ] {
                            let options = CallOptions::new().forward(forward).name(name);
                            client
                                .send(client.get(format!("{back}/charge")), &options)
                                .await
                                .unwrap();
                        }
                    },
                ),
            )
            .route(
                "/calls",
                get(
                    |State((client, back)): State<(BudgetClient, String)>| async move {
                        let mut statuses = Vec::new();
                        for (path, sla) in [("busy", 1000), ("late", 1000), ("slow", 500)] {
                            let options = CallOptions::new().sla(ms(sla));
                            let result = client
                                .send(client.get(format!("{back}/{path}")), &options)
                                .await;
                            statuses.push(match result {
                                Ok(response) => response.status().as_u16().to_string(),
                                Err(error) => format!("{error:?}"),
                            });
                        }
                        statuses.join(" ")
                    },
                ),
            )
            .route(
                "/refuse",
                get(
                    |State((client, back)): State<(BudgetClient, String)>| async move {
                        let result = client
                            .send(client.get(format!("{back}/charge")), &CallOptions::new())
                            .await;
                        format!("{}", result.is_err())
                    },
                ),
            )
            .with_state((client, back.clone()))
            .layer(BudgetLayer::new().default_budget(ms(2000))),
    )
    .await;
    let plain = reqwest::Client::new();

    // 1. A chain: test -> front (1000 ms) -> back (capped at 300 ms).
    let chain = plain
        .get(format!("{front}/pay"))
        .header("x-budget-ms", "1000")
        .send()
        .await
        .unwrap();
    assert_eq!(chain.text().await.unwrap(), "200");
    let spans = exported(&exporter, 3).await;
    let front_hop = server_named(&spans, "GET /pay");
    let back_hop = server_named(&spans, "GET /charge");
    let call = spans
        .iter()
        .find(|s| s.span_kind == SpanKind::Client)
        .unwrap();

    let a = budget_attributes(front_hop);
    assert_eq!(
        keys(&a),
        [
            "budget.outcome",
            "budget.received_ms",
            "budget.remaining_at_start_ms",
            "budget.source"
        ]
    );
    assert_eq!(a["budget.source"], Value::from("x-budget-ms"));
    assert_eq!(a["budget.outcome"], Value::from("ok"));
    assert_eq!(int(&a, "budget.received_ms"), 1000);
    assert!((900..=1000).contains(&int(&a, "budget.remaining_at_start_ms")));
    assert_eq!(status(front_hop), Some(200), "{:?}", front_hop.attributes);

    let c = budget_attributes(call);
    assert_eq!(
        keys(&c),
        [
            "budget.attempt",
            "budget.forwarded_ms",
            "budget.remaining_ms",
            "budget.sla_ms",
            "budget.timeout_ms"
        ]
    );
    assert_eq!(int(&c, "budget.attempt"), 1);
    assert_eq!(int(&c, "budget.sla_ms"), 300);
    assert_eq!(int(&c, "budget.timeout_ms"), 300);
    assert_eq!(int(&c, "budget.forwarded_ms"), 300);
    assert!((900..=1000).contains(&int(&c, "budget.remaining_ms")));

    let b = budget_attributes(back_hop);
    assert_eq!(int(&b, "budget.received_ms"), 300);
    assert_eq!(b["budget.source"], Value::from("x-budget-ms"));
    assert!((200..=300).contains(&int(&b, "budget.remaining_at_start_ms")));
    assert_eq!(b["budget.outcome"], Value::from("ok"));

    // One trace: back's SERVER span is the child of front's CLIENT span.
    let trace = front_hop.span_context.trace_id();
    assert_eq!(call.span_context.trace_id(), trace);
    assert_eq!(call.parent_span_id, front_hop.span_context.span_id());
    assert_eq!(back_hop.span_context.trace_id(), trace);
    assert_eq!(back_hop.parent_span_id, call.span_context.span_id());
    // A chain that propagates the budget correctly gives the analysis nothing to report.
    assert_eq!(findings(&spans), []);
    exporter.reset();

    // 2. Too little left to call: the CLIENT span says refused and nothing is forwarded.
    let refused = plain
        .get(format!("{front}/refuse"))
        .header("x-budget-ms", "30")
        .send()
        .await
        .unwrap();
    assert_eq!(refused.text().await.unwrap(), "true");
    let spans = exported(&exporter, 2).await;
    let call = spans
        .iter()
        .find(|s| s.span_kind == SpanKind::Client)
        .unwrap();
    let c = budget_attributes(call);
    assert_eq!(
        keys(&c),
        [
            "budget.attempt",
            "budget.outcome",
            "budget.remaining_ms",
            "budget.timeout_ms"
        ]
    );
    assert_eq!(c["budget.outcome"], Value::from("refused"));
    assert!((0..=30).contains(&int(&c, "budget.remaining_ms")));
    exporter.reset();

    // 3. No budget at the edge: the default.
    plain.get(format!("{front}/refuse")).send().await.unwrap();
    let spans = exported(&exporter, 2).await;
    let a = budget_attributes(server_named(&spans, "GET /refuse"));
    assert_eq!(
        keys(&a),
        [
            "budget.default_ms",
            "budget.outcome",
            "budget.remaining_at_start_ms",
            "budget.source"
        ]
    );
    assert_eq!(a["budget.source"], Value::from("default"));
    assert_eq!(int(&a, "budget.default_ms"), 2000);
    assert!((1900..=2000).contains(&int(&a, "budget.remaining_at_start_ms")));
    exporter.reset();

    // 4. An invalid value: recorded raw, never trusted.
    plain
        .get(format!("{back}/charge"))
        .header("x-budget-ms", "99999999999")
        .send()
        .await
        .unwrap();
    let spans = exported(&exporter, 1).await;
    let b = budget_attributes(&spans[0]);
    assert_eq!(
        keys(&b),
        ["budget.invalid_value", "budget.outcome", "budget.source"]
    );
    assert_eq!(b["budget.source"], Value::from("invalid"));
    assert_eq!(b["budget.invalid_value"], Value::from("99999999999"));
    assert_eq!(b["budget.outcome"], Value::from("ok"));
    exporter.reset();

    // 5. Spent on arrival: 504 at once, shed_expired, no work started.
    let shed = plain
        .get(format!("{back}/charge"))
        .header("grpc-timeout", "0m")
        .send()
        .await
        .unwrap();
    assert_eq!(shed.status(), StatusCode::GATEWAY_TIMEOUT);
    let spans = exported(&exporter, 1).await;
    let b = budget_attributes(&spans[0]);
    assert_eq!(
        keys(&b),
        ["budget.outcome", "budget.received_ms", "budget.source"]
    );
    assert_eq!(b["budget.source"], Value::from("grpc-timeout"));
    assert_eq!(b["budget.outcome"], Value::from("shed_expired"));
    assert_eq!(status(&spans[0]), Some(504));

    // 6. Calls that failed: the callee shed (503, 504) or the local timeout fired. The callee
    //    behind the timed-out call sees its caller go away and is cancelled.
    exporter.reset();
    let calls = plain
        .get(format!("{front}/calls"))
        .header("x-budget-ms", "3000")
        .send()
        .await
        .unwrap();
    let calls_status = calls.status();
    assert_eq!(
        calls.text().await.unwrap(),
        "503 504 DeadlineExceeded { timeout: 500ms }",
        "{calls_status}"
    );
    let spans = exported(&exporter, 7).await;
    let outcome_of_call = |path: &str| {
        let call = spans
            .iter()
            .find(|s| s.span_kind == SpanKind::Client && s.name.ends_with(path))
            .unwrap();
        budget_attributes(call)["budget.outcome"].clone()
    };
    assert_eq!(outcome_of_call("/busy"), Value::from("shed_full"));
    // The hop that answered 503 has no queue of its own: it did not shed, it failed (so a 503
    // relayed up a chain is not counted as a shed at every hop).
    let busy = budget_attributes(server_named(&spans, "GET /busy"));
    assert_eq!(busy["budget.outcome"], Value::from("error"));
    assert_eq!(outcome_of_call("/late"), Value::from("shed_expired"));
    assert_eq!(outcome_of_call("/slow"), Value::from("deadline_exceeded"));
    let slow = budget_attributes(server_named(&spans, "GET /slow"));
    assert_eq!(slow["budget.outcome"], Value::from("cancelled"));
    assert_eq!(int(&slow, "budget.received_ms"), 500);

    // 7. The broken variants: the wire carries the reset or nothing, and the CLIENT spans tell
    //    the truth about what remained and what was written.
    exporter.reset();
    plain
        .get(format!("{front}/broken"))
        .header("x-budget-ms", "700")
        .send()
        .await
        .unwrap();
    let spans = exported(&exporter, 5).await;
    let call = |name: &str| {
        budget_attributes(
            spans
                .iter()
                .find(|s| s.span_kind == SpanKind::Client && s.name == name)
                .unwrap(),
        )
    };
    let reset = call("reset");
    assert_eq!(int(&reset, "budget.forwarded_ms"), 3000);
    assert!((600..=700).contains(&int(&reset, "budget.remaining_ms")));
    let dropped = call("drop");
    assert_eq!(
        keys(&dropped),
        ["budget.attempt", "budget.remaining_ms", "budget.timeout_ms"]
    );
    let callee_sources: Vec<_> = spans
        .iter()
        .filter(|s| s.span_kind == SpanKind::Server && s.name == "GET /charge")
        .map(|s| budget_attributes(s)["budget.source"].clone())
        .collect();
    assert_eq!(
        callee_sources,
        [Value::from("x-budget-ms"), Value::from("none")]
    );
    // ... and the analysis names both mistakes on the calls that made them.
    let found = findings(&spans);
    assert!(
        found.contains(&(FindingKind::BudgetReset, "reset".into())),
        "{found:?}"
    );
    assert!(
        found.contains(&(FindingKind::BudgetDropped, "drop".into())),
        "{found:?}"
    );

    // 8. The queue, in paused time through oneshot: 503 when full, 504 for an item that
    //    expired while waiting, and the wait on each span.
    exporter.reset();
    tokio::time::pause();
    let queue = DeadlineQueueLayer::new(1, 1);
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    let app = gated(queue.clone(), Arc::clone(&gate));
    let first = tokio::spawn(app.clone().oneshot(request("/first", None)));
    settle(|| queue.running() == 1).await;
    let late = tokio::spawn(app.clone().oneshot(request("/late", Some("200"))));
    settle(|| queue.queued() == 1).await;
    let full = app.clone().oneshot(request("/full", None)).await.unwrap();
    assert_eq!(full.status(), StatusCode::SERVICE_UNAVAILABLE);
    tokio::time::sleep(ms(500)).await;
    gate.add_permits(1);
    assert_eq!(first.await.unwrap().unwrap().status(), StatusCode::OK);
    assert_eq!(
        late.await.unwrap().unwrap().status(),
        StatusCode::GATEWAY_TIMEOUT
    );
    let spans = exported(&exporter, 3).await;
    let f = budget_attributes(server_named(&spans, "GET /full"));
    assert_eq!(keys(&f), ["budget.outcome", "budget.source"]);
    assert_eq!(f["budget.outcome"], Value::from("shed_full"));
    let l = budget_attributes(server_named(&spans, "GET /late"));
    assert_eq!(
        keys(&l),
        [
            "budget.outcome",
            "budget.queue_wait_ms",
            "budget.received_ms",
            "budget.source"
        ]
    );
    assert_eq!(l["budget.outcome"], Value::from("shed_expired"));
    // Paused mid-test, the clock is not on a millisecond boundary: timers round up by < 1 ms.
    assert!((500..=501).contains(&int(&l, "budget.queue_wait_ms")));
    let r = budget_attributes(server_named(&spans, "GET /first"));
    assert_eq!(
        keys(&r),
        ["budget.outcome", "budget.queue_wait_ms", "budget.source"]
    );
    assert_eq!(int(&r, "budget.queue_wait_ms"), 0);
    assert_eq!(r["budget.outcome"], Value::from("ok"));

    // 9. Callers that went away: one running, one still queued.
    exporter.reset();
    let queue = DeadlineQueueLayer::new(1, 1);
    let app = gated(queue.clone(), Arc::new(tokio::sync::Semaphore::new(0)));
    let running = tokio::spawn(app.clone().oneshot(request("/running", Some("5000"))));
    settle(|| queue.running() == 1).await;
    let waiting = tokio::spawn(app.clone().oneshot(request("/waiting", Some("5000"))));
    settle(|| queue.queued() == 1).await;
    tokio::time::sleep(ms(100)).await;
    running.abort();
    waiting.abort();
    let spans = exported(&exporter, 2).await;
    let r = budget_attributes(server_named(&spans, "GET /running"));
    assert_eq!(
        keys(&r),
        [
            "budget.outcome",
            "budget.queue_wait_ms",
            "budget.received_ms",
            "budget.remaining_at_start_ms",
            "budget.source"
        ]
    );
    assert_eq!(r["budget.outcome"], Value::from("cancelled"));
    assert!((4999..=5000).contains(&int(&r, "budget.remaining_at_start_ms")));
    let w = budget_attributes(server_named(&spans, "GET /waiting"));
    assert_eq!(
        keys(&w),
        [
            "budget.outcome",
            "budget.queue_wait_ms",
            "budget.received_ms",
            "budget.source"
        ]
    );
    assert_eq!(w["budget.outcome"], Value::from("cancelled"));
    assert!((100..=101).contains(&int(&w, "budget.queue_wait_ms")));
    assert_eq!(queue.queued(), 0);
}

/// A handler that waits for a permit from `gate`, behind `queue` and the budget layer.
fn gated(queue: DeadlineQueueLayer, gate: Arc<tokio::sync::Semaphore>) -> Router {
    Router::new()
        .route(
            "/{name}",
            get(move || {
                let gate = Arc::clone(&gate);
                async move {
                    let _permit = gate.acquire().await.unwrap();
                    "done"
                }
            }),
        )
        .layer(queue)
        .layer(BudgetLayer::new())
}

fn request(path: &str, budget_ms: Option<&str>) -> http::Request<axum::body::Body> {
    let mut builder = http::Request::get(path);
    if let Some(budget) = budget_ms {
        builder = builder.header("x-budget-ms", budget);
    }
    builder.body(axum::body::Body::empty()).unwrap()
}

/// The findings the analysis gives for exported spans: "the middleware wrote X, so the analysis
/// says Y". Services: `back` serves `/charge`, everything else is `front`.
fn findings(spans: &[SpanData]) -> Vec<(FindingKind, String)> {
    use deadline_budget::analysis::{
        self, BudgetFacts, BudgetSource, Chain, Options, Outcome, SpanStatus, TraceId,
    };
    let mut chains: BTreeMap<TraceId, Chain> = BTreeMap::new();
    for s in spans {
        let attributes: BTreeMap<&str, &Value> = s
            .attributes
            .iter()
            .map(|kv| (kv.key.as_str(), &kv.value))
            .collect();
        let int = |key: &str| match attributes.get(key) {
            Some(Value::I64(v)) => Some(*v),
            _ => None,
        };
        let text = |key: &str| match attributes.get(key) {
            Some(Value::String(v)) => Some(v.as_str().to_owned()),
            _ => None,
        };
        let nanos = |t: std::time::SystemTime| {
            t.duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64
        };
        let kind = match s.span_kind {
            SpanKind::Server => analysis::SpanKind::Server,
            SpanKind::Client => analysis::SpanKind::Client,
            _ => analysis::SpanKind::Internal,
        };
        let back = kind == analysis::SpanKind::Server && s.name.ends_with("/charge");
        let trace_id = TraceId(s.span_context.trace_id().to_bytes());
        let parent = s.parent_span_id;
        let span = analysis::Span {
            trace_id,
            span_id: analysis::SpanId(s.span_context.span_id().to_bytes()),
            parent_span_id: (parent != opentelemetry::trace::SpanId::INVALID)
                .then(|| analysis::SpanId(parent.to_bytes())),
            service: if back { "back".into() } else { "front".into() },
            name: s.name.as_ref().into(),
            kind,
            start_unix_nano: nanos(s.start_time),
            end_unix_nano: nanos(s.end_time),
            status: match s.status {
                opentelemetry::trace::Status::Error { .. } => SpanStatus::Error,
                _ => SpanStatus::Unset,
            },
            budget: BudgetFacts {
                received_ms: int("budget.received_ms"),
                source: text("budget.source").and_then(|v| BudgetSource::parse(&v)),
                default_ms: int("budget.default_ms"),
                queue_wait_ms: int("budget.queue_wait_ms"),
                remaining_at_start_ms: int("budget.remaining_at_start_ms"),
                outcome: text("budget.outcome").and_then(|v| Outcome::parse(&v)),
                remaining_ms: int("budget.remaining_ms"),
                forwarded_ms: int("budget.forwarded_ms"),
                timeout_ms: int("budget.timeout_ms"),
                sla_ms: int("budget.sla_ms"),
                attempt: int("budget.attempt"),
                http_status: int("http.response.status_code"),
                ..BudgetFacts::default()
            },
        };
        chains
            .entry(trace_id)
            .or_insert_with(|| Chain::new(trace_id))
            .insert(span);
    }
    chains
        .values()
        .flat_map(|chain| chain.analyse(&Options::default()).findings)
        .map(|f| (f.kind, f.span_name.to_string()))
        .collect()
}

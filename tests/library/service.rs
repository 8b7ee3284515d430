//! The library's behaviour as a service author sees it: budgets through the server layer, the
//! call rule in the client, the deadline-aware queue, cancellation, and the exported spans.
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::extract::State;
use axum::routing::get;
use axum::{Extension, Router};
use deadline_budget::analysis::BudgetSource;
use deadline_budget::{
    BudgetClient, BudgetLayer, CallError, CallOptions, Deadline, DeadlineQueueLayer, Forward,
    HopBudget,
};
use http::{HeaderMap, StatusCode};
use tower::ServiceExt;

use crate::support::{InProcess, Log, get as request, in_process, ms, settle, text};

/// A callee that logs the headers it received, then answers after `delay`.
fn recording_callee(log: Log<HeaderMap>, delay: Duration) -> Router {
    Router::new()
        .route(
            "/{*path}",
            get(move |headers: HeaderMap| {
                let log = log.clone();
                async move {
                    log.push(headers);
                    tokio::time::sleep(delay).await;
                    "done"
                }
            }),
        )
        .layer(BudgetLayer::new())
}

fn header(headers: &HeaderMap, name: &str) -> Option<String> {
    headers.get(name).map(|v| v.to_str().unwrap().to_owned())
}

#[tokio::test(start_paused = true)]
async fn the_server_layer_gives_handlers_a_deadline_that_shrinks_by_the_time_spent() {
    let app = Router::new()
        .route(
            "/",
            get(|Extension(hop): Extension<HopBudget>| async move {
                let from_task = Deadline::current().unwrap();
                assert_eq!(hop.deadline, Some(from_task));
                assert_eq!(hop.source, BudgetSource::XBudgetMs);
                assert_eq!(hop.received, Some(ms(1200)));
                let before = from_task.remaining();
                tokio::time::sleep(ms(380)).await;
                format!(
                    "{} {}",
                    before.as_millis(),
                    from_task.remaining().as_millis()
                )
            }),
        )
        .layer(BudgetLayer::new());
    let response = app
        .oneshot(request("/", &[("x-budget-ms", "1200")]))
        .await
        .unwrap();
    assert_eq!(text(response).await, "1200 820");
}

#[tokio::test(start_paused = true)]
async fn the_edge_default_applies_when_no_budget_arrives() {
    let app = Router::new()
        .route(
            "/",
            get(|Extension(hop): Extension<HopBudget>| async move {
                format!(
                    "{:?} {}",
                    hop.source,
                    Deadline::current().unwrap().remaining_ms()
                )
            }),
        )
        .layer(BudgetLayer::new().default_budget(ms(1500)));
    let none = app.clone().oneshot(request("/", &[])).await.unwrap();
    assert_eq!(text(none).await, "Default 1500");
    let invalid = app
        .oneshot(request("/", &[("x-budget-ms", "soon")]))
        .await
        .unwrap();
    assert_eq!(text(invalid).await, "Invalid 1500");
}

#[tokio::test(start_paused = true)]
async fn a_spent_budget_gets_504_at_once_and_the_handler_never_runs() {
    let runs = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&runs);
    let handler = get(move || {
        counted.fetch_add(1, Ordering::SeqCst);
        async { "ran" }
    });
    let app = Router::new()
        .route("/", handler.clone())
        .layer(BudgetLayer::new());
    let response = app
        .oneshot(request("/", &[("x-budget-ms", "0")]))
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::GATEWAY_TIMEOUT);
    assert_eq!(runs.load(Ordering::SeqCst), 0);

    // The broken variant runs it anyway.
    let app = Router::new()
        .route("/", handler)
        .layer(BudgetLayer::new().shed_expired_on_arrival(false));
    let response = app
        .oneshot(request("/", &[("x-budget-ms", "0")]))
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(runs.load(Ordering::SeqCst), 1);
}

#[tokio::test(start_paused = true)]
async fn forwarded_is_min_of_sla_and_remaining_minus_margin() {
    let log = Log::default();
    let client = in_process(vec![("callee", recording_callee(log.clone(), ms(0)))]);
    let deadline = Deadline::after(ms(1000));
    let call = |options: CallOptions| {
        let client = client.clone();
        async move {
            client
                .send(client_get(&client), &options.deadline(deadline))
                .await
                .unwrap()
        }
    };

    // The SLA is the smaller: it is the timeout and the forwarded budget.
    call(CallOptions::new().sla(ms(400)).margin(ms(20))).await;
    // What remains minus the margin is the smaller.
    call(CallOptions::new().sla(ms(2000)).margin(ms(20))).await;
    // No SLA: remaining minus margin.
    call(CallOptions::new().margin(ms(100))).await;
    // 300 ms later, exactly 300 ms less is forwarded.
    tokio::time::sleep(ms(300)).await;
    call(CallOptions::new().margin(ms(100)).grpc(true)).await;

    let seen: Vec<_> = log
        .all()
        .iter()
        .map(|h| header(h, "x-budget-ms").unwrap())
        .collect();
    assert_eq!(seen, ["400", "980", "900", "600"]);
    assert_eq!(
        header(&log.all()[3], "grpc-timeout").as_deref(),
        Some("600000u")
    );
    assert_eq!(header(&log.all()[0], "grpc-timeout"), None);
}

fn client_get(_client: &BudgetClient<InProcess>) -> reqwest::RequestBuilder {
    reqwest::Client::new().get("http://callee/work")
}

#[tokio::test(start_paused = true)]
async fn the_broken_variants_reset_or_drop_the_budget_on_the_wire() {
    let log = Log::default();
    let client = in_process(vec![("callee", recording_callee(log.clone(), ms(0)))]);
    let deadline = Deadline::after(ms(700));
    let fixed = CallOptions::new()
        .forward(Forward::Fixed(ms(3000)))
        .deadline(deadline);
    client.send(client_get(&client), &fixed).await.unwrap();
    let dropped = CallOptions::new()
        .forward(Forward::Nothing)
        .deadline(deadline);
    client.send(client_get(&client), &dropped).await.unwrap();
    let seen = log.all();
    assert_eq!(header(&seen[0], "x-budget-ms").as_deref(), Some("3000"));
    assert_eq!(header(&seen[1], "x-budget-ms"), None);
}

#[tokio::test(start_paused = true)]
async fn a_call_is_refused_without_being_sent_when_too_little_remains() {
    let log = Log::default();
    let client = in_process(vec![("callee", recording_callee(log.clone(), ms(0)))]);

    let nearly_spent = CallOptions::new().deadline(Deadline::after(ms(40)));
    let error = client
        .send(client_get(&client), &nearly_spent)
        .await
        .unwrap_err();
    assert!(
        matches!(
            error,
            CallError::Refused {
                remaining_ms: 40,
                ..
            }
        ),
        "{error:?}"
    );

    let eaten_by_margin = CallOptions::new()
        .margin(ms(100))
        .deadline(Deadline::after(ms(120)));
    assert!(matches!(
        client.send(client_get(&client), &eaten_by_margin).await,
        Err(CallError::Refused { .. })
    ));

    let spent = CallOptions::new()
        .min_worth_calling(Duration::ZERO)
        .deadline(Deadline::after_ms(-5));
    assert!(matches!(
        client.send(client_get(&client), &spent).await,
        Err(CallError::Refused {
            remaining_ms: -5,
            ..
        })
    ));
    assert_eq!(log.len(), 0, "a refused call must not reach the callee");

    // With no minimum, 40 ms is worth a call.
    let small = CallOptions::new()
        .min_worth_calling(Duration::ZERO)
        .deadline(Deadline::after(ms(40)));
    client.send(client_get(&client), &small).await.unwrap();
    assert_eq!(log.len(), 1);
}

#[tokio::test(start_paused = true)]
async fn the_local_timeout_fires_at_the_budget_not_later() {
    let log = Log::default();
    let client = in_process(vec![("callee", recording_callee(log.clone(), ms(5000)))]);
    let options = CallOptions::new().deadline(Deadline::after(ms(250)));
    let started = tokio::time::Instant::now();
    let error = client
        .send(client_get(&client), &options)
        .await
        .unwrap_err();
    assert!(
        matches!(error, CallError::DeadlineExceeded { timeout } if timeout == ms(250)),
        "{error:?}"
    );
    assert_eq!(started.elapsed(), ms(250));
}

/// The payment example of issue 2: a 1200 ms budget; the fraud check is capped at 400 ms and
/// answers in 380 ms, so the charge gets the 820 ms that remain, not its own 1 s SLA
/// (margin 0).
#[tokio::test(start_paused = true)]
async fn the_payment_example_holds() {
    let fraud = Log::default();
    let bank = Log::default();
    let client = in_process(vec![
        ("fraud", recording_callee(fraud.clone(), ms(380))),
        ("bank", recording_callee(bank.clone(), ms(10))),
    ]);
    let payments = Router::new()
        .route(
            "/pay",
            get(|State(client): State<BudgetClient<InProcess>>| async move {
                let http = reqwest::Client::new();
                let check = CallOptions::new().sla(ms(400));
                client
                    .send(http.get("http://fraud/check"), &check)
                    .await
                    .unwrap();
                let charge = CallOptions::new().sla(ms(1000));
                client
                    .send(http.get("http://bank/charge"), &charge)
                    .await
                    .unwrap();
                "paid"
            }),
        )
        .with_state(client)
        .layer(BudgetLayer::new());

    let response = payments
        .oneshot(request("/pay", &[("x-budget-ms", "1200")]))
        .await
        .unwrap();
    assert_eq!(text(response).await, "paid");
    assert_eq!(
        header(&fraud.all()[0], "x-budget-ms").as_deref(),
        Some("400")
    );
    assert_eq!(
        header(&bank.all()[0], "x-budget-ms").as_deref(),
        Some("820")
    );
}

/// A handler that logs its start and blocks until the test says so (via a semaphore permit).
fn gated_app(
    queue: DeadlineQueueLayer,
    gate: Arc<tokio::sync::Semaphore>,
    runs: Log<String>,
) -> Router {
    Router::new()
        .route(
            "/{name}",
            get(
                move |axum::extract::Path(name): axum::extract::Path<String>| {
                    let gate = Arc::clone(&gate);
                    let runs = runs.clone();
                    async move {
                        runs.push(name);
                        let _permit = gate.acquire().await.unwrap();
                        "done"
                    }
                },
            ),
        )
        .layer(queue)
        .layer(BudgetLayer::new())
}

#[tokio::test(start_paused = true)]
async fn a_full_queue_answers_503_at_once() {
    let queue = DeadlineQueueLayer::new(1, 1);
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    let runs = Log::default();
    let app = gated_app(queue.clone(), Arc::clone(&gate), runs.clone());

    let first = tokio::spawn(app.clone().oneshot(request("/first", &[])));
    settle(|| runs.len() == 1).await;
    let second = tokio::spawn(app.clone().oneshot(request("/second", &[])));
    settle(|| queue.queued() == 1).await;

    let third = app.clone().oneshot(request("/third", &[])).await.unwrap();
    assert_eq!(third.status(), StatusCode::SERVICE_UNAVAILABLE);

    gate.add_permits(2);
    assert_eq!(first.await.unwrap().unwrap().status(), StatusCode::OK);
    assert_eq!(second.await.unwrap().unwrap().status(), StatusCode::OK);
    assert_eq!(runs.all(), ["first", "second"]);
    assert_eq!(queue.queued(), 0);
}

#[tokio::test(start_paused = true)]
async fn an_item_that_expired_in_the_queue_gets_504_and_never_runs() {
    for check in [true, false] {
        let queue = DeadlineQueueLayer::new(1, 8).check_at_dequeue(check);
        let gate = Arc::new(tokio::sync::Semaphore::new(0));
        let runs = Log::default();
        let app = gated_app(queue.clone(), Arc::clone(&gate), runs.clone());

        let first = tokio::spawn(app.clone().oneshot(request("/first", &[])));
        settle(|| runs.len() == 1).await;
        let late = tokio::spawn(
            app.clone()
                .oneshot(request("/late", &[("x-budget-ms", "200")])),
        );
        settle(|| queue.queued() == 1).await;
        // The first request holds the only slot past the late one's deadline.
        tokio::time::sleep(ms(500)).await;
        gate.add_permits(2);
        assert_eq!(first.await.unwrap().unwrap().status(), StatusCode::OK);
        let late = late.await.unwrap().unwrap();
        if check {
            assert_eq!(late.status(), StatusCode::GATEWAY_TIMEOUT);
            assert_eq!(runs.all(), ["first"], "the expired item must not run");
        } else {
            // The broken variant runs it after its caller stopped waiting.
            assert_eq!(late.status(), StatusCode::OK);
            assert_eq!(runs.all(), ["first", "late"]);
        }
    }
}

#[tokio::test(start_paused = true)]
async fn an_item_whose_caller_went_away_leaves_the_queue() {
    for drop_cancelled in [true, false] {
        let queue = DeadlineQueueLayer::new(1, 8).drop_cancelled(drop_cancelled);
        let gate = Arc::new(tokio::sync::Semaphore::new(0));
        let runs = Log::default();
        let app = gated_app(queue.clone(), Arc::clone(&gate), runs.clone());

        let first = tokio::spawn(app.clone().oneshot(request("/first", &[])));
        settle(|| runs.len() == 1).await;
        let gone = tokio::spawn(app.clone().oneshot(request("/gone", &[])));
        settle(|| queue.queued() == 1).await;
        gone.abort();
        let _ = gone.await;
        if drop_cancelled {
            assert_eq!(queue.queued(), 0);
        }
        gate.add_permits(2);
        assert_eq!(first.await.unwrap().unwrap().status(), StatusCode::OK);
        if drop_cancelled {
            settle(|| queue.running() == 0).await;
            assert_eq!(runs.all(), ["first"]);
        } else {
            // The broken variant keeps it and runs it for nobody.
            settle(|| runs.len() == 2).await;
            assert_eq!(runs.all(), ["first", "gone"]);
        }
    }
}

/// Signals on drop: tells the test the handler's future was dropped.
struct DropSignal(Option<tokio::sync::oneshot::Sender<()>>);

impl Drop for DropSignal {
    fn drop(&mut self) {
        if let Some(tx) = self.0.take() {
            let _ = tx.send(());
        }
    }
}

#[tokio::test(start_paused = true)]
async fn cancellation_reaches_the_handler() {
    for cancel in [true, false] {
        let (dropped_tx, dropped_rx) = tokio::sync::oneshot::channel();
        let dropped_tx = Arc::new(std::sync::Mutex::new(Some(dropped_tx)));
        let finished = Log::default();
        let started = Log::default();
        let (f, s) = (finished.clone(), started.clone());
        let app = Router::new()
            .route(
                "/",
                get(move || {
                    let signal = DropSignal(dropped_tx.lock().unwrap().take());
                    let (finished, started) = (f.clone(), s.clone());
                    async move {
                        let _signal = signal;
                        started.push(());
                        tokio::time::sleep(ms(1000)).await;
                        finished.push(());
                        "done"
                    }
                }),
            )
            .layer(BudgetLayer::new().cancel_on_disconnect(cancel));

        let call = tokio::spawn(app.oneshot(request("/", &[("x-budget-ms", "5000")])));
        settle(|| started.len() == 1).await;
        // The client goes away: hyper drops the service future, as aborting does here.
        call.abort();
        let _ = call.await;
        tokio::time::timeout(ms(2000), dropped_rx)
            .await
            .expect("the handler future was dropped")
            .unwrap();
        if cancel {
            assert_eq!(finished.len(), 0, "the handler must stop with its caller");
        } else {
            assert_eq!(finished.len(), 1, "the broken variant runs to the end");
        }
    }
}

#[tokio::test(start_paused = true)]
async fn the_deadline_reaches_calls_made_inside_the_queue() {
    let log = Log::default();
    let client = in_process(vec![("callee", recording_callee(log.clone(), ms(0)))]);
    let app = Router::new()
        .route(
            "/",
            get(|State(client): State<BudgetClient<InProcess>>| async move {
                tokio::time::sleep(ms(100)).await;
                let response = client
                    .send(client_get(&client), &CallOptions::new())
                    .await
                    .unwrap();
                response.status().as_u16().to_string()
            }),
        )
        .with_state(client)
        .layer(DeadlineQueueLayer::new(2, 2).drop_cancelled(false))
        .layer(BudgetLayer::new());
    let response = app
        .oneshot(request("/", &[("x-budget-ms", "900")]))
        .await
        .unwrap();
    assert_eq!(text(response).await, "200");
    assert_eq!(header(&log.all()[0], "x-budget-ms").as_deref(), Some("800"));
}

#[tokio::test(start_paused = true)]
async fn an_absolute_deadline_becomes_a_relative_budget_on_arrival() {
    let app_with = |layer: BudgetLayer| {
        Router::new()
            .route(
                "/",
                get(|Extension(hop): Extension<HopBudget>| async move {
                    let left = Deadline::current().unwrap().remaining_ms();
                    format!("{:?} {left}", hop.source)
                }),
            )
            .layer(layer)
    };
    let app = app_with(BudgetLayer::new());
    // The wall clock moves on while the request is built: allow it a few ms.
    let deadline = deadline_budget::carrier::now_unix_ms() + 800;
    let response = app
        .clone()
        .oneshot(request(
            "/",
            &[("x-request-deadline", &deadline.to_string())],
        ))
        .await
        .unwrap();
    let body = text(response).await;
    let (source, left) = body.split_once(' ').unwrap();
    assert_eq!(source, "XRequestDeadline");
    assert!(
        (700..=800).contains(&left.parse::<i64>().unwrap()),
        "{body}"
    );

    // Already past: 504 at once.
    let past = deadline_budget::carrier::now_unix_ms() - 10;
    let response = app
        .clone()
        .oneshot(request("/", &[("x-request-deadline", &past.to_string())]))
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::GATEWAY_TIMEOUT);

    // A host whose clock runs 1.5 s behind believes it has 1.5 s more; one 1.5 s ahead
    // believes the deadline has passed.
    let left_with = |offset_ms: i64| {
        let app = app_with(BudgetLayer::new().clock_offset_ms(offset_ms));
        async move {
            let deadline = deadline_budget::carrier::now_unix_ms() + 800;
            let response = app
                .oneshot(request(
                    "/",
                    &[("x-request-deadline", &deadline.to_string())],
                ))
                .await
                .unwrap();
            (response.status(), text(response).await)
        }
    };
    let (status, body) = left_with(-1500).await;
    assert_eq!(status, StatusCode::OK);
    let left: i64 = body.split_once(' ').unwrap().1.parse().unwrap();
    assert!((2200..=2300).contains(&left), "{body}");
    assert_eq!(left_with(1500).await.0, StatusCode::GATEWAY_TIMEOUT);
}

#[tokio::test(start_paused = true)]
async fn a_call_can_carry_its_budget_as_an_absolute_deadline() {
    let log = Log::default();
    let client = in_process(vec![("callee", recording_callee(log.clone(), ms(0)))]);
    let options = CallOptions::new()
        .absolute_deadline(true)
        .deadline(Deadline::after(ms(700)));
    let before = deadline_budget::carrier::now_unix_ms();
    // A copied-in carrier never leaks through.
    let request = client_get(&client).header("x-request-deadline", "1");
    client.send(request, &options).await.unwrap();
    let after = deadline_budget::carrier::now_unix_ms();
    let seen = &log.all()[0];
    assert_eq!(header(seen, "x-budget-ms"), None, "one carrier, not two");
    let at: i64 = header(seen, "x-request-deadline").unwrap().parse().unwrap();
    assert!(
        (before + 690..=after + 700).contains(&at),
        "{at} not 700 ms after {before}"
    );
}

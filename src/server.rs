//! The server side: a tower [`Layer`] (works as axum middleware through `.layer(...)`) that reads
//! the caller's budget, makes it the request's [`Deadline`], and records the SERVER span
//! attributes of `CONVENTIONS.md` section 2.
//!
//! A request enters with headers; the layer decodes the carriers ([`crate::carrier`]), assigns
//! the edge default when configured, answers 504 at once when nothing is left, and otherwise runs
//! the inner service inside a SERVER span with the deadline in the request extensions and in the
//! task-local [`Deadline::current`]. When the response future is dropped before completing (in
//! hyper and axum that is what happens when the client goes away) the handler is dropped with it
//! and the span says `budget.outcome = "cancelled"`.
//!
//! A gRPC request (`content-type: application/grpc…`, as a tonic server receives it) is answered
//! in gRPC's own codes (`CONVENTIONS.md` section 1): HTTP 200 with `grpc-status` 4
//! (`DEADLINE_EXCEEDED`) when the budget is spent, 8 (`RESOURCE_EXHAUSTED`) when the queue is
//! full, and a `grpc-message`. Its handler is also ended at the deadline with `DEADLINE_EXCEEDED`,
//! as gRPC servers do, before tonic's own `grpc-timeout` cut would answer `CANCELLED`.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use http::{Request, Response, StatusCode};
use tokio::time::Instant;
use tower::{Layer, Service};
use tracing::Instrument;
use tracing::field::Empty;

use crate::analysis::{BudgetSource, Outcome};
use crate::budget::{Deadline, saturating_ms};
use crate::carrier::{self, Received};
use crate::trace_context;

/// The future returned by [`BudgetService`].
pub type ResponseFuture<B, E> = Pin<Box<dyn Future<Output = Result<Response<B>, E>> + Send>>;

/// What the server layer learned about a request's budget; in the request extensions of every
/// request it handles (`axum::Extension<HopBudget>`).
#[derive(Clone, Debug)]
pub struct HopBudget {
    /// The hop's deadline, when it has a budget (received or default).
    pub deadline: Option<Deadline>,
    /// Where the budget came from.
    pub source: BudgetSource,
    /// The budget decoded at arrival, when one was received.
    pub received: Option<Duration>,
    /// When the request arrived.
    pub arrival: Instant,
    /// Shared with the queue (one extension instead of two keeps the per-request cost down).
    pub(crate) progress: HopProgress,
}

/// Progress shared between the server layer and the queue for one request: the queue says when
/// work really started and whether it shed the item, the layer records it once at the end.
#[derive(Clone, Debug, Default)]
pub(crate) struct HopProgress(Arc<Mutex<Progress>>);

#[derive(Debug, Default)]
struct Progress {
    /// The request entered a queue (set by the queue when it has to wait).
    enqueued: bool,
    /// Work started at (set by the queue at dequeue).
    started: Option<Instant>,
    /// Time spent queued (set by the queue).
    queue_wait: Option<Duration>,
    /// An outcome the status code cannot tell (the queue's `shed_expired`).
    outcome: Option<Outcome>,
}

impl HopProgress {
    /// The queue made the item wait for a slot.
    pub(crate) fn enqueued(&self) {
        if let Ok(mut p) = self.0.lock() {
            p.enqueued = true;
        }
    }

    /// The queue dequeued the item at `started` after `waited`.
    pub(crate) fn dequeued(&self, started: Instant, waited: Duration) {
        if let Ok(mut p) = self.0.lock() {
            p.started = Some(started);
            p.queue_wait = Some(waited);
        }
    }

    /// The queue answered with `outcome` without running the work.
    pub(crate) fn shed(&self, outcome: Outcome) {
        if let Ok(mut p) = self.0.lock() {
            p.outcome = Some(outcome);
        }
    }

    /// The deadline passed while the item still waited for a slot: it never starts.
    fn expired_in_queue(&self, waited: Duration) {
        if let Ok(mut p) = self.0.lock() {
            p.queue_wait = Some(waited);
            p.outcome = Some(Outcome::ShedExpired);
        }
    }

    fn take(&self) -> (Option<Instant>, Option<Duration>, Option<Outcome>) {
        match self.0.lock() {
            Ok(p) => (p.started, p.queue_wait, p.outcome),
            Err(_) => (None, None, None),
        }
    }

    fn waiting(&self) -> bool {
        self.0
            .lock()
            .is_ok_and(|p| p.enqueued && p.started.is_none())
    }
}

#[derive(Debug, Clone, Copy)]
struct Config {
    default_budget: Option<Duration>,
    shed_expired_on_arrival: bool,
    cancel_on_disconnect: bool,
    trace_context: bool,
    clock_offset_ms: i64,
}

/// The server budget layer. See the [module docs](self).
///
/// ```
/// use std::time::Duration;
/// use deadline_budget::server::BudgetLayer;
/// let app: axum::Router = axum::Router::new()
///     .route("/", axum::routing::get(|| async { "hi" }))
///     .layer(BudgetLayer::new().default_budget(Duration::from_millis(1500)));
/// ```
#[derive(Clone, Debug)]
pub struct BudgetLayer {
    config: Config,
}

impl Default for BudgetLayer {
    fn default() -> Self {
        BudgetLayer::new()
    }
}

impl BudgetLayer {
    /// A layer with no edge default, 504 on arrival when the budget is spent, cancellation on
    /// disconnect, and W3C trace context extraction.
    pub fn new() -> Self {
        BudgetLayer {
            config: Config {
                default_budget: None,
                shed_expired_on_arrival: true,
                cancel_on_disconnect: true,
                trace_context: true,
                clock_offset_ms: 0,
            },
        }
    }

    /// The edge default: the budget this hop gives itself when no valid carrier arrives
    /// (`budget.source = "default"`, `budget.default_ms`).
    pub fn default_budget(mut self, budget: Duration) -> Self {
        self.config.default_budget = Some(budget);
        self
    }

    /// Answer 504 at once when the budget is already spent on arrival (default `true`).
    /// Turning it off runs expired work anyway: one of the broken variants the demo shows.
    pub fn shed_expired_on_arrival(mut self, on: bool) -> Self {
        self.config.shed_expired_on_arrival = on;
        self
    }

    /// Drop the handler when the caller goes away (default `true`). With `false` the handler is
    /// spawned and keeps running after the caller left (orphaned work, a broken variant); the
    /// span then ends when the work ends. A gRPC handler is still ended at its deadline.
    pub fn cancel_on_disconnect(mut self, on: bool) -> Self {
        self.config.cancel_on_disconnect = on;
        self
    }

    /// Make the incoming `traceparent` the parent of the SERVER span (default `true`).
    pub fn trace_context(mut self, on: bool) -> Self {
        self.config.trace_context = on;
        self
    }

    /// Read absolute deadlines (`x-request-deadline`) against a wall clock `offset_ms` ahead of
    /// this host's (negative: behind), as a host whose clock is off would: the demo's
    /// `absolute-deadline` scenario. Relative carriers need no clock and are not affected.
    pub fn clock_offset_ms(mut self, offset_ms: i64) -> Self {
        self.config.clock_offset_ms = offset_ms;
        self
    }
}

impl<S> Layer<S> for BudgetLayer {
    type Service = BudgetService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        BudgetService {
            inner,
            config: self.config,
        }
    }
}

/// The service [`BudgetLayer`] wraps around an inner HTTP service.
#[derive(Clone)]
pub struct BudgetService<S> {
    inner: S,
    config: Config,
}

impl<S> fmt::Debug for BudgetService<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BudgetService")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

/// The SERVER span named `$name`: the transport's own fields, then the HTTP request's and the
/// SERVER span keys of `CONVENTIONS.md` section 2, declared once for HTTP and gRPC hops.
macro_rules! budget_server_span {
    ($name:expr, $method:expr, $path:expr, $($transport:tt)*) => {
        tracing::info_span!(
            "budget.server",
            otel.kind = "server",
            otel.name = %$name,
            otel.status_code = Empty,
            $($transport)*
            http.request.method = %$method,
            url.path = %$path,
            http.response.status_code = Empty,
            budget.received_ms = Empty,
            budget.source = Empty,
            budget.default_ms = Empty,
            budget.invalid_value = Empty,
            budget.queue_wait_ms = Empty,
            budget.remaining_at_start_ms = Empty,
            budget.outcome = Empty,
            "http.request.header.x-request-deadline" = Empty,
        )
    };
}

/// The SERVER span, with every attribute the layer may record declared up front. A gRPC call is
/// named `package.Service/Method`, as OpenTelemetry's RPC conventions say.
fn server_span<B>(req: &Request<B>, grpc: bool) -> tracing::Span {
    let method = req.method().as_str();
    let path = req.uri().path();
    if grpc {
        let rpc = path.trim_start_matches('/');
        let (service, rpc_method) = rpc.split_once('/').unwrap_or((rpc, ""));
        budget_server_span!(
            rpc,
            method,
            path,
            rpc.system = "grpc",
            rpc.service = %service,
            rpc.method = %rpc_method,
            rpc.grpc.status_code = Empty,
        )
    } else {
        http_server_span(method, path)
    }
}

fn http_server_span(method: &str, path: &str) -> tracing::Span {
    budget_server_span!(format_args!("{method} {path}"), method, path,)
}

/// Record one attribute, skipping the field lookup when no subscriber wants the span.
pub(crate) fn record(span: &tracing::Span, key: &str, value: impl tracing::Value) {
    if !span.is_disabled() {
        span.record(key, value);
    }
}

/// The hop's outcome from the response status, unless the queue already said. A 503 that the
/// hop's own queue did not produce was relayed from a callee (or made by the handler): an
/// error here, not this hop shedding, so one shed is not reported once per hop above it.
pub(crate) fn outcome_for_status(status: StatusCode) -> Outcome {
    match status.as_u16() {
        504 => Outcome::DeadlineExceeded,
        500..=599 => Outcome::Error,
        _ => Outcome::Ok,
    }
}

/// Whether `req` is a gRPC call (`content-type: application/grpc`, `application/grpc+proto`...):
/// such a caller is answered in gRPC's codes, not HTTP statuses.
pub(crate) fn is_grpc<B>(req: &Request<B>) -> bool {
    req.headers()
        .get(http::header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"application/grpc"))
}

/// gRPC's `DEADLINE_EXCEEDED`.
pub(crate) const GRPC_DEADLINE_EXCEEDED: i32 = 4;
/// gRPC's `RESOURCE_EXHAUSTED`.
pub(crate) const GRPC_RESOURCE_EXHAUSTED: i32 = 8;
/// gRPC's `INTERNAL`.
const GRPC_INTERNAL: i32 = 13;

/// The hop's own answer when it does not run (or finish) the work: an empty HTTP `status`, or
/// for a gRPC caller the matching gRPC status (504 → `DEADLINE_EXCEEDED`, 503 →
/// `RESOURCE_EXHAUSTED`, anything else `INTERNAL`) in a trailers-only HTTP 200 response, with
/// `message` as its `grpc-message` (plain ASCII: nothing to percent-encode).
pub(crate) fn answer<B: Default>(
    status: StatusCode,
    grpc: bool,
    message: &'static str,
) -> Response<B> {
    if !grpc {
        return status_response(status);
    }
    let code = match status {
        StatusCode::GATEWAY_TIMEOUT => GRPC_DEADLINE_EXCEEDED,
        StatusCode::SERVICE_UNAVAILABLE => GRPC_RESOURCE_EXHAUSTED,
        _ => GRPC_INTERNAL,
    };
    let mut response = Response::new(B::default());
    let headers = response.headers_mut();
    headers.insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/grpc"),
    );
    headers.insert("grpc-status", http::HeaderValue::from(code));
    headers.insert("grpc-message", http::HeaderValue::from_static(message));
    response
}

/// The `grpc-status` of a trailers-only gRPC response (an error, or the hop's own answer); a
/// successful call carries its status in the trailers instead, so `None` there.
pub(crate) fn grpc_status<B>(response: &Response<B>) -> Option<i32> {
    response
        .headers()
        .get("grpc-status")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse().ok())
}

/// The hop's outcome from a gRPC status, as [`outcome_for_status`] does for HTTP: a
/// `RESOURCE_EXHAUSTED` the hop's own queue did not produce was relayed, an error here.
fn outcome_for_grpc_status(code: i32) -> Outcome {
    match code {
        0 => Outcome::Ok,
        GRPC_DEADLINE_EXCEEDED => Outcome::DeadlineExceeded,
        _ => Outcome::Error,
    }
}

/// The gRPC codes OpenTelemetry counts as a server error: `UNKNOWN`, `DEADLINE_EXCEEDED`,
/// `UNIMPLEMENTED`, `INTERNAL`, `UNAVAILABLE`, `DATA_LOSS`.
fn grpc_server_error(code: i32) -> bool {
    matches!(code, 2 | 4 | 12..=15)
}

/// Records the end of a hop exactly once: on completion, or as `cancelled` when dropped first.
struct Finish {
    span: tracing::Span,
    progress: HopProgress,
    deadline: Option<Deadline>,
    arrival: Instant,
    done: bool,
}

impl Finish {
    fn record_start(&self, started: Option<Instant>, queue_wait: Option<Duration>) {
        if let Some(wait) = queue_wait {
            record(
                &self.span,
                crate::semconv::QUEUE_WAIT_MS,
                saturating_ms(wait),
            );
        }
        if let Some(deadline) = self.deadline {
            let started = started.unwrap_or(self.arrival);
            record(
                &self.span,
                crate::semconv::REMAINING_AT_START_MS,
                deadline.remaining_ms_at(started),
            );
        }
    }

    fn complete(&mut self, status: StatusCode, grpc: Option<i32>) {
        self.done = true;
        let (started, queue_wait, shed) = self.progress.take();
        let outcome = match shed {
            Some(shed) => {
                // Shed by the queue: the work never started, so no remaining_at_start_ms.
                if let Some(wait) = queue_wait {
                    record(
                        &self.span,
                        crate::semconv::QUEUE_WAIT_MS,
                        saturating_ms(wait),
                    );
                }
                shed
            }
            None => {
                self.record_start(started, queue_wait);
                let answered = match grpc {
                    Some(code) => outcome_for_grpc_status(code),
                    None => outcome_for_status(status),
                };
                match answered {
                    // Answered, but after the caller stopped waiting.
                    Outcome::Ok if self.deadline.is_some_and(|d| d.is_expired()) => {
                        Outcome::DeadlineExceeded
                    }
                    other => other,
                }
            }
        };
        record(
            &self.span,
            "http.response.status_code",
            i64::from(status.as_u16()),
        );
        if let Some(code) = grpc {
            record(
                &self.span,
                crate::semconv::RPC_GRPC_STATUS_CODE,
                i64::from(code),
            );
        }
        if status.is_server_error() || grpc.is_some_and(grpc_server_error) {
            record(&self.span, "otel.status_code", "ERROR");
        }
        record(&self.span, crate::semconv::OUTCOME, outcome.as_str());
    }

    fn failed(&mut self) {
        self.done = true;
        let (started, queue_wait, _) = self.progress.take();
        self.record_start(started, queue_wait);
        record(&self.span, "otel.status_code", "ERROR");
        record(&self.span, crate::semconv::OUTCOME, Outcome::Error.as_str());
    }
}

impl Drop for Finish {
    fn drop(&mut self) {
        if !self.done {
            if self.progress.waiting() {
                // Cancelled while queued: the work never started; say how long it waited.
                record(
                    &self.span,
                    crate::semconv::QUEUE_WAIT_MS,
                    saturating_ms(Instant::now().saturating_duration_since(self.arrival)),
                );
            } else {
                let (started, queue_wait, _) = self.progress.take();
                self.record_start(started, queue_wait);
            }
            record(
                &self.span,
                crate::semconv::OUTCOME,
                Outcome::Cancelled.as_str(),
            );
        }
    }
}

impl<S, ReqB, ResB> Service<Request<ReqB>> for BudgetService<S>
where
    S: Service<Request<ReqB>, Response = Response<ResB>> + Send,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
    ResB: Default + Send + 'static,
{
    type Response = Response<ResB>;
    type Error = S::Error;
    type Future = ResponseFuture<ResB, S::Error>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut req: Request<ReqB>) -> Self::Future {
        let arrival = Instant::now();
        let grpc = is_grpc(&req);
        let span = server_span(&req, grpc);
        if self.config.trace_context {
            trace_context::set_parent_from(&span, req.headers());
        }

        const X_REQUEST_DEADLINE: http::HeaderName =
            http::HeaderName::from_static(carrier::X_REQUEST_DEADLINE);
        let mut now = 0;
        let received = match req.headers().get(X_REQUEST_DEADLINE) {
            Some(absolute) => {
                // Captured as OpenTelemetry does, so the collector can compare the absolute
                // deadline with the relative view (clock skew).
                if let Ok(value) = absolute.to_str() {
                    record(&span, crate::semconv::HTTP_HEADER_REQUEST_DEADLINE, value);
                }
                now = carrier::now_unix_ms().saturating_add(self.config.clock_offset_ms);
                carrier::read_headers(req.headers(), now)
            }
            // The wall clock is only needed for an absolute deadline.
            None => carrier::read_headers(req.headers(), 0),
        };
        let mut deadline = None;
        match &received {
            Received::Budget {
                budget,
                deadline_unix_ms,
                ..
            } => {
                // An absolute deadline already past on this clock is recorded below zero, as
                // it was read: a budget of 0 would hide how far this clock is from the caller's.
                let received_ms = match deadline_unix_ms {
                    Some(d) => d.saturating_sub(now),
                    None => saturating_ms(*budget),
                };
                record(&span, crate::semconv::RECEIVED_MS, received_ms);
                deadline = Some(Deadline::at(arrival + *budget));
            }
            Received::Invalid { value, .. } => {
                record(&span, crate::semconv::INVALID_VALUE, value.as_str());
            }
            Received::None => {}
        }
        if let (None, Some(default)) = (deadline, self.config.default_budget) {
            record(&span, crate::semconv::DEFAULT_MS, saturating_ms(default));
            deadline = Some(Deadline::at(arrival + default));
        }
        let source = match (received.source(), deadline) {
            (BudgetSource::None, Some(_)) => BudgetSource::Default,
            (source, _) => source,
        };
        // Recorded once, with its final value: an edge that fell back to its default says
        // `default`, not `none` then `default`.
        record(&span, crate::semconv::SOURCE, source.as_str());

        let progress = HopProgress::default();
        let extensions = req.extensions_mut();
        extensions.insert(HopBudget {
            deadline,
            source,
            received: received.budget(),
            arrival,
            progress: progress.clone(),
        });
        if let Some(deadline) = deadline {
            extensions.insert(deadline);
        }

        let mut finish = Finish {
            span: span.clone(),
            progress,
            deadline,
            arrival,
            done: false,
        };

        if self.config.shed_expired_on_arrival && deadline.is_some_and(|d| d.instant() <= arrival) {
            finish.progress.shed(Outcome::ShedExpired);
            let response = answer(StatusCode::GATEWAY_TIMEOUT, grpc, "budget spent on arrival");
            finish.complete(response.status(), grpc_status(&response));
            return Box::pin(std::future::ready(Ok(response)));
        }

        let inner = {
            let _entered = span.enter();
            match deadline {
                Some(d) => d.sync_scope(|| self.inner.call(req)),
                None => self.inner.call(req),
            }
        };
        // A gRPC handler ends at its deadline, as gRPC servers do.
        let cut_at = deadline.filter(|_| grpc).map(|d| d.instant());
        let work = async move {
            let run = async move {
                match deadline {
                    Some(d) => d.scope(inner).instrument(span).await,
                    None => inner.instrument(span).await,
                }
            };
            let result = match cut_at {
                Some(at) => match tokio::time::timeout_at(at, run).await {
                    Ok(result) => result,
                    Err(_) if finish.progress.waiting() => {
                        finish
                            .progress
                            .expired_in_queue(at.saturating_duration_since(arrival));
                        Ok(answer(
                            StatusCode::GATEWAY_TIMEOUT,
                            true,
                            "budget spent while queued",
                        ))
                    }
                    Err(_) => Ok(answer(
                        StatusCode::GATEWAY_TIMEOUT,
                        true,
                        "the budget ran out while working",
                    )),
                },
                None => run.await,
            };
            match &result {
                Ok(response) => finish.complete(response.status(), grpc_status(response)),
                Err(_) => finish.failed(),
            }
            result
        };
        if self.config.cancel_on_disconnect {
            Box::pin(work)
        } else {
            Box::pin(joined(tokio::spawn(work), grpc, "the handler task ended"))
        }
    }
}

/// The answer of `task`, run detached from its caller (it runs on when the caller goes away): a
/// panic in it is resumed here, and a task ended otherwise (its runtime stopping) answers 500
/// with `ended`.
pub(crate) async fn joined<B: Default, E>(
    task: tokio::task::JoinHandle<Result<Response<B>, E>>,
    grpc: bool,
    ended: &'static str,
) -> Result<Response<B>, E> {
    match task.await {
        Ok(result) => result,
        Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
        Err(_) => Ok(answer(StatusCode::INTERNAL_SERVER_ERROR, grpc, ended)),
    }
}

/// An empty response with `status`.
pub(crate) fn status_response<B: Default>(status: StatusCode) -> Response<B> {
    let mut response = Response::new(B::default());
    *response.status_mut() = status;
    response
}

//! The client side for gRPC through tonic (cargo feature `tonic`): [`BudgetChannelLayer`] wraps
//! a tonic `Channel` (or any tower service taking an `http::Request`) and applies the call rule
//! of `CONVENTIONS.md` section 1 to every gRPC call, as [`BudgetClient`](crate::BudgetClient)
//! does for reqwest: `timeout = min(sla, remaining - margin)` from [`Deadline::current`] (or
//! [`CallOptions::deadline`]), written as `grpc-timeout` (and `traceparent`) and applied locally.
//! A call with too little left is refused unsent, and one past its timeout ends, both as
//! `DEADLINE_EXCEEDED`. The CLIENT span of section 2 lasts until the response body ends.
//! `x-budget-ms` is never written: a receiver reads it first, and it would hide gRPC's own
//! carrier. Per call, [`CallOptions`] go in the request's extensions (a retry's attempt).
//!
//! ```no_run
//! # async fn example() -> Result<(), Box<dyn std::error::Error>> {
//! use std::time::Duration;
//! use deadline_budget::{BudgetChannelLayer, CallOptions};
//! use tower::Layer as _;
//!
//! let channel = tonic::transport::Endpoint::from_static("http://127.0.0.1:50051")
//!     .connect()
//!     .await?;
//! let channel = BudgetChannelLayer::new(CallOptions::new().sla(Duration::from_millis(400)))
//!     .layer(channel);
//! // SomeServiceClient::new(channel), or tonic::client::Grpc::new(channel)
//! # Ok(()) }
//! ```

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use http::{Request, Response};
use http_body::{Body, Frame, SizeHint};
use tokio::time::Sleep;
use tower::{Layer, Service};
use tracing::field::Empty;

use crate::analysis::Outcome;
use crate::budget::Deadline;
use crate::carrier;
use crate::client::{
    BoxError, CallOptions, budget_client_span, insert_grpc_timeout, record_forwarded,
};
use crate::server::record;
use crate::trace_context;

/// The client layer for tonic channels. See the [module docs](self).
#[derive(Clone, Debug)]
pub struct BudgetChannelLayer {
    options: Arc<CallOptions>,
    trace_context: bool,
}

impl Default for BudgetChannelLayer {
    fn default() -> Self {
        BudgetChannelLayer::new(CallOptions::default())
    }
}

impl BudgetChannelLayer {
    /// A layer applying `options` to every call that has none of its own.
    pub fn new(options: CallOptions) -> Self {
        BudgetChannelLayer {
            options: Arc::new(options),
            trace_context: true,
        }
    }

    /// Write the CLIENT span's `traceparent` into each call (default `true`).
    pub fn trace_context(mut self, on: bool) -> Self {
        self.trace_context = on;
        self
    }
}

impl<S> Layer<S> for BudgetChannelLayer {
    type Service = BudgetChannel<S>;

    fn layer(&self, inner: S) -> Self::Service {
        BudgetChannel {
            inner,
            options: Arc::clone(&self.options),
            trace_context: self.trace_context,
        }
    }
}

/// The service [`BudgetChannelLayer`] wraps around a tonic channel.
#[derive(Clone)]
pub struct BudgetChannel<S> {
    inner: S,
    options: Arc<CallOptions>,
    trace_context: bool,
}

impl<S> BudgetChannel<S> {
    /// The wrapped channel.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }

    /// The wrapped channel, taken back.
    pub fn into_inner(self) -> S {
        self.inner
    }
}

impl<S> fmt::Debug for BudgetChannel<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BudgetChannel")
            .field("options", &self.options)
            .field("trace_context", &self.trace_context)
            .finish_non_exhaustive()
    }
}

/// The CLIENT span of a call in flight. tracing-opentelemetry ends a span at its last exit, not
/// when it closes, so the span is entered once more when the call ends (answered, failed, cut,
/// or dropped because the caller went away): its end is then the call's end, not its last poll.
struct CallSpan(tracing::Span);

impl Drop for CallSpan {
    fn drop(&mut self) {
        let _entered = self.0.enter();
    }
}

/// The gRPC status a call ended with, as `tonic::Status` reads it.
fn status(code: tonic::Code, message: String) -> BoxError {
    Box::new(tonic::Status::new(code, message))
}

/// The CLIENT span of one attempt, named `package.Service/Method` as OpenTelemetry's RPC
/// conventions say.
fn client_span(path: &str, options: &CallOptions) -> tracing::Span {
    let rpc = path.trim_start_matches('/');
    let (service, method) = rpc.split_once('/').unwrap_or((rpc, ""));
    let name = options.name.as_deref().unwrap_or(rpc);
    let span = budget_client_span!(
        name,
        options.attempt,
        rpc.system = "grpc",
        rpc.service = %service,
        rpc.method = %method,
        peer.service = Empty,
        rpc.grpc.status_code = Empty,
    );
    if let Some(peer) = &options.peer_service {
        span.record("peer.service", peer.as_str());
    }
    span
}

/// Record how the call ended: the callee's `grpc-status` (4 and 8 are its budget answers, as
/// 504 and 503 are for HTTP).
fn record_grpc_status(span: &tracing::Span, code: i32) {
    record(span, crate::semconv::RPC_GRPC_STATUS_CODE, i64::from(code));
    let outcome = match code {
        0 => return,
        8 => Outcome::ShedFull,
        4 => Outcome::ShedExpired,
        _ => Outcome::Error,
    };
    record(span, "otel.status_code", "ERROR");
    record(span, crate::semconv::OUTCOME, outcome.as_str());
}

/// Record a call that ended on the calling side: the local timeout, or the transport.
fn record_failure(span: &tracing::Span, timed_out: bool) {
    record(span, "otel.status_code", "ERROR");
    if timed_out {
        record(
            span,
            crate::semconv::RPC_GRPC_STATUS_CODE,
            i64::from(tonic::Code::DeadlineExceeded as i32),
        );
        record(span, crate::semconv::ERROR_TYPE, "timeout");
        record(
            span,
            crate::semconv::OUTCOME,
            Outcome::DeadlineExceeded.as_str(),
        );
    } else {
        record(span, crate::semconv::ERROR_TYPE, "transport");
        record(span, crate::semconv::OUTCOME, Outcome::Error.as_str());
    }
}

fn grpc_status_of(headers: &http::HeaderMap) -> Option<i32> {
    headers
        .get("grpc-status")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse().ok())
}

/// Whether tonic's own `grpc-timeout` cut is somewhere in `error`'s chain.
fn is_timeout_expired(error: &(dyn std::error::Error + 'static)) -> bool {
    let mut next = Some(error);
    // A chain is short; bound the walk anyway.
    for _ in 0..16 {
        match next {
            Some(e) if e.is::<tonic::TimeoutExpired>() => return true,
            Some(e) => next = e.source(),
            None => return false,
        }
    }
    false
}

fn timed_out(timeout: Duration) -> BoxError {
    status(
        tonic::Code::DeadlineExceeded,
        format!(
            "no answer within {} ms (the call's budget)",
            timeout.as_millis()
        ),
    )
}

impl<S, ReqB, ResB> Service<Request<ReqB>> for BudgetChannel<S>
where
    S: Service<Request<ReqB>, Response = Response<ResB>>,
    S::Error: Into<BoxError>,
{
    type Response = Response<ResponseBody<ResB>>;
    type Error = BoxError;
    type Future = ResponseFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, mut req: Request<ReqB>) -> Self::Future {
        let own = req.extensions_mut().remove::<CallOptions>();
        let options = own.as_ref().unwrap_or(&self.options);
        let span = client_span(req.uri().path(), options);
        let headers = req.headers_mut();
        // A timeout the caller code set on the tonic request caps this call, like an SLA.
        let set_by_caller = headers
            .remove(carrier::GRPC_TIMEOUT)
            .and_then(|v| v.to_str().ok().map(carrier::parse_grpc_timeout))
            .and_then(Result::ok);
        headers.remove(carrier::X_BUDGET_MS);
        let capped;
        let options = match (set_by_caller, options.sla) {
            (Some(cap), sla) if sla.is_none_or(|sla| cap < sla) => {
                capped = options.clone().sla(cap);
                &capped
            }
            _ => options,
        };
        let deadline = options.deadline.or_else(Deadline::current);
        let plan = match options.plan_on_span(deadline, &span) {
            Ok(plan) => plan,
            Err(refused) => {
                return ResponseFuture {
                    state: State::Refused {
                        error: Some(status(tonic::Code::DeadlineExceeded, refused.to_string())),
                    },
                };
            }
        };
        if let Some(forwarded) = plan.forwarded {
            insert_grpc_timeout(headers, forwarded);
            record_forwarded(&span, forwarded);
        }
        if self.trace_context {
            trace_context::inject(&span, headers);
        }
        let sleep = plan.timeout.map(|t| (Box::pin(tokio::time::sleep(t)), t));
        let future = {
            let _entered = span.enter();
            self.inner.call(req)
        };
        ResponseFuture {
            state: State::Sending {
                future,
                sleep,
                span: Some(CallSpan(span)),
            },
        }
    }
}

pin_project_lite::pin_project! {
    /// The future returned by [`BudgetChannel`]: the response headers, or the call's error (a
    /// `tonic::Status` for a refused or timed-out call, which tonic's clients read as such).
    pub struct ResponseFuture<F> {
        #[pin]
        state: State<F>,
    }
}

pin_project_lite::pin_project! {
    #[project = StateProj]
    enum State<F> {
        Refused { error: Option<BoxError> },
        Sending {
            #[pin]
            future: F,
            sleep: Option<(Pin<Box<Sleep>>, Duration)>,
            span: Option<CallSpan>,
        },
    }
}

impl<F> fmt::Debug for ResponseFuture<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResponseFuture").finish_non_exhaustive()
    }
}

impl<F, B, E> Future for ResponseFuture<F>
where
    F: Future<Output = Result<Response<B>, E>>,
    E: Into<BoxError>,
{
    type Output = Result<Response<ResponseBody<B>>, BoxError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.project().state.project() {
            StateProj::Refused { error } => Poll::Ready(Err(error
                .take()
                .unwrap_or_else(|| status(tonic::Code::Internal, "polled after done".into())))),
            StateProj::Sending {
                future,
                sleep,
                span,
            } => {
                let polled = match span.as_ref() {
                    Some(span) => span.0.in_scope(|| future.poll(cx)),
                    None => future.poll(cx),
                };
                let Some(current) = span.take() else {
                    return Poll::Ready(Err(status(
                        tonic::Code::Internal,
                        "polled after done".into(),
                    )));
                };
                match polled {
                    Poll::Ready(Ok(response)) => {
                        if let Some(code) = grpc_status_of(response.headers()) {
                            // Trailers-only: the call ended with the headers.
                            record_grpc_status(&current.0, code);
                        }
                        let (parts, body) = response.into_parts();
                        let body = ResponseBody {
                            inner: body,
                            sleep: sleep.take(),
                            span: current,
                        };
                        Poll::Ready(Ok(Response::from_parts(parts, body)))
                    }
                    Poll::Ready(Err(error)) => {
                        let error: BoxError = error.into();
                        // tonic's channel enforces the grpc-timeout written above on its own
                        // task, and may report it first: that is this call's timeout too.
                        let ours = match sleep.as_ref() {
                            Some((timer, timeout)) => (timer.is_elapsed()
                                || is_timeout_expired(error.as_ref()))
                            .then_some(*timeout),
                            None => None,
                        };
                        record_failure(&current.0, ours.is_some());
                        Poll::Ready(Err(ours.map_or(error, timed_out)))
                    }
                    Poll::Pending => {
                        if let Some((timer, timeout)) = sleep.as_mut()
                            && timer.as_mut().poll(cx).is_ready()
                        {
                            record_failure(&current.0, true);
                            return Poll::Ready(Err(timed_out(*timeout)));
                        }
                        *span = Some(current);
                        Poll::Pending
                    }
                }
            }
        }
    }
}

pin_project_lite::pin_project! {
    /// The response body of a call through [`BudgetChannel`]: the callee's body, cut at the
    /// call's timeout, holding the CLIENT span open until it ends and reading the `grpc-status`
    /// in its trailers.
    pub struct ResponseBody<B> {
        #[pin]
        inner: B,
        sleep: Option<(Pin<Box<Sleep>>, Duration)>,
        span: CallSpan,
    }
}

impl<B> fmt::Debug for ResponseBody<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResponseBody").finish_non_exhaustive()
    }
}

impl<B> Body for ResponseBody<B>
where
    B: Body,
    B::Error: Into<BoxError>,
{
    type Data = B::Data;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        let this = self.project();
        match this.inner.poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(code) = frame.trailers_ref().and_then(grpc_status_of) {
                    record_grpc_status(&this.span.0, code);
                    *this.sleep = None;
                }
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(Some(Err(error))) => {
                *this.sleep = None;
                record_failure(&this.span.0, false);
                Poll::Ready(Some(Err(error.into())))
            }
            Poll::Ready(None) => {
                *this.sleep = None;
                Poll::Ready(None)
            }
            Poll::Pending => {
                if let Some((timer, timeout)) = this.sleep.as_mut() {
                    ready!(timer.as_mut().poll(cx));
                    let timeout = *timeout;
                    *this.sleep = None;
                    record_failure(&this.span.0, true);
                    return Poll::Ready(Some(Err(timed_out(timeout))));
                }
                Poll::Pending
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

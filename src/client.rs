//! The client side: [`BudgetClient`] wraps a `reqwest::Client` (or any tower service taking a
//! `reqwest::Request`) and applies the call rule of `CONVENTIONS.md` section 1 to each call.
//!
//! A call enters with [`CallOptions`] (per-call SLA, margin, minimum worth calling, attempt) and
//! the hop's deadline ([`Deadline::current`], or one given explicitly). The client computes
//! `timeout = min(sla, remaining - margin)`, refuses the call when less than the minimum worth
//! calling remains, writes `x-budget-ms` (and `grpc-timeout` for gRPC) and `traceparent`, applies
//! the timeout, and records the CLIENT span attributes of section 2.
//!
//! The broken variants the demo teaches are explicit options ([`Forward::Fixed`] resets the
//! budget, [`Forward::Nothing`] drops it); the span still records the truth.

use std::fmt;
use std::time::Duration;

use http::HeaderValue;
use tower::{Service, ServiceExt};
use tracing::Instrument;
use tracing::field::Empty;

use crate::analysis::Outcome;
use crate::budget::{Deadline, saturating_ms};
use crate::carrier;
use crate::server::record;
use crate::trace_context;

/// The CLIENT span of one attempt named `$name`: the transport's own fields, then the CLIENT
/// span keys of `CONVENTIONS.md` section 2, declared once for HTTP and gRPC calls.
macro_rules! budget_client_span {
    ($name:expr, $attempt:expr, $($transport:tt)*) => {
        tracing::info_span!(
            "budget.client",
            otel.kind = "client",
            otel.name = %$name,
            otel.status_code = Empty,
            $($transport)*
            error.type = Empty,
            budget.remaining_ms = Empty,
            budget.forwarded_ms = Empty,
            budget.timeout_ms = Empty,
            budget.sla_ms = Empty,
            budget.attempt = i64::from($attempt),
            budget.outcome = Empty,
        )
    };
}
#[cfg(feature = "tonic")]
pub(crate) use budget_client_span;

/// A boxed error from the underlying transport.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// What to forward to the callee as its budget.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Forward {
    /// The right thing: forward the call's timeout, `min(sla, remaining - margin)`.
    #[default]
    Budget,
    /// A broken variant: forward a fixed budget whatever remains (a "reset").
    Fixed(Duration),
    /// A broken variant: forward nothing (a "drop").
    Nothing,
}

/// Per-call options. `CallOptions::default()` has no SLA, no margin, a 50 ms minimum worth
/// calling, attempt 1, plain HTTP, and forwards the budget.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CallOptions {
    /// The per-call cap on the timeout (`budget.sla_ms`).
    pub sla: Option<Duration>,
    /// Kept back from the remaining budget for the hop's own work after the call.
    pub margin: Duration,
    /// Refuse the call when less than this remains after the margin (default 50 ms).
    pub min_worth_calling: Duration,
    /// The attempt number, 1 for the first (`budget.attempt`).
    pub attempt: u32,
    /// Also write `grpc-timeout`.
    pub grpc: bool,
    /// What to forward.
    pub forward: Forward,
    /// The deadline to work to; [`Deadline::current`] when `None`.
    pub deadline: Option<Deadline>,
    /// The CLIENT span name; `"{METHOD} {host}{path}"` when `None`.
    pub name: Option<String>,
    /// The callee's service name, written as `peer.service`: what names the edge when the
    /// callee's own spans are not in the chain.
    pub peer_service: Option<String>,
    /// Write the budget as `x-request-deadline` (absolute Unix ms on this host's clock) instead
    /// of `x-budget-ms`: for callees that read only an absolute deadline, as many Java and Rails
    /// services do. Skew-prone: the callee's clock must agree with this host's.
    pub absolute_deadline: bool,
}

impl Default for CallOptions {
    fn default() -> Self {
        CallOptions {
            sla: None,
            margin: Duration::ZERO,
            min_worth_calling: Duration::from_millis(50),
            attempt: 1,
            grpc: false,
            forward: Forward::Budget,
            deadline: None,
            name: None,
            peer_service: None,
            absolute_deadline: false,
        }
    }
}

impl CallOptions {
    /// The defaults (see the type docs).
    pub fn new() -> Self {
        CallOptions::default()
    }
    /// Set the per-call SLA.
    pub fn sla(mut self, sla: Duration) -> Self {
        self.sla = Some(sla);
        self
    }
    /// Set the margin.
    pub fn margin(mut self, margin: Duration) -> Self {
        self.margin = margin;
        self
    }
    /// Set the minimum worth calling with.
    pub fn min_worth_calling(mut self, min: Duration) -> Self {
        self.min_worth_calling = min;
        self
    }
    /// Set the attempt number (1 for the first).
    pub fn attempt(mut self, attempt: u32) -> Self {
        self.attempt = attempt;
        self
    }
    /// Mark the call as gRPC: `grpc-timeout` is written too.
    pub fn grpc(mut self, grpc: bool) -> Self {
        self.grpc = grpc;
        self
    }
    /// Choose what to forward (the broken variants live here).
    pub fn forward(mut self, forward: Forward) -> Self {
        self.forward = forward;
        self
    }
    /// Work to this deadline instead of [`Deadline::current`] (for spawned tasks).
    pub fn deadline(mut self, deadline: Deadline) -> Self {
        self.deadline = Some(deadline);
        self
    }
    /// Name the CLIENT span.
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }
    /// Name the callee's service on the CLIENT span (`peer.service`).
    pub fn peer_service(mut self, service: impl Into<String>) -> Self {
        self.peer_service = Some(service.into());
        self
    }
    /// Write the budget as an absolute `x-request-deadline` instead of `x-budget-ms` (see
    /// [`CallOptions::absolute_deadline`](CallOptions#structfield.absolute_deadline)).
    pub fn absolute_deadline(mut self, on: bool) -> Self {
        self.absolute_deadline = on;
        self
    }

    /// Apply the call rule to `deadline` now: the timeout and the value to forward, or the
    /// refusal. Without a deadline the SLA (if any) is the timeout and nothing is refused.
    pub fn plan(&self, deadline: Option<Deadline>) -> Result<CallPlan, CallError> {
        let Some(deadline) = deadline else {
            return Ok(CallPlan {
                remaining: None,
                timeout: self.sla,
                forwarded: self.forwarded(self.sla),
            });
        };
        let remaining_ms = deadline.remaining_ms();
        let left = deadline.remaining().saturating_sub(self.margin);
        if left.is_zero() || left < self.min_worth_calling {
            return Err(CallError::Refused {
                remaining_ms,
                margin: self.margin,
                min_worth_calling: self.min_worth_calling,
            });
        }
        let timeout = deadline.call_timeout(self.sla, self.margin);
        Ok(CallPlan {
            remaining: Some(remaining_ms),
            timeout: Some(timeout),
            forwarded: self.forwarded(Some(timeout)),
        })
    }

    /// [`CallOptions::plan`], with the CLIENT span's `budget.*` attributes recorded on `span`
    /// (the SLA, what remained, the timeout, and `refused` when the call is not worth making).
    /// The one place both clients (`BudgetClient`, the tonic layer) write them.
    pub(crate) fn plan_on_span(
        &self,
        deadline: Option<Deadline>,
        span: &tracing::Span,
    ) -> Result<CallPlan, CallError> {
        if let Some(sla) = self.sla {
            record(span, crate::semconv::SLA_MS, saturating_ms(sla));
        }
        match self.plan(deadline) {
            Ok(plan) => {
                if let Some(remaining) = plan.remaining {
                    record(span, crate::semconv::REMAINING_MS, remaining);
                }
                if let Some(timeout) = plan.timeout {
                    record(span, crate::semconv::TIMEOUT_MS, saturating_ms(timeout));
                }
                Ok(plan)
            }
            Err(refused) => {
                if let CallError::Refused { remaining_ms, .. } = &refused {
                    record(span, crate::semconv::REMAINING_MS, *remaining_ms);
                }
                record(
                    span,
                    crate::semconv::TIMEOUT_MS,
                    deadline.map_or(0, |d| saturating_ms(d.call_timeout(self.sla, self.margin))),
                );
                record(span, crate::semconv::OUTCOME, Outcome::Refused.as_str());
                Err(refused)
            }
        }
    }

    fn forwarded(&self, timeout: Option<Duration>) -> Option<Duration> {
        match self.forward {
            Forward::Budget => timeout,
            Forward::Fixed(fixed) => Some(fixed),
            Forward::Nothing => None,
        }
    }
}

/// The call rule applied at one moment: see [`CallOptions::plan`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CallPlan {
    /// What remained of the hop's deadline, in ms (negative after expiry); `None` without one.
    pub remaining: Option<i64>,
    /// The local timeout; `None` when there is neither deadline nor SLA.
    pub timeout: Option<Duration>,
    /// The budget to write into the request; `None` when nothing is forwarded.
    pub forwarded: Option<Duration>,
}

/// Why a call failed before an HTTP response arrived. HTTP error statuses are not errors here:
/// they come back as the response (and the span's `budget.outcome` says `shed_full` for 503,
/// `shed_expired` for 504, `error` for other 5xx).
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    /// Not made: less than the minimum worth calling remained after the margin.
    #[error(
        "call refused: {remaining_ms} ms left, margin {margin:?}, minimum worth calling {min_worth_calling:?}"
    )]
    Refused {
        /// What remained, in ms (negative after expiry).
        remaining_ms: i64,
        /// The margin that was kept back.
        margin: Duration,
        /// The minimum worth calling with.
        min_worth_calling: Duration,
    },
    /// The local timeout fired before a response arrived.
    #[error("no response within the call's timeout of {timeout:?}")]
    DeadlineExceeded {
        /// The timeout that was applied.
        timeout: Duration,
    },
    /// The request could not be built.
    #[error("could not build the request")]
    Build(#[source] reqwest::Error),
    /// The transport failed (connection refused, reset...).
    #[error("transport error")]
    Transport(#[source] BoxError),
}

/// A budget-aware HTTP client. Cheap to clone.
///
/// ```no_run
/// # async fn run() -> Result<(), deadline_budget::client::CallError> {
/// use std::time::Duration;
/// use deadline_budget::client::{BudgetClient, CallOptions};
/// let client = BudgetClient::new(reqwest::Client::new());
/// let options = CallOptions::new().sla(Duration::from_millis(400));
/// let response = client.send(client.get("http://127.0.0.1:3000/pay"), &options).await?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct BudgetClient<S = reqwest::Client> {
    inner: S,
    trace_context: bool,
}

impl<S> fmt::Debug for BudgetClient<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BudgetClient")
            .field("trace_context", &self.trace_context)
            .finish_non_exhaustive()
    }
}

impl BudgetClient<reqwest::Client> {
    /// Wrap a `reqwest::Client`.
    pub fn new(client: reqwest::Client) -> Self {
        BudgetClient::with_service(client)
    }

    /// The wrapped `reqwest::Client`.
    pub fn http(&self) -> &reqwest::Client {
        &self.inner
    }

    /// Start a GET request (send it with [`BudgetClient::send`]).
    pub fn get(&self, url: impl reqwest::IntoUrl) -> reqwest::RequestBuilder {
        self.inner.get(url)
    }

    /// Start a POST request (send it with [`BudgetClient::send`]).
    pub fn post(&self, url: impl reqwest::IntoUrl) -> reqwest::RequestBuilder {
        self.inner.post(url)
    }

    /// Start a request with any method (send it with [`BudgetClient::send`]).
    pub fn request(
        &self,
        method: reqwest::Method,
        url: impl reqwest::IntoUrl,
    ) -> reqwest::RequestBuilder {
        self.inner.request(method, url)
    }
}

impl<S> BudgetClient<S>
where
    S: Service<reqwest::Request, Response = reqwest::Response> + Clone,
    S::Error: Into<BoxError>,
{
    /// Wrap any tower service that sends a `reqwest::Request` (a `reqwest::Client`, or a stub
    /// in tests).
    pub fn with_service(inner: S) -> Self {
        BudgetClient {
            inner,
            trace_context: true,
        }
    }

    /// Write the CLIENT span's `traceparent` into each request (default `true`).
    pub fn trace_context(mut self, on: bool) -> Self {
        self.trace_context = on;
        self
    }

    /// Build and send a request: see [`BudgetClient::execute`].
    pub async fn send(
        &self,
        request: reqwest::RequestBuilder,
        options: &CallOptions,
    ) -> Result<reqwest::Response, CallError> {
        let request = request.build().map_err(CallError::Build)?;
        self.execute(request, options).await
    }

    /// Send `request` under the call rule, inside a CLIENT span (one per attempt). Returns the
    /// callee's response whatever its status; errors only when the call was refused, timed out
    /// or failed in transport.
    pub async fn execute(
        &self,
        mut request: reqwest::Request,
        options: &CallOptions,
    ) -> Result<reqwest::Response, CallError> {
        let deadline = options.deadline.or_else(Deadline::current);
        let name = match &options.name {
            Some(name) => name.clone(),
            None => format!(
                "{} {}{}",
                request.method(),
                request.url().host_str().unwrap_or(""),
                request.url().path()
            ),
        };
        let span = budget_client_span!(
            name,
            options.attempt,
            http.request.method = %request.method(),
            url.full = %request.url(),
            peer.service = Empty,
            http.response.status_code = Empty,
        );
        if let Some(peer) = &options.peer_service {
            span.record("peer.service", peer.as_str());
        }
        let plan = options.plan_on_span(deadline, &span)?;
        if let Some(timeout) = plan.timeout {
            *request.timeout_mut() = Some(timeout);
        }
        let headers = request.headers_mut();
        // Never pass on a budget the caller code copied in: only what the rule says.
        for name in [
            carrier::X_BUDGET_MS,
            carrier::GRPC_TIMEOUT,
            carrier::X_REQUEST_DEADLINE,
        ] {
            headers.remove(name);
        }
        if let Some(forwarded) = plan.forwarded {
            let (name, value) = if options.absolute_deadline {
                let at = carrier::now_unix_ms().saturating_add(saturating_ms(forwarded));
                (
                    carrier::X_REQUEST_DEADLINE,
                    carrier::format_request_deadline(at),
                )
            } else {
                (carrier::X_BUDGET_MS, carrier::format_x_budget_ms(forwarded))
            };
            if let Ok(value) = HeaderValue::from_str(&value) {
                headers.insert(name, value);
            }
            if options.grpc {
                insert_grpc_timeout(headers, forwarded);
            }
            record_forwarded(&span, forwarded);
        }
        if self.trace_context {
            trace_context::inject(&span, headers);
        }

        let service = self.inner.clone();
        let send = service.oneshot(request).instrument(span.clone());
        let result = match plan.timeout {
            Some(timeout) => match tokio::time::timeout(timeout, send).await {
                Ok(result) => result.map_err(|e| classify(e.into(), timeout)),
                Err(_) => Err(CallError::DeadlineExceeded { timeout }),
            },
            None => send.await.map_err(|e| classify(e.into(), Duration::ZERO)),
        };
        match &result {
            Ok(response) => {
                let status = response.status();
                record(
                    &span,
                    "http.response.status_code",
                    i64::from(status.as_u16()),
                );
                let outcome = match status.as_u16() {
                    503 => Some(Outcome::ShedFull),
                    504 => Some(Outcome::ShedExpired),
                    500..=599 => Some(Outcome::Error),
                    _ => None,
                };
                if let Some(outcome) = outcome {
                    record(&span, "otel.status_code", "ERROR");
                    record(&span, crate::semconv::OUTCOME, outcome.as_str());
                }
            }
            Err(error) => {
                let (outcome, kind) = match error {
                    CallError::DeadlineExceeded { .. } => (Outcome::DeadlineExceeded, "timeout"),
                    _ => (Outcome::Error, "transport"),
                };
                record(&span, "otel.status_code", "ERROR");
                record(&span, crate::semconv::ERROR_TYPE, kind);
                record(&span, crate::semconv::OUTCOME, outcome.as_str());
            }
        }
        result
    }
}

/// A transport error that is really reqwest's own timeout counts as the deadline.
fn classify(error: BoxError, timeout: Duration) -> CallError {
    match error.downcast_ref::<reqwest::Error>() {
        Some(e) if e.is_timeout() && !timeout.is_zero() => CallError::DeadlineExceeded { timeout },
        _ => CallError::Transport(error),
    }
}

/// Writes `forwarded` as gRPC's own carrier, `grpc-timeout`, for a gRPC callee.
pub(crate) fn insert_grpc_timeout(headers: &mut http::HeaderMap, forwarded: Duration) {
    if let Ok(value) = HeaderValue::from_str(&carrier::format_grpc_timeout(forwarded)) {
        headers.insert(carrier::GRPC_TIMEOUT, value);
    }
}

/// Records the budget forwarded on the CLIENT span as the callee reads it: whole ms, rounded
/// down.
pub(crate) fn record_forwarded(span: &tracing::Span, forwarded: Duration) {
    record(span, crate::semconv::FORWARDED_MS, saturating_ms(forwarded));
}

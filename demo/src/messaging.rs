//! The `message-deadline` story: jobs on a message queue that carry their deadline.
//!
//! `api` answers an HTTP request by putting a job on the `jobs` queue (a PRODUCER span, as
//! messaging instrumentation names it: `jobs publish`) with the time it must be done by as an
//! absolute `x-request-deadline` in the message's headers, next to `traceparent`, and answers
//! 202. An absolute time is what a message needs: it may wait in the queue for any length of
//! time, and the consumer and producer share a clock here.
//!
//! `worker` takes each job off the queue as it arrives into its own buffer (its CONSUMER span,
//! `jobs process`, starts then: the job has arrived) and works through the buffer one job at a
//! time. The span records the contract's attributes as an HTTP hop behind a queue does: the
//! budget received, the time in the buffer (`budget.queue_wait_ms`), what was left when work
//! started and the outcome. Broken, the worker runs every job however late; checked, it drops
//! a job whose deadline passed while it waited (`shed_expired`) and stops work at the deadline.

use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::routing::get;
use deadline_budget::analysis::Outcome;
use deadline_budget::budget::Deadline;
use deadline_budget::carrier::{self, Received};
use deadline_budget::server::BudgetLayer;
use deadline_budget::{semconv, trace_context};
use tokio::sync::mpsc;
use tokio::time::Instant;
use tracing::Instrument as _;
use tracing::field::Empty;

use crate::DemoError;
use crate::hop::Hop;
use crate::host::ServiceHost;
use crate::telemetry::Export;

/// Jobs the queue holds before a publish is refused (503).
const QUEUE_CAPACITY: usize = 1024;
/// Jobs the worker holds in its own buffer; past it, jobs wait in the queue.
const BUFFER_CAPACITY: usize = 1024;

/// One message: its headers (`traceparent`, `x-request-deadline`).
#[derive(Debug)]
pub(crate) struct Job {
    headers: HeaderMap,
}

/// The publishing end of the `jobs` queue.
pub(crate) type Queue = mpsc::Sender<Job>;
/// The consuming end.
pub(crate) type Jobs = mpsc::Receiver<Job>;

/// A new `jobs` queue (in-process: a broker would sit here).
pub(crate) fn queue() -> (Queue, Jobs) {
    mpsc::channel(QUEUE_CAPACITY)
}

/// `api`: local work, then one job published.
#[derive(Clone, Debug)]
pub(crate) struct Producer {
    hop: Hop,
    queue: Queue,
    /// Kept back from the deadline the job carries.
    margin: Duration,
    /// Below this left, the job is not published (nothing could be done in time).
    min_worth: Duration,
}

impl Producer {
    pub(crate) fn new(hop: Hop, queue: Queue, margin: Duration, min_worth: Duration) -> Self {
        Self {
            hop,
            queue,
            margin,
            min_worth,
        }
    }

    /// Publish one job under the request's deadline: 202, or why not.
    fn publish(&self) -> (StatusCode, String) {
        let span = tracing::info_span!(
            "budget.producer",
            otel.kind = "producer",
            otel.name = "jobs publish",
            otel.status_code = Empty,
            messaging.system = "budget-demo",
            messaging.destination.name = "jobs",
            messaging.operation.type = "publish",
            budget.remaining_ms = Empty,
            budget.forwarded_ms = Empty,
            budget.outcome = Empty,
        );
        let mut headers = HeaderMap::new();
        if let Some(deadline) = Deadline::current() {
            span.record(semconv::REMAINING_MS, deadline.remaining_ms());
            let left = deadline.remaining().saturating_sub(self.margin);
            if left.is_zero() || left < self.min_worth {
                span.record(semconv::OUTCOME, Outcome::Refused.as_str());
                return (
                    StatusCode::GATEWAY_TIMEOUT,
                    format!(
                        "jobs: not published, only {} ms left",
                        deadline.remaining_ms()
                    ),
                );
            }
            let forwarded = i64::try_from(left.as_millis()).unwrap_or(i64::MAX);
            let at = carrier::now_unix_ms().saturating_add(forwarded);
            if let Ok(value) = HeaderValue::from_str(&carrier::format_request_deadline(at)) {
                headers.insert(carrier::X_REQUEST_DEADLINE, value);
            }
            span.record(semconv::FORWARDED_MS, forwarded);
        }
        trace_context::inject(&span, &mut headers);
        match self.queue.try_send(Job { headers }) {
            Ok(()) => (StatusCode::ACCEPTED, "queued".to_owned()),
            Err(_) => {
                span.record("otel.status_code", "ERROR");
                span.record(semconv::OUTCOME, Outcome::ShedFull.as_str());
                (
                    StatusCode::SERVICE_UNAVAILABLE,
                    "jobs: the queue is full".to_owned(),
                )
            }
        }
    }
}

async fn publish(State(producer): State<Producer>) -> (StatusCode, String) {
    if let Err(failed) = producer.hop.work().await {
        return failed;
    }
    producer.publish()
}

/// Start `api`: an HTTP service at `path` that publishes one job per request.
pub(crate) fn start_producer(
    endpoint: &Export,
    producer: Producer,
    path: &'static str,
    layer: BudgetLayer,
) -> Result<ServiceHost, DemoError> {
    let name = producer.hop.name;
    ServiceHost::start(name, endpoint, move |_stop| {
        Router::new()
            .route(path, get(publish))
            .with_state(producer)
            .layer(layer)
    })
}

/// A job in the worker's buffer, its CONSUMER span open since it arrived.
struct Taken {
    span: tracing::Span,
    deadline: Option<Deadline>,
    arrival: Instant,
}

/// Start `worker`: it takes jobs off `jobs` into its buffer and works them one at a time,
/// checking each job's deadline when it takes it when `checked`. It serves no requests of its
/// own (its listener answers 404).
pub(crate) fn start_consumer(
    endpoint: &Export,
    hop: Hop,
    jobs: Jobs,
    checked: bool,
) -> Result<ServiceHost, DemoError> {
    let name = hop.name;
    ServiceHost::start(name, endpoint, move |_stop| {
        // On the service's own runtime and tracing pipeline: the spans are worker's. Both tasks
        // end when the queue closes (api stopped) and the buffer is worked through.
        let (buffer, taken) = mpsc::channel(BUFFER_CAPACITY);
        tokio::spawn(intake(jobs, buffer));
        tokio::spawn(work(taken, hop, checked));
        Router::new()
    })
}

/// Take each job off the queue as it comes: it has arrived at the worker.
async fn intake(mut jobs: Jobs, buffer: mpsc::Sender<Taken>) {
    while let Some(job) = jobs.recv().await {
        let arrival = Instant::now();
        let span = tracing::info_span!(
            "budget.consumer",
            otel.kind = "consumer",
            otel.name = "jobs process",
            otel.status_code = Empty,
            messaging.system = "budget-demo",
            messaging.destination.name = "jobs",
            messaging.operation.type = "process",
            budget.received_ms = Empty,
            budget.source = Empty,
            budget.invalid_value = Empty,
            budget.queue_wait_ms = Empty,
            budget.remaining_at_start_ms = Empty,
            budget.outcome = Empty,
        );
        trace_context::set_parent_from(&span, &job.headers);
        let received = carrier::read_headers(&job.headers, carrier::now_unix_ms());
        let deadline = match &received {
            Received::Budget { budget, .. } => {
                span.record(
                    semconv::RECEIVED_MS,
                    i64::try_from(budget.as_millis()).unwrap_or(i64::MAX),
                );
                Some(Deadline::at(arrival + *budget))
            }
            Received::Invalid { value, .. } => {
                span.record(semconv::INVALID_VALUE, value.as_str());
                None
            }
            Received::None => None,
        };
        span.record(semconv::SOURCE, received.source().as_str());
        let taken = Taken {
            span,
            deadline,
            arrival,
        };
        if buffer.send(taken).await.is_err() {
            break;
        }
    }
}

/// Work through the buffer, one job at a time.
async fn work(mut taken: mpsc::Receiver<Taken>, hop: Hop, checked: bool) {
    while let Some(job) = taken.recv().await {
        let started = Instant::now();
        let span = job.span;
        span.record(
            semconv::QUEUE_WAIT_MS,
            i64::try_from(started.duration_since(job.arrival).as_millis()).unwrap_or(i64::MAX),
        );
        let expired = job.deadline.is_some_and(|d| d.instant() <= started);
        if checked && expired {
            // Dropped as it leaves the buffer: never started, so no remaining_at_start_ms.
            span.record(semconv::OUTCOME, Outcome::ShedExpired.as_str());
            continue;
        }
        if let Some(deadline) = job.deadline {
            span.record(
                semconv::REMAINING_AT_START_MS,
                deadline.remaining_ms_at(started),
            );
        }
        let run = hop.work().instrument(span.clone());
        let result = match job.deadline {
            Some(deadline) => deadline.scope(run).await,
            None => run.await,
        };
        let outcome = match result {
            Ok(_) if job.deadline.is_some_and(|d| d.is_expired()) => Outcome::DeadlineExceeded,
            Ok(_) => Outcome::Ok,
            Err((StatusCode::GATEWAY_TIMEOUT, _)) => Outcome::DeadlineExceeded,
            Err(_) => Outcome::Error,
        };
        if outcome != Outcome::Ok {
            span.record("otel.status_code", "ERROR");
        }
        span.record(semconv::OUTCOME, outcome.as_str());
    }
}

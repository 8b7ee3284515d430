//! A deadline-aware bounded queue in front of an HTTP or gRPC service, as a tower [`Layer`].
//!
//! At most `concurrency` requests run at once; up to `queue_limit` more wait in arrival order
//! (tokio's semaphore is fair). A request arriving to a full queue gets 503 (`shed_full`). When
//! a waiting request reaches the front, its deadline is checked: an expired one is answered 504
//! (`shed_expired`) without running. A request whose caller went away leaves the queue, because
//! dropping its response future drops its place in line. Both checks can be turned off for the
//! demo's broken variants. A gRPC caller gets the same answers in gRPC's codes: 8
//! (`RESOURCE_EXHAUSTED`) for a full queue, 4 (`DEADLINE_EXCEEDED`) for an expired item.
//!
//! Put it inside the [`BudgetLayer`](crate::server::BudgetLayer) (in axum: `.layer(queue)` before
//! `.layer(budget)`), which gives it each request's deadline and records `budget.queue_wait_ms`
//! and `budget.remaining_at_start_ms` on the SERVER span. One layer value is one queue: every
//! service it wraps (every axum route) shares it.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll};

use http::{Request, Response, StatusCode};
use tokio::sync::Semaphore;
use tokio::time::Instant;
use tower::{Layer, Service, ServiceExt};
use tracing::Instrument;

use crate::analysis::Outcome;
use crate::budget::Deadline;
use crate::server::{HopBudget, ResponseFuture, answer, is_grpc, joined};

/// The state every service of one queue shares.
#[derive(Debug)]
struct Shared {
    running: Arc<Semaphore>,
    concurrency: usize,
    queued: AtomicUsize,
}

#[derive(Clone, Copy, Debug)]
struct Config {
    queue_limit: usize,
    check_at_dequeue: bool,
    drop_cancelled: bool,
}

/// A bounded, deadline-aware queue. See the [module docs](self).
///
/// ```
/// use deadline_budget::{queue::DeadlineQueueLayer, server::BudgetLayer};
/// let app: axum::Router = axum::Router::new()
///     .route("/", axum::routing::get(|| async { "hi" }))
///     .layer(DeadlineQueueLayer::new(4, 16))
///     .layer(BudgetLayer::new());
/// ```
#[derive(Clone, Debug)]
pub struct DeadlineQueueLayer {
    shared: Arc<Shared>,
    config: Config,
}

impl DeadlineQueueLayer {
    /// A queue running at most `concurrency` requests at once (at least 1) with up to
    /// `queue_limit` more waiting; both behaviours on.
    pub fn new(concurrency: usize, queue_limit: usize) -> Self {
        DeadlineQueueLayer {
            shared: Arc::new(Shared {
                running: Arc::new(Semaphore::new(concurrency.max(1))),
                concurrency: concurrency.max(1),
                queued: AtomicUsize::new(0),
            }),
            config: Config {
                queue_limit,
                check_at_dequeue: true,
                drop_cancelled: true,
            },
        }
    }

    /// Check the deadline when an item reaches the front and answer 504 when it expired
    /// (default `true`). With `false` expired work runs anyway (ran after expiry).
    pub fn check_at_dequeue(mut self, on: bool) -> Self {
        self.config.check_at_dequeue = on;
        self
    }

    /// Remove an item from the queue when its caller goes away (default `true`). With `false`
    /// the item stays queued and runs for nobody (orphaned work).
    pub fn drop_cancelled(mut self, on: bool) -> Self {
        self.config.drop_cancelled = on;
        self
    }

    /// Requests waiting right now.
    pub fn queued(&self) -> usize {
        self.shared.queued.load(Ordering::Relaxed)
    }

    /// Requests running right now.
    pub fn running(&self) -> usize {
        self.shared
            .concurrency
            .saturating_sub(self.shared.running.available_permits())
    }
}

impl<S> Layer<S> for DeadlineQueueLayer {
    type Service = DeadlineQueue<S>;

    fn layer(&self, inner: S) -> Self::Service {
        DeadlineQueue {
            inner,
            shared: Arc::clone(&self.shared),
            config: self.config,
        }
    }
}

/// The service [`DeadlineQueueLayer`] wraps around an inner HTTP service.
#[derive(Clone)]
pub struct DeadlineQueue<S> {
    inner: S,
    shared: Arc<Shared>,
    config: Config,
}

impl<S> fmt::Debug for DeadlineQueue<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DeadlineQueue")
            .field("shared", &self.shared)
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

/// Counts one waiting item for as long as it waits.
struct QueuedSlot<'a>(&'a AtomicUsize);

impl Drop for QueuedSlot<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

impl<S, ReqB, ResB> Service<Request<ReqB>> for DeadlineQueue<S>
where
    S: Service<Request<ReqB>, Response = Response<ResB>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
    ReqB: Send + 'static,
    ResB: Default + Send + 'static,
{
    type Response = Response<ResB>;
    type Error = S::Error;
    type Future = ResponseFuture<ResB, S::Error>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        // Readiness is decided per request, in the queue itself.
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request<ReqB>) -> Self::Future {
        let arrival = Instant::now();
        let shared = Arc::clone(&self.shared);
        let config = self.config;
        let inner = self.inner.clone();
        let inner = std::mem::replace(&mut self.inner, inner);
        let grpc = is_grpc(&req);
        let hop = req.extensions().get::<HopBudget>();
        let progress = hop.map(|hop| hop.progress.clone());
        let deadline = match hop {
            Some(hop) => hop.deadline,
            None => req
                .extensions()
                .get::<Deadline>()
                .copied()
                .or_else(Deadline::current),
        };

        let work = async move {
            let permit = match Arc::clone(&shared.running).try_acquire_owned() {
                Ok(permit) => permit,
                Err(_) => {
                    if shared.queued.fetch_add(1, Ordering::AcqRel) >= config.queue_limit {
                        shared.queued.fetch_sub(1, Ordering::AcqRel);
                        if let Some(p) = &progress {
                            p.shed(Outcome::ShedFull);
                        }
                        return Ok(answer(StatusCode::SERVICE_UNAVAILABLE, grpc, "queue full"));
                    }
                    let _slot = QueuedSlot(&shared.queued);
                    if let Some(p) = &progress {
                        p.enqueued();
                    }
                    match Arc::clone(&shared.running).acquire_owned().await {
                        Ok(permit) => permit,
                        // The semaphore is never closed.
                        Err(_) => {
                            return Ok(answer(
                                StatusCode::SERVICE_UNAVAILABLE,
                                grpc,
                                "queue closed",
                            ));
                        }
                    }
                }
            };
            let started = Instant::now();
            if let Some(p) = &progress {
                p.dequeued(started, started - arrival);
            }
            if config.check_at_dequeue && deadline.is_some_and(|d| d.is_expired()) {
                if let Some(p) = &progress {
                    p.shed(Outcome::ShedExpired);
                }
                return Ok(answer(
                    StatusCode::GATEWAY_TIMEOUT,
                    grpc,
                    "budget spent while queued",
                ));
            }
            let response = inner.oneshot(req).await;
            drop(permit);
            response
        };
        if config.drop_cancelled {
            Box::pin(work)
        } else {
            // Detached: the item runs even when nobody waits. Carry the deadline and the span
            // into the task, which task-locals would not cross on their own.
            let span = tracing::Span::current();
            let handle = match deadline {
                Some(d) => tokio::spawn(d.scope(work).instrument(span)),
                None => tokio::spawn(work.instrument(span)),
            };
            Box::pin(joined(handle, grpc, "the queued task ended"))
        }
    }
}

//! One demo service's own work, a [`Hop`]: as long as its latency knob says, inside its own
//! span, stopped at its deadline unless it is a scenario's mistake not to. The HTTP services of
//! every topology, `antifraud` (gRPC) and the jobs' `worker` all work through it, so it sits
//! beside them rather than in `topology`, which wires them together.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use axum::http::StatusCode;
use deadline_budget::budget::Deadline;
use tracing::Instrument as _;

use crate::Latencies;

/// A handler's answer: a short text, or a status with a text naming the step that failed.
pub(crate) type Answer = Result<String, (StatusCode, String)>;

/// One service's own work.
#[derive(Clone, Debug)]
pub(crate) struct Hop {
    pub(crate) name: &'static str,
    knobs: Latencies,
    /// Stop the work when the hop's deadline passes (the right thing).
    pub(crate) respects_deadline: bool,
    /// The work span's name; `"{name} work"` when `None`.
    pub(crate) work_name: Option<&'static str>,
    /// Some pieces of work are slower than the knob says.
    pub(crate) slow: Option<Slow>,
    /// The service turns slow at some point: its knob is set then.
    pub(crate) slowdown: Option<Slowdown>,
}

/// A dependency that turns slow, not down: from `at` on, its work takes `ms`. Set once on its
/// latency knob, so the screen shows it and `-` brings it back.
#[derive(Clone, Debug)]
pub(crate) struct Slowdown {
    at: std::time::Instant,
    ms: u64,
    done: Arc<AtomicBool>,
}

impl Slowdown {
    /// `after` from now.
    pub(crate) fn after(after: Duration, ms: u64) -> Self {
        Slowdown {
            at: std::time::Instant::now() + after,
            ms,
            done: Arc::default(),
        }
    }

    /// Turn `service` slow on `knobs` if its time has come (once).
    fn apply(&self, knobs: &Latencies, service: &str) {
        if std::time::Instant::now() >= self.at && !self.done.swap(true, Ordering::Relaxed) {
            knobs.set(service, self.ms);
        }
    }
}

/// A tail: every `every`-th piece of work takes `ms` instead of the knob's time.
#[derive(Clone, Debug)]
pub(crate) struct Slow {
    every: u64,
    ms: u64,
    count: Arc<AtomicU64>,
}

impl Slow {
    pub(crate) fn every(every: u64, ms: u64) -> Self {
        Slow {
            every: every.max(1),
            ms,
            count: Arc::default(),
        }
    }

    /// This piece of work's time, when it is one of the slow ones.
    fn next(&self) -> Option<Duration> {
        let n = self.count.fetch_add(1, Ordering::Relaxed) + 1;
        n.is_multiple_of(self.every)
            .then(|| Duration::from_millis(self.ms))
    }
}

impl Hop {
    /// A service's work as its latency knob says, stopped at its deadline.
    pub(crate) fn new(name: &'static str, knobs: &Latencies) -> Self {
        Hop {
            name,
            knobs: knobs.clone(),
            respects_deadline: true,
            work_name: None,
            slow: None,
            slowdown: None,
        }
    }

    /// The local work: as long as the service's latency knob says, inside its own span.
    pub(crate) async fn work(&self) -> Answer {
        if let Some(slowdown) = &self.slowdown {
            slowdown.apply(&self.knobs, self.name);
        }
        let knob = self.knobs.work(self.name);
        let time = self.slow.as_ref().and_then(Slow::next).unwrap_or(knob);
        let deadline = Deadline::current().filter(|_| self.respects_deadline);
        if deadline.is_some_and(|d| d.is_expired()) {
            // Nothing left: do not start work nobody will wait for.
            return Err((
                StatusCode::GATEWAY_TIMEOUT,
                format!("{}: the budget ran out before local work", self.name),
            ));
        }
        let span = match self.work_name {
            Some(name) => tracing::info_span!("work", otel.name = name),
            None => tracing::info_span!("work", otel.name = %format_args!("{} work", self.name)),
        };
        async move {
            match deadline {
                Some(deadline) => {
                    tokio::time::timeout_at(deadline.instant(), tokio::time::sleep(time))
                        .await
                        .map_err(|_| {
                            (
                                StatusCode::GATEWAY_TIMEOUT,
                                format!("{}: the budget ran out during local work", self.name),
                            )
                        })?;
                }
                None => tokio::time::sleep(time).await,
            }
            Ok(format!("{} done", self.name))
        }
        .instrument(span)
        .await
    }
}

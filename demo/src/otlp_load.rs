//! `budget-demo load`: a firehose of realistic OTLP traces for measuring a receiver (issue 6).
//!
//! Every request is a copy of one encoded template with fresh trace ids (`chains.rs`, which also
//! writes `budget-demo recording`'s lines). Sent over OTLP/gRPC or OTLP/HTTP protobuf
//! (`sender.rs`), on `connections` connections at once, to loopback only.
//!
//! Two pacings. Closed loop ([`Pacing::Closed`]): each connection sends its next request when
//! the last one is answered, so the receiver's speed sets the offered load (a capacity
//! measurement). Open loop ([`Pacing::Open`]): requests leave at the plan's rate whatever the
//! answers, many in flight per connection, so a receiver slower than the rate is offered more
//! than it can take (an overload test); a cap on requests in flight keeps the generator's own
//! memory bounded, and a request that would go past it is not sent and is counted as unsent.
//! Answers are counted by kind: accepted, throttled (gRPC `RESOURCE_EXHAUSTED`, HTTP 429/503:
//! OTLP's "retry later") and other failures. The closed loop does as an OTLP exporter does with
//! "retry later": it waits as the answer says (`Retry-After`, gRPC `RetryInfo`; else a second)
//! and sends the same request again, a few times at most and within `--for`; each request is
//! counted once, by its last answer, and the resends apart. The open loop never resends: what
//! the receiver refuses past its capacity is what an overload test measures.
//!
//! Over TLS when given a root to trust ([`Security`], `--tls-ca`: what a receiver run with
//! `--tls-cert/--tls-key` needs; rustls, as the receivers), with a bearer token when given one
//! (`--bearer-token-file`).

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

mod chains;
mod sender;
mod tls;
pub use chains::{Template, recording_request};
use sender::{Answer, Sender};
pub use tls::{Security, TLS_SERVER_NAME};

/// Where to send.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    /// OTLP/gRPC at this address.
    Grpc(SocketAddr),
    /// OTLP/HTTP protobuf at this address (`POST /v1/traces`).
    Http(SocketAddr),
}

impl Target {
    fn addr(self) -> SocketAddr {
        match self {
            Target::Grpc(a) | Target::Http(a) => a,
        }
    }
}

/// What to send.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FloodPlan {
    /// The receiver.
    pub target: Target,
    /// Spans to send in all (rounded up to whole requests: [`FloodPlan::spans_to_send`]).
    pub spans: u64,
    /// Spans per export request, at most `spans` (rounded up to whole chains).
    pub batch: usize,
    /// Hops per chain.
    pub depth: usize,
    /// Connections sending at once.
    pub connections: usize,
    /// Spans per second in all; `None`: as fast as the receiver takes them.
    pub rate: Option<f64>,
    /// Stop sending after this long even if spans remain.
    pub max_time: Option<Duration>,
    /// Whether to wait for answers before sending more.
    pub pacing: Pacing,
}

impl FloodPlan {
    /// The spans per request: `batch`, no more than `spans`, in whole chains.
    fn request_size(&self) -> usize {
        self.batch
            .min(usize::try_from(self.spans).unwrap_or(usize::MAX))
            .max(1)
    }

    /// The spans in each request.
    pub fn spans_per_request(&self) -> u64 {
        Template::spans_per_request(self.request_size(), self.depth)
    }

    /// The spans a full run sends: `spans` rounded up to whole requests of whole chains (100
    /// spans in chains of 4 hops are 13 chains, 104 spans).
    pub fn spans_to_send(&self) -> u64 {
        let per_request = self.spans_per_request();
        self.spans.div_ceil(per_request) * per_request
    }
}

/// How requests are paced.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Pacing {
    /// Each connection sends its next request once the last is answered (capped by the rate,
    /// if any): the receiver's speed sets the load.
    #[default]
    Closed,
    /// Requests leave at the plan's rate (required) whatever the answers. At most
    /// `max_inflight` requests await an answer; a request due past that is not sent (counted
    /// in [`FloodResult::spans_unsent`]). Each answer is awaited at most [`OPEN_LOOP_TIMEOUT`].
    Open {
        /// Requests awaiting an answer at most.
        max_inflight: usize,
    },
}

/// The longest an open-loop request waits for its answer before it counts as failed.
pub const OPEN_LOOP_TIMEOUT: Duration = Duration::from_secs(20);

/// How many times the closed loop sends a request again after "retry later" before it counts
/// the request as throttled.
pub const MAX_RESENDS: u32 = 5;
/// The wait before a resend when the answer names none; and the longest wait an answer may ask.
const DEFAULT_RETRY_WAIT: Duration = Duration::from_secs(1);
const MAX_RETRY_WAIT: Duration = Duration::from_secs(10);

/// What was sent, and how it was answered.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct FloodResult {
    /// Spans in requests the receiver accepted.
    pub spans_sent: u64,
    /// Spans in requests the receiver throttled (RESOURCE_EXHAUSTED, HTTP 429 or 503).
    pub spans_throttled: u64,
    /// Spans in requests that failed otherwise (transport error, other status, timeout).
    pub spans_failed: u64,
    /// Spans in requests that were due but not sent: the open loop's in-flight cap was reached.
    pub spans_unsent: u64,
    /// Requests the receiver accepted.
    pub requests_accepted: u64,
    /// Requests the receiver throttled.
    pub requests_throttled: u64,
    /// Requests that failed otherwise.
    pub requests_failed: u64,
    /// Requests that were due but not sent.
    pub requests_unsent: u64,
    /// Answers "retry later" after which the closed loop waited as told and sent the request
    /// again (the request is counted once above, by its last answer).
    pub requests_resent: u64,
    /// Wall time of the sending, until the last answer.
    pub seconds: f64,
}

impl FloodResult {
    /// Spans the plan offered: sent (whatever the answer) or due and unsent.
    pub fn spans_offered(&self) -> u64 {
        self.spans_sent + self.spans_throttled + self.spans_failed + self.spans_unsent
    }

    /// Requests the plan offered.
    pub fn requests_offered(&self) -> u64 {
        self.requests_accepted
            + self.requests_throttled
            + self.requests_failed
            + self.requests_unsent
    }

    /// Accepted spans per second.
    pub fn spans_per_second(&self) -> f64 {
        if self.seconds > 0.0 {
            self.spans_sent as f64 / self.seconds
        } else {
            0.0
        }
    }
}

/// Why a flood could not run.
#[derive(Debug, thiserror::Error)]
pub enum FloodError {
    /// The target is not on this machine.
    #[error("{0} is not a loopback address: the load generator only sends to this machine")]
    NotLoopback(SocketAddr),
    /// A nonsensical plan.
    #[error("{0}")]
    Plan(&'static str),
    /// The CA or the token file could not be read.
    #[error("{0}")]
    Security(String),
    /// The receiver could not be reached.
    #[error("cannot connect to {addr}: {message}")]
    Connect {
        /// The receiver.
        addr: SocketAddr,
        /// What the transport said.
        message: String,
    },
}

/// Answers counted by kind, shared by the senders.
#[derive(Debug, Default)]
struct Tally {
    accepted: AtomicU64,
    throttled: AtomicU64,
    failed: AtomicU64,
    unsent: AtomicU64,
    resent: AtomicU64,
}

impl Tally {
    fn count(&self, answer: Answer) {
        let counter = match answer {
            Answer::Accepted => &self.accepted,
            Answer::Throttled(_) => &self.throttled,
            Answer::Failed => &self.failed,
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    fn result(&self, spans_per_request: u64, seconds: f64) -> FloodResult {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        FloodResult {
            spans_sent: get(&self.accepted) * spans_per_request,
            spans_throttled: get(&self.throttled) * spans_per_request,
            spans_failed: get(&self.failed) * spans_per_request,
            spans_unsent: get(&self.unsent) * spans_per_request,
            requests_accepted: get(&self.accepted),
            requests_throttled: get(&self.throttled),
            requests_failed: get(&self.failed),
            requests_unsent: get(&self.unsent),
            requests_resent: get(&self.resent),
            seconds,
        }
    }
}

/// Send the plan's spans; returns how they were answered and how fast.
pub async fn flood(plan: FloodPlan) -> Result<FloodResult, FloodError> {
    flood_with(plan, &Security::default()).await
}

/// [`flood`] over TLS and with a token, as `security` says.
pub async fn flood_with(plan: FloodPlan, security: &Security) -> Result<FloodResult, FloodError> {
    let addr = plan.target.addr();
    if !addr.ip().is_loopback() {
        return Err(FloodError::NotLoopback(addr));
    }
    if plan.batch == 0 || plan.connections == 0 || plan.depth == 0 {
        return Err(FloodError::Plan(
            "--batch, --depth and --connections must be at least 1",
        ));
    }
    let rate = plan.rate.filter(|r| r.is_finite() && *r > 0.0);
    if let Pacing::Open { max_inflight } = plan.pacing {
        if rate.is_none() {
            return Err(FloodError::Plan(
                "an open loop needs a rate (--rate SPANS_PER_S)",
            ));
        }
        if max_inflight == 0 {
            return Err(FloodError::Plan("--max-inflight must be at least 1"));
        }
    }
    let template = Arc::new(Template::new(plan.request_size(), plan.depth));
    let requests = plan.spans.div_ceil(template.spans());
    let mut senders = Vec::with_capacity(plan.connections);
    for _ in 0..plan.connections {
        senders.push(Sender::connect(plan.target, security).await?);
    }
    let tally = Arc::new(Tally::default());
    let started = Instant::now();
    let stop_at = plan.max_time.map(|d| started + d);
    match (plan.pacing, rate) {
        (Pacing::Open { max_inflight }, Some(rate)) => {
            let per_second = rate / template.spans() as f64;
            open_loop(
                senders,
                &template,
                requests,
                per_second,
                max_inflight,
                stop_at,
                &tally,
            )
            .await;
        }
        _ => closed_loop(senders, &template, requests, rate, stop_at, &tally).await,
    }
    Ok(tally.result(template.spans(), started.elapsed().as_secs_f64()))
}

/// Each connection sends, waits for the answer, and sends again (paced to its share of the
/// rate, if any).
async fn closed_loop(
    senders: Vec<Sender>,
    template: &Arc<Template>,
    requests: u64,
    rate: Option<f64>,
    stop_at: Option<Instant>,
    tally: &Arc<Tally>,
) {
    let next = Arc::new(AtomicU64::new(0));
    // Each connection paces itself to its share of the rate.
    let gap = rate
        .map(|rate| Duration::from_secs_f64(template.spans() as f64 * senders.len() as f64 / rate));
    let mut tasks = tokio::task::JoinSet::new();
    for mut sender in senders {
        let (template, next, tally) = (template.clone(), next.clone(), tally.clone());
        tasks.spawn(async move {
            let mut tick = Instant::now();
            loop {
                let n = next.fetch_add(1, Ordering::Relaxed);
                if n >= requests || stop_at.is_some_and(|t| Instant::now() >= t) {
                    break;
                }
                let request = template.request(n as u32);
                let mut resends = 0;
                let answer = loop {
                    match sender.send(request.clone()).await {
                        Answer::Throttled(asked) if resends < MAX_RESENDS => {
                            let wait = asked.unwrap_or(DEFAULT_RETRY_WAIT).min(MAX_RETRY_WAIT);
                            if stop_at.is_some_and(|t| Instant::now() + wait >= t) {
                                break Answer::Throttled(asked);
                            }
                            resends += 1;
                            tally.resent.fetch_add(1, Ordering::Relaxed);
                            tokio::time::sleep(wait).await;
                        }
                        answer => break answer,
                    }
                };
                tally.count(answer);
                if let Some(gap) = gap {
                    tick += gap;
                    tokio::time::sleep_until(tick.into()).await;
                }
            }
        });
    }
    while tasks.join_next().await.is_some() {}
}

/// Requests leave on schedule (`per_second`), round-robin over the connections, each in its
/// own task; the schedule never waits for an answer.
async fn open_loop(
    senders: Vec<Sender>,
    template: &Arc<Template>,
    requests: u64,
    per_second: f64,
    max_inflight: usize,
    stop_at: Option<Instant>,
    tally: &Arc<Tally>,
) {
    let inflight = Arc::new(tokio::sync::Semaphore::new(max_inflight));
    let started = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    let mut n: u64 = 0;
    // One pass a millisecond (the timer's grain): send every request due by now. Bounded by
    // `requests` and `stop_at`.
    let mut tick = tokio::time::interval(Duration::from_millis(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    while n < requests {
        tick.tick().await;
        let now = Instant::now();
        if stop_at.is_some_and(|t| now >= t) {
            break;
        }
        let due = ((now - started).as_secs_f64() * per_second) as u64;
        while n < due.min(requests) {
            match inflight.clone().try_acquire_owned() {
                Ok(permit) => {
                    let mut sender = senders[(n % senders.len() as u64) as usize].clone();
                    let (body, tally) = (template.request(n as u32), tally.clone());
                    tasks.spawn(async move {
                        let answer = tokio::time::timeout(OPEN_LOOP_TIMEOUT, sender.send(body))
                            .await
                            .unwrap_or(Answer::Failed);
                        tally.count(answer);
                        drop(permit);
                    });
                }
                Err(_) => {
                    tally.unsent.fetch_add(1, Ordering::Relaxed);
                }
            }
            n += 1;
        }
        // Reap finished tasks so the set stays as small as what is in flight.
        while tasks.try_join_next().is_some() {}
    }
    // Every task ends within OPEN_LOOP_TIMEOUT.
    while tasks.join_next().await.is_some() {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn refuses_to_send_off_this_machine() {
        let plan = FloodPlan {
            target: Target::Grpc("192.0.2.1:4317".parse().unwrap()),
            spans: 1,
            batch: 1,
            depth: 1,
            connections: 1,
            rate: None,
            max_time: None,
            pacing: Pacing::Closed,
        };
        assert!(matches!(flood(plan).await, Err(FloodError::NotLoopback(_))));
    }
}

//! `budget-demo load`: a firehose of realistic OTLP traces for measuring a receiver (issue 6).
//!
//! Chains of `depth` hops (each a SERVER and a CLIENT span with the contract's `budget.*`
//! attributes and the HTTP attributes real instrumentation adds, about ten a span) are encoded
//! once into a template export request; each request sent is a copy of it with fresh trace ids
//! patched into the bytes, so the generator spends its time on the wire, not on encoding. Sent
//! over OTLP/gRPC (raw bytes through a pass-through codec) or OTLP/HTTP protobuf, on
//! `connections` connections at once, to loopback only.
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

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::{BufMut as _, Bytes};
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{
    AnyValue, InstrumentationScope, KeyValue, any_value::Value,
};
use opentelemetry_proto::tonic::resource::v1::Resource;
use opentelemetry_proto::tonic::trace::v1::status::StatusCode;
use opentelemetry_proto::tonic::trace::v1::{
    ResourceSpans, ScopeSpans, Span, Status, span::SpanKind,
};
use prost::Message as _;

mod tls;
pub use tls::{Security, TLS_SERVER_NAME};
use tls::{TlsDial, dial};

/// The gRPC method of OTLP trace export.
const EXPORT_PATH: &str = "/opentelemetry.proto.collector.trace.v1.TraceService/Export";
/// The first 8 bytes of every template trace id: unlikely anywhere else in the encoding.
const MARKER: [u8; 8] = [0xb7, 0x1d, 0x9e, 0x42, 0x13, 0x37, 0xc0, 0xde];
/// Service names of the hops, edge first (cycled for deeper chains).
const SERVICES: [&str; 8] = [
    "gateway",
    "bff",
    "orders",
    "inventory",
    "payments",
    "ledger",
    "notify",
    "search",
];

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

/// One encoded export request and where its trace ids sit in the bytes.
#[derive(Clone, Debug)]
pub struct Template {
    bytes: Vec<u8>,
    trace_id_offsets: Vec<usize>,
    spans: u64,
    /// Written into every trace id, so two runs against one receiver do not collide.
    run: u32,
}

impl Template {
    /// The spans [`Template::new`] puts in a request: `batch` rounded up to whole chains of
    /// `depth` hops (two spans each).
    pub fn spans_per_request(batch: usize, depth: usize) -> u64 {
        let per_chain = 2 * depth.max(1);
        (batch.div_ceil(per_chain).max(1) * per_chain) as u64
    }

    /// Encode chains of `depth` hops until about `batch` spans.
    pub fn new(batch: usize, depth: usize) -> Self {
        let depth = depth.max(1);
        let per_chain = 2 * depth;
        let chains = batch.div_ceil(per_chain).max(1);
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        // One ResourceSpans per service, holding that service's spans of every chain.
        let mut by_service: Vec<Vec<Span>> = vec![Vec::new(); depth];
        for chain in 0..chains {
            let mut trace_id = MARKER.to_vec();
            trace_id.extend_from_slice(&[0; 4]);
            trace_id.extend_from_slice(&(chain as u32).to_be_bytes());
            hops(&trace_id, depth, now, &mut by_service);
        }
        let request = request_of(by_service);
        let bytes = request.encode_to_vec();
        let trace_id_offsets = bytes
            .windows(MARKER.len())
            .enumerate()
            .filter(|(_, w)| *w == MARKER)
            .map(|(i, _)| i)
            .collect();
        Self {
            bytes,
            trace_id_offsets,
            spans: (chains * per_chain) as u64,
            run: (now >> 10) as u32,
        }
    }

    /// Spans in one request.
    pub fn spans(&self) -> u64 {
        self.spans
    }

    /// Request number `n`: the template with trace ids unique to this run and `n`.
    pub fn request(&self, n: u32) -> Bytes {
        let mut bytes = self.bytes.clone();
        for &offset in &self.trace_id_offsets {
            bytes[offset + 4..offset + 8].copy_from_slice(&self.run.to_be_bytes());
            bytes[offset + 8..offset + 12].copy_from_slice(&n.to_be_bytes());
        }
        Bytes::from(bytes)
    }
}

fn service(hop: usize) -> &'static str {
    SERVICES[hop % SERVICES.len()]
}

fn text(key: &str, value: &str) -> KeyValue {
    KeyValue {
        key: key.into(),
        value: Some(AnyValue {
            value: Some(Value::StringValue(value.into())),
        }),
        ..KeyValue::default()
    }
}

fn int(key: &str, value: i64) -> KeyValue {
    KeyValue {
        key: key.into(),
        value: Some(AnyValue {
            value: Some(Value::IntValue(value)),
        }),
        ..KeyValue::default()
    }
}

/// How one chain differs from the template's: its work per hop, and the mistakes in it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Shape {
    /// Milliseconds of work at each hop before it calls the next.
    work_ms: u64,
    /// Hop 1 receives more budget than hop 0 forwarded (`budget_reset`).
    reset: bool,
    /// The last call of the chain gives up after 5 ms while its callee works on
    /// (`orphaned_work`).
    give_up: bool,
}

/// The template's chain: 20 ms of work per hop, correctly propagated.
const RIGHT: Shape = Shape {
    work_ms: 20,
    reset: false,
    give_up: false,
};

/// The spans of one chain: every hop a SERVER span and a CLIENT span to the next hop, with a
/// budget that is correctly propagated (1200 ms at the edge, 20 ms of work per hop).
fn hops(trace_id: &[u8], depth: usize, now: u64, out: &mut [Vec<Span>]) {
    shaped_hops(trace_id, depth, now, RIGHT, out);
}

/// The spans of one chain of `shape`.
fn shaped_hops(trace_id: &[u8], depth: usize, now: u64, shape: Shape, out: &mut [Vec<Span>]) {
    const MS: u64 = 1_000_000;
    let step = shape.work_ms + 1;
    let mut parent: Vec<u8> = Vec::new();
    let mut budget: i64 = 1200;
    for (hop, spans) in out.iter_mut().enumerate().take(depth) {
        let server_id = ((hop as u64) * 2 + 1).to_be_bytes().to_vec();
        let client_id = ((hop as u64) * 2 + 2).to_be_bytes().to_vec();
        let start = now + (hop as u64) * step * MS;
        let end = now + (2 * depth as u64 - hop as u64) * step * MS;
        let path = format!("/{}", service(hop));
        if hop == 1 && shape.reset {
            budget += 500;
        }
        let mut server_attrs = vec![
            text("http.request.method", "GET"),
            text("url.path", &path),
            text("url.scheme", "http"),
            int("http.response.status_code", 200),
            text("network.protocol.version", "1.1"),
            text("server.address", "127.0.0.1"),
            text("budget.outcome", "ok"),
            int("budget.remaining_at_start_ms", budget),
        ];
        if hop == 0 {
            server_attrs.push(text("budget.source", "default"));
            server_attrs.push(int("budget.default_ms", budget));
        } else {
            server_attrs.push(text("budget.source", "x-budget-ms"));
            server_attrs.push(int("budget.received_ms", budget));
        }
        spans.push(Span {
            trace_id: trace_id.to_vec(),
            span_id: server_id.clone(),
            parent_span_id: parent.clone(),
            name: format!("GET {path}"),
            kind: SpanKind::Server as i32,
            start_time_unix_nano: start,
            end_time_unix_nano: end,
            attributes: server_attrs,
            ..Span::default()
        });
        let remaining = budget - shape.work_ms as i64;
        let mut forwarded = remaining - 10;
        let give_up = shape.give_up && hop + 2 == depth;
        let (client_end, status, code) = if give_up {
            forwarded = 5;
            let status = Status {
                code: StatusCode::Error as i32,
                message: "deadline exceeded".into(),
            };
            (start + (shape.work_ms + 5) * MS, Some(status), 504)
        } else {
            (end - MS, None, 200)
        };
        let callee = format!("/{}", service(hop + 1));
        spans.push(Span {
            trace_id: trace_id.to_vec(),
            span_id: client_id.clone(),
            parent_span_id: server_id,
            name: format!("GET {}", service(hop + 1)),
            kind: SpanKind::Client as i32,
            start_time_unix_nano: start + shape.work_ms * MS,
            end_time_unix_nano: client_end,
            attributes: vec![
                text("http.request.method", "GET"),
                text("url.full", &format!("http://127.0.0.1:8080{callee}")),
                text("server.address", "127.0.0.1"),
                int("server.port", 8080),
                int("http.response.status_code", code),
                int("budget.remaining_ms", remaining),
                int("budget.forwarded_ms", forwarded),
                int("budget.timeout_ms", forwarded),
                int("budget.sla_ms", 2000),
                int("budget.attempt", 1),
            ],
            status,
            ..Span::default()
        });
        parent = client_id;
        budget = forwarded;
    }
}

/// Request number `n` of a recording of chains of `depth` hops, `batch` spans at most (whole
/// chains): what `budget-demo recording` writes, one line each. Every chain differs a little
/// (its work per hop, 5 to 41 ms; its start, a millisecond after the one before), one in ten
/// resets its budget at hop 1 and one in thirteen gives up on its last call while the callee
/// works on, so the report has latencies, findings and wasted time to total. The same `n`
/// gives the same request.
pub fn recording_request(n: u64, batch: usize, depth: usize) -> ExportTraceServiceRequest {
    const START: u64 = 1_764_547_200_000_000_000; // 2025-12-01T00:00:00Z
    let depth = depth.max(1);
    let chains = batch.div_ceil(2 * depth).max(1) as u64;
    let mut by_service: Vec<Vec<Span>> = vec![Vec::new(); depth];
    for chain in 0..chains {
        let number = n * chains + chain;
        let mut trace_id = MARKER[..4].to_vec();
        trace_id.extend_from_slice(&number.to_be_bytes());
        trace_id.extend_from_slice(&[0; 4]);
        let shape = Shape {
            work_ms: 5 + number % 37,
            reset: number % 10 == 3,
            give_up: depth >= 2 && number % 13 == 7,
        };
        shaped_hops(
            &trace_id,
            depth,
            START + number * 1_000_000,
            shape,
            &mut by_service,
        );
    }
    request_of(by_service)
}

/// One export request: a `ResourceSpans` per hop's service, holding its spans.
fn request_of(by_service: Vec<Vec<Span>>) -> ExportTraceServiceRequest {
    ExportTraceServiceRequest {
        resource_spans: by_service
            .into_iter()
            .enumerate()
            .map(|(hop, spans)| ResourceSpans {
                resource: Some(Resource {
                    attributes: vec![
                        text("service.name", service(hop)),
                        text("telemetry.sdk.language", "rust"),
                    ],
                    ..Resource::default()
                }),
                scope_spans: vec![ScopeSpans {
                    scope: Some(InstrumentationScope {
                        name: "budget-demo-load".into(),
                        ..InstrumentationScope::default()
                    }),
                    spans,
                    ..ScopeSpans::default()
                }],
                ..ResourceSpans::default()
            })
            .collect(),
    }
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

/// How the receiver answered one request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Answer {
    Accepted,
    /// OTLP's "retry later": gRPC RESOURCE_EXHAUSTED, HTTP 429 or 503; with the wait the
    /// answer asked for, when it named one (gRPC `RetryInfo`, HTTP `Retry-After` in seconds).
    Throttled(Option<Duration>),
    Failed,
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

/// One connection to the receiver (a clone shares it: gRPC multiplexes requests over the one
/// HTTP/2 connection; HTTP/1.1 opens more connections to the pool as requests overlap), and
/// the `authorization` value sent with each request.
#[derive(Clone)]
enum Sender {
    Grpc(
        tonic::client::Grpc<tonic::transport::Channel>,
        Option<tonic::metadata::MetadataValue<tonic::metadata::Ascii>>,
    ),
    Http(reqwest::Client, String, Option<String>),
    /// OTLP/HTTP over TLS: hyper's pooled client on [`TlsDial`].
    HttpTls(
        Box<hyper_util::client::legacy::Client<TlsDial, http_body_util::Full<Bytes>>>,
        http::Uri,
        Option<http::HeaderValue>,
    ),
}

impl Sender {
    async fn connect(target: Target, security: &Security) -> Result<Self, FloodError> {
        let addr = target.addr();
        let fail = |message: String| FloodError::Connect { addr, message };
        let token = security.authorization.clone();
        match target {
            Target::Grpc(addr) => {
                let endpoint = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
                    .map_err(|e| fail(e.to_string()))?;
                let channel = match security.connector(b"h2") {
                    Some(tls) => endpoint
                        .connect_with_connector(tower::service_fn(move |_uri| {
                            let tls = tls.clone();
                            async move { dial(addr, &tls).await }
                        }))
                        .await
                        .map_err(|e| fail(with_causes(&e)))?,
                    None => endpoint
                        .connect()
                        .await
                        .map_err(|e| fail(with_causes(&e)))?,
                };
                let token = token
                    .map(|t| t.parse())
                    .transpose()
                    .map_err(|_| FloodError::Security("the token is not a header value".into()))?;
                Ok(Sender::Grpc(tonic::client::Grpc::new(channel), token))
            }
            Target::Http(addr) => match security.connector(b"http/1.1") {
                Some(tls) => {
                    // One handshake now, so a certificate the CA did not sign is an error
                    // here rather than every request failing.
                    dial(addr, &tls).await.map_err(|e| fail(e.to_string()))?;
                    let client = hyper_util::client::legacy::Client::builder(
                        hyper_util::rt::TokioExecutor::new(),
                    )
                    .pool_max_idle_per_host(1)
                    .build(TlsDial { addr, tls });
                    let url = format!("https://{TLS_SERVER_NAME}:{}/v1/traces", addr.port())
                        .parse()
                        .map_err(|e: http::uri::InvalidUri| fail(e.to_string()))?;
                    let token =
                        token
                            .map(http::HeaderValue::try_from)
                            .transpose()
                            .map_err(|_| {
                                FloodError::Security("the token is not a header value".into())
                            })?;
                    Ok(Sender::HttpTls(Box::new(client), url, token))
                }
                None => {
                    // One client per sender, one pooled connection each.
                    let client = reqwest::Client::builder()
                        .pool_max_idle_per_host(1)
                        .build()
                        .map_err(|e| fail(e.to_string()))?;
                    Ok(Sender::Http(
                        client,
                        format!("http://{addr}/v1/traces"),
                        token,
                    ))
                }
            },
        }
    }

    /// Send one request and say how it was answered.
    async fn send(&mut self, body: Bytes) -> Answer {
        match self {
            Sender::Grpc(grpc, token) => {
                if grpc.ready().await.is_err() {
                    return Answer::Failed;
                }
                let path = tonic::codegen::http::uri::PathAndQuery::from_static(EXPORT_PATH);
                let mut request = tonic::Request::new(body);
                if let Some(token) = token {
                    request
                        .metadata_mut()
                        .insert("authorization", token.clone());
                }
                match grpc.unary::<Bytes, (), _>(request, path, RawCodec).await {
                    Ok(_) => Answer::Accepted,
                    Err(status) if status.code() == tonic::Code::ResourceExhausted => {
                        use tonic_types::StatusExt as _;
                        let asked = status.get_details_retry_info().and_then(|r| r.retry_delay);
                        Answer::Throttled(asked)
                    }
                    Err(_) => Answer::Failed,
                }
            }
            Sender::Http(client, url, token) => {
                let mut request = client
                    .post(url.as_str())
                    .header("content-type", "application/x-protobuf");
                if let Some(token) = token {
                    request = request.header("authorization", token.as_str());
                }
                match request.body(body).send().await {
                    Ok(response) => http_answer(response.status(), response.headers()),
                    Err(_) => Answer::Failed,
                }
            }
            Sender::HttpTls(client, url, token) => {
                let mut request = http::Request::post(url.clone())
                    .header(http::header::CONTENT_TYPE, "application/x-protobuf");
                if let Some(token) = token {
                    request = request.header(http::header::AUTHORIZATION, token.clone());
                }
                let Ok(request) = request.body(http_body_util::Full::new(body)) else {
                    return Answer::Failed;
                };
                match client.request(request).await {
                    Ok(response) => {
                        let answer = http_answer(response.status(), response.headers());
                        // Read the answer to its end, so the connection goes back to the pool.
                        let _ = http_body_util::BodyExt::collect(response.into_body()).await;
                        answer
                    }
                    Err(_) => Answer::Failed,
                }
            }
        }
    }
}

/// An OTLP/HTTP answer: success, "retry later" (429, 503, with the wait its `Retry-After`
/// names in seconds) or a failure.
fn http_answer(status: http::StatusCode, headers: &http::HeaderMap) -> Answer {
    if status.is_success() {
        Answer::Accepted
    } else if status == http::StatusCode::TOO_MANY_REQUESTS
        || status == http::StatusCode::SERVICE_UNAVAILABLE
    {
        let asked = headers
            .get(http::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok()?.trim().parse::<u64>().ok())
            .map(Duration::from_secs);
        Answer::Throttled(asked)
    } else {
        Answer::Failed
    }
}

/// An error and its causes (tonic's own says only "transport error"), each said once.
fn with_causes(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.ends_with(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

/// A gRPC codec that sends already-encoded bytes and ignores the response's content.
#[derive(Clone, Copy, Debug, Default)]
struct RawCodec;

impl tonic::codec::Codec for RawCodec {
    type Encode = Bytes;
    type Decode = ();
    type Encoder = RawCodec;
    type Decoder = RawCodec;
    fn encoder(&mut self) -> Self::Encoder {
        RawCodec
    }
    fn decoder(&mut self) -> Self::Decoder {
        RawCodec
    }
}

impl tonic::codec::Encoder for RawCodec {
    type Item = Bytes;
    type Error = tonic::Status;
    fn encode(
        &mut self,
        item: Bytes,
        dst: &mut tonic::codec::EncodeBuf<'_>,
    ) -> Result<(), Self::Error> {
        dst.put_slice(&item);
        Ok(())
    }
}

impl tonic::codec::Decoder for RawCodec {
    type Item = ();
    type Error = tonic::Status;
    fn decode(
        &mut self,
        src: &mut tonic::codec::DecodeBuf<'_>,
    ) -> Result<Option<Self::Item>, Self::Error> {
        use bytes::Buf as _;
        let len = src.remaining();
        src.advance(len);
        Ok(Some(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_template_request_decodes_with_fresh_trace_ids_and_whole_chains() {
        let template = Template::new(512, 4);
        assert_eq!(template.spans() % 8, 0, "whole chains of 4 hops x 2 spans");
        assert!(template.spans() >= 512 && template.spans() < 520);
        let a = ExportTraceServiceRequest::decode(template.request(7)).unwrap();
        let b = ExportTraceServiceRequest::decode(template.request(8)).unwrap();
        let spans = |r: &ExportTraceServiceRequest| -> Vec<Span> {
            r.resource_spans
                .iter()
                .flat_map(|rs| rs.scope_spans.iter().flat_map(|s| s.spans.clone()))
                .collect()
        };
        let (sa, sb) = (spans(&a), spans(&b));
        assert_eq!(sa.len() as u64, template.spans());
        assert_eq!(a.resource_spans.len(), 4, "one resource per service");
        for (x, y) in sa.iter().zip(&sb) {
            assert_eq!(&x.trace_id[8..12], &7u32.to_be_bytes());
            assert_eq!(&y.trace_id[8..12], &8u32.to_be_bytes());
            assert_eq!(x.span_id, y.span_id);
            assert!(x.attributes.len() >= 10, "{}", x.name);
        }
    }

    #[test]
    fn a_recording_line_is_the_same_each_time_and_no_two_lines_share_a_chain() {
        let spans = |r: &ExportTraceServiceRequest| -> Vec<Span> {
            r.resource_spans
                .iter()
                .flat_map(|rs| rs.scope_spans.iter().flat_map(|s| s.spans.clone()))
                .collect()
        };
        assert_eq!(recording_request(3, 512, 4), recording_request(3, 512, 4));
        let (a, b) = (
            spans(&recording_request(0, 512, 4)),
            spans(&recording_request(1, 512, 4)),
        );
        assert_eq!(a.len() as u64, Template::spans_per_request(512, 4));
        let ids = |s: &[Span]| -> std::collections::BTreeSet<Vec<u8>> {
            s.iter().map(|s| s.trace_id.clone()).collect()
        };
        assert_eq!(ids(&a).len(), 64, "64 chains of 8 spans");
        assert!(ids(&a).is_disjoint(&ids(&b)));
        // Some chains give up on their last call (an error status), the others answer.
        let errors = a.iter().filter(|s| s.status.is_some()).count();
        assert!(errors > 0 && errors < 64, "{errors}");
    }

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

//! OTLP ingest: the network side of budget-top.
//!
//! Two receivers (OTLP/gRPC `TraceService` and OTLP/HTTP `POST /v1/traces`) decode each export
//! request into [`Batch`]es and hand them to the one loop that owns the store, over a bounded
//! channel. A producer is never blocked for long: a request the store has no room for waits
//! a moment unread, then gets OTLP's throttling answer.
//!
//! Admission control refuses load past what the store can take cheaply, and keeps memory
//! bounded, counting what costs memory: requests being read ([`IngestConfig::max_inflight`]),
//! the bytes of their bodies ([`IngestConfig::max_inflight_bytes`], see `body_bytes`) and the
//! spans queued for the store ([`IngestConfig::max_queued_spans`]). A request past a gate waits
//! unread for [`ADMISSION_WAIT`] at most, then is refused before its body is read: gRPC
//! `RESOURCE_EXHAUSTED` with `RetryInfo`, HTTP 503 with `Retry-After`, counted in
//! [`IngestStats`]. A request answered with success has all its valid spans in the channel.
//! One that can never succeed (malformed, too large, of an unknown type) gets an answer no SDK
//! retries (HTTP 400/413/415, gRPC `INVALID_ARGUMENT`). The gates, in order, and why they count
//! what they count: `docs/architecture.md`, "Ingest's admission control".

pub mod decode;
mod error;
pub mod receive;

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use deadline_budget::carrier::Carriers;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc};
use tokio_util::sync::CancellationToken;

use crate::batch::Batch;
use receive::{auth, body_bytes, tls};
pub use receive::{serve_app, start};

/// The default OTLP/gRPC address.
pub const DEFAULT_GRPC: &str = "127.0.0.1:4317";
/// The default OTLP/HTTP address.
pub const DEFAULT_HTTP: &str = "127.0.0.1:4318";
/// The default largest request body (compressed or not, and after decompression).
pub const DEFAULT_MAX_BODY: usize = 4 * 1024 * 1024;
/// The default for [`IngestConfig::body_timeout`].
pub const DEFAULT_BODY_TIMEOUT: Duration = Duration::from_secs(30);
/// The default for [`IngestConfig::max_connections`].
pub const DEFAULT_MAX_CONNECTIONS: usize = 512;
/// The default for [`IngestConfig::idle_timeout`].
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(120);
/// The default for [`IngestConfig::idle_timeout_near_cap`].
pub const DEFAULT_IDLE_TIMEOUT_NEAR_CAP: Duration = Duration::from_secs(5);
/// The default for [`IngestConfig::header_timeout`].
pub const DEFAULT_HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// The default for [`IngestConfig::max_inflight`].
pub const DEFAULT_MAX_INFLIGHT: usize = 1024;
/// The default for [`IngestConfig::max_inflight_bytes`]: what 64 bodies of the default
/// `max_body` hold.
pub const DEFAULT_MAX_INFLIGHT_BYTES: usize = 64 * DEFAULT_MAX_BODY;
/// The default for [`IngestConfig::max_queued_spans`].
pub const DEFAULT_MAX_QUEUED_SPANS: usize = 100_000;
/// [`IngestConfig::max_queued_bytes`] for the live screen: what may wait for its loop. Queued
/// spans are decoded on the runtime's workers, and glibc keeps each worker's malloc arena at
/// its high-water mark, so a queue bounded in spans alone grew the screen's memory with it.
/// This holds ~12,000 spans with the raw attributes the screen keeps: more than the loop takes
/// in between two frames at full speed (docs/performance.md, "A batch's leftovers freed on a
/// worker").
pub const SCREEN_MAX_QUEUED_BYTES: u64 = 8 * 1024 * 1024;
/// What a queued span costs beyond its raw attributes: the `Span` it is decoded into.
const QUEUED_SPAN_BYTES: u64 = std::mem::size_of::<deadline_budget::analysis::Span>() as u64;
/// How long a throttled client is asked to wait before retrying.
pub const RETRY_AFTER: Duration = Duration::from_secs(1);
/// How long a request may wait, unread, for a slot to read it in and room in the queue before
/// it is refused with [`RETRY_AFTER`]: long enough to ride out the store's passing lag, short
/// beside an exporter's own timeout (10 s in the OpenTelemetry SDKs).
pub const ADMISSION_WAIT: Duration = Duration::from_millis(250);
/// How often the one waiter looks for room in the queue (the owner loop takes batches
/// without telling anyone).
const ADMISSION_POLL: Duration = Duration::from_millis(1);
/// How many name interners the receivers share (see `Shared::interner`): as many as requests
/// are decoded at once, one on each of the runtime's workers (a thread per core), each
/// interner holding its own copy of the names (at most 16 copies).
fn interners() -> usize {
    std::thread::available_parallelism().map_or(2, |n| n.get().clamp(2, 16))
}

/// What to listen on and how to hand batches over.
#[derive(Clone, Debug)]
pub struct IngestConfig {
    /// OTLP/gRPC listen address; `None` disables it. Port 0 picks a free port.
    pub grpc: Option<SocketAddr>,
    /// OTLP/HTTP listen address; `None` disables it. Port 0 picks a free port.
    pub http: Option<SocketAddr>,
    /// Largest request body accepted, before and after decompression.
    pub max_body: usize,
    /// Batches that may wait in the channel before requests are refused (a second bound
    /// besides [`IngestConfig::max_queued_spans`]).
    pub channel_capacity: usize,
    /// Requests being read and decoded at once, both receivers together; past it a request is
    /// refused (throttled) before its body is read.
    pub max_inflight: usize,
    /// Bytes the bodies being read may hold between them, counted as they arrive (never below
    /// `max_body`); a body that would go past it is cut off and its request refused
    /// (throttled). This, not the count, bounds the memory of bodies held.
    pub max_inflight_bytes: usize,
    /// Spans that may wait in the channel for the owner loop; a request that would go past it
    /// is refused (throttled). A request is admitted whole or not at all; one larger than the
    /// limit alone is taken when the queue is empty.
    pub max_queued_spans: usize,
    /// Longest time a client may take to send a request body (a trickle is answered 408).
    pub body_timeout: Duration,
    /// Connections held open at once per receiver. Past it a new connection is served at
    /// once: the one that has gone longest without a request is closed to make room (or the
    /// new one, when every connection is serving a request).
    pub max_connections: usize,
    /// A connection that serves no request for this long is closed.
    pub idle_timeout: Duration,
    /// The same, once three quarters of `max_connections` are open.
    pub idle_timeout_near_cap: Duration,
    /// A connection whose first request has not started this long after it was accepted
    /// (headers that trickle in, or nothing at all) is closed.
    pub header_timeout: Duration,
    /// Bytes the spans waiting in the channel may hold, their raw attributes included (a span
    /// counted as the `Span` it is decoded into, plus its attributes' bytes): a second bound
    /// beside [`IngestConfig::max_queued_spans`], enforced the same way. Unbounded by default;
    /// the live screen sets it (see [`SCREEN_MAX_QUEUED_BYTES`]).
    pub max_queued_bytes: u64,
    /// Keep each span's raw attributes in [`Batch::attributes`] (for the detail view).
    pub keep_attributes: bool,
    /// Raw attribute bytes that may wait in the channel; a batch that would go past it is
    /// still taken, with its spans' attributes left out (counted as not kept), so what spans
    /// carry cannot grow the queue past what the screen would hold.
    pub max_queued_attribute_bytes: usize,
    /// Keep the whole request in [`Batch::raw`] (for `record`).
    pub keep_raw: bool,
    /// Keep each valid span as received in [`Batch::received`] (for `serve --forward`).
    pub keep_received: bool,
    /// Allow listening on an address other than loopback (other machines could then send
    /// spans). Off by default: a non-loopback address is refused unless this is set.
    pub allow_remote: bool,
    /// The carriers read from captured headers (`--budget-header` first, then the built-in).
    pub carriers: Arc<Carriers>,
    /// `--bearer-token-file`: every request must carry `Authorization: Bearer <its token>`
    /// (see [`auth`]). Read once at start: missing or empty, the receivers do not start.
    pub bearer_token_file: Option<PathBuf>,
    /// `--tls-cert`, `--tls-key` and `--client-ca`: both receivers speak TLS (see [`tls`]).
    /// Read once at start: a bad file and the receivers do not start.
    pub tls: Option<tls::TlsFiles>,
}

impl Default for IngestConfig {
    fn default() -> Self {
        Self {
            grpc: DEFAULT_GRPC.parse().ok(),
            http: DEFAULT_HTTP.parse().ok(),
            max_body: DEFAULT_MAX_BODY,
            channel_capacity: 1024,
            max_inflight: DEFAULT_MAX_INFLIGHT,
            max_inflight_bytes: DEFAULT_MAX_INFLIGHT_BYTES,
            max_queued_spans: DEFAULT_MAX_QUEUED_SPANS,
            body_timeout: DEFAULT_BODY_TIMEOUT,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
            idle_timeout_near_cap: DEFAULT_IDLE_TIMEOUT_NEAR_CAP,
            header_timeout: DEFAULT_HEADER_TIMEOUT,
            max_queued_bytes: u64::MAX,
            keep_attributes: true,
            max_queued_attribute_bytes: crate::batch::DEFAULT_MAX_ATTRIBUTE_BYTES,
            keep_raw: false,
            keep_received: false,
            allow_remote: false,
            carriers: Arc::default(),
            bearer_token_file: None,
            tls: None,
        }
    }
}

/// Counters shared by the receivers, the screen and the report.
#[derive(Debug, Default)]
pub struct IngestStats {
    /// Export requests answered with success.
    pub requests_accepted: AtomicU64,
    /// Requests rejected as malformed, too large or of an unknown type.
    pub requests_rejected: AtomicU64,
    /// Requests refused because the store could not keep up (throttled).
    pub requests_refused: AtomicU64,
    /// Of [`IngestStats::requests_refused`], those refused before their body was read (too many
    /// requests in flight, or the queue full): their spans are not in `spans_refused`.
    pub requests_refused_unread: AtomicU64,
    /// Spans handed to the store.
    pub spans_accepted: AtomicU64,
    /// Spans refused because the store could not keep up.
    pub spans_refused: AtomicU64,
    /// Spans rejected as invalid (wrong id lengths), reported in `partial_success`.
    pub spans_rejected: AtomicU64,
    /// Metrics and logs export requests: answered with success and dropped (an SDK given one
    /// endpoint exports every signal there).
    pub requests_ignored: AtomicU64,
    /// Connections closed to make room for a new one past `max_connections` (idle, or not
    /// serving a request).
    pub connections_evicted: AtomicU64,
    /// New connections closed at once: `max_connections` were all serving requests.
    pub connections_refused: AtomicU64,
    /// Requests without the bearer token (`--bearer-token-file`): answered 401 /
    /// `UNAUTHENTICATED` before their body was read, so their spans are unknown.
    pub requests_unauthenticated: AtomicU64,
}

/// A plain copy of [`IngestStats`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct IngestCounts {
    /// See [`IngestStats::requests_accepted`].
    pub requests_accepted: u64,
    /// See [`IngestStats::requests_rejected`].
    pub requests_rejected: u64,
    /// See [`IngestStats::requests_refused`].
    pub requests_refused: u64,
    /// See [`IngestStats::requests_refused_unread`].
    pub requests_refused_unread: u64,
    /// See [`IngestStats::spans_accepted`].
    pub spans_accepted: u64,
    /// See [`IngestStats::spans_refused`].
    pub spans_refused: u64,
    /// See [`IngestStats::spans_rejected`].
    pub spans_rejected: u64,
    /// See [`IngestStats::requests_ignored`].
    pub requests_ignored: u64,
    /// See [`IngestStats::connections_evicted`].
    pub connections_evicted: u64,
    /// See [`IngestStats::connections_refused`].
    pub connections_refused: u64,
    /// See [`IngestStats::requests_unauthenticated`].
    pub requests_unauthenticated: u64,
}

impl IngestStats {
    /// A snapshot of the counters.
    pub fn snapshot(&self) -> IngestCounts {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        IngestCounts {
            requests_accepted: get(&self.requests_accepted),
            requests_rejected: get(&self.requests_rejected),
            requests_refused: get(&self.requests_refused),
            requests_refused_unread: get(&self.requests_refused_unread),
            spans_accepted: get(&self.spans_accepted),
            spans_refused: get(&self.spans_refused),
            spans_rejected: get(&self.spans_rejected),
            requests_ignored: get(&self.requests_ignored),
            connections_evicted: get(&self.connections_evicted),
            connections_refused: get(&self.connections_refused),
            requests_unauthenticated: get(&self.requests_unauthenticated),
        }
    }
}

/// Running receivers. Dropping it does not stop them: call [`Ingest::shutdown`] or cancel
/// [`Ingest::shutdown_token`].
#[derive(Debug)]
pub struct Ingest {
    /// The bound gRPC address, when enabled.
    pub grpc_addr: Option<SocketAddr>,
    /// The bound HTTP address, when enabled.
    pub http_addr: Option<SocketAddr>,
    /// DecodedRequest batches, for the loop that owns the store.
    pub receiver: mpsc::Receiver<Batch>,
    /// Shared counters.
    pub stats: Arc<IngestStats>,
    /// Cancel to stop both receivers.
    pub shutdown_token: CancellationToken,
    /// Whether requests must carry the bearer token.
    pub token_required: bool,
    /// Whether the receivers speak TLS.
    pub tls: bool,
    /// Whether clients must present a certificate (`--client-ca`).
    pub client_ca: bool,
    /// Whether they listen beyond loopback (`--allow-remote`).
    pub allow_remote: bool,
    /// The warning about a token file others can read, for the start-up lines.
    pub token_warning: Option<String>,
}

impl Ingest {
    /// Stops both receivers (in-flight requests finish).
    pub fn shutdown(&self) {
        self.shutdown_token.cancel();
    }

    /// "grpc 127.0.0.1:4317, http 127.0.0.1:4318", for a status line.
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        if let Some(a) = self.grpc_addr {
            parts.push(format!("grpc {a}"));
        }
        if let Some(a) = self.http_addr {
            parts.push(format!("http {a}"));
        }
        parts.join(", ")
    }

    /// What protects the receivers: "TLS, token", "plain, no token"...
    pub fn protection(&self) -> &'static str {
        auth::protection(self.tls, self.client_ca, self.token_required)
    }

    /// The loud warning when anyone on the network can send: `--allow-remote` with neither TLS
    /// nor a token. `None` otherwise.
    pub fn open_to_network(&self) -> Option<&'static str> {
        open_to_network(self.allow_remote, self.tls, self.token_required)
    }

    /// The start-up lines after "listening: ...": what protects the receivers, and the warning
    /// when anyone on the network can send.
    pub fn protection_lines(&self) -> Vec<String> {
        let mut lines = vec![format!("receivers: {}", self.protection())];
        lines.extend(self.token_warning.clone());
        if let Some(warning) = self.open_to_network() {
            lines.push(format!("warning: {warning}"));
        }
        lines
    }
}

/// See [`Ingest::open_to_network`].
pub fn open_to_network(allow_remote: bool, tls: bool, token: bool) -> Option<&'static str> {
    (allow_remote && !tls && !token).then_some(
        "ANYONE ON THE NETWORK CAN SEND SPANS: --allow-remote with neither TLS nor a bearer \
         token (add --bearer-token-file FILE)",
    )
}

/// What the receivers share: the queue to the owner loop, the admission limits, the counters
/// and the name interner.
#[derive(Debug)]
struct Shared {
    queue: Mutex<Queue>,
    max_queued_spans: u64,
    max_queued_bytes: u64,
    max_queued_attribute_bytes: u64,
    /// One permit per request being read and decoded.
    inflight: Arc<Semaphore>,
    /// The turn to wait for room in the queue: one waiter polls, the others queue behind it.
    room: tokio::sync::Mutex<()>,
    /// The bytes the bodies being read hold between them.
    body_bytes: body_bytes::BodyBytes,
    stats: Arc<IngestStats>,
    /// Name interners (see [`interners`]): a request is decoded with whichever is free.
    interners: Vec<Mutex<decode::interner::Interner>>,
    keep_attributes: bool,
    keep_raw: bool,
    keep_received: bool,
    /// The token every request must carry, when `--bearer-token-file` is given.
    bearer: Option<auth::BearerToken>,
}

/// How a request was handled, for the transport to answer.
#[derive(Debug, PartialEq, Eq)]
enum Admission {
    /// Accepted; `rejected` spans were invalid (partial success) for the reason given.
    Accepted { rejected: u64, message: String },
    /// The store is behind: retry later.
    Throttled,
}

/// The channel to the owner loop, and the spans of the batches still in it.
///
/// The channel counts batches; what costs memory is spans. `waiting` holds the span count of
/// each batch sent, oldest first. The owner loop takes batches in that same order, so when the
/// channel holds `k` batches, they are the last `k` of `waiting`: the older entries have been
/// taken and are dropped. This needs nothing from the owner loop (it keeps a plain
/// `mpsc::Receiver`). It is exact because every send happens under the lock and no permit is
/// ever reserved ahead.
#[derive(Debug)]
struct Queue {
    tx: mpsc::Sender<Batch>,
    /// Spans and raw attribute bytes of each batch sent, oldest first.
    waiting: VecDeque<(u64, u64)>,
    /// The sum of `waiting`'s spans.
    spans: u64,
    /// The sum of `waiting`'s attribute bytes.
    attribute_bytes: u64,
    /// Spans of the last batch sent: what the next request probably holds.
    last: u64,
    /// What the last batch sent holds in bytes ([`Queue::bytes_waiting`]).
    last_bytes: u64,
}

impl Queue {
    /// Forgets the batches the owner loop has taken.
    fn forget_taken(&mut self) {
        let in_channel = self.tx.max_capacity() - self.tx.capacity();
        while self.waiting.len() > in_channel {
            if let Some((spans, bytes)) = self.waiting.pop_front() {
                self.spans -= spans;
                self.attribute_bytes -= bytes;
            }
        }
    }

    /// Spans in batches the owner loop has not taken yet.
    fn spans_waiting(&mut self) -> u64 {
        self.forget_taken();
        self.spans
    }

    /// The bytes the batches not taken yet hold: their spans as decoded, and their raw
    /// attributes (call after [`Queue::spans_waiting`]).
    fn bytes_waiting(&self) -> u64 {
        self.spans * QUEUED_SPAN_BYTES + self.attribute_bytes
    }

    /// Sends the batch if the queue has room for it (it stays within `max` spans and
    /// `max_bytes`, or the queue is empty: a request larger than the limit alone is still
    /// taken) and the channel has a free slot. Its raw attributes go with it only while the
    /// queue holds fewer than `max_attribute_bytes` of them (or none): past that, each span
    /// says its attributes were not kept.
    fn try_send(
        &mut self,
        mut batch: Batch,
        max: u64,
        max_bytes: u64,
        max_attribute_bytes: u64,
    ) -> Result<(), Batch> {
        let spans = batch.spans.len() as u64;
        let waiting = self.spans_waiting();
        let mut bytes: u64 = batch.attributes.iter().map(|a| a.bytes_held() as u64).sum();
        if waiting > 0
            && (waiting + spans > max
                || self.bytes_waiting() + spans * QUEUED_SPAN_BYTES + bytes > max_bytes)
        {
            return Err(batch);
        }
        if bytes > 0
            && self.attribute_bytes > 0
            && self.attribute_bytes + bytes > max_attribute_bytes
        {
            for attributes in &mut batch.attributes {
                *attributes = attributes.without_values();
            }
            bytes = 0;
        }
        match self.tx.try_send(batch) {
            Ok(()) => {
                self.waiting.push_back((spans, bytes));
                self.spans += spans;
                self.attribute_bytes += bytes;
                self.last = spans;
                self.last_bytes = spans * QUEUED_SPAN_BYTES + bytes;
                Ok(())
            }
            Err(error) => Err(error.into_inner()),
        }
    }
}

impl Shared {
    /// Whether a request may be served: no token is required, or its `Authorization` header
    /// carries it. A request refused here is counted (its body is never read).
    fn authenticated(&self, headers: &::http::HeaderMap) -> bool {
        let Some(token) = &self.bearer else {
            return true;
        };
        let value = headers
            .get(::http::header::AUTHORIZATION)
            .map(::http::HeaderValue::as_bytes);
        if token.accepts(value) {
            return true;
        }
        self.stats
            .requests_unauthenticated
            .fetch_add(1, Ordering::Relaxed);
        false
    }

    /// The cheap first gate, before a request's body is read: a permit to read and decode it,
    /// once one is free and the queue has room for a request the size of the last one taken,
    /// waited for up to [`ADMISSION_WAIT`]; `None` past that. A refusal is counted here (its
    /// spans are unknown: the body is never read).
    async fn begin(&self) -> Option<OwnedSemaphorePermit> {
        let deadline = tokio::time::Instant::now() + ADMISSION_WAIT;
        let room = !self.queue_full() || self.wait_for_room(deadline).await;
        let permit = if room {
            tokio::time::timeout_at(deadline, self.inflight.clone().acquire_owned())
                .await
                .ok()
                .and_then(Result::ok)
        } else {
            None
        };
        if permit.is_none() {
            self.refuse_unread();
        }
        permit
    }

    /// Whether the queue has no room for a request the size of the last one taken (or the
    /// channel no free slot).
    fn queue_full(&self) -> bool {
        let mut queue = self.queue();
        let waiting = queue.spans_waiting();
        queue.tx.capacity() == 0
            || waiting > 0
                && (waiting + queue.last > self.max_queued_spans
                    || queue.bytes_waiting() + queue.last_bytes > self.max_queued_bytes)
    }

    /// Waits, in arrival order, until the queue has room or `deadline` passes; whether it has.
    async fn wait_for_room(&self, deadline: tokio::time::Instant) -> bool {
        let Ok(_turn) = tokio::time::timeout_at(deadline, self.room.lock()).await else {
            return false;
        };
        loop {
            if !self.queue_full() {
                return true;
            }
            if tokio::time::Instant::now() + ADMISSION_POLL > deadline {
                return false;
            }
            tokio::time::sleep(ADMISSION_POLL).await;
        }
    }

    /// Counts a request refused before its spans were read (throttled).
    fn refuse_unread(&self) {
        self.stats.requests_refused.fetch_add(1, Ordering::Relaxed);
        self.stats
            .requests_refused_unread
            .fetch_add(1, Ordering::Relaxed);
    }

    fn queue(&self) -> std::sync::MutexGuard<'_, Queue> {
        match self.queue.lock() {
            Ok(guard) => guard,
            Err(poisoned) => poisoned.into_inner(),
        }
    }

    /// Decodes a request and offers it to the store without waiting; `repaired` counts the
    /// strings made valid UTF-8 before it was decoded.
    fn admit(
        &self,
        mut request: ExportTraceServiceRequest,
        repaired: decode::utf8::Utf8Repairs,
    ) -> Admission {
        let total = decode::count_spans(&request);
        let keep = decode::Keep {
            attributes: self.keep_attributes && !self.keep_raw,
            received: self.keep_received,
        };
        let mut decoded = decode::decode_request_keeping(&mut request, &mut self.interner(), keep);
        decoded.repaired.merge(repaired);
        self.offer(decoded, self.keep_raw.then_some(request), total)
    }

    /// An OTLP/JSON body: invalid UTF-8 repaired, then read as the Collector reads it.
    /// The error is a message for the client.
    fn admit_json(&self, body: &[u8]) -> Result<Admission, String> {
        let (body, repaired) = decode::utf8::repair_json(body);
        decode::otlp_json::parse_request(&body)
            .map(|request| self.admit(request, repaired))
            .map_err(|e| format!("invalid OTLP/JSON ExportTraceServiceRequest: {e}"))
    }

    /// The same for a protobuf body, read in place (the hot path: no request tree is built
    /// unless `record` wants the request itself).
    /// The error is a message for the client.
    fn admit_protobuf(&self, body: &bytes::Bytes) -> Result<Admission, String> {
        if self.keep_raw {
            use prost::Message as _;
            let invalid =
                |e: prost::DecodeError| format!("invalid protobuf ExportTraceServiceRequest: {e}");
            return match ExportTraceServiceRequest::decode(body.as_ref()) {
                Ok(request) => Ok(self.admit(request, decode::utf8::Utf8Repairs::default())),
                // prost refuses invalid UTF-8: repair the strings, as the in-place path reads
                // them, and try again.
                Err(error) => {
                    let Some(repaired) =
                        decode::utf8::repair(body.as_ref(), decode::utf8::Message::Request)
                            .filter(|r| r.count > 0)
                    else {
                        return Err(invalid(error));
                    };
                    let request = ExportTraceServiceRequest::decode(repaired.bytes.as_slice())
                        .map_err(invalid)?;
                    let mut repairs = decode::utf8::Utf8Repairs::default();
                    for _ in 0..repaired.count {
                        repairs
                            .add(|| "a string of the request (record repairs every field)".into());
                    }
                    Ok(self.admit(request, repairs))
                }
            };
        }
        let keep = decode::Keep {
            attributes: self.keep_attributes,
            received: self.keep_received,
        };
        let mut decoded = decode::decode_protobuf_keeping(body, &mut self.interner(), keep)
            .map_err(|e| e.to_string())?;
        if let Some(received) = decoded.received.as_mut() {
            // A copy of its own: the body is a slice of the connection's read buffer, and
            // holding it (until its chains are judged) would hold that whole buffer.
            received.bytes = bytes::Bytes::copy_from_slice(body);
        }
        let total = decoded.total();
        Ok(self.offer(decoded, None, total))
    }

    /// A free interner for one request's decoding, or the first one once it is free: the
    /// runtime's workers decode requests side by side (one interner held by each request
    /// for its whole decoding made the other worker sleep on it, and wake again).
    fn interner(&self) -> std::sync::MutexGuard<'_, decode::interner::Interner> {
        for interner in &self.interners {
            match interner.try_lock() {
                Ok(guard) => return guard,
                Err(std::sync::TryLockError::Poisoned(poisoned)) => return poisoned.into_inner(),
                Err(std::sync::TryLockError::WouldBlock) => {}
            }
        }
        match self.interners[0].lock() {
            Ok(guard) => guard,
            Err(poisoned) => poisoned.into_inner(),
        }
    }

    fn offer(
        &self,
        decoded: decode::decoded_request::DecodedRequest,
        raw: Option<ExportTraceServiceRequest>,
        total: u64,
    ) -> Admission {
        let accepted = decoded.spans.len() as u64;
        let message = decoded.message();
        let batch = Batch {
            spans: decoded.spans,
            attributes: decoded.attributes,
            raw,
            received: decoded.received,
        };
        // Full or closed: either way the store cannot take it now.
        if (accepted > 0 || batch.raw.is_some())
            && self
                .queue()
                .try_send(
                    batch,
                    self.max_queued_spans,
                    self.max_queued_bytes,
                    self.max_queued_attribute_bytes,
                )
                .is_err()
        {
            self.stats.requests_refused.fetch_add(1, Ordering::Relaxed);
            self.stats.spans_refused.fetch_add(total, Ordering::Relaxed);
            return Admission::Throttled;
        }
        self.stats.requests_accepted.fetch_add(1, Ordering::Relaxed);
        self.stats
            .spans_accepted
            .fetch_add(accepted, Ordering::Relaxed);
        self.stats
            .spans_rejected
            .fetch_add(decoded.rejected, Ordering::Relaxed);
        Admission::Accepted {
            rejected: decoded.rejected,
            message,
        }
    }

    fn reject_request(&self) {
        self.stats.requests_rejected.fetch_add(1, Ordering::Relaxed);
    }

    fn ignore_request(&self) {
        self.stats.requests_ignored.fetch_add(1, Ordering::Relaxed);
    }
}

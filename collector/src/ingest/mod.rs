//! OTLP ingest: the network side of budget-top, in three rooms.
//!
//! Two receivers (OTLP/gRPC `TraceService` and OTLP/HTTP `POST /v1/traces`) decode each export
//! request into [`Batch`]es and hand them to the one loop that owns the store, over a bounded
//! channel: [`receive`] the receivers and what guards them, up to a body in hand; `admission`
//! the gates a request passes and the queue to the owner loop; [`decode`] a body into spans.
//! `error` is why a request is refused, answered on either transport. This file holds the
//! configuration, the counters and the running [`Ingest`].
//!
//! A producer is never blocked for long. Admission control refuses load past what the store can
//! take cheaply, and keeps memory bounded, counting what costs memory: requests being read
//! ([`IngestConfig::max_inflight`]), the bytes of their bodies
//! ([`IngestConfig::max_inflight_bytes`]) and the spans queued for the store
//! ([`IngestConfig::max_queued_spans`]). A request past a gate waits unread for
//! [`ADMISSION_WAIT`] at most, then is refused before its body is read: gRPC
//! `RESOURCE_EXHAUSTED` with `RetryInfo`, HTTP 503 with `Retry-After`, counted in
//! [`IngestStats`]. A request answered with success has all its valid spans in the channel.
//! One that can never succeed (malformed, too large, of an unknown type) gets an answer no SDK
//! retries (HTTP 400/413/415, gRPC `INVALID_ARGUMENT`). The gates, in order, and why they count
//! what they count: `docs/architecture.md`, "Ingest's admission control".

mod admission;
pub mod decode;
mod error;
pub mod receive;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use deadline_budget::carrier::Carriers;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::batch::Batch;
use receive::{auth, tls};
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
/// How long a throttled client is asked to wait before retrying.
pub const RETRY_AFTER: Duration = Duration::from_secs(1);
/// How long a request may wait, unread, for a slot to read it in and room in the queue before
/// it is refused with [`RETRY_AFTER`]: long enough to ride out the store's passing lag, short
/// beside an exporter's own timeout (10 s in the OpenTelemetry SDKs).
pub const ADMISSION_WAIT: Duration = Duration::from_millis(250);

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

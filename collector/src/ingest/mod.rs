//! OTLP ingest: the network side of budget-top.
//!
//! Two receivers (OTLP/gRPC `TraceService` and OTLP/HTTP `POST /v1/traces`) decode each export
//! request into [`Batch`]es and hand them to the one loop that owns the store, over a bounded
//! channel. A producer is never blocked: when the channel is full the request is refused with
//! the OTLP throttling answer (gRPC `RESOURCE_EXHAUSTED` with retry info, HTTP 503 with
//! `Retry-After`) and its spans are counted in [`IngestStats::spans_refused`]. A request that is
//! answered with success has all its valid spans in the channel: nothing accepted is lost.

pub mod decode;
mod grpc;
mod http;
mod limit;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context as _;
use deadline_budget::analysis::Span;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

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
/// How long a throttled client is asked to wait before retrying.
pub const RETRY_AFTER: Duration = Duration::from_secs(1);

/// What to listen on and how to hand batches over.
#[derive(Clone, Debug)]
pub struct IngestConfig {
    /// OTLP/gRPC listen address; `None` disables it. Port 0 picks a free port.
    pub grpc: Option<SocketAddr>,
    /// OTLP/HTTP listen address; `None` disables it. Port 0 picks a free port.
    pub http: Option<SocketAddr>,
    /// Largest request body accepted, before and after decompression.
    pub max_body: usize,
    /// Batches that may wait in the channel before requests are refused.
    pub channel_capacity: usize,
    /// Longest time a client may take to send a request body (a trickle is answered 408).
    pub body_timeout: Duration,
    /// Connections held open at once per receiver; more wait until one closes.
    pub max_connections: usize,
    /// A connection on which the client sends nothing for this long is closed.
    pub idle_timeout: Duration,
    /// Keep each span's raw attributes in [`Batch::attributes`] (for the detail view).
    pub keep_attributes: bool,
    /// Keep the whole request in [`Batch::raw`] (for `record`).
    pub keep_raw: bool,
    /// Allow listening on an address other than loopback (other machines could then send
    /// spans). Off by default: a non-loopback address is refused unless this is set.
    pub allow_remote: bool,
}

impl Default for IngestConfig {
    fn default() -> Self {
        Self {
            grpc: DEFAULT_GRPC.parse().ok(),
            http: DEFAULT_HTTP.parse().ok(),
            max_body: DEFAULT_MAX_BODY,
            channel_capacity: 1024,
            body_timeout: DEFAULT_BODY_TIMEOUT,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
            keep_attributes: true,
            keep_raw: false,
            allow_remote: false,
        }
    }
}

/// One export request, decoded.
#[derive(Debug)]
pub struct Batch {
    /// The valid spans of the request.
    pub spans: Vec<Span>,
    /// Raw attributes, same index as `spans`; empty unless `keep_attributes`.
    pub attributes: Vec<decode::RawAttributes>,
    /// The request as received; `None` unless `keep_raw`.
    pub raw: Option<ExportTraceServiceRequest>,
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
    /// Spans handed to the store.
    pub spans_accepted: AtomicU64,
    /// Spans refused because the store could not keep up.
    pub spans_refused: AtomicU64,
    /// Spans rejected as invalid (wrong id lengths), reported in `partial_success`.
    pub spans_rejected: AtomicU64,
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
    /// See [`IngestStats::spans_accepted`].
    pub spans_accepted: u64,
    /// See [`IngestStats::spans_refused`].
    pub spans_refused: u64,
    /// See [`IngestStats::spans_rejected`].
    pub spans_rejected: u64,
}

impl IngestStats {
    /// A snapshot of the counters.
    pub fn snapshot(&self) -> IngestCounts {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        IngestCounts {
            requests_accepted: get(&self.requests_accepted),
            requests_rejected: get(&self.requests_rejected),
            requests_refused: get(&self.requests_refused),
            spans_accepted: get(&self.spans_accepted),
            spans_refused: get(&self.spans_refused),
            spans_rejected: get(&self.spans_rejected),
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
    /// Decoded batches, for the loop that owns the store.
    pub receiver: mpsc::Receiver<Batch>,
    /// Shared counters.
    pub stats: Arc<IngestStats>,
    /// Cancel to stop both receivers.
    pub shutdown_token: CancellationToken,
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
}

/// Binds the receivers and starts serving. Must run inside a tokio runtime. A port already in
/// use gives an error naming the address and the flag that changes it.
pub async fn start(config: IngestConfig) -> anyhow::Result<Ingest> {
    let (tx, receiver) = mpsc::channel(config.channel_capacity.max(1));
    let stats = Arc::new(IngestStats::default());
    let shared = Arc::new(Shared {
        tx,
        stats: stats.clone(),
        interner: Mutex::new(decode::Interner::default()),
        keep_attributes: config.keep_attributes,
        keep_raw: config.keep_raw,
    });
    let token = CancellationToken::new();
    for (addr, flag) in [(config.grpc, "--grpc"), (config.http, "--http")] {
        if let Some(addr) = addr {
            check_loopback(addr, flag, config.allow_remote)?;
        }
    }
    let grpc_listener = match config.grpc {
        Some(addr) => Some(bind(addr, "--grpc").await?),
        None => None,
    };
    let http_listener = match config.http {
        Some(addr) => Some(bind(addr, "--http").await?),
        None => None,
    };
    let mut grpc_addr = None;
    if let Some(listener) = grpc_listener {
        grpc_addr = Some(listener.local_addr()?);
        grpc::spawn(
            limit::LimitedListener::new(listener, config.max_connections, config.idle_timeout),
            shared.clone(),
            config.max_body,
            config.body_timeout,
            token.clone(),
        );
    }
    let mut http_addr = None;
    if let Some(listener) = http_listener {
        http_addr = Some(listener.local_addr()?);
        http::spawn(
            limit::LimitedListener::new(listener, config.max_connections, config.idle_timeout),
            shared.clone(),
            config.max_body,
            config.body_timeout,
            token.clone(),
        );
    }
    Ok(Ingest {
        grpc_addr,
        http_addr,
        receiver,
        stats,
        shutdown_token: token,
    })
}

async fn bind(addr: SocketAddr, flag: &str) -> anyhow::Result<tokio::net::TcpListener> {
    tokio::net::TcpListener::bind(addr).await.with_context(|| {
        format!("cannot listen on {addr} (change it with {flag} ADDR, port 0 picks a free one)")
    })
}

/// What the receivers share: the channel sender, the counters and the name interner.
#[derive(Debug)]
struct Shared {
    tx: mpsc::Sender<Batch>,
    stats: Arc<IngestStats>,
    interner: Mutex<decode::Interner>,
    keep_attributes: bool,
    keep_raw: bool,
}

/// How a request was handled, for the transport to answer.
#[derive(Debug, PartialEq, Eq)]
enum Admission {
    /// Accepted; `rejected` spans were invalid (partial success) for the reason given.
    Accepted { rejected: u64, message: String },
    /// The store is behind: retry later.
    Throttled,
}

impl Shared {
    /// Decodes a request and offers it to the store without waiting.
    fn admit(&self, mut request: ExportTraceServiceRequest) -> Admission {
        let total = decode::count_spans(&request);
        let keep_attributes = self.keep_attributes && !self.keep_raw;
        let decoded = decode::decode_request(&mut request, &mut self.interner(), keep_attributes);
        self.offer(decoded, self.keep_raw.then_some(request), total)
    }

    /// The same for a protobuf body, read in place (the hot path: no request tree is built
    /// unless `record` wants the request itself).
    /// The error is a message for the client.
    fn admit_protobuf(&self, body: &[u8]) -> Result<Admission, String> {
        if self.keep_raw {
            use prost::Message as _;
            return ExportTraceServiceRequest::decode(body)
                .map(|request| self.admit(request))
                .map_err(|e| format!("invalid protobuf ExportTraceServiceRequest: {e}"));
        }
        let decoded = decode::decode_protobuf(body, &mut self.interner(), self.keep_attributes)
            .map_err(|e| e.to_string())?;
        let total = decoded.total();
        Ok(self.offer(decoded, None, total))
    }

    fn interner(&self) -> std::sync::MutexGuard<'_, decode::Interner> {
        match self.interner.lock() {
            Ok(guard) => guard,
            Err(poisoned) => poisoned.into_inner(),
        }
    }

    fn offer(
        &self,
        decoded: decode::Decoded,
        raw: Option<ExportTraceServiceRequest>,
        total: u64,
    ) -> Admission {
        let accepted = decoded.spans.len() as u64;
        let batch = Batch {
            spans: decoded.spans,
            attributes: decoded.attributes,
            raw,
        };
        // Full or closed: either way the store cannot take it now.
        if (accepted > 0 || batch.raw.is_some()) && self.tx.try_send(batch).is_err() {
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
            message: decoded.first_error.unwrap_or_default(),
        }
    }

    fn reject_request(&self) {
        self.stats.requests_rejected.fetch_add(1, Ordering::Relaxed);
    }
}

/// Receivers listen on loopback unless the user asked for more on purpose: spans from other
/// machines are then accepted, which is a choice, never a default.
fn check_loopback(addr: SocketAddr, flag: &str, allow_remote: bool) -> anyhow::Result<()> {
    if addr.ip().is_loopback() || allow_remote {
        return Ok(());
    }
    anyhow::bail!(
        "refusing to listen on {addr} ({flag}): it is not a loopback address, so other machines \
         could send spans; pass --allow-remote to listen there on purpose"
    )
}

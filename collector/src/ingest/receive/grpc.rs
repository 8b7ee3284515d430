//! OTLP/gRPC: `TraceService/Export`, gzip accepted, throttled with RESOURCE_EXHAUSTED (and
//! retry info); `MetricsService/Export` and `LogsService/Export` answered OK and dropped.
//!
//! The request message is taken as bytes (a pass-through codec) and read in place by
//! [`decode_protobuf`](crate::ingest::decode::decode_protobuf): building prost's request tree
//! (a `String` per attribute key and value) cost more than everything else ingest does.
//!
//! A request that can never succeed gets `INVALID_ARGUMENT`, which no SDK retries, and is
//! counted as rejected: a malformed message, and one refused while it was read (over
//! `--max-body`, before or after gzip, or corrupt compression), which tonic answers with
//! `OUT_OF_RANGE` or `RESOURCE_EXHAUSTED` without retry info: the OTLP specification lists the
//! first as retryable, and the stock Python exporter retries both.

use std::convert::Infallible;
use std::marker::PhantomData;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};

use bytes::{Buf as _, Bytes};
use opentelemetry_proto::tonic::collector::logs::v1::ExportLogsServiceResponse;
use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceResponse;
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTracePartialSuccess, ExportTraceServiceResponse,
};
use prost::Message as _;
use tokio_util::sync::CancellationToken;
use tonic::codec::{
    Codec, CompressionEncoding, DecodeBuf, Decoder, EnabledCompressionEncodings, EncodeBuf, Encoder,
};
use tonic::{Code, Request, Response, Status};

use super::connections::ConnectionTag;
use crate::ingest::admission::{Admission, Shared};
use crate::ingest::error::IngestError;

/// The gRPC service name of OTLP trace export.
const SERVICE: &str = "opentelemetry.proto.collector.trace.v1.TraceService";
/// Its one method.
const EXPORT: &str = "/opentelemetry.proto.collector.trace.v1.TraceService/Export";

/// HTTP/2 streams one client may have open on one connection (what a client past it waits
/// for is its own business, not the server's memory; docs/performance.md, "Streams per
/// connection").
const MAX_STREAMS_PER_CONNECTION: u32 = 256;

/// Bytes a client may send on one stream before the server reads them (hyper's default is
/// 1 MiB): room for a whole request of the SDKs' default 512 spans, so that it arrives without
/// waiting for the server's `WINDOW_UPDATE`s (each a write by the server and a wake-up on both
/// sides). A request refused unread is answered at once, and what the client sent meanwhile (up
/// to this) is read and thrown away; since refused requests first wait for room
/// (`ADMISSION_WAIT`), that no longer costs goodput (docs/performance.md, "The gRPC stream
/// window").
const STREAM_WINDOW: u32 = 256 * 1024;

/// A signal's `Export` as the receiver serves it: its gRPC service, its method (the path, and
/// the name the UNIMPLEMENTED answer gives), the codec its message is read with and the method
/// run on it. Every signal's message is read through the same gate, up to `--max-body`.
trait Signal: Send + Sync + 'static {
    const NAME: &'static str;
    const EXPORT: &'static str;
    const METHOD: &'static str;
    type Codec: Codec + Send + 'static;
    type Method: tonic::server::UnaryService<
            <Self::Codec as Codec>::Decode,
            Response = <Self::Codec as Codec>::Encode,
            Future: Send,
        > + Send
        + 'static;
    fn codec() -> Self::Codec;
    /// The method for one request; it sets `ran` when it runs (the message was read whole).
    fn method(shared: Arc<Shared>, ran: Arc<AtomicBool>) -> Self::Method;
}

/// Traces: read in place and admitted.
#[derive(Debug)]
struct Traces;

impl Signal for Traces {
    const NAME: &'static str = SERVICE;
    const EXPORT: &'static str = EXPORT;
    const METHOD: &'static str = "TraceService/Export";
    type Codec = BytesCodec;
    type Method = Export;
    fn codec() -> BytesCodec {
        BytesCodec
    }
    fn method(shared: Arc<Shared>, ran: Arc<AtomicBool>) -> Export {
        Export { shared, ran }
    }
}

/// A signal's service as a tower service (what tonic's generated server is, with our codecs).
#[derive(Debug)]
struct Receiver<S> {
    shared: Arc<Shared>,
    max_body: usize,
    signal: PhantomData<fn() -> S>,
}

impl<S> Receiver<S> {
    fn new(shared: Arc<Shared>, max_body: usize) -> Self {
        Receiver {
            shared,
            max_body,
            signal: PhantomData,
        }
    }
}

impl<S> Clone for Receiver<S> {
    fn clone(&self) -> Self {
        Receiver::new(self.shared.clone(), self.max_body)
    }
}

impl<S: Signal> tonic::server::NamedService for Receiver<S> {
    const NAME: &'static str = S::NAME;
}

impl<S, B> tower::Service<http::Request<B>> for Receiver<S>
where
    S: Signal,
    B: tonic::codegen::Body + Send + 'static,
    B::Error: Into<tonic::codegen::StdError> + Send + 'static,
{
    type Response = http::Response<tonic::body::Body>;
    type Error = Infallible;
    type Future = futures::future::BoxFuture<'static, Result<Self::Response, Infallible>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        let shared = self.shared.clone();
        let ran = Arc::new(AtomicBool::new(false));
        let method = S::method(shared.clone(), ran.clone());
        serve_export(
            shared,
            self.max_body,
            request,
            (S::EXPORT, S::METHOD),
            S::codec(),
            method,
            ran,
        )
    }
}

/// One unary `Export` through the admission gate, for every signal: a path other than
/// `served.0` (the method `served.1`) is UNIMPLEMENTED (rejected); past the gate the request is
/// throttled before its message is read; the message is read with its bytes counted against
/// `--max-inflight-bytes` (cut off there: throttled) and handed to `method` (which sets `ran`);
/// a message tonic refused while reading it is rejected (see [`refused_unread`]).
fn serve_export<B, C, M>(
    shared: Arc<Shared>,
    max_body: usize,
    request: http::Request<B>,
    served: (&'static str, &'static str),
    codec: C,
    method: M,
    ran: Arc<AtomicBool>,
) -> futures::future::BoxFuture<'static, Result<http::Response<tonic::body::Body>, Infallible>>
where
    B: tonic::codegen::Body + Send + 'static,
    B::Error: Into<tonic::codegen::StdError> + Send + 'static,
    C: Codec + Send + 'static,
    M: tonic::server::UnaryService<C::Decode, Response = C::Encode> + Send + 'static,
    M::Future: Send,
{
    let (path, served) = served;
    // `--bearer-token-file`: checked before anything else, the message never read; never
    // retried (UNAUTHENTICATED is not a retryable code in OTLP).
    if !shared.authenticated(request.headers()) {
        let error = IngestError::Unauthenticated {
            send: "the metadata authorization",
        };
        let answer = refuse(&shared, error).into_http();
        return Box::pin(async { Ok(answer) });
    }
    if request.uri().path() != path {
        let answer = refuse(&shared, IngestError::NoMethod { served }).into_http();
        return Box::pin(async move { Ok(answer) });
    }
    let busy = request
        .extensions()
        .get::<ConnectionTag>()
        .map(ConnectionTag::busy);
    Box::pin(async move {
        // Waited for a moment, then refused before the message is read: the cheap answer to
        // load past capacity. The permit is held while the message is read and handled.
        let Some(_permit) = shared.begin().await else {
            return Ok(refuse(&shared, IngestError::Throttled).into_http());
        };
        let (parts, body) = request.into_parts();
        let (body, held) = shared.body_bytes.meter(body);
        let request = http::Request::from_parts(parts, body);
        let _busy = busy;
        let response = grpc(codec, max_body).unary(method, request).await;
        if held.over() {
            // Cut off mid-body: budget-top holds as many request bytes as it may.
            shared.refuse_unread();
            return Ok(refuse(&shared, IngestError::Throttled).into_http());
        }
        Ok(refused_unread(response, &ran, &shared, max_body))
    })
}

/// tonic's server for one unary method: gzip accepted and answered, messages over `max_body`
/// (before or after decompression) refused as they are read.
fn grpc<C: Codec>(codec: C, max_body: usize) -> tonic::server::Grpc<C> {
    let mut gzip = EnabledCompressionEncodings::default();
    gzip.enable(CompressionEncoding::Gzip);
    tonic::server::Grpc::new(codec)
        .apply_compression_config(gzip, gzip)
        .apply_max_message_size_config(Some(max_body), None)
}

/// tonic's answer when the method never ran (`ran` unset): it refused the message while
/// reading it. A request refused that way can never succeed; it is answered
/// `INVALID_ARGUMENT` (never retried) instead of tonic's `OUT_OF_RANGE` or
/// `RESOURCE_EXHAUSTED` (retried by SDKs), and counted as rejected.
fn refused_unread(
    response: http::Response<tonic::body::Body>,
    ran: &AtomicBool,
    shared: &Shared,
    max_body: usize,
) -> http::Response<tonic::body::Body> {
    if ran.load(Ordering::Relaxed) {
        return response;
    }
    let Some(status) = Status::from_header_map(response.headers()) else {
        return response;
    };
    if status.code() == Code::Ok {
        return response;
    }
    let said = status.message().to_string();
    let error = match status.code() {
        Code::OutOfRange | Code::ResourceExhausted => IngestError::MessageTooLarge {
            max: max_body,
            said,
        },
        _ => IngestError::UnreadableMessage(said),
    };
    refuse(shared, error).into_http()
}

/// The `Export` method: the request's protobuf bytes in, the OTLP response out.
#[derive(Debug)]
struct Export {
    shared: Arc<Shared>,
    /// Set when the method runs: the message was read whole.
    ran: Arc<AtomicBool>,
}

impl tonic::server::UnaryService<Bytes> for Export {
    type Response = ExportTraceServiceResponse;
    type Future = std::future::Ready<Result<Response<ExportTraceServiceResponse>, Status>>;

    fn call(&mut self, request: Request<Bytes>) -> Self::Future {
        self.ran.store(true, Ordering::Relaxed);
        std::future::ready(match self.shared.admit_protobuf(request.get_ref()) {
            Ok(Admission::Accepted { rejected, message }) => {
                Ok(Response::new(response(rejected, message)))
            }
            Ok(Admission::Throttled) => Err(refuse(&self.shared, IngestError::Throttled)),
            Err(message) => Err(refuse(&self.shared, IngestError::Malformed(message))),
        })
    }
}

/// The answer to a refused request, counted as rejected when it can never succeed.
fn refuse(shared: &Shared, error: IngestError) -> Status {
    if error.is_rejected() {
        shared.reject_request();
    }
    error.grpc_status()
}

/// Requests as bytes, responses encoded by prost.
#[derive(Clone, Copy, Debug, Default)]
struct BytesCodec;

impl Codec for BytesCodec {
    type Encode = ExportTraceServiceResponse;
    type Decode = Bytes;
    type Encoder = BytesCodec;
    type Decoder = BytesCodec;

    fn encoder(&mut self) -> Self::Encoder {
        BytesCodec
    }

    fn decoder(&mut self) -> Self::Decoder {
        BytesCodec
    }
}

impl Encoder for BytesCodec {
    type Item = ExportTraceServiceResponse;
    type Error = Status;

    fn encode(&mut self, item: Self::Item, dst: &mut EncodeBuf<'_>) -> Result<(), Status> {
        item.encode(dst)
            .map_err(|e| Status::internal(format!("cannot encode the response: {e}")))
    }
}

impl Decoder for BytesCodec {
    type Item = Bytes;
    type Error = Status;

    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<Bytes>, Status> {
        Ok(Some(src.copy_to_bytes(src.remaining())))
    }
}

/// A signal budget-top does not read (metrics, logs): its `Export` is answered with the empty
/// success response and the request dropped, counted as ignored.
trait IgnoredSignal: Send + Sync + 'static {
    /// The gRPC service name.
    const NAME: &'static str;
    /// Its `Export` method's path.
    const EXPORT: &'static str;
    /// The method's response (sent empty).
    type Response: prost::Message + Default + Send + Sync + 'static;
}

#[derive(Debug)]
struct Metrics;

impl IgnoredSignal for Metrics {
    const NAME: &'static str = "opentelemetry.proto.collector.metrics.v1.MetricsService";
    const EXPORT: &'static str = "/opentelemetry.proto.collector.metrics.v1.MetricsService/Export";
    type Response = ExportMetricsServiceResponse;
}

#[derive(Debug)]
struct Logs;

impl IgnoredSignal for Logs {
    const NAME: &'static str = "opentelemetry.proto.collector.logs.v1.LogsService";
    const EXPORT: &'static str = "/opentelemetry.proto.collector.logs.v1.LogsService/Export";
    type Response = ExportLogsServiceResponse;
}

impl<S: IgnoredSignal> Signal for S {
    const NAME: &'static str = <S as IgnoredSignal>::NAME;
    const EXPORT: &'static str = <S as IgnoredSignal>::EXPORT;
    const METHOD: &'static str = "Export";
    type Codec = DiscardCodec<S::Response>;
    type Method = DropExport<S>;
    fn codec() -> Self::Codec {
        DiscardCodec(PhantomData)
    }
    fn method(shared: Arc<Shared>, ran: Arc<AtomicBool>) -> DropExport<S> {
        DropExport {
            shared,
            ran,
            signal: PhantomData,
        }
    }
}

/// The ignored signal's `Export`: counted, answered with the empty response.
#[derive(Debug)]
struct DropExport<S> {
    shared: Arc<Shared>,
    ran: Arc<AtomicBool>,
    signal: PhantomData<fn() -> S>,
}

impl<S: IgnoredSignal> tonic::server::UnaryService<()> for DropExport<S> {
    type Response = S::Response;
    type Future = std::future::Ready<Result<Response<S::Response>, Status>>;

    fn call(&mut self, _request: Request<()>) -> Self::Future {
        self.ran.store(true, Ordering::Relaxed);
        self.shared.ignore_request();
        std::future::ready(Ok(Response::new(S::Response::default())))
    }
}

/// Requests skipped unread, responses encoded by prost.
#[derive(Debug)]
struct DiscardCodec<R>(PhantomData<fn() -> R>);

impl<R: prost::Message + Default + Send + 'static> Codec for DiscardCodec<R> {
    type Encode = R;
    type Decode = ();
    type Encoder = DiscardCodec<R>;
    type Decoder = DiscardCodec<R>;

    fn encoder(&mut self) -> Self::Encoder {
        DiscardCodec(PhantomData)
    }

    fn decoder(&mut self) -> Self::Decoder {
        DiscardCodec(PhantomData)
    }
}

impl<R: prost::Message + Default + Send + 'static> Encoder for DiscardCodec<R> {
    type Item = R;
    type Error = Status;

    fn encode(&mut self, item: R, dst: &mut EncodeBuf<'_>) -> Result<(), Status> {
        item.encode(dst)
            .map_err(|e| Status::internal(format!("cannot encode the response: {e}")))
    }
}

impl<R: prost::Message + Default + Send + 'static> Decoder for DiscardCodec<R> {
    type Item = ();
    type Error = Status;

    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<()>, Status> {
        src.advance(src.remaining());
        Ok(Some(()))
    }
}

pub(super) fn response(rejected: u64, message: String) -> ExportTraceServiceResponse {
    ExportTraceServiceResponse {
        // Rejected spans, or a warning (strings repaired) with none rejected: OTLP's
        // partial_success carries both.
        partial_success: (rejected > 0 || !message.is_empty()).then_some(
            ExportTracePartialSuccess {
                rejected_spans: rejected as i64,
                error_message: message,
            },
        ),
    }
}

pub(super) fn spawn(
    listener: super::tls::Listener,
    shared: Arc<Shared>,
    max_body: usize,
    timeout: std::time::Duration,
    token: CancellationToken,
) {
    let metrics = Receiver::<Metrics>::new(shared.clone(), max_body);
    let logs = Receiver::<Logs>::new(shared.clone(), max_body);
    let service = Receiver::<Traces>::new(shared, max_body);
    tokio::spawn(async move {
        // Accept errors are retried inside the listener, so the stream never ends the server.
        let incoming = futures::stream::unfold(listener, |mut listener| async move {
            let (stream, _) = axum::serve::Listener::accept(&mut listener).await;
            Some((Ok::<_, std::io::Error>(stream), listener))
        });
        let result = tonic::transport::Server::builder()
            // A request that trickles in is cut off instead of holding a slot forever.
            .timeout(timeout)
            // No per-connection concurrency limit: one would make requests past it wait
            // unseen inside the server; the admission gate refuses them instead.
            .max_concurrent_streams(MAX_STREAMS_PER_CONNECTION)
            .initial_stream_window_size(Some(STREAM_WINDOW))
            // Frames as large as the stream window lets a client send at once: a whole request
            // in one frame, and fewer reads.
            .max_frame_size(Some(STREAM_WINDOW))
            .add_service(service)
            .add_service(metrics)
            .add_service(logs)
            .serve_with_incoming_shutdown(incoming, token.cancelled_owned())
            .await;
        if let Err(error) = result {
            tracing::error!(%error, "OTLP/gRPC receiver stopped");
        }
    });
}

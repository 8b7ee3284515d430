//! OTLP/gRPC: `TraceService/Export`, gzip accepted, throttled with RESOURCE_EXHAUSTED.
//!
//! The request message is taken as bytes (a pass-through codec) and read in place by
//! [`decode::decode_protobuf`](super::decode::decode_protobuf): building prost's request tree
//! (a `String` per attribute key and value) cost more than everything else ingest does.

use std::convert::Infallible;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::{Buf as _, Bytes};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTracePartialSuccess, ExportTraceServiceResponse,
};
use prost::Message as _;
use tokio_util::sync::CancellationToken;
use tonic::codec::{
    Codec, CompressionEncoding, DecodeBuf, Decoder, EnabledCompressionEncodings, EncodeBuf, Encoder,
};
use tonic::{Code, Request, Response, Status};
use tonic_types::{ErrorDetails, StatusExt as _};

use super::{Admission, RETRY_AFTER, Shared};

/// The gRPC service name of OTLP trace export.
const SERVICE: &str = "opentelemetry.proto.collector.trace.v1.TraceService";
/// Its one method.
const EXPORT: &str = "/opentelemetry.proto.collector.trace.v1.TraceService/Export";

/// HTTP/2 streams one client may have open on one connection (what a client past it waits
/// for is its own business, not the server's memory).
const MAX_STREAMS_PER_CONNECTION: u32 = 256;

/// Bytes a client may send on one stream before the server reads them (hyper's default is
/// 1 MiB). A request refused unread is answered at once, but what the client sent meanwhile
/// still arrives and is thrown away: with 1 MiB that was the whole body.
const STREAM_WINDOW: u32 = 64 * 1024;

/// `TraceService` as a tower service (what tonic's generated server is, with our codec).
#[derive(Clone, Debug)]
struct TraceService {
    shared: Arc<Shared>,
    max_body: usize,
}

impl tonic::server::NamedService for TraceService {
    const NAME: &'static str = SERVICE;
}

impl<B> tower::Service<http::Request<B>> for TraceService
where
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
        if request.uri().path() != EXPORT {
            return Box::pin(async {
                Ok(Status::unimplemented("only TraceService/Export is served").into_http())
            });
        }
        // Refused before the message is read: the cheap answer to load past capacity.
        let Some(permit) = self.shared.begin() else {
            return Box::pin(async { Ok(throttled().into_http()) });
        };
        let export = Export {
            shared: self.shared.clone(),
        };
        let max_body = self.max_body;
        Box::pin(async move {
            // Held while the message is read and decoded.
            let _permit = permit;
            let mut gzip = EnabledCompressionEncodings::default();
            gzip.enable(CompressionEncoding::Gzip);
            let mut grpc = tonic::server::Grpc::new(BytesCodec)
                .apply_compression_config(gzip, gzip)
                .apply_max_message_size_config(Some(max_body), None);
            Ok(grpc.unary(export, request).await)
        })
    }
}

/// The `Export` method: the request's protobuf bytes in, the OTLP response out.
#[derive(Debug)]
struct Export {
    shared: Arc<Shared>,
}

impl tonic::server::UnaryService<Bytes> for Export {
    type Response = ExportTraceServiceResponse;
    type Future = std::future::Ready<Result<Response<ExportTraceServiceResponse>, Status>>;

    fn call(&mut self, request: Request<Bytes>) -> Self::Future {
        std::future::ready(match self.shared.admit_protobuf(request.get_ref()) {
            Ok(Admission::Accepted { rejected, message }) => {
                Ok(Response::new(response(rejected, message)))
            }
            Ok(Admission::Throttled) => Err(throttled()),
            Err(message) => {
                self.shared.reject_request();
                Err(Status::invalid_argument(message))
            }
        })
    }
}

/// OTLP's throttling answer: retry after [`RETRY_AFTER`].
fn throttled() -> Status {
    Status::with_error_details(
        Code::ResourceExhausted,
        "budget-top is behind: retry later",
        ErrorDetails::with_retry_info(Some(RETRY_AFTER)),
    )
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
    listener: super::limit::LimitedListener,
    shared: Arc<Shared>,
    max_body: usize,
    timeout: std::time::Duration,
    token: CancellationToken,
) {
    let service = TraceService { shared, max_body };
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
            .add_service(service)
            .serve_with_incoming_shutdown(incoming, token.cancelled_owned())
            .await;
        if let Err(error) = result {
            tracing::error!(%error, "OTLP/gRPC receiver stopped");
        }
    });
}

//! OTLP/gRPC: the generated `TraceService`, gzip accepted, throttled with RESOURCE_EXHAUSTED.

use std::sync::Arc;

use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{
    TraceService, TraceServiceServer,
};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTracePartialSuccess, ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use tokio_util::sync::CancellationToken;
use tonic::codec::CompressionEncoding;
use tonic::{Code, Request, Response, Status};
use tonic_types::{ErrorDetails, StatusExt as _};

use super::{Admission, RETRY_AFTER, Shared};

#[derive(Debug)]
struct Receiver {
    shared: Arc<Shared>,
}

#[tonic::async_trait]
impl TraceService for Receiver {
    async fn export(
        &self,
        request: Request<ExportTraceServiceRequest>,
    ) -> Result<Response<ExportTraceServiceResponse>, Status> {
        match self.shared.admit(request.into_inner()) {
            Admission::Accepted { rejected, message } => {
                Ok(Response::new(response(rejected, message)))
            }
            Admission::Throttled => Err(Status::with_error_details(
                Code::ResourceExhausted,
                "budget-top is behind: retry later",
                ErrorDetails::with_retry_info(Some(RETRY_AFTER)),
            )),
        }
    }
}

pub(super) fn response(rejected: u64, message: String) -> ExportTraceServiceResponse {
    ExportTraceServiceResponse {
        partial_success: (rejected > 0).then_some(ExportTracePartialSuccess {
            rejected_spans: rejected as i64,
            error_message: message,
        }),
    }
}

pub(super) fn spawn(
    listener: super::limit::LimitedListener,
    shared: Arc<Shared>,
    max_body: usize,
    timeout: std::time::Duration,
    token: CancellationToken,
) {
    let service = TraceServiceServer::new(Receiver { shared })
        .accept_compressed(CompressionEncoding::Gzip)
        .send_compressed(CompressionEncoding::Gzip)
        .max_decoding_message_size(max_body);
    tokio::spawn(async move {
        // Accept errors are retried inside the listener, so the stream never ends the server.
        let incoming = futures::stream::unfold(listener, |mut listener| async move {
            let (stream, _) = axum::serve::Listener::accept(&mut listener).await;
            Some((Ok::<_, std::io::Error>(stream), listener))
        });
        let result = tonic::transport::Server::builder()
            // A request that trickles in is cut off instead of holding a slot forever.
            .timeout(timeout)
            .concurrency_limit_per_connection(64)
            .add_service(service)
            .serve_with_incoming_shutdown(incoming, token.cancelled_owned())
            .await;
        if let Err(error) = result {
            tracing::error!(%error, "OTLP/gRPC receiver stopped");
        }
    });
}

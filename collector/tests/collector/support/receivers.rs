//! Helpers for the tests that run the receivers in the test process (`budget_top::ingest`):
//! start them on port 0, take their batches, and speak to them by hand.

use std::net::SocketAddr;
use std::time::Duration;

use budget_top::batch::Batch;
use budget_top::ingest::{self, Ingest, IngestConfig};
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceResponse;
use opentelemetry_proto::tonic::collector::trace::v1::trace_service_client::TraceServiceClient;
use tokio::io::AsyncWriteExt as _;
use tokio::net::TcpStream;
use tonic::transport::Channel;

/// The start of an OTLP/HTTP protobuf request written by hand, up to its content type: the
/// test adds what it needs (a length, a token, the blank line).
pub const POST_PROTOBUF: &str =
    "POST /v1/traces HTTP/1.1\r\nhost: x\r\ncontent-type: application/x-protobuf\r\n";

/// The receivers `config` asks for (gRPC, HTTP or both), each on 127.0.0.1 port 0.
pub async fn receivers(config: IngestConfig) -> Ingest {
    let any_port = "127.0.0.1:0".parse().ok();
    ingest::start(IngestConfig {
        grpc: config.grpc.and(any_port),
        http: config.http.and(any_port),
        ..config
    })
    .await
    .unwrap()
}

/// The next batch the receivers give the store (10 s at most).
pub async fn next_batch(ingest: &mut Ingest) -> Batch {
    tokio::time::timeout(Duration::from_secs(10), ingest.receiver.recv())
        .await
        .unwrap()
        .unwrap()
}

/// The URL of the OTLP/HTTP receiver's traces.
pub fn traces_url(ingest: &Ingest) -> String {
    format!("http://{}/v1/traces", ingest.http_addr.unwrap())
}

/// A connection to the gRPC receiver.
pub async fn grpc_channel(ingest: &Ingest) -> Channel {
    Channel::from_shared(format!("http://{}", ingest.grpc_addr.unwrap()))
        .unwrap()
        .connect()
        .await
        .unwrap()
}

/// An OTLP/gRPC trace client of the gRPC receiver.
pub async fn grpc_client(ingest: &Ingest) -> TraceServiceClient<Channel> {
    TraceServiceClient::new(grpc_channel(ingest).await)
}

/// Exports `body` as it is (bytes no `ExportTraceServiceRequest` may hold) over gRPC.
pub async fn export_bytes(
    ingest: &Ingest,
    body: Vec<u8>,
) -> Result<ExportTraceServiceResponse, tonic::Status> {
    let mut raw = tonic::client::Grpc::new(grpc_channel(ingest).await);
    raw.ready().await.unwrap();
    raw.unary(
        tonic::Request::new(bytes::Bytes::from(body)),
        "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
            .parse()
            .unwrap(),
        budget_top::forward::client::RawCodec,
    )
    .await
    .map(tonic::Response::into_inner)
}

/// A TCP connection to `addr` that has sent `bytes` (a request's start, written by hand).
pub async fn sent(addr: SocketAddr, bytes: impl AsRef<[u8]>) -> TcpStream {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream.write_all(bytes.as_ref()).await.unwrap();
    stream
}

//! One export request to the backend and how it answered: OTLP/gRPC through tonic, or OTLP/HTTP
//! protobuf through hyper, gzip-compressed, over TCP or TLS (rustls: budget-top dials itself, so
//! the receivers' crypto serves the exporter too), with the token when one is given.
//!
//! The answer is sorted as the OTLP specification and the Collector's exporters sort it:
//! accepted (with the spans a partial success rejected), worth retrying (gRPC `UNAVAILABLE`,
//! `CANCELLED`, `DEADLINE_EXCEEDED`, `ABORTED`, `OUT_OF_RANGE`, `DATA_LOSS`, and
//! `RESOURCE_EXHAUSTED` only with `RetryInfo`; HTTP 429, 502, 503 and 504; no answer at all),
//! with the wait the backend asked for (`RetryInfo`, `Retry-After`), or refused for good.

use std::io::Write as _;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use bytes::{Buf as _, Bytes};
use http_body_util::{BodyExt as _, Full};
use hyper_util::rt::TokioIo;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceResponse;
use prost::Message as _;
use rustls::pki_types::ServerName;
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_util::either::Either;
use tonic::codec::{Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};
use tonic_types::StatusExt as _;

use super::endpoint::{Endpoint, Security, Transport};

/// How the backend answered one request.
#[derive(Debug, PartialEq, Eq)]
pub enum Answer {
    /// Accepted; `rejected` spans were refused in a partial success (`message` says why).
    Accepted { rejected: u64, message: String },
    /// Worth sending again, after `after` when the backend said so.
    Retry {
        after: Option<Duration>,
        why: String,
    },
    /// Refused for good: never sent again.
    Refused { why: String },
}

/// The gRPC method of OTLP trace export.
const EXPORT: &str = "/opentelemetry.proto.collector.trace.v1.TraceService/Export";

/// How long a connection may take to open (within the request's own timeout).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

type Stream = Either<TcpStream, tokio_rustls::client::TlsStream<TcpStream>>;

/// Dials the endpoint: TCP, then TLS when it speaks it.
#[derive(Clone)]
struct Dialer {
    authority: String,
    server_name: ServerName<'static>,
    tls: Option<TlsConnector>,
}

impl std::fmt::Debug for Dialer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dialer")
            .field("authority", &self.authority)
            .field("tls", &self.tls.is_some())
            .finish()
    }
}

impl Dialer {
    fn new(endpoint: &Endpoint, security: &Security) -> anyhow::Result<Dialer> {
        let server_name = ServerName::try_from(endpoint.host.clone())
            .map_err(|_| anyhow::anyhow!("{:?} is not a host name", endpoint.host))?;
        Ok(Dialer {
            authority: endpoint.authority(),
            server_name,
            tls: security.tls.clone().map(TlsConnector::from),
        })
    }

    async fn dial(&self) -> std::io::Result<Stream> {
        let tcp = tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(&self.authority))
            .await
            .map_err(|_| {
                std::io::Error::new(std::io::ErrorKind::TimedOut, "connect timed out")
            })??;
        let _ = tcp.set_nodelay(true);
        Ok(match &self.tls {
            Some(tls) => Either::Right(tls.connect(self.server_name.clone(), tcp).await?),
            None => Either::Left(tcp),
        })
    }
}

/// A client of the endpoint.
#[derive(Clone, Debug)]
pub enum Client {
    /// OTLP/gRPC.
    Grpc(GrpcClient),
    /// OTLP/HTTP protobuf.
    Http(HttpClient),
}

impl Client {
    /// A client of `endpoint` (no connection is made until the first request).
    pub fn new(endpoint: &Endpoint, security: &Security) -> anyhow::Result<Client> {
        let dialer = Dialer::new(endpoint, security)?;
        Ok(match endpoint.transport {
            Transport::Grpc => Client::Grpc(GrpcClient::new(dialer, security)?),
            Transport::Http => Client::Http(HttpClient {
                dialer,
                path: endpoint.path.clone(),
                authorization: security.authorization.clone(),
                idle: Arc::new(Mutex::new(Vec::new())),
            }),
        })
    }

    /// Sends one export request (`body`: its protobuf bytes, not compressed), waiting at most
    /// `timeout` for the answer (past it: worth retrying).
    pub async fn export(&self, body: Bytes, timeout: Duration) -> Answer {
        let sent = match self {
            Client::Grpc(client) => tokio::time::timeout(timeout, client.export(body)).await,
            Client::Http(client) => tokio::time::timeout(timeout, client.export(body)).await,
        };
        sent.unwrap_or_else(|_| Answer::Retry {
            after: None,
            why: format!("no answer within {timeout:?} (--forward-timeout)"),
        })
    }
}

/// OTLP/gRPC: a tonic channel over budget-top's own dialer.
#[derive(Clone, Debug)]
pub struct GrpcClient {
    channel: tonic::transport::Channel,
    authorization: Option<tonic::metadata::MetadataValue<tonic::metadata::Ascii>>,
}

impl GrpcClient {
    fn new(dialer: Dialer, security: &Security) -> anyhow::Result<GrpcClient> {
        let uri = format!("http://{}", dialer.authority);
        let endpoint = tonic::transport::Endpoint::from_shared(uri)?
            .connect_timeout(CONNECT_TIMEOUT)
            .tcp_nodelay(true);
        let connector = tower::service_fn(move |_: http::Uri| {
            let dialer = dialer.clone();
            async move { dialer.dial().await.map(TokioIo::new) }
        });
        let authorization = match &security.authorization {
            Some(value) => Some(
                tonic::metadata::MetadataValue::try_from(value.as_bytes())
                    .map_err(|_| anyhow::anyhow!("the token cannot be sent as gRPC metadata"))?,
            ),
            None => None,
        };
        Ok(GrpcClient {
            channel: endpoint.connect_with_connector_lazy(connector),
            authorization,
        })
    }

    async fn export(&self, body: Bytes) -> Answer {
        let mut grpc = tonic::client::Grpc::new(self.channel.clone())
            .send_compressed(tonic::codec::CompressionEncoding::Gzip)
            .accept_compressed(tonic::codec::CompressionEncoding::Gzip);
        if let Err(error) = grpc.ready().await {
            return Answer::Retry {
                after: None,
                why: format!("cannot connect: {error}"),
            };
        }
        let mut request = tonic::Request::new(body);
        if let Some(token) = &self.authorization {
            request
                .metadata_mut()
                .insert("authorization", token.clone());
        }
        let path = http::uri::PathAndQuery::from_static(EXPORT);
        match grpc.unary(request, path, RawCodec).await {
            Ok(response) => accepted(&response.into_inner()),
            Err(status) => grpc_answer(&status),
        }
    }
}

fn accepted(response: &ExportTraceServiceResponse) -> Answer {
    let partial = response.partial_success.as_ref();
    Answer::Accepted {
        rejected: partial.map_or(0, |p| u64::try_from(p.rejected_spans).unwrap_or(0)),
        message: partial.map(|p| p.error_message.clone()).unwrap_or_default(),
    }
}

/// A gRPC status sorted (see the module documentation).
fn grpc_answer(status: &tonic::Status) -> Answer {
    use tonic::Code;
    let retry_info = status
        .get_details_retry_info()
        .and_then(|info| info.retry_delay);
    let why = format!("gRPC {:?}: {}", status.code(), status.message());
    match status.code() {
        Code::Unavailable
        | Code::Cancelled
        | Code::DeadlineExceeded
        | Code::Aborted
        | Code::OutOfRange
        | Code::DataLoss => Answer::Retry {
            after: retry_info,
            why,
        },
        Code::ResourceExhausted if retry_info.is_some() => Answer::Retry {
            after: retry_info,
            why,
        },
        _ => Answer::Refused { why },
    }
}

/// Requests as their protobuf bytes, responses decoded by prost (public for the tests that send
/// bytes no `ExportTraceServiceRequest` holds).
#[derive(Clone, Copy, Debug, Default)]
pub struct RawCodec;

impl Codec for RawCodec {
    type Encode = Bytes;
    type Decode = ExportTraceServiceResponse;
    type Encoder = RawCodec;
    type Decoder = RawCodec;

    fn encoder(&mut self) -> Self::Encoder {
        RawCodec
    }

    fn decoder(&mut self) -> Self::Decoder {
        RawCodec
    }
}

impl Encoder for RawCodec {
    type Item = Bytes;
    type Error = tonic::Status;

    fn encode(&mut self, item: Bytes, dst: &mut EncodeBuf<'_>) -> Result<(), tonic::Status> {
        bytes::BufMut::put(dst, item);
        Ok(())
    }
}

impl Decoder for RawCodec {
    type Item = ExportTraceServiceResponse;
    type Error = tonic::Status;

    fn decode(
        &mut self,
        src: &mut DecodeBuf<'_>,
    ) -> Result<Option<ExportTraceServiceResponse>, tonic::Status> {
        let bytes = src.copy_to_bytes(src.remaining());
        // An answer that does not decode still said OK: nothing was refused.
        Ok(Some(
            ExportTraceServiceResponse::decode(bytes).unwrap_or_default(),
        ))
    }
}

/// OTLP/HTTP protobuf: HTTP/1.1 connections budget-top dials, kept open between requests.
#[derive(Clone, Debug)]
pub struct HttpClient {
    dialer: Dialer,
    path: String,
    authorization: Option<http::HeaderValue>,
    /// Connections open and idle.
    idle: Arc<Mutex<Vec<hyper::client::conn::http1::SendRequest<Full<Bytes>>>>>,
}

impl HttpClient {
    async fn connection(
        &self,
    ) -> Result<hyper::client::conn::http1::SendRequest<Full<Bytes>>, String> {
        loop {
            let idle = match self.idle.lock() {
                Ok(mut idle) => idle.pop(),
                Err(poisoned) => poisoned.into_inner().pop(),
            };
            match idle {
                Some(mut sender) if !sender.is_closed() => {
                    if sender.ready().await.is_ok() {
                        return Ok(sender);
                    }
                }
                Some(_) => {}
                None => break,
            }
        }
        let stream = self
            .dialer
            .dial()
            .await
            .map_err(|e| format!("cannot connect: {e}"))?;
        let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|e| format!("cannot speak HTTP/1.1: {e}"))?;
        tokio::spawn(async move {
            let _ = connection.await;
        });
        Ok(sender)
    }

    async fn export(&self, body: Bytes) -> Answer {
        let mut sender = match self.connection().await {
            Ok(sender) => sender,
            Err(why) => return Answer::Retry { after: None, why },
        };
        let mut gzip = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        let compressed = match gzip.write_all(&body).and_then(|()| gzip.finish()) {
            Ok(compressed) => compressed,
            Err(e) => {
                return Answer::Refused {
                    why: format!("cannot compress: {e}"),
                };
            }
        };
        let mut request = http::Request::post(&self.path)
            .header(http::header::HOST, &self.dialer.authority)
            .header(http::header::CONTENT_TYPE, "application/x-protobuf")
            .header(http::header::CONTENT_ENCODING, "gzip")
            .header(
                http::header::USER_AGENT,
                concat!("budget-top/", env!("CARGO_PKG_VERSION")),
            );
        if let Some(token) = &self.authorization {
            request = request.header(http::header::AUTHORIZATION, token);
        }
        let request = match request.body(Full::new(Bytes::from(compressed))) {
            Ok(request) => request,
            Err(e) => {
                return Answer::Refused {
                    why: format!("cannot make the request: {e}"),
                };
            }
        };
        let response = match sender.send_request(request).await {
            Ok(response) => response,
            Err(e) => {
                return Answer::Retry {
                    after: None,
                    why: format!("the connection failed: {e}"),
                };
            }
        };
        let status = response.status();
        let retry_after = response
            .headers()
            .get(http::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(retry_after);
        let body = response
            .into_body()
            .collect()
            .await
            .map(|b| b.to_bytes())
            .unwrap_or_default();
        if !sender.is_closed() {
            match self.idle.lock() {
                Ok(mut idle) => idle.push(sender),
                Err(poisoned) => poisoned.into_inner().push(sender),
            }
        }
        http_answer(status, retry_after, &body)
    }
}

/// An HTTP answer sorted (see the module documentation).
fn http_answer(status: http::StatusCode, retry_after: Option<Duration>, body: &[u8]) -> Answer {
    if status.is_success() {
        return accepted(&ExportTraceServiceResponse::decode(body).unwrap_or_default());
    }
    let text = String::from_utf8_lossy(&body[..body.len().min(200)]);
    let why = format!("HTTP {status}: {}", text.trim());
    match status.as_u16() {
        429 | 502 | 503 | 504 => Answer::Retry {
            after: retry_after,
            why,
        },
        _ => Answer::Refused { why },
    }
}

/// A `Retry-After` value: seconds, or an HTTP date.
fn retry_after(value: &str) -> Option<Duration> {
    let value = value.trim();
    if let Ok(seconds) = value.parse::<u64>() {
        return Some(Duration::from_secs(seconds));
    }
    let at = httpdate::parse_http_date(value).ok()?;
    Some(at.duration_since(SystemTime::now()).unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_sorted_as_otlp_says() {
        let retry = |a: &Answer| matches!(a, Answer::Retry { .. });
        for code in [429, 502, 503, 504] {
            let status = http::StatusCode::from_u16(code).unwrap();
            assert!(retry(&http_answer(status, None, b"")), "{code}");
        }
        for code in [400, 401, 403, 404, 413, 415, 500, 501] {
            let status = http::StatusCode::from_u16(code).unwrap();
            assert!(!retry(&http_answer(status, None, b"")), "{code}");
        }
        assert_eq!(retry_after("7"), Some(Duration::from_secs(7)));
        assert!(retry_after("Wed, 21 Oct 2015 07:28:00 GMT").is_some());
        assert_eq!(retry_after("soon"), None);
        let exhausted = tonic::Status::resource_exhausted("full");
        assert!(!retry(&grpc_answer(&exhausted)));
        let told = tonic::Status::with_error_details(
            tonic::Code::ResourceExhausted,
            "full",
            tonic_types::ErrorDetails::with_retry_info(Some(Duration::from_secs(2))),
        );
        assert_eq!(
            grpc_answer(&told),
            Answer::Retry {
                after: Some(Duration::from_secs(2)),
                why: "gRPC ResourceExhausted: full".into()
            }
        );
        assert!(retry(&grpc_answer(&tonic::Status::unavailable("down"))));
        assert!(!retry(&grpc_answer(&tonic::Status::unauthenticated("who"))));
        assert!(!retry(&grpc_answer(&tonic::Status::invalid_argument(
            "bad"
        ))));
    }
}

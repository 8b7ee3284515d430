//! Sending one encoded export request and reading its answer: OTLP/gRPC (the raw bytes
//! through a pass-through codec), OTLP/HTTP protobuf, or OTLP/HTTP over TLS; a token with each.

use std::time::Duration;

use bytes::{BufMut as _, Bytes};

use super::tls::{TlsDial, dial};
use super::{FloodError, Security, TLS_SERVER_NAME, Target};

/// The gRPC method of OTLP trace export.
const EXPORT_PATH: &str = "/opentelemetry.proto.collector.trace.v1.TraceService/Export";

/// How the receiver answered one request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Answer {
    Accepted,
    /// OTLP's "retry later": gRPC RESOURCE_EXHAUSTED, HTTP 429 or 503; with the wait the
    /// answer asked for, when it named one (gRPC `RetryInfo`, HTTP `Retry-After` in seconds).
    Throttled(Option<Duration>),
    Failed,
}

/// One connection to the receiver (a clone shares it: gRPC multiplexes requests over the one
/// HTTP/2 connection; HTTP/1.1 opens more connections to the pool as requests overlap), and
/// the `authorization` value sent with each request.
#[derive(Clone)]
pub(super) enum Sender {
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
    pub(super) async fn connect(target: Target, security: &Security) -> Result<Self, FloodError> {
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
    pub(super) async fn send(&mut self, body: Bytes) -> Answer {
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

//! OTLP/HTTP: `POST /v1/traces`, protobuf or JSON, gzip or not, answered in the request's own
//! encoding. Bodies are capped at `max_body` both on the wire and while decompressing, so a
//! gzip bomb is refused before it is allocated.

use std::io::Read as _;
use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use prost::Message as _;
use tokio_util::sync::CancellationToken;

use super::{Admission, RETRY_AFTER, Shared};

const PROTOBUF: &str = "application/x-protobuf";
const JSON: &str = "application/json";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Encoding {
    Protobuf,
    Json,
}

/// `google.rpc.Status`, the body OTLP/HTTP error responses carry.
#[derive(Clone, PartialEq, prost::Message, serde::Serialize)]
struct RpcStatus {
    #[prost(int32, tag = "1")]
    code: i32,
    #[prost(string, tag = "2")]
    message: String,
}

#[derive(Clone, Debug)]
struct HttpState {
    shared: Arc<Shared>,
    max_body: usize,
    body_timeout: Duration,
}

pub(super) fn spawn(
    listener: super::limit::LimitedListener,
    shared: Arc<Shared>,
    max_body: usize,
    body_timeout: Duration,
    token: CancellationToken,
) {
    let app = router(HttpState {
        shared,
        max_body,
        body_timeout,
    });
    tokio::spawn(async move {
        let result = axum::serve(listener, app)
            .with_graceful_shutdown(token.cancelled_owned())
            .await;
        if let Err(error) = result {
            tracing::error!(%error, "OTLP/HTTP receiver stopped");
        }
    });
}

fn router(state: HttpState) -> axum::Router {
    axum::Router::new()
        .route("/v1/traces", post(export))
        .layer(DefaultBodyLimit::disable())
        .with_state(state)
}

async fn export(State(state): State<HttpState>, headers: HeaderMap, body: Body) -> Response {
    let shared = &state.shared;
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let media = content_type
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    let encoding = match media.as_str() {
        PROTOBUF => Encoding::Protobuf,
        JSON => Encoding::Json,
        _ => {
            shared.reject_request();
            return (
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
                format!("unsupported content type {content_type:?}: send {PROTOBUF} or {JSON}"),
            )
                .into_response();
        }
    };
    let fail = |status: StatusCode, message: String| {
        shared.reject_request();
        error_response(encoding, status, message)
    };
    let read = tokio::time::timeout(
        state.body_timeout,
        axum::body::to_bytes(body, state.max_body),
    );
    let body = match read.await {
        Err(_elapsed) => {
            return fail(
                StatusCode::REQUEST_TIMEOUT,
                format!("request body not received within {:?}", state.body_timeout),
            );
        }
        Ok(Ok(bytes)) => bytes,
        Ok(Err(error)) => {
            let too_large = std::error::Error::source(&error)
                .is_some_and(|e| e.is::<http_body_util::LengthLimitError>())
                || error.to_string().contains("length limit");
            return if too_large {
                fail(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    format!(
                        "request body is over the limit of {} bytes (--max-body)",
                        state.max_body
                    ),
                )
            } else {
                fail(
                    StatusCode::BAD_REQUEST,
                    format!("could not read the request body: {error}"),
                )
            };
        }
    };
    let content_encoding = headers
        .get(header::CONTENT_ENCODING)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("identity")
        .trim()
        .to_ascii_lowercase();
    let body = match content_encoding.as_str() {
        "" | "identity" => body,
        "gzip" => match gunzip_capped(&body, state.max_body) {
            Ok(bytes) => bytes,
            Err(Gunzip::TooLarge) => {
                return fail(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    format!(
                        "decompressed body is over the limit of {} bytes (--max-body)",
                        state.max_body
                    ),
                );
            }
            Err(Gunzip::Corrupt(error)) => {
                return fail(
                    StatusCode::BAD_REQUEST,
                    format!("invalid gzip body: {error}"),
                );
            }
        },
        other => {
            return fail(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                format!("unsupported content encoding {other:?}: send gzip or identity"),
            );
        }
    };
    let admission = match encoding {
        Encoding::Protobuf => shared.admit_protobuf(&body),
        Encoding::Json => serde_json::from_slice::<ExportTraceServiceRequest>(&body)
            .map(|request| shared.admit(request))
            .map_err(|e| format!("invalid OTLP/JSON ExportTraceServiceRequest: {e}")),
    };
    let admission = match admission {
        Ok(admission) => admission,
        Err(message) => return fail(StatusCode::BAD_REQUEST, message),
    };
    match admission {
        Admission::Accepted { rejected, message } => {
            let response = super::grpc::response(rejected, message);
            match encoding {
                Encoding::Protobuf => {
                    ([(header::CONTENT_TYPE, PROTOBUF)], response.encode_to_vec()).into_response()
                }
                // A full success is `{}`: OTLP/JSON leaves unset fields out.
                Encoding::Json => {
                    let body = match &response.partial_success {
                        Some(partial) => {
                            serde_json::json!({ "partialSuccess": partial }).to_string()
                        }
                        None => "{}".to_string(),
                    };
                    ([(header::CONTENT_TYPE, JSON)], body).into_response()
                }
            }
        }
        Admission::Throttled => {
            let mut response = error_response(
                encoding,
                StatusCode::SERVICE_UNAVAILABLE,
                "budget-top is behind: retry later".into(),
            );
            if let Ok(value) = RETRY_AFTER.as_secs().to_string().parse() {
                response.headers_mut().insert(header::RETRY_AFTER, value);
            }
            response
        }
    }
}

fn error_response(encoding: Encoding, status: StatusCode, message: String) -> Response {
    // gRPC codes in the Status body: 3 INVALID_ARGUMENT, 8 RESOURCE_EXHAUSTED, 14 UNAVAILABLE.
    let code = match status {
        StatusCode::SERVICE_UNAVAILABLE => 14,
        StatusCode::PAYLOAD_TOO_LARGE => 8,
        _ => 3,
    };
    let body = RpcStatus { code, message };
    match encoding {
        Encoding::Protobuf => (
            status,
            [(header::CONTENT_TYPE, PROTOBUF)],
            body.encode_to_vec(),
        )
            .into_response(),
        Encoding::Json => (
            status,
            [(header::CONTENT_TYPE, JSON)],
            serde_json::to_vec(&body).unwrap_or_default(),
        )
            .into_response(),
    }
}

enum Gunzip {
    TooLarge,
    Corrupt(std::io::Error),
}

/// Decompresses at most `max + 1` bytes: a bomb is detected without allocating it.
fn gunzip_capped(body: &[u8], max: usize) -> Result<Bytes, Gunzip> {
    let mut out = Vec::new();
    let decoder = flate2::read::MultiGzDecoder::new(body);
    decoder
        .take(max as u64 + 1)
        .read_to_end(&mut out)
        .map_err(Gunzip::Corrupt)?;
    if out.len() > max {
        return Err(Gunzip::TooLarge);
    }
    Ok(Bytes::from(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_gzip_bomb_stops_at_the_cap() {
        let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        let zeros = vec![0u8; 1 << 20];
        for _ in 0..64 {
            std::io::Write::write_all(&mut encoder, &zeros).unwrap();
        }
        let bomb = encoder.finish().unwrap();
        assert!(bomb.len() < 1 << 20);
        assert!(matches!(
            gunzip_capped(&bomb, 4 << 20),
            Err(Gunzip::TooLarge)
        ));
        assert!(matches!(
            gunzip_capped(b"not gzip", 100),
            Err(Gunzip::Corrupt(_))
        ));
    }
}

//! OTLP/HTTP: `POST /v1/traces`, protobuf or JSON, gzip or not, answered in the request's own
//! encoding. Bodies are capped at `max_body` both on the wire and while decompressing, so a
//! gzip bomb is refused before it is allocated. `POST /v1/metrics` and `/v1/logs` are answered
//! with success and dropped (counted as ignored), so an SDK that exports every signal to one
//! endpoint does not log errors forever.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::{ConnectInfo, DefaultBodyLimit, State};
use axum::http::{HeaderMap, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use prost::Message as _;
use tokio_util::sync::CancellationToken;

use super::connections::ConnectionTag;
use super::gzip::{self, GunzipError};
use crate::ingest::admission::{Admission, Shared};
use crate::ingest::error::IngestError;

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
    listener: super::tls::Listener,
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
    serve_on(listener, app, token, "OTLP/HTTP receiver");
}

/// Serves `app` on `listener` until `token` is cancelled and the requests in progress are
/// answered; the task ends then.
fn serve_on(
    listener: super::tls::Listener,
    app: axum::Router,
    token: CancellationToken,
    what: &'static str,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let app = app.into_make_service_with_connect_info::<ConnectionTag>();
        let result = axum::serve(listener, app)
            .with_graceful_shutdown(token.cancelled_owned())
            .await;
        if let Err(error) = result {
            tracing::error!(%error, "{what} stopped");
        }
    })
}

/// Serves another HTTP app (`serve`'s API) on `listener` as the OTLP/HTTP receiver is served:
/// each request marks its connection busy, and the server stops accepting once `token` is
/// cancelled, then answers the requests in progress before its task ends.
pub(super) fn spawn_app(
    listener: super::tls::Listener,
    app: axum::Router,
    token: CancellationToken,
) -> tokio::task::JoinHandle<()> {
    serve_on(
        listener,
        app.layer(axum::middleware::from_fn(busy)),
        token,
        "HTTP API",
    )
}

fn router(state: HttpState) -> axum::Router {
    let auth = axum::middleware::from_fn_with_state(state.clone(), require_token);
    axum::Router::new()
        .route("/v1/traces", post(export))
        .route("/v1/metrics", post(ignored))
        .route("/v1/logs", post(ignored))
        .fallback(not_found)
        .method_not_allowed_fallback(not_post)
        .layer(DefaultBodyLimit::disable())
        .layer(axum::middleware::from_fn(busy))
        // Outermost: a request without the token is answered before anything else looks at it.
        .layer(auth)
        .with_state(state)
}

/// Any other path: 404, counted as rejected (a request that can never succeed).
async fn not_found(State(state): State<HttpState>, uri: axum::http::Uri) -> Response {
    let path = uri.path().to_string();
    refuse(&state.shared, None, IngestError::NoEndpoint { path })
}

/// Not a POST: 405, counted as rejected.
async fn not_post(State(state): State<HttpState>) -> Response {
    refuse(&state.shared, None, IngestError::NotPost)
}

/// `--bearer-token-file`: a request without `Authorization: Bearer <token>` is answered 401
/// with `WWW-Authenticate: Bearer` (no `Retry-After`: it is never retried) before its body is
/// read, and counted as unauthenticated.
async fn require_token(
    State(state): State<HttpState>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    if state.shared.authenticated(request.headers()) {
        return next.run(request).await;
    }
    let content_type = request
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let media = content_type.split(';').next().unwrap_or("").trim();
    let encoding = if media.eq_ignore_ascii_case(PROTOBUF) {
        Some(Encoding::Protobuf)
    } else if media.eq_ignore_ascii_case(JSON) {
        Some(Encoding::Json)
    } else {
        None
    };
    let error = IngestError::Unauthenticated {
        send: "Authorization",
    };
    let mut response = refuse(&state.shared, encoding, error);
    response.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        axum::http::HeaderValue::from_static("Bearer"),
    );
    // The body is not read: the connection cannot be reused for the next request.
    response.headers_mut().insert(
        header::CONNECTION,
        axum::http::HeaderValue::from_static("close"),
    );
    response
}

/// Marks the connection as serving a request while it is (see [`ConnectionTag::busy`]).
async fn busy(request: axum::extract::Request, next: axum::middleware::Next) -> Response {
    let _busy = request
        .extensions()
        .get::<ConnectInfo<ConnectionTag>>()
        .map(|tag| tag.0.busy());
    next.run(request).await
}

/// The request's encoding from its content type, or the 415 answer (counted as rejected).
#[allow(clippy::result_large_err)]
fn encoding_of(shared: &Shared, headers: &HeaderMap) -> Result<Encoding, Response> {
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
    match media.as_str() {
        PROTOBUF => Ok(Encoding::Protobuf),
        JSON => Ok(Encoding::Json),
        _ => {
            let error = IngestError::UnsupportedContentType {
                content_type: content_type.to_string(),
                accepted: format!("{PROTOBUF} or {JSON}"),
            };
            Err(refuse(shared, None, error))
        }
    }
}

/// `POST /v1/metrics` and `/v1/logs`: the body is read off the connection (so it stays usable)
/// and dropped, and the answer is the signal's empty success response, in the request's
/// encoding (an empty `Export*ServiceResponse` encodes to no bytes, `{}` in JSON).
async fn ignored(State(state): State<HttpState>, headers: HeaderMap, body: Body) -> Response {
    let shared = &state.shared;
    let encoding = match encoding_of(shared, &headers) {
        Ok(encoding) => encoding,
        Err(response) => return response,
    };
    let _ = tokio::time::timeout(state.body_timeout, drain(body, state.max_body)).await;
    shared.ignore_request();
    match encoding {
        Encoding::Protobuf => ([(header::CONTENT_TYPE, PROTOBUF)], Vec::new()).into_response(),
        Encoding::Json => ([(header::CONTENT_TYPE, JSON)], "{}").into_response(),
    }
}

async fn export(State(state): State<HttpState>, headers: HeaderMap, body: Body) -> Response {
    let shared = &state.shared;
    let encoding = match encoding_of(shared, &headers) {
        Ok(encoding) => encoding,
        Err(response) => return response,
    };
    // Waited for a moment, then refused before the body is read into memory or decoded: the
    // cheap answer to load past capacity. The body is still read off the connection (and
    // dropped as it comes), so the client gets the 503 instead of a reset connection.
    let Some(_permit) = shared.begin().await else {
        let drained = tokio::time::timeout(state.body_timeout, drain(body, state.max_body));
        let _ = drained.await;
        return refuse(shared, Some(encoding), IngestError::Throttled);
    };
    let fail = |error: IngestError| refuse(shared, Some(encoding), error);
    let (body, held) = shared.body_bytes.meter(body);
    let read = tokio::time::timeout(
        state.body_timeout,
        axum::body::to_bytes(Body::new(body), state.max_body),
    );
    let read = read.await;
    if held.over() {
        // Cut off mid-body: budget-top holds as many request bytes as it may.
        shared.refuse_unread();
        return fail(IngestError::Throttled);
    }
    let body = match read {
        Err(_elapsed) => return fail(IngestError::BodyTimeout(state.body_timeout)),
        Ok(Ok(bytes)) => bytes,
        Ok(Err(error)) if over_the_limit(&error) => {
            return fail(IngestError::BodyTooLarge {
                max: state.max_body,
            });
        }
        Ok(Err(error)) => return fail(IngestError::UnreadableBody(error.to_string())),
    };
    let content_encoding = headers
        .get(header::CONTENT_ENCODING)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("identity")
        .trim()
        .to_ascii_lowercase();
    let body = match gzip::decode_capped(&content_encoding, body, state.max_body) {
        Some(Ok(bytes)) => bytes,
        Some(Err(GunzipError::TooLarge { .. })) => {
            return fail(IngestError::DecompressedTooLarge {
                max: state.max_body,
            });
        }
        Some(Err(GunzipError::Corrupt(error))) => {
            return fail(IngestError::CorruptBody {
                encoding: content_encoding,
                error: error.to_string(),
            });
        }
        None => {
            return fail(IngestError::UnsupportedEncoding {
                encoding: content_encoding,
            });
        }
    };
    let admission = match encoding {
        Encoding::Protobuf => shared.admit_protobuf(&body),
        Encoding::Json => shared.admit_json(&body),
    };
    let admission = match admission {
        Ok(admission) => admission,
        Err(message) => return fail(IngestError::Malformed(message)),
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
        Admission::Throttled => fail(IngestError::Throttled),
    }
}

/// Whether reading the body stopped at `--max-body`: the limit's own error, anywhere in the
/// chain of causes.
fn over_the_limit(error: &axum::Error) -> bool {
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(e) = cause {
        if e.is::<http_body_util::LengthLimitError>() {
            return true;
        }
        cause = e.source();
    }
    false
}

/// Reads a body to its end without keeping it, stopping past `max` bytes.
async fn drain(body: Body, max: usize) {
    use http_body_util::BodyExt as _;
    let mut body = body;
    let mut read = 0usize;
    while let Some(Ok(frame)) = body.frame().await {
        if let Some(data) = frame.data_ref() {
            read += data.len();
            if read > max {
                break;
            }
        }
    }
}

/// The answer to a refused request (counted as rejected when it can never succeed): a
/// `google.rpc.Status` in the request's `encoding`, plain text when it is not known, and
/// `Retry-After` when the client should send it again.
fn refuse(shared: &Shared, encoding: Option<Encoding>, error: IngestError) -> Response {
    if error.is_rejected() {
        shared.reject_request();
    }
    let status = error.http_status();
    let body = RpcStatus {
        code: i32::from(error.http_body_code()),
        message: error.to_string(),
    };
    let mut response = match encoding {
        Some(Encoding::Protobuf) => (
            status,
            [(header::CONTENT_TYPE, PROTOBUF)],
            body.encode_to_vec(),
        )
            .into_response(),
        Some(Encoding::Json) => (
            status,
            [(header::CONTENT_TYPE, JSON)],
            serde_json::to_vec(&body).unwrap_or_default(),
        )
            .into_response(),
        None => (
            status,
            [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
            body.message,
        )
            .into_response(),
    };
    if let Some(wait) = error.retry_after()
        && let Ok(value) = wait.as_secs().to_string().parse()
    {
        response.headers_mut().insert(header::RETRY_AFTER, value);
    }
    response
}

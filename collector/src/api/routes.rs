//! The API's routes (CONVENTIONS §7): `GET /metrics`, `GET /api/report`,
//! `GET /api/chains?kind=K&limit=N`, `GET /healthz`, `GET /readyz`; anything else 404 (an
//! unknown path) or 405 (another method), never a 5xx. With `--bearer-token-file`, every route
//! but the probes wants `Authorization: Bearer <token>` (401 otherwise).
//!
//! The handlers hold no state of their own: what the store knows they ask the loop that owns
//! it ([`Ask`]), and wait for its answer; `/metrics` alone does not: it reads what the loop
//! last published.

use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};

use axum::extract::{RawQuery, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use deadline_budget::analysis::FindingKind;
use tokio::sync::{mpsc, oneshot};

use super::Ask;
use super::encoding::accepts_gzip;
use super::metrics::{Metrics, wants_openmetrics};
use crate::ingest::IngestStats;
use crate::ingest::receive::auth::BearerToken;

/// `limit` of `/api/chains` when none is given.
pub const DEFAULT_CHAINS_LIMIT: usize = 100;
/// The largest `limit` of `/api/chains`.
pub const MAX_CHAINS_LIMIT: usize = 10_000;

/// Where the server stands, for `/readyz`.
#[derive(Debug, Default)]
pub struct Readiness(AtomicU8);

impl Readiness {
    // 0: starting (the default).
    const READY: u8 = 1;
    const STOPPING: u8 = 2;

    /// The receivers are bound: ready.
    pub fn ready(&self) {
        self.0.store(Self::READY, Ordering::Relaxed);
    }

    /// Shutting down: not ready any more (a load balancer stops sending).
    pub fn stopping(&self) {
        self.0.store(Self::STOPPING, Ordering::Relaxed);
    }
}

/// What every handler shares.
#[derive(Clone, Debug)]
pub struct ApiState {
    /// Questions for the loop that owns the store.
    pub asks: mpsc::Sender<Ask>,
    /// The metrics the loop brings up to date.
    pub metrics: Arc<Metrics>,
    /// The receivers' counters (read fresh on every scrape).
    pub stats: Arc<IngestStats>,
    /// `--bearer-token-file`'s token, when given.
    pub token: Option<BearerToken>,
    /// For `/readyz`.
    pub readiness: Arc<Readiness>,
    /// The forwarding's counters (read fresh on every scrape), when `--forward` is given.
    pub forward: Option<Arc<crate::forward::ForwardStats>>,
}

/// The API's router.
pub fn router(state: ApiState) -> axum::Router {
    let auth = axum::middleware::from_fn_with_state(state.clone(), require_token);
    let api = axum::Router::new()
        .route("/metrics", get(metrics))
        .route("/api/report", get(report))
        .route("/api/chains", get(chains))
        .layer(auth);
    axum::Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .merge(api)
        .fallback(not_found)
        .method_not_allowed_fallback(not_get)
        .with_state(state)
}

fn plain(status: StatusCode, text: impl Into<String>) -> Response {
    let mut text = text.into();
    text.push('\n');
    (
        status,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        text,
    )
        .into_response()
}

async fn not_found(uri: axum::http::Uri) -> Response {
    plain(
        StatusCode::NOT_FOUND,
        format!(
            "nothing at {}: GET /metrics, /api/report, /api/chains?kind=K&limit=N, /healthz or /readyz",
            uri.path()
        ),
    )
}

async fn not_get() -> Response {
    plain(
        StatusCode::METHOD_NOT_ALLOWED,
        "budget-top's API answers GET only",
    )
}

/// Every route but the probes: `Authorization: Bearer <token>` when a token is required.
async fn require_token(
    State(state): State<ApiState>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let Some(token) = &state.token else {
        return next.run(request).await;
    };
    let value = request
        .headers()
        .get(header::AUTHORIZATION)
        .map(HeaderValue::as_bytes);
    if token.accepts(value) {
        return next.run(request).await;
    }
    let mut response = plain(
        StatusCode::UNAUTHORIZED,
        "missing or wrong bearer token: send Authorization: Bearer <the token in budget-top's --bearer-token-file> (/healthz and /readyz need none)",
    );
    response
        .headers_mut()
        .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    response
}

async fn healthz() -> Response {
    plain(StatusCode::OK, "ok")
}

async fn readyz(State(state): State<ApiState>) -> Response {
    match state.readiness.0.load(Ordering::Relaxed) {
        Readiness::READY => plain(StatusCode::OK, "ready"),
        Readiness::STOPPING => plain(
            StatusCode::SERVICE_UNAVAILABLE,
            "shutting down: the receivers are closed",
        ),
        _ => plain(
            StatusCode::SERVICE_UNAVAILABLE,
            "starting: the receivers are not bound yet",
        ),
    }
}

/// Sends `ask` to the loop and waits for its answer; `None` once the loop has stopped
/// answering (shutting down).
async fn ask<T>(state: &ApiState, make: impl FnOnce(oneshot::Sender<T>) -> Ask) -> Option<T> {
    let (reply, answer) = oneshot::channel();
    state.asks.send(make(reply)).await.ok()?;
    answer.await.ok()
}

fn shutting_down() -> Response {
    plain(
        StatusCode::SERVICE_UNAVAILABLE,
        "shutting down: the final report is being written",
    )
}

async fn metrics(State(state): State<ApiState>, headers: HeaderMap) -> Response {
    // The receivers' counters fresh; the totals as last published and encoded (the loop's
    // timer), without waiting for the loop.
    state.metrics.publish_ingest(&state.stats.snapshot());
    if let Some(forward) = &state.forward {
        state.metrics.publish_forward(&forward.snapshot());
    }
    let value_of = |name| {
        headers
            .get(name)
            .and_then(|v: &HeaderValue| v.to_str().ok())
    };
    let gzip = accepts_gzip(value_of(header::ACCEPT_ENCODING));
    let (pieces, content_type) = state
        .metrics
        .encode_parts(wants_openmetrics(value_of(header::ACCEPT)), gzip);
    // The totals' text (megabytes at 10,000 edges) is sent as kept, not copied into one body.
    let body = axum::body::Body::from_stream(futures::stream::iter(
        pieces
            .into_iter()
            .filter(|piece| !piece.is_empty())
            .map(Ok::<_, std::convert::Infallible>),
    ));
    let mut response = ([(header::CONTENT_TYPE, content_type)], body).into_response();
    let response_headers = response.headers_mut();
    response_headers.insert(
        header::VARY,
        HeaderValue::from_static("accept, accept-encoding"),
    );
    if gzip {
        response_headers.insert(header::CONTENT_ENCODING, HeaderValue::from_static("gzip"));
    }
    response
}

async fn report(State(state): State<ApiState>) -> Response {
    match ask(&state, Ask::Report).await {
        Some(Ok(json)) => ([(header::CONTENT_TYPE, "application/json")], json).into_response(),
        Some(Err(error)) => plain(StatusCode::INTERNAL_SERVER_ERROR, error),
        None => shutting_down(),
    }
}

/// The query of `/api/chains`, or the 400 that says what is wrong with it.
pub fn chains_query(query: Option<&str>) -> Result<(Option<FindingKind>, usize), String> {
    let mut kind = None;
    let mut limit = DEFAULT_CHAINS_LIMIT;
    for pair in query.unwrap_or("").split('&').filter(|p| !p.is_empty()) {
        let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
        match name {
            "kind" => {
                kind = Some(
                    FindingKind::ALL
                        .into_iter()
                        .find(|k| k.as_str() == value)
                        .ok_or_else(|| {
                            let kinds: Vec<&str> =
                                FindingKind::ALL.iter().map(|k| k.as_str()).collect();
                            format!(
                                "unknown kind {value:?}: one of {} (or no kind: any finding)",
                                kinds.join(", ")
                            )
                        })?,
                );
            }
            "limit" => {
                limit = value
                    .parse::<usize>()
                    .ok()
                    .filter(|n| (1..=MAX_CHAINS_LIMIT).contains(n))
                    .ok_or_else(|| {
                        format!(
                            "limit must be a whole number from 1 to {MAX_CHAINS_LIMIT} (default {DEFAULT_CHAINS_LIMIT}), got {value:?}"
                        )
                    })?;
            }
            other => {
                return Err(format!(
                    "unknown parameter {other:?}: /api/chains takes kind=K and limit=N"
                ));
            }
        }
    }
    Ok((kind, limit))
}

async fn chains(State(state): State<ApiState>, RawQuery(query): RawQuery) -> Response {
    let (kind, limit) = match chains_query(query.as_deref()) {
        Ok(query) => query,
        Err(message) => return plain(StatusCode::BAD_REQUEST, message),
    };
    match ask(&state, |reply| Ask::Chains { kind, limit, reply }).await {
        Some(lines) => ([(header::CONTENT_TYPE, "application/x-ndjson")], lines).into_response(),
        None => shutting_down(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_chains_query_is_checked() {
        assert_eq!(chains_query(None), Ok((None, 100)));
        assert_eq!(
            chains_query(Some("kind=budget_reset&limit=10000")),
            Ok((Some(FindingKind::BudgetReset), 10_000))
        );
        assert!(
            chains_query(Some("kind=nope"))
                .unwrap_err()
                .contains("unknown kind")
        );
        for bad in ["limit=0", "limit=10001", "limit=-1", "limit=x", "limit="] {
            assert!(chains_query(Some(bad)).is_err(), "{bad}");
        }
        assert!(chains_query(Some("kinds=x")).is_err());
    }
}

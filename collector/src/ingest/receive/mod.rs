//! Receiving: the two OTLP receivers and what guards them, up to a request's body in hand.
//!
//! [`start`] binds OTLP/gRPC (`grpc`) and OTLP/HTTP (`http`) and serves them through the same
//! stack: a cap on open connections and their timeouts (`connections`), TLS when asked
//! (`tls`), the bearer token (`auth`), the bytes of bodies being read bounded (`body_bytes`)
//! and their content encodings (`gzip`). A body read whole goes to admission
//! (`ingest::admission`); a refusal is an `IngestError` (`ingest/error.rs`), answered
//! in the transport's own terms. [`serve_app`] serves `serve`'s API through the same stack.

pub mod auth;
pub(super) mod body_bytes;
mod connections;
mod grpc;
pub mod gzip;
mod http;
pub mod tls;

use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::Context as _;
use tokio_util::sync::CancellationToken;

use super::admission::Shared;
use super::{Ingest, IngestConfig, IngestStats};

/// Binds the receivers and starts serving. Must run inside a tokio runtime. A port already in
/// use gives an error naming the address and the flag that changes it.
pub async fn start(config: IngestConfig) -> anyhow::Result<Ingest> {
    let mut token_warning = None;
    let bearer = match &config.bearer_token_file {
        Some(path) => {
            let loaded = auth::BearerToken::load(path)?;
            token_warning = loaded
                .readable_by_others
                .map(|mode| auth::open_file_warning(path, mode));
            Some(loaded.token)
        }
        None => None,
    };
    let token_required = bearer.is_some();
    let tls = config.tls.as_ref().map(tls::Tls::load).transpose()?;
    let stats = Arc::new(IngestStats::default());
    let (shared, receiver) = Shared::new(&config, bearer, stats.clone());
    let shared = Arc::new(shared);
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
    let limits = connections::Limits {
        max: config.max_connections,
        header: config.header_timeout,
        idle: config.idle_timeout,
        idle_near_cap: config.idle_timeout_near_cap,
    };
    let mut grpc_addr = None;
    if let Some(listener) = grpc_listener {
        grpc_addr = Some(listener.local_addr()?);
        grpc::spawn(
            tls::Listener::new(
                connections::LimitedListener::new(listener, limits, stats.clone()),
                tls.as_ref().map(|t| t.grpc.clone()),
                config.header_timeout,
                token.clone(),
            )?,
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
            tls::Listener::new(
                connections::LimitedListener::new(listener, limits, stats.clone()),
                tls.as_ref().map(|t| t.http.clone()),
                config.header_timeout,
                token.clone(),
            )?,
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
        token_required,
        tls: tls.is_some(),
        client_ca: config.tls.as_ref().is_some_and(|t| t.client_ca.is_some()),
        allow_remote: config.allow_remote,
        token_warning,
    })
}

/// Serves another HTTP app of budget-top (`serve`'s API, on `addr`, given by `flag`) as the
/// receivers are served: loopback unless `config.allow_remote`, the receivers' connection cap
/// and timeouts (its connections counted apart from theirs), and TLS with the same files. The
/// server stops accepting once `shutdown` is cancelled; its task ends when the requests in
/// progress are answered. Returns the bound address and that task.
pub async fn serve_app(
    app: axum::Router,
    addr: SocketAddr,
    flag: &str,
    config: &IngestConfig,
    shutdown: CancellationToken,
) -> anyhow::Result<(SocketAddr, tokio::task::JoinHandle<()>)> {
    check_loopback(addr, flag, config.allow_remote)?;
    let tls = config.tls.as_ref().map(tls::Tls::load).transpose()?;
    let listener = bind(addr, flag).await?;
    let local = listener.local_addr()?;
    let limits = connections::Limits {
        max: config.max_connections,
        header: config.header_timeout,
        idle: config.idle_timeout,
        idle_near_cap: config.idle_timeout_near_cap,
    };
    let listener = tls::Listener::new(
        connections::LimitedListener::new(listener, limits, Arc::new(IngestStats::default())),
        tls.map(|t| t.http),
        config.header_timeout,
        shutdown.clone(),
    )?;
    Ok((local, http::spawn_app(listener, app, shutdown)))
}

async fn bind(addr: SocketAddr, flag: &str) -> anyhow::Result<tokio::net::TcpListener> {
    tokio::net::TcpListener::bind(addr).await.with_context(|| {
        format!("cannot listen on {addr} (change it with {flag} ADDR, port 0 picks a free one)")
    })
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

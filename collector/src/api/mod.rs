//! `budget-top serve`'s HTTP API (CONVENTIONS §7) on `--api ADDR`: the metrics, the report,
//! the newest chains of a finding, and the probes.
//!
//! Requests come in on the API's own server ([`start`]: bound as the receivers are, with their
//! TLS and token); what the store knows is asked of the one loop that owns it, over a bounded
//! channel ([`Ask`]), and answered there ([`Answers::answer`]): no lock on the store. The
//! metrics' families are shared: the loop brings them up to date on its timer
//! ([`Answers::publish`]), a task of their own encodes them after each publish
//! ([`metrics::keep_encoded`]), and a scrape copies the text last encoded: it never waits for
//! the loop, however many chains are being judged.
//!
//! - [`routes`]: the router, the token check, the probes and the query of `/api/chains`;
//! - [`metrics`]: the families of §7 from the totals and the receivers' counters;
//! - [`chains`]: the newest judged chains with a finding, as OTLP/JSON lines;
//! - [`encoding`]: what a scraper's `Accept` headers take, and `/metrics` gzip-compressed.

pub mod chains;
pub mod encoding;
pub mod metrics;
pub mod routes;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use deadline_budget::analysis::FindingKind;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use crate::forward::ForwardView;
use crate::ingest::{self, IngestConfig, IngestStats};
use crate::report::{Context, json as report_json};
use crate::store::Store;
use crate::view_model::trace_url::TraceUrl;
use metrics::Metrics;
use routes::{ApiState, Readiness};

/// A question for the loop that owns the store; the answer goes back on `reply`.
#[derive(Debug)]
pub enum Ask {
    /// The §4 JSON report of the chains judged so far (or why it could not be written).
    Report(oneshot::Sender<Result<String, String>>),
    /// The newest judged chains with a finding of `kind` (any finding without one), at most
    /// `limit`, as OTLP/JSON lines.
    Chains {
        /// The finding the chains must have.
        kind: Option<FindingKind>,
        /// At most this many.
        limit: usize,
        /// Where the lines go.
        reply: oneshot::Sender<String>,
    },
}

/// The running API server.
#[derive(Debug)]
pub struct Api {
    /// The bound address.
    pub addr: SocketAddr,
    /// Questions from the requests, for the loop to answer.
    pub asks: mpsc::Receiver<Ask>,
    /// What the loop answers with.
    pub answers: Answers,
    /// For `/readyz`.
    pub readiness: Arc<Readiness>,
    shutdown: CancellationToken,
    /// The server's task: it ends once, after [`Api::shutdown`], every request in progress is
    /// answered (keep answering [`Api::asks`] until then).
    pub server: tokio::task::JoinHandle<()>,
}

impl Api {
    /// Stops accepting connections (and `/readyz` says so); the requests in progress are still
    /// answered: keep answering [`Api::asks`] until [`Api::server`] ends.
    pub fn shutdown(&self) {
        self.readiness.stopping();
        self.shutdown.cancel();
    }
}

/// Binds the API on `addr` as the receivers of `config` are bound (loopback unless
/// `--allow-remote`, their TLS), with the token `config.bearer_token_file` holds; `/readyz`
/// answers ready once [`Readiness::ready`] is called. `stats` are the receivers' counters.
pub async fn start(
    addr: SocketAddr,
    config: &IngestConfig,
    stats: Arc<IngestStats>,
    max_series: usize,
    forward: Option<ForwardView>,
) -> anyhow::Result<Api> {
    let token = match &config.bearer_token_file {
        Some(path) => Some(ingest::receive::auth::BearerToken::load(path)?.token),
        None => None,
    };
    let metrics = Arc::new(Metrics::with_forwarding(max_series, forward.is_some()));
    let (tx, asks) = mpsc::channel(64);
    let readiness = Arc::new(Readiness::default());
    let state = ApiState {
        asks: tx,
        metrics: metrics.clone(),
        stats: stats.clone(),
        token,
        readiness: readiness.clone(),
        forward: forward.as_ref().map(|f| f.stats.clone()),
    };
    let shutdown = CancellationToken::new();
    tokio::spawn(metrics::keep_encoded(metrics.clone(), shutdown.clone()));
    let (addr, server) = ingest::serve_app(
        routes::router(state),
        addr,
        "--api",
        config,
        shutdown.clone(),
    )
    .await?;
    Ok(Api {
        addr,
        asks,
        answers: Answers {
            metrics,
            stats,
            forward,
            published: None,
            published_at: None,
            links: None,
        },
        readiness,
        shutdown,
        server,
    })
}

/// What the loop answers with: the metrics it brings up to date, and the receivers' counters
/// the report carries.
#[derive(Debug)]
pub struct Answers {
    metrics: Arc<Metrics>,
    stats: Arc<IngestStats>,
    /// The forwarding, for the report's `forward` object.
    forward: Option<ForwardView>,
    /// What the totals were when last published: (chains judged, chains judged again).
    published: Option<(u64, u64)>,
    /// When they were.
    published_at: Option<Instant>,
    /// `--trace-url`: each finding's `trace_url` in the report, each chain's in /api/chains.
    links: Option<TraceUrl>,
}

/// The metrics' totals are published at most this often (Prometheus scrapes every 15 s by
/// default, every second at the most): a publish walks every edge, and each is encoded again.
pub const PUBLISH_EVERY: Duration = Duration::from_secs(1);

impl Answers {
    /// Links each chain to its trace with `links` (`--trace-url`) from now on.
    pub fn link_traces(&mut self, links: Option<TraceUrl>) {
        self.links = links;
    }

    /// Brings the metrics' families up to the store's totals when chains were judged since
    /// the last publish, at most every [`PUBLISH_EVERY`], and not while the last publish is
    /// still being encoded (the next call tries again). Called by the loop on its timer.
    pub fn publish(&mut self, store: &Store) {
        let now = (store.totals().traces, store.counters().chains_rejudged);
        if self.published == Some(now)
            || self
                .published_at
                .is_some_and(|at| at.elapsed() < PUBLISH_EVERY)
        {
            return;
        }
        if self
            .metrics
            .try_publish_totals(store.totals(), store.exemplars())
        {
            self.published = Some(now);
            self.published_at = Some(Instant::now());
        }
    }

    /// Answers one question from the store.
    pub fn answer(&mut self, ask: Ask, store: &Store) {
        match ask {
            Ask::Report(reply) => {
                let report = store.report_of_judged();
                let counts = self.stats.snapshot();
                let context = Context {
                    ingest: Some(&counts),
                    source: None,
                    links: self.links.as_ref(),
                };
                let counters = store.counters();
                let additions = report_json::Additions {
                    lines_torn: 0,
                    store: Some(&counters),
                    forward: self
                        .forward
                        .as_ref()
                        .map(|f| f.json(counters.received_bytes)),
                };
                let json = report_json::render(&report, &context, additions)
                    .map_err(|e| format!("cannot write the report: {e:#}"));
                let _ = reply.send(json);
            }
            Ask::Chains { kind, limit, reply } => {
                let _ = reply.send(chains::newest(store, kind, limit, self.links.as_ref()));
            }
        }
    }
}

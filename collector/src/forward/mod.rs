//! `serve --forward URL` (CONVENTIONS §7): the chains that matter, sent on to the trace backend.
//! The stage after judging, beside the totals: ingest → store → judge → totals / forward.
//!
//! In: what the store hands on ([`Handoff`]): each chain [`Policy`] keeps at its first verdict
//! (a finding at or above `--forward-on`, or the `--forward-sample` share of the others by the
//! trace id's hash, [`sample`]), with its spans as received, and each span that joins a chain
//! after its verdict. The [`Forwarder`], owned by the loop that owns the store, makes it ready
//! ([`request::prepare`]: each span once, the verdict on its root) and queues it for the
//! exporter task ([`exporter`]) without ever waiting: past `--forward-buffer`'s half for the
//! queue, a chain is dropped and counted. A late span of a kept chain is sent too. Out: export
//! requests to the backend ([`client`], [`endpoint`]), and the counts of [`ForwardStats`], read
//! by `/metrics`, `/api/report` and the final report.

pub mod client;
pub mod endpoint;
pub mod exporter;
pub mod request;
pub mod sample;
pub mod stats;

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use deadline_budget::analysis::{Severity, TraceId};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::store::Handoff;
use endpoint::{Endpoint, ForwardFiles, Security};
use exporter::{Queued, Settings};
use sample::Share;
pub use stats::{ForwardCounts, ForwardStats};

/// The default for `--forward-sample`.
pub const DEFAULT_SAMPLE: f64 = 0.01;
/// The default for `--forward-buffer`: spans as received held for forwarding, all together.
pub const DEFAULT_BUFFER: usize = 256 * 1024 * 1024;
/// The default for `--forward-retry-for` (the Collector's `retry_on_failure.max_elapsed_time`).
pub const DEFAULT_RETRY_FOR: Duration = Duration::from_secs(300);
/// The default for `--forward-timeout` (the OpenTelemetry SDKs' exporter timeout).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);
/// Trace ids of chains kept for a finding remembered, so that a late span of one is sent too
/// (a sampled chain's late span is known by its hash). Older ones are forgotten.
const REMEMBERED: usize = 1 << 16;
/// Chains the exporter's channel holds at most (the bytes bound it first, nearly always).
const QUEUE_CHAINS: usize = 1 << 16;

/// What `--forward` and its flags say.
#[derive(Clone, Debug)]
pub struct ForwardConfig {
    /// `--forward`.
    pub endpoint: Endpoint,
    /// `--forward-ca`, `--forward-cert`, `--forward-key`, `--forward-token-file`.
    pub files: ForwardFiles,
    /// `--forward-on`: the lowest severity that keeps a chain.
    pub on: Severity,
    /// `--forward-sample`: the share of the other chains kept.
    pub sample: Share,
    /// `--forward-buffer`: bytes of spans as received held, waiting to be judged or sent.
    pub buffer: usize,
    /// `--forward-retry-for`.
    pub retry_for: Duration,
    /// `--forward-timeout`.
    pub timeout: Duration,
}

impl ForwardConfig {
    /// The share of `--forward-buffer` the store holds for chains not judged yet (the other
    /// half is the exporter's queue).
    pub fn held_bytes(&self) -> usize {
        self.buffer / 2
    }

    /// Which chains are kept.
    pub fn policy(&self) -> Policy {
        Policy {
            on: self.on,
            sample: self.sample,
        }
    }
}

/// Which chains are kept (CONVENTIONS §7): a finding at or above `on`, else the `sample` share.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Policy {
    /// `--forward-on`.
    pub on: Severity,
    /// `--forward-sample`.
    pub sample: Share,
}

impl Policy {
    /// Why a chain of `trace_id` whose worst finding is `worst` is kept; `None` when it is not.
    pub fn reason(self, trace_id: TraceId, worst: Option<Severity>) -> Option<Reason> {
        if worst.is_some_and(|w| w >= self.on) {
            Some(Reason::Finding)
        } else if self.sample.keeps(trace_id) {
            Some(Reason::Sample)
        } else {
            None
        }
    }

    /// The same, as the store asks it at each chain's verdict.
    pub fn keep(self) -> crate::store::Keep {
        Box::new(move |trace_id, worst| self.reason(trace_id, worst).is_some())
    }
}

/// Why a chain was kept.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reason {
    /// A finding at or above `--forward-on`.
    Finding,
    /// The `--forward-sample` share of the others.
    Sample,
}

/// The forwarding stage, owned by the loop that owns the store. See the module documentation.
#[derive(Debug)]
pub struct Forwarder {
    config: ForwardConfig,
    protection: &'static str,
    warning: Option<String>,
    tx: mpsc::Sender<Queued>,
    stats: Arc<ForwardStats>,
    remembered: VecDeque<TraceId>,
    remembered_set: foldhash::HashSet<TraceId>,
    task: tokio::task::JoinHandle<()>,
    stop: CancellationToken,
}

/// Reads every file and starts the exporter task (a backend that does not answer is no error
/// here: the exporter retries it). Must run inside a tokio runtime.
pub fn start(config: ForwardConfig) -> anyhow::Result<Forwarder> {
    let security = Security::load(&config.endpoint, &config.files)?;
    let client = client::Client::new(&config.endpoint, &security)?;
    let stats = Arc::new(ForwardStats::default());
    let (tx, rx) = mpsc::channel(QUEUE_CHAINS);
    let stop = CancellationToken::new();
    let settings = Arc::new(Settings {
        client,
        timeout: config.timeout,
        retry_for: config.retry_for,
    });
    let task = tokio::spawn(exporter::run(rx, settings, stats.clone(), stop.clone()));
    Ok(Forwarder {
        protection: security.describe(&config.files),
        warning: security.warning,
        config,
        tx,
        stats,
        remembered: VecDeque::new(),
        remembered_set: foldhash::HashSet::default(),
        task,
        stop,
    })
}

impl Forwarder {
    /// The counts, shared.
    pub fn stats(&self) -> Arc<ForwardStats> {
        self.stats.clone()
    }

    /// What `--forward` and its flags say.
    pub fn config(&self) -> &ForwardConfig {
        &self.config
    }

    /// Keeps or lets go of what the store handed on (see the module documentation). Never
    /// waits.
    pub fn take(&mut self, handoffs: Vec<Handoff>) {
        for handoff in handoffs {
            match handoff {
                Handoff::Chain(chain) => {
                    let Some(reason) = self.config.policy().reason(chain.trace_id, chain.worst)
                    else {
                        continue;
                    };
                    let counter = match reason {
                        Reason::Finding => {
                            self.remember(chain.trace_id);
                            &self.stats.chains_finding
                        }
                        Reason::Sample => &self.stats.chains_sample,
                    };
                    ForwardStats::add(counter, 1);
                    let verdict = request::Verdict {
                        kinds: chain.kinds,
                        wasted_ms: chain.wasted_ms,
                    };
                    let ready = request::prepare(&chain.spans, Some(verdict));
                    let missing = u64::from(chain.spans.missing());
                    ForwardStats::add(&self.stats.spans_kept, u64::from(ready.len()) + missing);
                    ForwardStats::add(&self.stats.spans_dropped, missing);
                    ForwardStats::add(&self.stats.dropped_buffer, missing);
                    self.enqueue(ready);
                }
                Handoff::Late { trace_id, spans } => {
                    if !(self.remembered_set.contains(&trace_id)
                        || self.config.sample.keeps(trace_id))
                    {
                        continue;
                    }
                    let ready = request::prepare(&spans, None);
                    ForwardStats::add(&self.stats.late_spans, u64::from(ready.len()));
                    ForwardStats::add(&self.stats.spans_kept, u64::from(ready.len()));
                    self.enqueue(ready);
                }
            }
        }
    }

    fn remember(&mut self, trace_id: TraceId) {
        if self.remembered_set.insert(trace_id) {
            if self.remembered.len() >= REMEMBERED
                && let Some(old) = self.remembered.pop_front()
            {
                self.remembered_set.remove(&old);
            }
            self.remembered.push_back(trace_id);
        }
    }

    /// Queues a chain when the queue has room (its half of `--forward-buffer`; a chain larger
    /// than that alone is taken into an empty queue), else drops it, counted.
    fn enqueue(&mut self, chain: crate::store::ReceivedChain) {
        let spans = u64::from(chain.len());
        if spans == 0 {
            return;
        }
        let bytes = chain.bytes();
        let queued = self.stats.queued_bytes.load(Ordering::Relaxed);
        let max = (self.config.buffer - self.config.held_bytes()) as u64;
        let room = queued == 0 || queued + bytes as u64 <= max;
        if room && self.tx.try_send(Queued { chain, bytes }).is_ok() {
            ForwardStats::add(&self.stats.queued_spans, spans);
            ForwardStats::add(&self.stats.queued_bytes, bytes as u64);
            return;
        }
        ForwardStats::add(&self.stats.spans_dropped, spans);
        ForwardStats::add(&self.stats.dropped_queue, spans);
    }

    /// The start-up lines: where it forwards, what, and how.
    pub fn describe(&self) -> Vec<String> {
        let c = &self.config;
        let mut lines = vec![format!(
            "forwarding to {} ({}): every chain with a finding at or above {} and {} of the others (by trace id), once judged; buffer {} bytes (half for chains not judged yet, half queued), a request times out after {:?}, retries for {:?}",
            c.endpoint.url(),
            self.protection,
            c.on.as_str(),
            percent(c.sample.fraction()),
            c.buffer,
            c.timeout,
            c.retry_for,
        )];
        lines.extend(self.warning.clone());
        lines
    }

    /// What the API reads of it.
    pub fn view(&self) -> ForwardView {
        ForwardView {
            config: self.config.clone(),
            stats: self.stats.clone(),
        }
    }

    /// At the end of the run, after every chain held was judged and taken: what is queued is
    /// sent within `limit` (retries included), then whatever is left is dropped and counted.
    pub async fn finish(self, limit: Duration) -> ForwardCounts {
        let Forwarder {
            tx,
            task,
            stop,
            stats,
            ..
        } = self;
        drop(tx);
        let mut task = task;
        if tokio::time::timeout(limit, &mut task).await.is_err() {
            stop.cancel();
            let _ = task.await;
        }
        stats.snapshot()
    }
}

/// What the API and the reports read of the forwarding: where and what, and the counts.
#[derive(Clone, Debug)]
pub struct ForwardView {
    /// What `--forward` and its flags say.
    pub config: ForwardConfig,
    /// The counts.
    pub stats: Arc<ForwardStats>,
}

impl ForwardView {
    /// The report's `forward` object now (`held_bytes`: the store's spans as received of the
    /// chains not judged yet).
    pub fn json(&self, held_bytes: u64) -> serde_json::Value {
        json(&self.config, &self.stats.snapshot(), held_bytes)
    }
}

/// The report's `forward` object.
pub fn json(config: &ForwardConfig, counts: &ForwardCounts, held_bytes: u64) -> serde_json::Value {
    let mut value = serde_json::to_value(counts).unwrap_or_default();
    if let Some(object) = value.as_object_mut() {
        object.insert("endpoint".into(), config.endpoint.url().into());
        object.insert("on".into(), config.on.as_str().into());
        object.insert("sample".into(), config.sample.fraction().into());
        object.insert("held_bytes".into(), held_bytes.into());
        object.insert("buffer_bytes".into(), (config.buffer as u64).into());
    }
    value
}

/// The stderr line at the end: what was kept and what became of it.
pub fn summary_line(counts: &ForwardCounts) -> String {
    let s = &counts.spans;
    let mut line = format!(
        "forwarded {} chain(s) ({} with a finding, {} sampled) and {} late span(s): {} of {} span(s) kept sent, {} dropped ({} over the buffer, {} over the queue, {} left when serve stopped), {} failed, {} retries",
        counts.chains.finding + counts.chains.sample,
        counts.chains.finding,
        counts.chains.sample,
        counts.late_spans,
        s.sent,
        s.kept,
        s.dropped,
        counts.dropped.buffer,
        counts.dropped.queue,
        counts.dropped.stopped,
        s.failed,
        s.retried,
    );
    if let Some(error) = &counts.last_error
        && s.failed + s.dropped > 0
    {
        line.push_str(&format!("; last error: {error}"));
    }
    line
}

fn percent(fraction: f64) -> String {
    let p = fraction * 100.0;
    if p == p.round() {
        format!("{p:.0} %")
    } else {
        format!("{p:.3} %")
    }
}

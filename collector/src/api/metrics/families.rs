//! The families of CONVENTIONS §7 ([`Metrics`]) and the three registries they are declared in,
//! one table of name, help and family ([`Metrics::with_forwarding`]): the receivers' (and the
//! forwarding's), encoded on every scrape; the totals'; the latency histogram's, encoded apart
//! for its exemplars.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64};

use foldhash::HashMap;
use prometheus_client::encoding::{EncodeMetric, MetricEncoder};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::exemplar::CounterWithExemplar;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::{Metric, Registry};

use super::bound::Admitted;
use super::counters::SecondsCounter;
use super::exposition::Encoded;
use super::histogram::SketchHistogram;
use super::labels::{
    BudgetLabel, EdgeLabels, FamilyLabel, FindingLabels, OutcomeLabel, ReasonLabel, ResultLabel,
    TimeoutLabels, TraceLabel,
};
use crate::store::exemplars::{Exemplar, LATENCY_BUCKETS};

/// The registry and its families; see the module documentation.
#[derive(Debug)]
pub struct Metrics {
    /// The receivers' families: encoded fresh on every scrape (a few lines).
    pub(super) ingest_registry: Registry,
    /// The totals' families: encoded once per publish and kept ([`Metrics::encode_published`]),
    /// so a scraper that reads 100 times a second costs a copy, not an encoding.
    pub(super) totals_registry: Registry,
    /// Bumped by every publish of the totals.
    pub(super) version: AtomicU64,
    /// Held by a publish of the totals and by an encoding of them: never both at once.
    pub(super) totals_busy: Mutex<()>,
    /// Told of each publish: [`keep_encoded`](super::keep_encoded) waits on it.
    pub(super) published: tokio::sync::Notify,
    /// The totals' families as last encoded, by format (the text format, OpenMetrics).
    pub(super) encoded: [Mutex<Option<Encoded>>; 2],
    /// The formats a scraper has asked for, which each publish encodes anew.
    pub(super) wanted: [AtomicBool; 2],
    /// The formats a scraper has asked for gzip-compressed, which each publish compresses too.
    pub(super) wanted_gzip: [AtomicBool; 2],
    pub(super) spans: Family<ResultLabel, Counter>,
    pub(super) requests: Family<ResultLabel, Counter>,
    pub(super) forwarded_spans: Family<ResultLabel, Counter>,
    pub(super) forwarded_chains: Family<ReasonLabel, Counter>,
    pub(super) chains: Family<OutcomeLabel, Counter>,
    pub(super) hops: Family<BudgetLabel, Counter>,
    pub(super) findings: Family<FindingLabels, CounterWithExemplar<TraceLabel>>,
    pub(super) wasted: Family<EdgeLabels, SecondsCounter>,
    pub(super) edge_calls: Family<EdgeLabels, Counter>,
    pub(super) latency: Family<EdgeLabels, SketchHistogram>,
    /// The histogram's exemplars, by series and bucket: written after its bucket lines.
    pub(super) latency_exemplars: Mutex<HashMap<EdgeLabels, [Option<Exemplar>; LATENCY_BUCKETS]>>,
    /// The histogram alone: its text is encoded apart, for its exemplars.
    pub(super) latency_registry: Registry,
    pub(super) timeouts: Family<TimeoutLabels, Gauge<f64, AtomicU64>>,
    pub(super) overflow: Family<FamilyLabel, Counter>,
    pub(super) admitted_findings: Mutex<Admitted<FindingLabels>>,
    pub(super) admitted_wasted: Mutex<Admitted<EdgeLabels>>,
    pub(super) admitted_calls: Mutex<Admitted<EdgeLabels>>,
    pub(super) admitted_latency: Mutex<Admitted<EdgeLabels>>,
    pub(super) admitted_timeouts: Mutex<Admitted<TimeoutLabels>>,
}

/// The registry a family is declared in.
#[derive(Clone, Copy, Debug)]
enum Room {
    Ingest,
    /// The receivers' registry, with `serve --forward` only.
    Forwarding,
    Totals,
    Latency,
}

/// A family of any type, so that one table can declare them all.
#[derive(Debug)]
struct AnyFamily(Box<dyn Metric>);

impl AnyFamily {
    /// A handle on `family` (a family's clones share its series).
    fn of(family: &(impl Metric + Clone)) -> Self {
        AnyFamily(Box::new(family.clone()))
    }
}

impl EncodeMetric for AnyFamily {
    fn encode(&self, encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        self.0.encode(encoder)
    }

    fn metric_type(&self) -> MetricType {
        self.0.metric_type()
    }

    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl Metrics {
    /// The families of CONVENTIONS §7, each holding at most `max_series` label sets of its
    /// own (at least 1).
    pub fn new(max_series: usize) -> Self {
        Self::with_forwarding(max_series, false)
    }

    /// The same, with the forwarding's families when `forwarding` (`serve --forward`).
    pub fn with_forwarding(max_series: usize, forwarding: bool) -> Self {
        let max_series = max_series.max(1);
        let mut metrics = Metrics {
            spans: Family::default(),
            requests: Family::default(),
            forwarded_spans: Family::default(),
            forwarded_chains: Family::default(),
            chains: Family::default(),
            hops: Family::default(),
            findings: Family::default(),
            wasted: Family::default(),
            edge_calls: Family::default(),
            latency: Family::default(),
            latency_exemplars: Mutex::new(HashMap::default()),
            latency_registry: Registry::default(),
            timeouts: Family::default(),
            overflow: Family::default(),
            admitted_findings: Mutex::new(Admitted::new(max_series)),
            admitted_wasted: Mutex::new(Admitted::new(max_series)),
            admitted_calls: Mutex::new(Admitted::new(max_series)),
            admitted_latency: Mutex::new(Admitted::new(max_series)),
            admitted_timeouts: Mutex::new(Admitted::new(max_series)),
            ingest_registry: Registry::default(),
            totals_registry: Registry::default(),
            version: AtomicU64::new(0),
            totals_busy: Mutex::new(()),
            published: tokio::sync::Notify::new(),
            encoded: [Mutex::new(None), Mutex::new(None)],
            wanted: [AtomicBool::new(false), AtomicBool::new(false)],
            wanted_gzip: [AtomicBool::new(false), AtomicBool::new(false)],
        };
        // In the order they are encoded. Counters are named without `_total`: the encoders add it.
        let declared = [
            (
                Room::Ingest,
                "budget_top_spans",
                "Spans sent to the receivers: accepted (judged), refused under load (retryable), rejected as malformed",
                AnyFamily::of(&metrics.spans),
            ),
            (
                Room::Ingest,
                "budget_top_requests",
                "OTLP export requests: accepted, refused under load, rejected, unauthenticated (a refused body is never read)",
                AnyFamily::of(&metrics.requests),
            ),
            (
                Room::Forwarding,
                "budget_top_forwarded_spans",
                "Spans of the chains --forward kept: sent (accepted by the backend), retried (sent again, each time), dropped (no room, or left at stop), failed (refused, or out of retries)",
                AnyFamily::of(&metrics.forwarded_spans),
            ),
            (
                Room::Forwarding,
                "budget_top_forwarded_chains",
                "Chains --forward kept: for a finding at or above --forward-on, or as the --forward-sample share of the others",
                AnyFamily::of(&metrics.forwarded_chains),
            ),
            (
                Room::Totals,
                "budget_top_chains",
                "Request chains judged, by how they ended for their user",
                AnyFamily::of(&metrics.chains),
            ),
            (
                Room::Totals,
                "budget_top_findings",
                "Findings of the judged chains (and the edges' own), by kind, severity and the service each names",
                AnyFamily::of(&metrics.findings),
            ),
            (
                Room::Totals,
                "budget_top_wasted_seconds",
                "Dead work in the callee (work for callers who had given up), by the edge into it; a wait on a callee that sends no spans, on that call's own edge",
                AnyFamily::of(&metrics.wasted),
            ),
            (
                Room::Totals,
                "budget_top_edge_calls",
                "Calls seen on each caller -> callee edge",
                AnyFamily::of(&metrics.edge_calls),
            ),
            (
                Room::Latency,
                "budget_top_edge_latency_seconds",
                "Each edge's call latency (the caller's CLIENT span), from its sketch (within 1 %)",
                AnyFamily::of(&metrics.latency),
            ),
            (
                Room::Totals,
                "budget_top_edge_timeout_seconds",
                "Each edge's timeout: the largest declared, or inferred from the calls that got no answer",
                AnyFamily::of(&metrics.timeouts),
            ),
            (
                Room::Totals,
                "budget_top_hops",
                "Hops judged, by whether their budget is known",
                AnyFamily::of(&metrics.hops),
            ),
            (
                Room::Totals,
                "budget_top_series_overflow",
                "Label sets recorded under `other` because their family already held --max-series sets",
                AnyFamily::of(&metrics.overflow),
            ),
        ];
        for (room, name, help, family) in declared {
            let registry = match room {
                Room::Ingest => &mut metrics.ingest_registry,
                Room::Forwarding if forwarding => &mut metrics.ingest_registry,
                Room::Forwarding => continue,
                Room::Totals => &mut metrics.totals_registry,
                Room::Latency => &mut metrics.latency_registry,
            };
            registry.register(name, help, family);
        }
        metrics
    }
}

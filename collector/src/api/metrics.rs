//! `GET /metrics` (CONVENTIONS §7): the totals of section 6 and the receivers' counters as
//! Prometheus metrics, with the `prometheus-client` crate (the Prometheus project's Rust
//! client: registries of typed families, its text and OpenMetrics encoders).
//!
//! In: the store's [`Totals`], given to [`Metrics::try_publish_totals`] by the loop that owns
//! the store, and the receivers' [`IngestCounts`], given to [`Metrics::publish_ingest`] by each
//! scrape. Out: [`Metrics::encode_parts`], called by the API's request task. The figures are absolute totals; a counter only grows, so each series is raised to
//! the figure and never lowered (a chain judged again can take a count back: the series then
//! waits until the totals pass it again). Each family holds at most `--max-series` label sets
//! of its own; a set first seen past that is recorded under every label `other`, and
//! `budget_top_series_overflow_total{family}` says how many sets it holds.
//!
//! `budget_top_edge_latency_seconds` is a histogram read from each edge's latency sketch, its
//! buckets ([`LATENCY_BUCKETS_MS`]) where the sketch is exact or within its 1 %. In OpenMetrics
//! it, the findings and the wasted seconds carry `trace_id` exemplars ([`Exemplars`], kept by
//! serve's store): the counters as `CounterWithExemplar`, the histogram's written after its
//! bucket lines ([`with_bucket_exemplars`]).
//!
//! Two registries: the receivers' few lines are encoded on every scrape; the totals' families
//! once per publish, off the request path ([`keep_encoded`], on a blocking thread), their text
//! kept until the next: a scrape never publishes nor encodes the totals (but the first of its
//! format), it copies the text last encoded, however many chains are being judged. A publish
//! and an encoding of the totals never overlap ([`Metrics::try_publish_totals`] skips a publish
//! while an encoding runs), so a text is always one publish whole.

use std::collections::{BTreeMap, HashSet};
use std::hash::Hash;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;

use deadline_budget::analysis::{ChainOutcome, FindingKind, Sketch, Totals};
use foldhash::HashMap;
use prometheus_client::encoding::{
    EncodeLabelSet, EncodeMetric, MetricEncoder, NoLabelSet, prometheus_text, text,
};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::exemplar::CounterWithExemplar;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::{MetricType, TypedMetric};
use prometheus_client::registry::Registry;

use super::encoding::{self, Deflated};
use crate::ingest::IngestCounts;
/// The histogram's upper bounds, ms (`+Inf` follows): exact in the sketch up to 250 ms; the
/// store keeps an exemplar for each.
pub use crate::store::exemplars::LATENCY_BUCKETS_MS;
use crate::store::exemplars::{Exemplar, Exemplars, LATENCY_BUCKETS};

/// The label value every label of a set past `--max-series` takes.
pub const OTHER: &str = "other";

/// An exemplar's labels: the trace of the chain behind it.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TraceLabel {
    trace_id: String,
}

/// `budget_top_wasted_seconds_total`: a counter of seconds with an exemplar (prometheus-client
/// types only its whole-number one).
#[derive(Debug, Default)]
struct SecondsCounter(CounterWithExemplar<TraceLabel, f64, AtomicU64>);

impl TypedMetric for SecondsCounter {
    const TYPE: MetricType = MetricType::Counter;
}

impl EncodeMetric for SecondsCounter {
    fn encode(&self, encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        self.0.encode(encoder)
    }

    fn metric_type(&self) -> MetricType {
        Self::TYPE
    }
}

/// The content type of the OpenMetrics text format.
pub const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResultLabel {
    result: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabel {
    reason: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabel {
    outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct BudgetLabel {
    budget: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct FindingLabels {
    kind: String,
    severity: String,
    service: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct EdgeLabels {
    caller: String,
    callee: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, PartialOrd, Ord, EncodeLabelSet)]
struct TimeoutLabels {
    caller: String,
    callee: String,
    inferred: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct FamilyLabel {
    family: &'static str,
}

/// A set of labels that can stand for every set past `--max-series`.
trait Labels: Clone + Hash + Eq {
    /// The same labels, each `other`.
    fn other() -> Self;
}

impl Labels for FindingLabels {
    fn other() -> Self {
        FindingLabels {
            kind: OTHER.into(),
            severity: OTHER.into(),
            service: OTHER.into(),
        }
    }
}

impl Labels for EdgeLabels {
    fn other() -> Self {
        EdgeLabels {
            caller: OTHER.into(),
            callee: OTHER.into(),
        }
    }
}

impl Labels for TimeoutLabels {
    fn other() -> Self {
        TimeoutLabels {
            caller: OTHER.into(),
            callee: OTHER.into(),
            inferred: OTHER.into(),
        }
    }
}

/// The label sets a family has given a series of their own: at most `max`, the first seen.
#[derive(Debug)]
struct Admitted<L> {
    sets: HashSet<L>,
    max: usize,
}

impl<L: Labels> Admitted<L> {
    fn new(max: usize) -> Self {
        Admitted {
            sets: HashSet::new(),
            max,
        }
    }

    /// The labels a figure of `labels` is recorded under: its own, or `other`'s past `max`.
    fn place(&mut self, labels: L) -> Option<L> {
        if self.sets.contains(&labels) {
            return Some(labels);
        }
        if self.sets.len() < self.max {
            self.sets.insert(labels.clone());
            return Some(labels);
        }
        None
    }
}

/// Raises a counter to `value` (never lowers it).
fn raise(counter: &Counter, value: u64) {
    let current = counter.get();
    if value > current {
        counter.inc_by(value - current);
    }
}

/// A figure and the chain behind its latest rise, when known.
#[derive(Clone, Debug, Default)]
struct Traced<V> {
    value: V,
    exemplar: Option<Exemplar>,
}

/// The later of two exemplars (by when their chains were judged).
fn latest(a: Option<Exemplar>, b: Option<Exemplar>) -> Option<Exemplar> {
    match (a, b) {
        (Some(a), Some(b)) => Some(if b.judged_unix_nano >= a.judged_unix_nano {
            b
        } else {
            a
        }),
        (a, b) => a.or(b),
    }
}

/// The exemplar's labels and time, for prometheus-client.
fn exemplar_parts(e: &Exemplar) -> (TraceLabel, Option<std::time::SystemTime>) {
    let at = (e.judged_unix_nano > 0)
        .then(|| std::time::UNIX_EPOCH + std::time::Duration::from_nanos(e.judged_unix_nano));
    (
        TraceLabel {
            trace_id: e.trace.to_string(),
        },
        at,
    )
}

/// Raises a counter with an exemplar to `value`: the rise's last part is the exemplar's own
/// (what its chain added, at most the rise), the rest before it, so the exemplar shows the
/// chain behind the rise with its own value.
fn raise_traced(counter: &CounterWithExemplar<TraceLabel>, to: &Traced<u64>) {
    let current = counter.get().0;
    if to.value <= current {
        return;
    }
    let rise = to.value - current;
    match &to.exemplar {
        Some(e) => {
            let own = (e.value as u64).clamp(1, rise);
            if rise > own {
                counter.inc_by(rise - own, None, None);
            }
            let (labels, at) = exemplar_parts(e);
            counter.inc_by(own, Some(labels), at);
        }
        None => {
            counter.inc_by(rise, None, None);
        }
    }
}

/// The same in seconds (the exemplar's value is its chain's ms).
fn raise_traced_seconds(counter: &SecondsCounter, to: &Traced<f64>) {
    let current = counter.0.get().0;
    if to.value <= current {
        return;
    }
    let rise = to.value - current;
    match &to.exemplar {
        Some(e) => {
            let own = (e.value / 1000.0).min(rise);
            if rise > own {
                counter.0.inc_by(rise - own, None, None);
            }
            let (labels, at) = exemplar_parts(e);
            counter.0.inc_by(own, Some(labels), at);
        }
        None => {
            counter.0.inc_by(rise, None, None);
        }
    }
}

/// A histogram whose buckets are set from a sketch (see the module doc): cumulative counts per
/// bound, each only raised.
#[derive(Debug, Default)]
struct SketchHistogram {
    values: Mutex<HistogramValues>,
}

#[derive(Clone, Debug, Default, PartialEq)]
struct HistogramValues {
    /// Values at or below each bound of [`LATENCY_BUCKETS_MS`], cumulative.
    at_or_below: [u64; LATENCY_BUCKETS_MS.len()],
    count: u64,
    sum_seconds: f64,
}

impl HistogramValues {
    fn of(sketch: &Sketch) -> Self {
        let count = sketch.len();
        let mut at_or_below = [0; LATENCY_BUCKETS_MS.len()];
        for (slot, bound) in at_or_below.iter_mut().zip(LATENCY_BUCKETS_MS) {
            *slot = count.saturating_sub(sketch.count_above(bound));
        }
        let sum_ms: f64 = sketch.buckets().map(|(ms, n)| ms as f64 * n as f64).sum();
        HistogramValues {
            at_or_below,
            count,
            sum_seconds: sum_ms / 1000.0,
        }
    }

    fn add(&mut self, other: &HistogramValues) {
        for (a, b) in self.at_or_below.iter_mut().zip(other.at_or_below) {
            *a += b;
        }
        self.count += other.count;
        self.sum_seconds += other.sum_seconds;
    }
}

impl SketchHistogram {
    fn raise(&self, to: &HistogramValues) {
        let mut values = match self.values.lock() {
            Ok(guard) => guard,
            Err(poisoned) => poisoned.into_inner(),
        };
        for (a, b) in values.at_or_below.iter_mut().zip(to.at_or_below) {
            *a = (*a).max(b);
        }
        values.count = values.count.max(to.count);
        values.sum_seconds = values.sum_seconds.max(to.sum_seconds);
    }
}

impl TypedMetric for SketchHistogram {
    const TYPE: MetricType = MetricType::Histogram;
}

impl EncodeMetric for SketchHistogram {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        let values = match self.values.lock() {
            Ok(guard) => guard.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        };
        // The encoder wants each bucket's own count; the +Inf bucket is the rest.
        let mut buckets = Vec::with_capacity(LATENCY_BUCKETS_MS.len() + 1);
        let mut below = 0;
        for (bound, at_or_below) in LATENCY_BUCKETS_MS.iter().zip(values.at_or_below) {
            buckets.push((*bound as f64 / 1000.0, at_or_below.saturating_sub(below)));
            below = below.max(at_or_below);
        }
        buckets.push((f64::INFINITY, values.count.saturating_sub(below)));
        encoder.encode_histogram::<NoLabelSet>(
            values.sum_seconds,
            values.count.max(below),
            &buckets,
            None,
        )
    }

    fn metric_type(&self) -> MetricType {
        Self::TYPE
    }
}

/// The totals' text as encoded after a publish, and compressed when a scraper asked for gzip.
#[derive(Debug)]
struct Encoded {
    /// The publish's number.
    version: u64,
    text: Bytes,
    deflated: Option<Deflated>,
}

/// The totals' part of a body: as text, or compressed ([`encoding`](super::encoding)).
#[derive(Debug)]
enum TotalsPart {
    Text(Bytes),
    Deflated(Deflated),
}

/// The registry and its families; see the module documentation.
#[derive(Debug)]
pub struct Metrics {
    /// The receivers' families: encoded fresh on every scrape (a few lines).
    ingest_registry: Registry,
    /// The totals' families: encoded once per publish and kept ([`Metrics::totals_text`]),
    /// so a scraper that reads 100 times a second costs a copy, not an encoding.
    totals_registry: Registry,
    /// Bumped by every publish of the totals.
    version: AtomicU64,
    /// Held by a publish of the totals and by an encoding of them: never both at once.
    totals_busy: Mutex<()>,
    /// Told of each publish: [`keep_encoded`] waits on it.
    published: tokio::sync::Notify,
    /// The totals' families as last encoded, by format (the text format, OpenMetrics).
    encoded: [Mutex<Option<Encoded>>; 2],
    /// The formats a scraper has asked for, which each publish encodes anew.
    wanted: [AtomicBool; 2],
    /// The formats a scraper has asked for gzip-compressed, which each publish compresses too.
    wanted_gzip: [AtomicBool; 2],
    spans: Family<ResultLabel, Counter>,
    requests: Family<ResultLabel, Counter>,
    forwarded_spans: Family<ResultLabel, Counter>,
    forwarded_chains: Family<ReasonLabel, Counter>,
    chains: Family<OutcomeLabel, Counter>,
    hops: Family<BudgetLabel, Counter>,
    findings: Family<FindingLabels, CounterWithExemplar<TraceLabel>>,
    wasted: Family<EdgeLabels, SecondsCounter>,
    edge_calls: Family<EdgeLabels, Counter>,
    latency: Family<EdgeLabels, SketchHistogram>,
    /// The histogram's exemplars, by series and bucket: written after its bucket lines.
    latency_exemplars: Mutex<HashMap<EdgeLabels, [Option<Exemplar>; LATENCY_BUCKETS]>>,
    /// The histogram alone: its text is encoded apart, for its exemplars.
    latency_registry: Registry,
    timeouts: Family<TimeoutLabels, Gauge<f64, AtomicU64>>,
    overflow: Family<FamilyLabel, Counter>,
    admitted_findings: Mutex<Admitted<FindingLabels>>,
    admitted_wasted: Mutex<Admitted<EdgeLabels>>,
    admitted_calls: Mutex<Admitted<EdgeLabels>>,
    admitted_latency: Mutex<Admitted<EdgeLabels>>,
    admitted_timeouts: Mutex<Admitted<TimeoutLabels>>,
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    match mutex.lock() {
        Ok(guard) => guard,
        Err(poisoned) => poisoned.into_inner(),
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
        let mut ingest_registry = Registry::default();
        let mut registry = Registry::default();
        let mut latency_registry = Registry::default();
        let metrics = Metrics {
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
        // Counters are registered without `_total`: the encoders add it.
        ingest_registry.register(
            "budget_top_spans",
            "Spans sent to the receivers: accepted (judged), refused under load (retryable), rejected as malformed",
            metrics.spans.clone(),
        );
        ingest_registry.register(
            "budget_top_requests",
            "OTLP export requests: accepted, refused under load, rejected, unauthenticated (a refused body is never read)",
            metrics.requests.clone(),
        );
        if forwarding {
            ingest_registry.register(
                "budget_top_forwarded_spans",
                "Spans of the chains --forward kept: sent (accepted by the backend), retried (sent again, each time), dropped (no room, or left at stop), failed (refused, or out of retries)",
                metrics.forwarded_spans.clone(),
            );
            ingest_registry.register(
                "budget_top_forwarded_chains",
                "Chains --forward kept: for a finding at or above --forward-on, or as the --forward-sample share of the others",
                metrics.forwarded_chains.clone(),
            );
        }
        registry.register(
            "budget_top_chains",
            "Request chains judged, by how they ended for their user",
            metrics.chains.clone(),
        );
        registry.register(
            "budget_top_findings",
            "Findings of the judged chains (and the edges' own), by kind, severity and the service each names",
            metrics.findings.clone(),
        );
        registry.register(
            "budget_top_wasted_seconds",
            "Dead work in the callee (work for callers who had given up), by the edge into it; a wait on a callee that sends no spans, on that call's own edge",
            metrics.wasted.clone(),
        );
        registry.register(
            "budget_top_edge_calls",
            "Calls seen on each caller -> callee edge",
            metrics.edge_calls.clone(),
        );
        latency_registry.register(
            "budget_top_edge_latency_seconds",
            "Each edge's call latency (the caller's CLIENT span), from its sketch (within 1 %)",
            metrics.latency.clone(),
        );
        registry.register(
            "budget_top_edge_timeout_seconds",
            "Each edge's timeout: the largest declared, or inferred from the calls that got no answer",
            metrics.timeouts.clone(),
        );
        registry.register(
            "budget_top_hops",
            "Hops judged, by whether their budget is known",
            metrics.hops.clone(),
        );
        registry.register(
            "budget_top_series_overflow",
            "Label sets recorded under `other` because their family already held --max-series sets",
            metrics.overflow.clone(),
        );
        Metrics {
            ingest_registry,
            totals_registry: registry,
            latency_registry,
            ..metrics
        }
    }

    /// The receivers' counters (cheap: a scrape always reads them fresh).
    pub fn publish_ingest(&self, ingest: &IngestCounts) {
        let spans = [
            ("accepted", ingest.spans_accepted),
            ("refused", ingest.spans_refused),
            ("rejected", ingest.spans_rejected),
        ];
        for (result, n) in spans {
            raise(&self.spans.get_or_create(&ResultLabel { result }), n);
        }
        let requests = [
            ("accepted", ingest.requests_accepted),
            ("refused", ingest.requests_refused),
            ("rejected", ingest.requests_rejected),
            ("unauthenticated", ingest.requests_unauthenticated),
        ];
        for (result, n) in requests {
            raise(&self.requests.get_or_create(&ResultLabel { result }), n);
        }
    }

    /// The forwarding's counters (cheap: a scrape reads them fresh, as the receivers').
    pub fn publish_forward(&self, forward: &crate::forward::ForwardCounts) {
        let spans = [
            ("sent", forward.spans.sent),
            ("retried", forward.spans.retried),
            ("dropped", forward.spans.dropped),
            ("failed", forward.spans.failed),
        ];
        for (result, n) in spans {
            raise(
                &self.forwarded_spans.get_or_create(&ResultLabel { result }),
                n,
            );
        }
        let chains = [
            ("finding", forward.chains.finding),
            ("sample", forward.chains.sample),
        ];
        for (reason, n) in chains {
            raise(
                &self.forwarded_chains.get_or_create(&ReasonLabel { reason }),
                n,
            );
        }
    }

    /// The judged chains' totals (and the chains behind their latest rises, when the store
    /// keeps them), unless an encoding of them is running (then `false`: try again later; the
    /// loop that owns the store must not wait for an encoding).
    pub fn try_publish_totals(&self, totals: &Totals, exemplars: Option<&Exemplars>) -> bool {
        let _busy = match self.totals_busy.try_lock() {
            Ok(guard) => guard,
            Err(std::sync::TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) => return false,
        };
        self.record_totals(totals, exemplars);
        true
    }

    fn record_totals(&self, totals: &Totals, exemplars: Option<&Exemplars>) {
        let outcomes = totals.outcomes();
        for outcome in ChainOutcome::ALL {
            let labels = OutcomeLabel {
                outcome: outcome.as_str(),
            };
            raise(&self.chains.get_or_create(&labels), outcomes.get(outcome));
        }
        raise(
            &self.hops.get_or_create(&BudgetLabel { budget: "known" }),
            totals.hops_with_budget,
        );
        raise(
            &self.hops.get_or_create(&BudgetLabel { budget: "unknown" }),
            totals.hops_without_budget(),
        );
        self.publish_findings(totals, exemplars);
        let edges = totals.edges.sorted();
        let edge = |caller: &str, callee: &str| EdgeLabels {
            caller: caller.to_owned(),
            callee: callee.to_owned(),
        };
        let traced = |e: &deadline_budget::analysis::EdgeAggregate| {
            exemplars.and_then(|x| x.edges.get(&(e.caller.clone(), e.callee.clone())))
        };
        let overflow = bounded(
            &self.admitted_wasted,
            edges.iter().map(|e| {
                let figure = Traced {
                    value: e.wasted_ms.max(0) as f64 / 1000.0,
                    exemplar: traced(e).and_then(|x| x.wasted),
                };
                (edge(&e.caller, &e.callee), figure)
            }),
            |labels, figure| raise_traced_seconds(&self.wasted.get_or_create(labels), &figure),
        );
        self.overflowed("budget_top_wasted_seconds_total", overflow);
        let overflow = bounded(
            &self.admitted_calls,
            edges.iter().map(|e| (edge(&e.caller, &e.callee), e.calls)),
            |labels, value| raise(&self.edge_calls.get_or_create(labels), value),
        );
        self.overflowed("budget_top_edge_calls_total", overflow);
        let overflow = bounded(
            &self.admitted_latency,
            edges.iter().map(|e| {
                let figure = Traced {
                    value: HistogramValues::of(&e.latency),
                    exemplar: None,
                };
                (
                    edge(&e.caller, &e.callee),
                    (figure, traced(e).map(|x| x.latency)),
                )
            }),
            |labels, (figure, buckets)| {
                self.latency.get_or_create(labels).raise(&figure.value);
                if let Some(buckets) = buckets {
                    let mut kept = lock(&self.latency_exemplars);
                    let slots = match kept.get_mut(labels) {
                        Some(slots) => slots,
                        None => kept.entry(labels.clone()).or_default(),
                    };
                    for (slot, new) in slots.iter_mut().zip(buckets) {
                        *slot = latest(*slot, new);
                    }
                }
            },
        );
        self.overflowed("budget_top_edge_latency_seconds", overflow);
        self.publish_timeouts(totals);
        self.version.fetch_add(1, Ordering::Relaxed);
        self.published.notify_one();
    }

    fn publish_findings(&self, totals: &Totals, exemplars: Option<&Exemplars>) {
        // The chains' own findings by the service each names, and the edges' own (judged from
        // their totals now), which name the caller.
        let mut counts: BTreeMap<(FindingKind, &str), u64> = BTreeMap::new();
        for (service, kinds) in &totals.findings_by_service {
            for (kind, n) in kinds.iter() {
                *counts.entry((kind, service)).or_default() += n;
            }
        }
        let edges = totals.edges.sorted();
        for e in &edges {
            for (kind, n) in e.edge_findings().iter() {
                *counts.entry((kind, &e.caller)).or_default() += n;
            }
        }
        let overflow = bounded(
            &self.admitted_findings,
            counts.into_iter().map(|((kind, service), n)| {
                let labels = FindingLabels {
                    kind: kind.as_str().to_owned(),
                    severity: kind.severity().as_str().to_owned(),
                    service: service.to_owned(),
                };
                let exemplar = exemplars
                    .and_then(|x| x.findings.get(service))
                    .and_then(|slots| slots[kind as usize]);
                (labels, Traced { value: n, exemplar })
            }),
            |labels, figure| raise_traced(&self.findings.get_or_create(labels), &figure),
        );
        self.overflowed("budget_top_findings_total", overflow);
    }

    fn publish_timeouts(&self, totals: &Totals) {
        let mut now: BTreeMap<TimeoutLabels, f64> = BTreeMap::new();
        let mut admitted = lock(&self.admitted_timeouts);
        let mut overflow = 0;
        for e in totals.edges.sorted() {
            let Some((ms, inferred)) = e.timeout() else {
                continue;
            };
            let labels = TimeoutLabels {
                caller: e.caller.to_string(),
                callee: e.callee.to_string(),
                inferred: inferred.to_string(),
            };
            let seconds = ms as f64 / 1000.0;
            let labels = admitted.place(labels).unwrap_or_else(|| {
                overflow += 1;
                TimeoutLabels::other()
            });
            // `other` shows the longest timeout among the sets it holds.
            let slot = now.entry(labels).or_insert(0.0);
            *slot = slot.max(seconds);
        }
        // A gauge: an edge whose timeout went from inferred to declared (or away) loses its
        // old series.
        let gone: Vec<TimeoutLabels> = admitted
            .sets
            .iter()
            .filter(|l| !now.contains_key(*l))
            .cloned()
            .collect();
        for labels in gone {
            self.timeouts.remove(&labels);
            admitted.sets.remove(&labels);
        }
        drop(admitted);
        for (labels, seconds) in &now {
            self.timeouts.get_or_create(labels).set(*seconds);
        }
        self.overflowed("budget_top_edge_timeout_seconds", overflow);
    }

    fn overflowed(&self, family: &'static str, sets: u64) {
        raise(&self.overflow.get_or_create(&FamilyLabel { family }), sets);
    }

    /// The exposition: OpenMetrics text when `openmetrics`, else the Prometheus text format
    /// (0.0.4), in three parts a body sends one after the other (the receivers' lines, the
    /// totals' text as kept, shared and not copied, and the end), or, when `gzip`, one gzip
    /// member made of them (the totals' part compressed when it was encoded). Returns the body's
    /// pieces and the content type.
    pub fn encode_parts(&self, openmetrics: bool, gzip: bool) -> (Vec<Bytes>, &'static str) {
        let totals = self.totals_part(openmetrics, gzip);
        let mut head = String::with_capacity(4096);
        let mut end = String::new();
        // Writing into a String cannot fail.
        let content_type = if openmetrics {
            let _ = text::encode_registry(&mut head, &self.ingest_registry);
            let _ = text::encode_eof(&mut end);
            OPENMETRICS
        } else {
            let _ = prometheus_text::encode(&mut head, &self.ingest_registry);
            prometheus_text::CONTENT_TYPE
        };
        let pieces = match totals {
            TotalsPart::Text(totals) => vec![head.into(), totals, end.into()],
            TotalsPart::Deflated(totals) => encoding::member(&[
                Deflated::part(head.as_bytes(), false),
                totals,
                Deflated::part(end.as_bytes(), true),
            ]),
        };
        (pieces, content_type)
    }

    /// [`Metrics::encode_parts`] as one text (the tests read it).
    #[cfg(test)]
    pub fn encode(&self, openmetrics: bool) -> (String, &'static str) {
        let (parts, content_type) = self.encode_parts(openmetrics, false);
        let text = parts
            .iter()
            .map(|part| String::from_utf8_lossy(part))
            .collect();
        (text, content_type)
    }

    /// The totals' families as text, or compressed when `gzip`: as last encoded for this
    /// format, whatever was published since ([`keep_encoded`] brings it up to date); encoded
    /// (or compressed) here only the first time a format (or gzip) is asked for.
    fn totals_part(&self, openmetrics: bool, gzip: bool) -> TotalsPart {
        let format = usize::from(openmetrics);
        self.wanted[format].store(true, Ordering::Relaxed);
        if gzip {
            self.wanted_gzip[format].store(true, Ordering::Relaxed);
        }
        if let Some(encoded) = lock(&self.encoded[format]).as_ref() {
            match (&encoded.deflated, gzip) {
                (_, false) => return TotalsPart::Text(encoded.text.clone()),
                (Some(deflated), true) => return TotalsPart::Deflated(deflated.clone()),
                (None, true) => {}
            }
        }
        let _busy = lock(&self.totals_busy);
        let encoded = self.encode_totals(openmetrics);
        match (encoded.deflated, gzip) {
            (Some(deflated), true) => TotalsPart::Deflated(deflated),
            _ => TotalsPart::Text(encoded.text),
        }
    }

    /// Encodes the totals' families in `openmetrics` or the text format, compresses them too
    /// when a scraper asked for gzip, and keeps both (the caller holds `totals_busy`).
    fn encode_totals(&self, openmetrics: bool) -> Encoded {
        let format = usize::from(openmetrics);
        let version = self.version.load(Ordering::Relaxed);
        let mut out = String::new();
        if openmetrics {
            let _ = text::encode_registry(&mut out, &self.totals_registry);
            let mut latency = String::new();
            let _ = text::encode_registry(&mut latency, &self.latency_registry);
            with_bucket_exemplars(&latency, &lock(&self.latency_exemplars), &mut out);
        } else {
            let _ = prometheus_text::encode(&mut out, &self.totals_registry);
            let _ = prometheus_text::encode(&mut out, &self.latency_registry);
        }
        let deflated = self.wanted_gzip[format]
            .load(Ordering::Relaxed)
            .then(|| Deflated::part(out.as_bytes(), false));
        let text = Bytes::from(out);
        *lock(&self.encoded[format]) = Some(Encoded {
            version,
            text: text.clone(),
            deflated: deflated.clone(),
        });
        Encoded {
            version,
            text,
            deflated,
        }
    }

    /// Encodes anew, for each format a scraper has asked for, the totals' families published
    /// since its text was last encoded (and compresses them, when gzip was asked for).
    pub fn encode_published(&self) {
        let _busy = lock(&self.totals_busy);
        let version = self.version.load(Ordering::Relaxed);
        for openmetrics in [false, true] {
            let format = usize::from(openmetrics);
            if !self.wanted[format].load(Ordering::Relaxed) {
                continue;
            }
            let current = lock(&self.encoded[format])
                .as_ref()
                .map(|e| (e.version, e.deflated.is_some()));
            let gzip = self.wanted_gzip[format].load(Ordering::Relaxed);
            if current.is_none_or(|(v, deflated)| v != version || (gzip && !deflated)) {
                self.encode_totals(openmetrics);
            }
        }
    }
}

/// Keeps the totals' text up to date off the request path: after each publish, encodes it
/// again on a blocking thread (one encoding at a time; publishes during one are taken by the
/// next), until `stop`.
pub async fn keep_encoded(metrics: Arc<Metrics>, stop: tokio_util::sync::CancellationToken) {
    loop {
        tokio::select! {
            () = metrics.published.notified() => {}
            () = stop.cancelled() => return,
        }
        let encoding = metrics.clone();
        if tokio::task::spawn_blocking(move || encoding.encode_published())
            .await
            .is_err()
        {
            return;
        }
    }
}

/// The histogram's OpenMetrics text (`latency`) into `out`, each bucket line followed by its
/// exemplar when `exemplars` has one: ` # {trace_id="…"} <seconds> <judged at>`. A bucket line
/// names its series as prometheus-client writes labels (`\\`, `\"` and `\n` escaped, `le`
/// beside them), and a series' buckets come in order, `+Inf` last.
fn with_bucket_exemplars(
    latency: &str,
    exemplars: &HashMap<EdgeLabels, [Option<Exemplar>; LATENCY_BUCKETS]>,
    out: &mut String,
) {
    const BUCKET: &str = "budget_top_edge_latency_seconds_bucket{";
    if exemplars.is_empty() {
        out.push_str(latency);
        return;
    }
    let by_text: HashMap<String, &[Option<Exemplar>; LATENCY_BUCKETS]> = exemplars
        .iter()
        .map(|(labels, slots)| {
            let text = format!(
                "caller=\"{}\",callee=\"{}\"",
                escape_label(&labels.caller),
                escape_label(&labels.callee)
            );
            (text, slots)
        })
        .collect();
    let mut bucket_of: HashMap<&str, usize> = HashMap::default();
    for line in latency.split_inclusive('\n') {
        let series = line.strip_prefix(BUCKET).and_then(|rest| {
            // `{le="0.5",caller=…}` (OpenMetrics: le first) or `{caller=…,le="0.5"}`.
            match rest.strip_prefix("le=\"") {
                Some(after) => {
                    let start = after.find("\",")? + 2;
                    Some(&after[start..after.rfind("} ")?])
                }
                None => rest.rfind(",le=\"").map(|at| &rest[..at]),
            }
        });
        let Some(series) = series else {
            out.push_str(line);
            continue;
        };
        let bucket = bucket_of.entry(series).or_insert(0);
        let exemplar = by_text
            .get(series)
            .and_then(|slots| slots.get(*bucket).copied().flatten());
        *bucket += 1;
        match exemplar {
            Some(e) => {
                let _ = std::fmt::Write::write_fmt(
                    out,
                    format_args!(
                        "{} # {{trace_id=\"{}\"}} {} {}\n",
                        line.trim_end_matches('\n'),
                        e.trace,
                        e.value / 1000.0,
                        e.judged_unix_nano as f64 / 1e9
                    ),
                );
            }
            None => out.push_str(line),
        }
    }
}

/// A label value as the text formats escape it.
fn escape_label(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

/// Values that add up when sets share `other`.
trait Summed: Default {
    fn add(&mut self, other: &Self);
}

impl<V: Summed + Default> Summed for Traced<V> {
    fn add(&mut self, other: &Self) {
        self.value.add(&other.value);
        self.exemplar = latest(self.exemplar, other.exemplar);
    }
}

/// A histogram's figure and its buckets' exemplars: `other`'s are the latest of its sets.
impl Summed
    for (
        Traced<HistogramValues>,
        Option<[Option<Exemplar>; LATENCY_BUCKETS]>,
    )
{
    fn add(&mut self, other: &Self) {
        self.0.add(&other.0);
        if let Some(theirs) = &other.1 {
            let ours = self.1.get_or_insert([None; LATENCY_BUCKETS]);
            for (slot, new) in ours.iter_mut().zip(theirs) {
                *slot = latest(*slot, *new);
            }
        }
    }
}

impl Summed for u64 {
    fn add(&mut self, other: &Self) {
        *self += other;
    }
}

impl Summed for f64 {
    fn add(&mut self, other: &Self) {
        *self += other;
    }
}

impl Summed for HistogramValues {
    fn add(&mut self, other: &Self) {
        HistogramValues::add(self, other);
    }
}

/// Records each `(labels, value)` with `record` under its own labels while the family has room
/// (see [`Admitted`]), and the sum of the rest under `other`; returns how many sets went to
/// `other`.
fn bounded<L: Labels, V: Summed>(
    admitted: &Mutex<Admitted<L>>,
    figures: impl Iterator<Item = (L, V)>,
    record: impl Fn(&L, V),
) -> u64 {
    let mut admitted = lock(admitted);
    let mut other: Option<V> = None;
    let mut overflow = 0;
    for (labels, value) in figures {
        match admitted.place(labels) {
            Some(labels) => record(&labels, value),
            None => {
                overflow += 1;
                other.get_or_insert_with(V::default).add(&value);
            }
        }
    }
    drop(admitted);
    if let Some(value) = other {
        record(&L::other(), value);
    }
    overflow
}

/// What the scraper asked for: OpenMetrics when its `Accept` header names
/// `application/openmetrics-text` (Prometheus does, first), else the classic text format.
pub fn wants_openmetrics(accept: Option<&str>) -> bool {
    encoding::accepts(accept, |media| {
        media.eq_ignore_ascii_case("application/openmetrics-text")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn openmetrics_only_when_asked_for() {
        assert!(!wants_openmetrics(None));
        assert!(!wants_openmetrics(Some("text/plain")));
        assert!(!wants_openmetrics(Some("*/*")));
        assert!(wants_openmetrics(Some(
            "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1"
        )));
        assert!(!wants_openmetrics(Some(
            "application/openmetrics-text;q=0, text/plain"
        )));
    }

    #[test]
    fn counters_only_grow_and_sets_past_the_bound_go_to_other() {
        let metrics = Metrics::new(2);
        let mut ingest = IngestCounts {
            spans_accepted: 10,
            ..IngestCounts::default()
        };
        metrics.publish_ingest(&ingest);
        ingest.spans_accepted = 7;
        metrics.publish_ingest(&ingest);
        let (text, _) = metrics.encode(false);
        assert!(
            text.contains("budget_top_spans_total{result=\"accepted\"} 10\n"),
            "{text}"
        );
        let admitted = Mutex::new(Admitted::new(2));
        let record = Mutex::new(Vec::new());
        let sets = (0..5).map(|i| {
            (
                EdgeLabels {
                    caller: format!("a{i}"),
                    callee: "b".into(),
                },
                1u64 + i,
            )
        });
        let overflow = bounded(&admitted, sets, |l, v| {
            record.lock().unwrap().push((l.caller.clone(), v))
        });
        assert_eq!(overflow, 3);
        assert_eq!(
            record.into_inner().unwrap(),
            vec![
                ("a0".into(), 1),
                ("a1".into(), 2),
                ("other".into(), 3 + 4 + 5)
            ]
        );
    }

    /// A chain judged again moves its outcome: the totals take the old one back, the counter
    /// keeps it (a counter never goes down) and counts the new one.
    #[test]
    fn a_chain_judged_again_never_lowers_a_counter() {
        use deadline_budget::analysis::SpanStatus;
        let hop = |id, parent, service, status| hop([1; 16], id, parent, service, status);
        let mut store = crate::store::Store::new(100);
        store.insert_spans([hop(2, Some(1), "orders", SpanStatus::Unset)]);
        store.judge_all();
        let metrics = Metrics::new(10);
        assert!(metrics.try_publish_totals(store.totals(), store.exemplars()));
        let before = store.totals().outcomes();
        // The root arrives, answering with an error: judged again.
        store.insert_spans([hop(1, None, "frontend", SpanStatus::Error)]);
        store.analyse_dirty();
        let after = store.totals().outcomes();
        assert_eq!(store.counters().chains_rejudged, 1);
        assert_ne!(before, after);
        assert!(metrics.try_publish_totals(store.totals(), store.exemplars()));
        let (text, _) = metrics.encode(false);
        let samples: Vec<&str> = text
            .lines()
            .filter(|l| l.starts_with("budget_top_chains_total{"))
            .collect();
        for outcome in ChainOutcome::ALL {
            let value = (before.get(outcome)).max(after.get(outcome));
            let line = format!(
                "budget_top_chains_total{{outcome=\"{}\"}} {value}",
                outcome.as_str()
            );
            assert!(samples.contains(&line.as_str()), "{line} in {samples:?}");
        }
    }

    /// A scrape copies the text last encoded (it never encodes a publish itself: that is
    /// `encode_published`'s, off the request path), and a publish waits for no encoding.
    #[test]
    fn a_scrape_reads_the_text_last_encoded_and_a_publish_skips_a_running_encoding() {
        use deadline_budget::analysis::SpanStatus;
        let mut store = crate::store::Store::new(100);
        store.insert_spans([hop([1; 16], 1, None, "frontend", SpanStatus::Unset)]);
        store.judge_all();
        let metrics = Metrics::new(10);
        let chains = |text: &str| {
            text.lines()
                .filter(|l| l.starts_with("budget_top_chains_total{"))
                .map(|l| {
                    l.rsplit_once(' ')
                        .map_or(0, |(_, v)| v.parse::<u64>().unwrap_or(0))
                })
                .sum::<u64>()
        };
        // The first scrape of a format encodes it (nothing was kept yet).
        assert_eq!(chains(&metrics.encode(false).0), 0);
        let busy = lock(&metrics.totals_busy);
        assert!(
            !metrics.try_publish_totals(store.totals(), store.exemplars()),
            "published during an encoding"
        );
        drop(busy);
        assert!(metrics.try_publish_totals(store.totals(), store.exemplars()));
        assert_eq!(
            chains(&metrics.encode(false).0),
            0,
            "a scrape encoded the publish"
        );
        metrics.encode_published();
        assert_eq!(chains(&metrics.encode(false).0), 1);
        // OpenMetrics was never asked for: not encoded by the publish, but on its first scrape.
        assert!(lock(&metrics.encoded[1]).is_none());
        assert_eq!(chains(&metrics.encode(true).0), 1);
    }

    /// A server span of 49 ms named `op` in trace `trace`, without budget attributes.
    fn hop(
        trace: [u8; 16],
        id: u8,
        parent: Option<u8>,
        service: &str,
        status: deadline_budget::analysis::SpanStatus,
    ) -> deadline_budget::analysis::Span {
        use deadline_budget::analysis::{BudgetFacts, Span, SpanId, SpanKind, TraceId};
        Span {
            trace_id: TraceId(trace),
            span_id: SpanId([id; 8]),
            parent_span_id: parent.map(|p| SpanId([p; 8])),
            service: std::sync::Arc::from(service),
            name: std::sync::Arc::from("op"),
            kind: SpanKind::Server,
            start_unix_nano: 1_000_000,
            end_unix_nano: 50_000_000,
            status,
            budget: BudgetFacts::default(),
        }
    }

    /// `n` chains, each a call from its own service `svc-I` to `db`: `n` edges.
    fn edge_chains(n: u32) -> Vec<deadline_budget::analysis::Span> {
        use deadline_budget::analysis::SpanStatus::Unset;
        (0..n)
            .flat_map(|i| {
                let mut trace = [1u8; 16];
                trace[..4].copy_from_slice(&i.to_be_bytes());
                [
                    hop(trace, 1, None, &format!("svc-{i}"), Unset),
                    hop(trace, 2, Some(1), "db", Unset),
                ]
            })
            .collect()
    }

    #[test]
    fn a_gzip_scrape_is_the_same_text_compressed_and_follows_each_publish() {
        use std::io::Read as _;
        let gunzip = |pieces: Vec<Bytes>| {
            let body: Vec<u8> = pieces.iter().flat_map(|p| p.iter().copied()).collect();
            let mut text = String::new();
            flate2::read::GzDecoder::new(&body[..])
                .read_to_string(&mut text)
                .expect("one valid gzip member");
            (text, body.len())
        };
        let metrics = Metrics::new(10_000);
        let mut totals = Totals::new();
        let mut store = crate::store::Store::new(1000);
        for openmetrics in [false, true] {
            // Before any publish, then after one with many edges: the same text either way.
            for round in 0..2 {
                let (text, content_type) = metrics.encode(openmetrics);
                let (pieces, gzip_type) = metrics.encode_parts(openmetrics, true);
                let (unzipped, compressed) = gunzip(pieces);
                assert_eq!(unzipped, text, "openmetrics {openmetrics}, round {round}");
                assert_eq!(content_type, gzip_type);
                if round == 1 {
                    assert!(text.contains("budget_top_edge_calls_total{caller=\"svc-999\""));
                    assert!(
                        compressed * 5 < text.len(),
                        "{compressed} of {}",
                        text.len()
                    );
                }
                if round == 0 && !openmetrics {
                    store.insert_spans(edge_chains(1000));
                    store.judge_all();
                    totals = store.totals().clone();
                }
                assert!(metrics.try_publish_totals(&totals, None));
                metrics.encode_published();
            }
        }
    }

    /// A chain whose callee works on after its caller's call ended: an `orphaned_work` on
    /// `db`, dead work on frontend → db, and a call of 490 ms. The OpenMetrics text carries its
    /// trace as the exemplar of each series it raised; the text format carries none.
    #[test]
    fn the_series_a_chain_raised_carry_its_trace_as_exemplar() {
        use deadline_budget::analysis::{SpanKind, SpanStatus};
        let trace = [7u8; 16];
        let at = |mut span: deadline_budget::analysis::Span, kind, start_ms: u64, end_ms: u64| {
            span.kind = kind;
            span.start_unix_nano = start_ms * 1_000_000;
            span.end_unix_nano = end_ms * 1_000_000;
            span
        };
        let mut store = crate::store::Store::new(100).with_exemplars();
        store.set_clock(1_700_000_000_000_000_000);
        store.insert_spans([
            at(
                hop(trace, 1, None, "frontend", SpanStatus::Unset),
                SpanKind::Server,
                1,
                1000,
            ),
            at(
                hop(trace, 2, Some(1), "frontend", SpanStatus::Error),
                SpanKind::Client,
                10,
                500,
            ),
            at(
                hop(trace, 3, Some(2), "db", SpanStatus::Unset),
                SpanKind::Server,
                20,
                900,
            ),
        ]);
        store.judge_all();
        let report = store.report_of_judged();
        assert!(
            report
                .findings
                .iter()
                .any(|f| f.kind == FindingKind::OrphanedWork && &*f.service == "db"),
            "{:?}",
            report.findings
        );
        let metrics = Metrics::new(10);
        assert!(metrics.try_publish_totals(store.totals(), store.exemplars()));
        metrics.encode_published();
        let (text, _) = metrics.encode(true);
        let exemplar = format!(" # {{trace_id=\"{}\"}}", "07".repeat(16));
        let line = |prefix: &str| {
            text.lines()
                .find(|l| l.starts_with(prefix))
                .unwrap_or_else(|| panic!("no {prefix} in {text}"))
                .to_owned()
        };
        let findings = line(
            "budget_top_findings_total{kind=\"orphaned_work\",severity=\"error\",service=\"db\"}",
        );
        assert!(
            findings.ends_with(&format!("{exemplar} 1.0 1700000000.0")),
            "{findings}"
        );
        let wasted = line("budget_top_wasted_seconds_total{caller=\"frontend\",callee=\"db\"}");
        assert!(wasted.contains(&exemplar), "{wasted}");
        // 490 ms: the bucket up to 0.5 s, and no other.
        let bucket = line(
            "budget_top_edge_latency_seconds_bucket{le=\"0.5\",caller=\"frontend\",callee=\"db\"}",
        );
        assert!(
            bucket.ends_with(&format!("{exemplar} 0.49 1700000000")),
            "{bucket}"
        );
        let others = text
            .lines()
            .filter(|l| {
                l.starts_with("budget_top_edge_latency_seconds_bucket") && l.contains(" # ")
            })
            .count();
        assert_eq!(others, 1, "{text}");
        let (plain, _) = metrics.encode(false);
        assert!(!plain.contains("trace_id"), "{plain}");
    }

    #[test]
    fn a_histogram_reads_its_buckets_from_the_sketch() {
        let mut sketch = Sketch::new();
        for ms in [1, 3, 3, 40, 900, 70_000] {
            sketch.add(ms);
        }
        let values = HistogramValues::of(&sketch);
        assert_eq!(values.count, 6);
        assert_eq!(values.at_or_below[0], 1, "<= 1 ms");
        assert_eq!(values.at_or_below[2], 3, "<= 5 ms");
        assert_eq!(values.at_or_below[5], 4, "<= 50 ms");
        assert_eq!(values.at_or_below[9], 5, "<= 1 s");
        assert_eq!(values.at_or_below[14], 5, "<= 60 s");
        let metrics = Metrics::new(10);
        metrics
            .latency
            .get_or_create(&EdgeLabels {
                caller: "a".into(),
                callee: "b".into(),
            })
            .raise(&values);
        let (text, _) = metrics.encode(false);
        assert!(
            text.contains(
                "budget_top_edge_latency_seconds_bucket{caller=\"a\",callee=\"b\",le=\"0.05\"} 4\n"
            ),
            "{text}"
        );
        assert!(
            text.contains(
                "budget_top_edge_latency_seconds_bucket{caller=\"a\",callee=\"b\",le=\"+Inf\"} 6\n"
            ),
            "{text}"
        );
        assert!(
            text.contains("budget_top_edge_latency_seconds_count{caller=\"a\",callee=\"b\"} 6\n"),
            "{text}"
        );
    }
}

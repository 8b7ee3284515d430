//! The trace store: request chains assembled from spans as they arrive, analysed on demand.
//!
//! One loop owns it (no lock between ingest and render): it feeds [`Store::insert_batch`] with
//! what ingest sends, calls [`Store::analyse_dirty`] on its tick, and the screen and the check
//! report read chain summaries, a chain's analysis, edges and counts. Chains assemble in any
//! order across batches; a chain is marked dirty when a span joins it and analysed again on the
//! next tick. Retention is bounded by `max_spans`: the oldest chains (by first arrival) are
//! evicted first, so memory stays flat under any load.

use std::collections::VecDeque;

use foldhash::{HashMap, HashMapExt as _};
use std::sync::Arc;

use deadline_budget::analysis::{
    Chain, ChainAnalysis, ChainSummary, Coverage, EdgeAggregate, EdgeReport, EdgeSample, EdgeStats,
    EdgeTimeouts, Finding, FindingKind, Inserted, KindSet, LostContext, Options, OutcomeCounts,
    Report, Severity, SeverityCounts, Span, SpanId, Summary, TraceId, lost_contexts,
};
use opentelemetry_proto::tonic::common::v1::KeyValue;

use crate::batch::{self, Batch, RawAttributes};

mod attributes;
mod samples;
pub use attributes::SpanAttributes;
use attributes::{ChainAttributes, Dictionary};
use samples::EdgeSamples;

/// The default for `--max-spans`.
pub const DEFAULT_MAX_SPANS: usize = 1_000_000;

/// One line of the chain list: a chain's latest summary.
#[derive(Clone, Copy, Debug)]
pub struct ChainEntry<'a> {
    /// The trace.
    pub trace_id: TraceId,
    /// The chain at a glance, from its latest analysis.
    pub summary: &'a ChainSummary,
    /// Whether spans joined the chain since that analysis.
    pub stale: bool,
    /// When its first span arrived, on the clock given by [`Store::set_clock`].
    pub arrived_unix_nano: u64,
}

impl<'a> ChainEntry<'a> {
    /// The line for a held chain; `None` until it is analysed.
    fn of(trace_id: TraceId, entry: &'a Entry) -> Option<Self> {
        Some(ChainEntry {
            trace_id,
            summary: &entry.analysis.as_ref()?.summary,
            stale: entry.dirty,
            arrived_unix_nano: entry.arrived_unix_nano,
        })
    }
}

/// Store-wide counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct StoreCounters {
    /// Spans held now.
    pub spans_held: u64,
    /// Chains held now.
    pub chains_held: u64,
    /// Spans that replaced a copy already held (the same span sent twice).
    pub spans_duplicate: u64,
    /// Chains evicted to stay under `max_spans`.
    pub chains_evicted: u64,
    /// Spans evicted with them.
    pub spans_evicted: u64,
    /// Spans not kept because their chain alone already held `max_spans`.
    pub spans_over_limit: u64,
    /// Spans that arrived again with the same id but different contents: the copy kept is
    /// chosen by content (see `Chain::insert`), whatever the order they came in.
    pub spans_conflicting: u64,
    /// Raw attribute bytes held for the detail view: the chains' arenas and the dictionary of
    /// repeated attributes (see `store::attributes`).
    pub attribute_bytes: u64,
    /// Chains whose raw attributes were dropped, oldest first, to stay under the budget.
    pub attribute_chains_dropped: u64,
}

#[derive(Debug)]
struct Entry {
    chain: Chain,
    /// Raw attributes of the spans the ingest kept them for, compacted (no allocation for a
    /// chain without any: `check` keeps none).
    attributes: ChainAttributes,
    /// What `attributes` costs, counted in [`StoreCounters::attribute_bytes`].
    attribute_bytes: usize,
    /// Spans at positions below this had their raw attributes dropped for the budget.
    attributes_dropped_below: u32,
    /// The chain's place in [`Store::attribute_order`]; 0 when it is not there.
    attribute_seq: u64,
    /// The latest analysis, without its edge samples (held packed in `samples`).
    analysis: Option<Arc<ChainAnalysis>>,
    /// The latest analysis's edge samples, packed: they are in the edge aggregates, and are
    /// taken out again when the chain is analysed anew or evicted.
    samples: EdgeSamples,
    dirty: bool,
    /// When the chain's first span arrived ([`Store::set_clock`]).
    arrived_unix_nano: u64,
}

/// The store. See the module documentation.
#[derive(Debug)]
pub struct Store {
    /// Boxed: the map keeps about twice as many slots as chains, and a slot is then 24 bytes
    /// instead of 144.
    chains: HashMap<TraceId, Box<Entry>>,
    /// Trace ids by first arrival, oldest first. Chains leave only by eviction, from the front.
    order: VecDeque<TraceId>,
    max_spans: usize,
    counters: StoreCounters,
    options: Options,
    /// Sums of the analysed chains' edges.
    edges: EdgeStats,
    /// Sums of the analysed chains' severity counts.
    findings: SeverityCounts,
    /// Sum of the analysed chains' hops.
    hops: u64,
    /// Sum of the analysed chains' hops whose budget is known.
    hops_with_budget: u64,
    /// Hops without a known budget, by service, over the analysed chains.
    without_budget: HashMap<Arc<str>, u64>,
    /// Sum of the analysed chains' wasted ms.
    wasted_ms: i64,
    /// The analysed chains by outcome.
    outcomes: OutcomeCounts,
    /// The inferred timeouts the chains were last analysed with.
    timeouts: EdgeTimeouts,
    /// The `context_lost` findings folded into the analyses of the chains held, by trace
    /// (judged across chains: see [`Store::refresh_lost_contexts`]).
    lost: HashMap<TraceId, Vec<Finding>>,
    /// When `timeouts` was last compared with the edges (analyses since).
    timeouts_checked: usize,
    dirty: Vec<TraceId>,
    /// The most raw attribute bytes held; past it the oldest chains' attributes go first.
    max_attribute_bytes: usize,
    /// Chains holding raw attributes, in the order they first got some (oldest first), with
    /// the sequence number that tells a chain from a later one of the same trace id.
    attribute_order: VecDeque<(TraceId, u64)>,
    /// The last sequence number given in `attribute_order`.
    attribute_seq: u64,
    /// The raw attributes that repeat, numbered once for every chain.
    dictionary: Dictionary,
    /// The time spans inserted now arrive at ([`Store::set_clock`]).
    clock_unix_nano: u64,
}

/// The share of `--max-attribute-bytes` the dictionary of repeated attributes may take.
const DICTIONARY_SHARE: usize = 4;

/// The most spans held for which the screen's loop judges lost contexts on every pass that
/// analysed a chain (a pass over every span held).
const LOST_CONTEXT_LIVE_SPANS: u64 = 200_000;

/// Counts of one finding of `severity`.
fn one(severity: Severity) -> SeverityCounts {
    let mut c = SeverityCounts::default();
    c.bump(severity);
    c
}

/// Chains analysed between two looks at the edges' inferred timeouts in the live loop.
const TIMEOUT_CHECK_EVERY: usize = 2048;

impl Store {
    /// An empty store that holds at most `max_spans` spans (at least one).
    pub fn new(max_spans: usize) -> Self {
        Store {
            chains: HashMap::new(),
            order: VecDeque::new(),
            max_spans: max_spans.max(1),
            counters: StoreCounters::default(),
            options: Options::default(),
            edges: EdgeStats::new(),
            findings: SeverityCounts::default(),
            hops: 0,
            hops_with_budget: 0,
            without_budget: HashMap::new(),
            wasted_ms: 0,
            outcomes: OutcomeCounts::default(),
            timeouts: EdgeTimeouts::default(),
            lost: HashMap::new(),
            timeouts_checked: 0,
            dirty: Vec::new(),
            max_attribute_bytes: batch::DEFAULT_MAX_ATTRIBUTE_BYTES,
            attribute_order: VecDeque::new(),
            attribute_seq: 0,
            dictionary: Dictionary::with_limit(
                batch::DEFAULT_MAX_ATTRIBUTE_BYTES / DICTIONARY_SHARE,
            ),
            clock_unix_nano: 0,
        }
    }

    /// The time the spans inserted from now on arrive at (the screen's clock, so a chain's
    /// [`ChainEntry::arrived_unix_nano`] says when it first showed up); 0 until set.
    pub fn set_clock(&mut self, now_unix_nano: u64) {
        self.clock_unix_nano = now_unix_nano;
    }

    /// The same store holding at most `bytes` of raw attributes (`--max-attribute-bytes`).
    pub fn with_attribute_budget(mut self, bytes: usize) -> Self {
        self.max_attribute_bytes = bytes;
        self.dictionary = Dictionary::with_limit(bytes / DICTIONARY_SHARE);
        self
    }

    /// The same store with other analysis options.
    pub fn with_options(mut self, options: Options) -> Self {
        self.options = options;
        self
    }

    /// Adds a batch from ingest (its spans and, if kept, their raw attributes).
    pub fn insert_batch(&mut self, batch: Batch) {
        let mut attributes = batch.attributes.into_iter();
        for span in batch.spans {
            let attrs = attributes.next();
            self.insert_span(span, attrs);
        }
    }

    /// Adds spans without raw attributes.
    pub fn insert_spans(&mut self, spans: impl IntoIterator<Item = Span>) {
        for span in spans {
            self.insert_span(span, None);
        }
    }

    // Inlined into the loops above: a `Span` is 304 bytes, and each call by value copies it.
    #[inline]
    fn insert_span(&mut self, span: Span, attributes: Option<RawAttributes>) {
        let trace_id = span.trace_id;
        let span_id = span.span_id;
        let known = self
            .chains
            .get(&trace_id)
            .map(|e| (e.chain.contains(span_id), e.chain.len() >= self.max_spans));
        match known {
            None => self.add_chain(trace_id),
            // A copy of a span already held replaces it: no room needed.
            Some((true, _)) => {}
            Some((false, true)) => {
                self.counters.spans_over_limit += 1;
                return;
            }
            Some((false, false)) => self.make_room_except(1, trace_id),
        }
        let Some(entry) = self.chains.get_mut(&trace_id) else {
            return;
        };
        if known.is_some_and(|(held, _)| held) && !entry.samples.is_empty() {
            // The copy may win and bring another service to the position the packed samples
            // name it by: name them in full until the chain is analysed again.
            entry.samples = entry.samples.detach(&entry.chain);
        }
        match entry.chain.insert(span) {
            Inserted::New => {
                self.counters.spans_held += 1;
            }
            Inserted::Replaced => self.counters.spans_duplicate += 1,
            Inserted::Conflicting => {
                self.counters.spans_duplicate += 1;
                self.counters.spans_conflicting += 1;
            }
            Inserted::OtherTrace => return,
        }
        if let Some(attrs) = attributes.filter(|a| !a.is_empty()) {
            let dictionary_before = self.dictionary.bytes();
            entry
                .attributes
                .insert(&mut self.dictionary, span_id, &attrs);
            let held = entry.attributes.bytes_held();
            self.counters.attribute_bytes = self.counters.attribute_bytes + held as u64
                - entry.attribute_bytes as u64
                + (self.dictionary.bytes() - dictionary_before) as u64;
            entry.attribute_bytes = held;
            if entry.attribute_seq == 0 {
                self.attribute_seq += 1;
                entry.attribute_seq = self.attribute_seq;
                self.attribute_order
                    .push_back((trace_id, self.attribute_seq));
            }
        }
        if !entry.dirty {
            entry.dirty = true;
            self.dirty.push(trace_id);
        }
        self.trim_attributes();
        // Chains evicted with attributes leave their place behind: sweep now and then, so the
        // queue stays within a few times the chains held.
        if self.attribute_order.len() > self.chains.len() * 2 + 1024 {
            let chains = &self.chains;
            self.attribute_order
                .retain(|(id, seq)| chains.get(id).is_some_and(|e| e.attribute_seq == *seq));
        }
    }

    /// Drops the raw attributes of the chains that got theirs first until what is held fits
    /// `max_attribute_bytes`. The spans stay; the detail view says their attributes were
    /// dropped.
    fn trim_attributes(&mut self) {
        while self.counters.attribute_bytes as usize > self.max_attribute_bytes {
            let Some((oldest, seq)) = self.attribute_order.pop_front() else {
                return;
            };
            let Some(entry) = self
                .chains
                .get_mut(&oldest)
                .filter(|e| e.attribute_seq == seq)
            else {
                continue; // evicted since (perhaps a new chain of that trace id took its place)
            };
            entry.attribute_seq = 0;
            if !std::mem::take(&mut entry.attributes).is_empty() {
                self.counters.attribute_bytes -= entry.attribute_bytes as u64;
                self.counters.attribute_chains_dropped += 1;
                entry.attribute_bytes = 0;
                entry.attributes_dropped_below = entry.chain.len() as u32;
            }
        }
    }

    /// Makes room for one span, then an empty chain for `trace_id`, newest in arrival order.
    fn add_chain(&mut self, trace_id: TraceId) {
        self.make_room(1);
        self.order.push_back(trace_id);
        self.chains.insert(
            trace_id,
            Box::new(Entry {
                chain: Chain::new(trace_id),
                attributes: ChainAttributes::default(),
                attribute_bytes: 0,
                attributes_dropped_below: 0,
                attribute_seq: 0,
                analysis: None,
                samples: EdgeSamples::default(),
                dirty: false,
                arrived_unix_nano: self.clock_unix_nano,
            }),
        );
        self.counters.chains_held += 1;
    }

    /// Evicts the oldest chains until `extra` more spans fit.
    fn make_room(&mut self, extra: usize) {
        while self.counters.spans_held as usize + extra > self.max_spans {
            let Some(oldest) = self.order.pop_front() else {
                return;
            };
            self.evict(oldest);
        }
    }

    /// As [`Store::make_room`], but never evicts `keep` (the chain being added to).
    fn make_room_except(&mut self, extra: usize, keep: TraceId) {
        while self.counters.spans_held as usize + extra > self.max_spans {
            let Some(i) = self.order.iter().position(|id| *id != keep) else {
                return;
            };
            if let Some(oldest) = self.order.remove(i) {
                self.evict(oldest);
            }
        }
    }

    fn evict(&mut self, trace_id: TraceId) {
        let Some(entry) = self.chains.remove(&trace_id) else {
            return;
        };
        let n = entry.chain.len() as u64;
        self.counters.attribute_bytes -= entry.attribute_bytes as u64;
        self.counters.spans_held -= n;
        self.counters.chains_held -= 1;
        self.counters.chains_evicted += 1;
        self.counters.spans_evicted += n;
        if let Some(analysis) = entry.analysis {
            // With the lost contexts folded into it.
            self.subtract(&analysis, &entry.samples.unpack(&entry.chain));
        }
        self.lost.remove(&trace_id);
    }

    /// Takes a chain's analysis (held without its edge samples) and its samples out of the
    /// aggregates.
    fn subtract(&mut self, analysis: &ChainAnalysis, edges: &[EdgeSample]) {
        let s = &analysis.summary;
        self.findings.subtract(s.findings);
        self.hops -= u64::from(s.hops);
        self.hops_with_budget -= u64::from(s.hops_with_budget);
        self.wasted_ms -= s.wasted_ms;
        self.outcomes.remove(s.outcome);
        for service in &analysis.services_without_budget {
            if let Some(n) = self.without_budget.get_mut(service) {
                *n -= 1;
                if *n == 0 {
                    self.without_budget.remove(service);
                }
            }
        }
        for sample in edges {
            self.edges.remove_sample(analysis.trace_id, sample);
        }
    }

    /// Adds a chain's analysis and its edge samples to the aggregates.
    fn add(&mut self, analysis: &ChainAnalysis, edges: &[EdgeSample]) {
        let s = &analysis.summary;
        self.findings.add(s.findings);
        self.hops += u64::from(s.hops);
        self.hops_with_budget += u64::from(s.hops_with_budget);
        self.wasted_ms += s.wasted_ms;
        self.outcomes.add(s.outcome);
        for service in &analysis.services_without_budget {
            *self.without_budget.entry(service.clone()).or_insert(0) += 1;
        }
        for sample in edges {
            self.edges.add_sample(analysis.trace_id, sample);
        }
    }

    /// Compares the edges' inferred timeouts with the ones the chains were analysed with; when
    /// they moved much, every chain is analysed again (a slice per call, as any dirty chain), so
    /// `timeout_inverted` sees timeouts inferred from chains that came later. Returns whether.
    fn refresh_timeouts(&mut self) -> bool {
        let now = self.edges.inferred_timeouts();
        if !now.differs_much_from(&self.timeouts) {
            return false;
        }
        self.timeouts = now;
        for (id, entry) in self.chains.iter_mut() {
            if !entry.dirty {
                entry.dirty = true;
                self.dirty.push(*id);
            }
        }
        true
    }

    /// Analyses every chain a span joined since the last call; returns how many.
    pub fn analyse_dirty(&mut self) -> usize {
        self.analyse_dirty_within(None)
    }

    /// As [`Store::analyse_dirty`], but stops once `budget` has passed (checked every few
    /// chains), leaving the rest, oldest first, for the next call: the screen's loop analyses a
    /// burst a slice per frame instead of holding up the keys for one long pass.
    pub fn analyse_dirty_for(&mut self, budget: std::time::Duration) -> usize {
        self.analyse_dirty_within(Some(std::time::Instant::now() + budget))
    }

    fn analyse_dirty_within(&mut self, deadline: Option<std::time::Instant>) -> usize {
        let dirty = std::mem::take(&mut self.dirty);
        let mut analysed: usize = 0;
        let mut rest = dirty.into_iter();
        for trace_id in rest.by_ref() {
            let Some(entry) = self.chains.get_mut(&trace_id) else {
                continue; // evicted since
            };
            entry.dirty = false;
            entry.chain.shrink_to_fit();
            entry.attributes.shrink();
            let held = entry.attributes.bytes_held();
            self.counters.attribute_bytes =
                self.counters.attribute_bytes + held as u64 - entry.attribute_bytes as u64;
            entry.attribute_bytes = held;
            let mut fresh = entry.chain.analyse_with(&self.options, &self.timeouts);
            let edges = std::mem::take(&mut fresh.edges);
            let fresh = Arc::new(fresh);
            let old = entry.analysis.replace(fresh.clone());
            // The old samples name services by positions of spans that are still there with
            // the same service (see `insert_span`).
            let old_edges = old.as_ref().map(|_| entry.samples.unpack(&entry.chain));
            entry.samples = EdgeSamples::pack(&edges, &entry.chain);
            if let (Some(old), Some(old_edges)) = (old, old_edges) {
                // With the lost contexts folded into it: the fresh analysis has none yet.
                self.subtract(&old, &old_edges);
            }
            self.lost.remove(&trace_id);
            self.add(&fresh, &edges);
            analysed += 1;
            if analysed.is_multiple_of(32)
                && deadline.is_some_and(|d| std::time::Instant::now() >= d)
            {
                break;
            }
        }
        // What is left keeps its place ahead of chains that turn dirty later.
        let mut left: Vec<TraceId> = rest.collect();
        if !left.is_empty() {
            left.append(&mut self.dirty);
            self.dirty = left;
        }
        self.timeouts_checked += analysed;
        if self.timeouts_checked >= TIMEOUT_CHECK_EVERY || self.dirty.is_empty() && analysed > 0 {
            self.timeouts_checked = 0;
            self.refresh_timeouts();
        }
        // Judged across chains, over every span held: on the screen's loop only while the store
        // is small enough for a pass per frame (a report always judges them).
        if analysed > 0
            && (deadline.is_none() || self.counters.spans_held <= LOST_CONTEXT_LIVE_SPANS)
        {
            self.refresh_lost_contexts();
        }
        analysed
    }

    /// Judges the calls that lost their context over every chain held, and folds the
    /// `context_lost` findings into their chains' analyses (their findings, their rows' marks,
    /// their severity counts and the store's), taking out those that no longer hold. The screen
    /// then shows them as any other finding. Returns them.
    pub fn refresh_lost_contexts(&mut self) -> Vec<LostContext> {
        let found = lost_contexts(self.chains.values().map(|e| &e.chain), &self.options);
        let mut now: HashMap<TraceId, Vec<Finding>> = HashMap::new();
        for l in &found {
            now.entry(l.finding.trace_id)
                .or_default()
                .push(l.finding.clone());
        }
        let mut traces: Vec<TraceId> = self.lost.keys().chain(now.keys()).copied().collect();
        traces.sort_unstable();
        traces.dedup();
        for trace_id in traces {
            let new = now.remove(&trace_id).unwrap_or_default();
            let old = self.lost.remove(&trace_id).unwrap_or_default();
            let Some(entry) = self.chains.get_mut(&trace_id) else {
                continue;
            };
            if new != old
                && let Some(held) = entry.analysis.as_mut()
            {
                let analysis = Arc::make_mut(held);
                for f in &old {
                    self.findings.subtract(one(f.severity));
                    analysis.summary.findings.subtract(one(f.severity));
                }
                analysis
                    .findings
                    .retain(|f| f.kind != FindingKind::ContextLost);
                for f in &new {
                    self.findings.bump(f.severity);
                    analysis.summary.findings.bump(f.severity);
                    analysis.findings.push(f.clone());
                }
                for row in &mut analysis.rows {
                    let id = entry.chain.span(row.span as usize).map(|s| s.span_id);
                    let mut kinds = KindSet::default();
                    for k in row
                        .findings
                        .iter()
                        .filter(|&k| k != FindingKind::ContextLost)
                    {
                        kinds.insert(k);
                    }
                    if new.iter().any(|f| Some(f.span_id) == id) {
                        kinds.insert(FindingKind::ContextLost);
                    }
                    row.findings = kinds;
                }
                analysis.summary.worst = analysis.findings.iter().map(|f| f.severity).max();
            }
            if !new.is_empty() {
                self.lost.insert(trace_id, new);
            }
        }
        found
    }

    /// Whether some chain waits for [`Store::analyse_dirty`].
    pub fn has_dirty(&self) -> bool {
        !self.dirty.is_empty()
    }

    /// Chain summaries, newest chain (by first arrival) first. Chains not analysed yet are
    /// skipped.
    pub fn chains(&self) -> impl Iterator<Item = ChainEntry<'_>> + '_ {
        self.order
            .iter()
            .rev()
            .filter_map(|id| ChainEntry::of(*id, self.chains.get(id)?))
    }

    /// The same summaries in no particular order: one pass over the chains held, without a
    /// lookup per chain (for a caller that sorts them itself, as the screen's list does).
    pub fn chains_unordered(&self) -> impl Iterator<Item = ChainEntry<'_>> + '_ {
        self.chains
            .iter()
            .filter_map(|(id, entry)| ChainEntry::of(*id, entry))
    }

    /// The spans of one chain.
    pub fn chain(&self, trace_id: TraceId) -> Option<&Chain> {
        self.chains.get(&trace_id).map(|e| &e.chain)
    }

    /// The latest analysis of one chain (possibly stale: see [`Store::has_dirty`]).
    pub fn analysis(&self, trace_id: TraceId) -> Option<Arc<ChainAnalysis>> {
        let entry = self.chains.get(&trace_id)?;
        let held = entry.analysis.as_ref()?;
        let edges = entry.samples.unpack(&entry.chain);
        if edges.is_empty() {
            return Some(held.clone());
        }
        Some(Arc::new(ChainAnalysis {
            edges,
            ..ChainAnalysis::clone(held)
        }))
    }

    /// The latest analysis of one chain as held: everything but its edge samples (`edges` is
    /// empty; they are in [`Store::edges`]), without the copy [`Store::analysis`] makes to give
    /// them back. For passes over every chain.
    pub fn held_analysis(&self, trace_id: TraceId) -> Option<&ChainAnalysis> {
        self.chains.get(&trace_id)?.analysis.as_deref()
    }

    /// The raw attributes of one span, when ingest kept them (decoded now).
    pub fn attributes(&self, trace_id: TraceId, span_id: SpanId) -> Option<Vec<KeyValue>> {
        self.chains
            .get(&trace_id)?
            .attributes
            .get(&self.dictionary, span_id)
            .map(|a| a.attributes)
    }

    /// The raw attributes of every span of one chain that has them, decoded in one pass (for
    /// writing a whole chain out: [`Store::attributes`] walks the chain's records for each span).
    pub fn chain_attributes(&self, trace_id: TraceId) -> HashMap<SpanId, Vec<KeyValue>> {
        self.chains
            .get(&trace_id)
            .map_or_else(HashMap::new, |entry| {
                entry
                    .attributes
                    .all(&self.dictionary)
                    .into_iter()
                    .map(|(id, a)| (id, a.attributes))
                    .collect()
            })
    }

    /// What the detail view should say about a span's raw attributes beyond showing them:
    /// values cut, attributes not kept, or all of them dropped for the store's budget.
    pub fn attribute_note(&self, trace_id: TraceId, span_id: SpanId) -> Option<String> {
        let entry = self.chains.get(&trace_id)?;
        if let Some(attrs) = entry.attributes.get(&self.dictionary, span_id) {
            let mut parts = Vec::new();
            if attrs.cut > 0 {
                parts.push(format!(
                    "{} value(s) cut to {} KiB",
                    attrs.cut,
                    batch::MAX_VALUE_BYTES / 1024
                ));
            }
            if attrs.dropped > 0 {
                parts.push(format!(
                    "{} attribute(s) not kept (a span keeps {} KiB of attributes)",
                    attrs.dropped,
                    batch::MAX_SPAN_ATTRIBUTE_BYTES / 1024
                ));
            }
            return (!parts.is_empty()).then(|| parts.join("; "));
        }
        let position = entry.chain.spans().position(|s| s.span_id == span_id)?;
        (position < entry.attributes_dropped_below as usize).then(|| {
            "attributes dropped to stay under --max-attribute-bytes (oldest chains first)".into()
        })
    }

    /// Caller -> callee aggregates over every analysed chain held, by (caller, callee).
    pub fn edges(&self) -> Vec<&EdgeAggregate> {
        self.edges.sorted()
    }

    /// The same edges as the report's `edges` array.
    pub fn edge_reports(&self) -> Vec<EdgeReport> {
        self.edges.to_reports()
    }

    /// Findings by severity over every analysed chain held, and the edges' own.
    pub fn finding_counts(&self) -> SeverityCounts {
        let mut counts = self.findings;
        for f in self.edges.findings() {
            counts.bump(f.severity);
        }
        counts
    }

    /// The sum of the analysed chains' wasted ms (their hops' dead work).
    pub fn wasted_ms(&self) -> i64 {
        self.wasted_ms
    }

    /// The analysed chains by outcome.
    pub fn outcomes(&self) -> OutcomeCounts {
        self.outcomes
    }

    /// What the analysis could see over the chains held.
    pub fn coverage(&self) -> Coverage {
        let mut services: Vec<Arc<str>> = self.without_budget.keys().cloned().collect();
        services.sort_unstable();
        Coverage {
            hops_with_budget: self.hops_with_budget,
            hops_without_budget: self.hops - self.hops_with_budget,
            services_without_budget: services,
        }
    }

    /// Store-wide counters.
    pub fn counters(&self) -> StoreCounters {
        self.counters
    }

    /// The whole report over every chain held: analyses what is dirty first. Findings are in
    /// trace order, then as the analysis ordered them within a chain.
    pub fn report(&mut self) -> Report {
        // Timeouts inferred over every chain, then every chain judged with them: the same
        // answer as `Report::from_spans`. (A pass that changes the inferred timeouts marks every
        // chain for another; they settle at once, since a timeout comes from unanswered calls,
        // which no inferred timeout changes.)
        for _ in 0..3 {
            self.analyse_dirty();
            self.refresh_timeouts();
            if !self.has_dirty() {
                break;
            }
        }
        // Judged across the chains held (a call without its request's context starts a trace
        // of its own), folded into their chains, and listed after the edges' own findings as
        // `Report::from_spans` lists them.
        let lost = self.refresh_lost_contexts();
        let mut ids: Vec<TraceId> = self.chains.keys().copied().collect();
        ids.sort_unstable();
        let mut findings: Vec<Finding> = Vec::new();
        for id in &ids {
            if let Some(analysis) = self.chains.get(id).and_then(|e| e.analysis.as_ref()) {
                findings.extend(
                    analysis
                        .findings
                        .iter()
                        .filter(|f| f.kind != FindingKind::ContextLost)
                        .cloned(),
                );
            }
        }
        findings.extend(self.edges.findings());
        let mut report = Report {
            summary: Summary {
                traces: self.counters.chains_held,
                spans: self.counters.spans_held,
                hops: self.hops,
                findings: self.finding_counts(),
                wasted_ms: self.wasted_ms,
                outcomes: self.outcomes,
                coverage: self.coverage(),
            },
            findings,
            edges: self.edge_reports(),
        };
        report.attach_lost_contexts(&lost);
        report
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use deadline_budget::analysis::{BudgetFacts, SpanKind, SpanStatus};
    use opentelemetry_proto::tonic::common::v1::{AnyValue, any_value::Value};

    fn span(t: u32) -> Span {
        let mut trace = [1u8; 16];
        trace[..4].copy_from_slice(&t.to_be_bytes());
        Span {
            trace_id: TraceId(trace),
            span_id: SpanId([2; 8]),
            parent_span_id: None,
            service: Arc::from("svc"),
            name: Arc::from("op"),
            kind: SpanKind::Server,
            start_unix_nano: 1,
            end_unix_nano: 2,
            status: SpanStatus::Unset,
            budget: BudgetFacts::default(),
        }
    }

    fn edge_calls(store: &Store) -> Vec<(String, String, u64)> {
        store
            .edges()
            .iter()
            .map(|e| (e.caller.to_string(), e.callee.to_string(), e.calls))
            .collect()
    }

    #[test]
    fn a_copy_that_moves_a_span_to_another_service_moves_its_edge_too() {
        let hop = |id: u8, parent: Option<u8>, service: &str, kind, end| Span {
            span_id: SpanId([id; 8]),
            parent_span_id: parent.map(|p| SpanId([p; 8])),
            service: Arc::from(service),
            kind,
            end_unix_nano: end,
            ..span(1)
        };
        let first = [
            hop(1, None, "frontend", SpanKind::Server, 100),
            hop(2, Some(1), "frontend", SpanKind::Client, 90),
            hop(3, Some(2), "bff", SpanKind::Server, 80),
        ];
        let mut store = Store::new(100);
        store.insert_spans(first.clone());
        store.analyse_dirty();
        assert_eq!(edge_calls(&store), [("frontend".into(), "bff".into(), 1)]);
        // A later copy of the callee, from another service, wins by content.
        let moved = hop(3, Some(2), "orders", SpanKind::Server, 85);
        store.insert_spans([moved.clone()]);
        store.analyse_dirty();
        let mut fresh = Store::new(100);
        fresh.insert_spans([first[0].clone(), first[1].clone(), moved]);
        fresh.analyse_dirty();
        assert_eq!(
            edge_calls(&store),
            [("frontend".into(), "orders".into(), 1)]
        );
        assert_eq!(edge_calls(&store), edge_calls(&fresh));
        let id = TraceId(span(1).trace_id.0);
        assert_eq!(store.analysis(id), fresh.analysis(id));
    }

    /// Go's `context.Background()`: the edge's hop (trace 1) made no call; its call is the root
    /// of trace 2, with pricing under it. Judged across the chains held, folded into trace 2's
    /// analysis (the screen shows it), counted once in the report; taken out when the edge's
    /// hop turns out to have made a call of its own after all.
    #[test]
    fn lost_contexts_are_folded_into_their_chains_and_taken_out_when_they_no_longer_hold() {
        let at =
            |t: u32, id: u8, parent: Option<u8>, service: &str, kind, start: u64, end: u64| Span {
                span_id: SpanId([id; 8]),
                parent_span_id: parent.map(|p| SpanId([p; 8])),
                service: Arc::from(service),
                kind,
                start_unix_nano: start * 1_000_000,
                end_unix_nano: end * 1_000_000,
                ..span(t)
            };
        let mut store = Store::new(100);
        store.insert_spans([
            at(1, 1, None, "edge", SpanKind::Server, 1000, 1300),
            at(2, 2, None, "edge", SpanKind::Client, 1010, 1290),
            at(2, 3, Some(2), "pricing", SpanKind::Server, 1012, 1285),
        ]);
        store.analyse_dirty();
        let fragment = span(2).trace_id;
        let a = store.analysis(fragment).unwrap();
        assert_eq!(
            a.findings.iter().map(|f| f.kind).collect::<Vec<_>>(),
            vec![FindingKind::ContextLost]
        );
        assert_eq!(a.findings[0].linked_trace_id, Some(span(1).trace_id));
        assert!(a.rows[0].findings.contains(FindingKind::ContextLost));
        assert_eq!(a.summary.worst, Some(Severity::Warning));
        assert_eq!(store.finding_counts().warning, 1);
        let report = store.report();
        assert_eq!(report.summary.findings.warning, 1);
        assert_eq!(report.findings.len(), 1);
        assert_eq!(
            report.edges[0].findings.get("context_lost"),
            Some(&1),
            "{report:?}"
        );
        // The same again: nothing changes, nothing is counted twice.
        store.refresh_lost_contexts();
        assert_eq!(store.finding_counts().warning, 1);

        // The edge's hop made a call after all: that call was its work; the root call is not
        // one it lost.
        store.insert_spans([at(1, 4, Some(1), "edge", SpanKind::Client, 1001, 1002)]);
        store.analyse_dirty();
        let a = store.analysis(fragment).unwrap();
        assert!(a.findings.is_empty(), "{:?}", a.findings);
        assert!(a.rows[0].findings.is_empty());
        assert_eq!(a.summary.worst, None);
        assert_eq!(store.finding_counts().warning, 0);
        assert_eq!(store.report().summary.findings.warning, 0);
    }

    #[test]
    fn chains_evicted_with_attributes_leave_no_trace_behind() {
        let attrs = RawAttributes::from_key_values(&[KeyValue {
            key: "k".into(),
            value: Some(AnyValue {
                value: Some(Value::StringValue("v".into())),
            }),
            ..Default::default()
        }]);
        let mut store = Store::new(5);
        for t in 0..20_000 {
            store.insert_span(span(t), Some(attrs.clone()));
            assert!(store.attribute_order.len() <= 2 * store.chains.len() + 1025);
        }
        let held: usize = store.chains.values().map(|e| e.attribute_bytes).sum();
        assert_eq!(
            store.counters().attribute_bytes,
            (held + store.dictionary.bytes()) as u64
        );
        let arenas: usize = store
            .chains
            .values()
            .map(|e| e.attributes.bytes_held())
            .sum();
        assert_eq!(held, arenas);
        // Five chains of one span each, the attribute numbered once for all of them.
        assert_eq!(store.chains.len(), 5);
        assert_eq!(store.dictionary.len(), 1);
        for id in store.order.iter() {
            assert_eq!(store.attributes(*id, SpanId([2; 8])), Some(attrs.decode()));
        }
    }
}

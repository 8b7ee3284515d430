//! The trace store: request chains assembled from spans as they arrive, analysed on demand,
//! judged once, and counted once in the running totals (`CONVENTIONS.md` section 6).
//!
//! One loop owns it (no lock between ingest and render): it feeds [`Store::insert_batch`] with
//! what ingest sends, calls [`Store::analyse_dirty`] and [`Store::judge_settled`] on its tick,
//! and the screen and the check report read chain summaries, a chain's analysis, and the
//! totals. Chains assemble in any order across batches; a chain is marked dirty when a span
//! joins it and analysed again on the next tick (what the screen shows of it). A chain is
//! *judged* (its analysis folded into the totals, once) when it has been quiet for `--settle`,
//! when it must be evicted, or when a report is written; a span for a judged chain still held
//! judges it again (its contribution replaced), one for an evicted chain is counted
//! (`spans_after_verdict`) and not judged. Retention is bounded by `max_spans`: the oldest
//! chains (by first arrival) are evicted first, so memory stays flat under any load, and
//! nothing evicted leaves the totals.

use std::collections::VecDeque;

use foldhash::{HashMap, HashMapExt as _};
use std::sync::Arc;

use deadline_budget::analysis::{
    Chain, ChainAnalysis, ChainSummary, DEFAULT_MAX_FINDINGS, EdgeSample, FindingList, Inserted,
    LostContext, Options, Span, Totals, TraceId, lost_contexts,
};

use crate::batch::{self, Batch, RawAttributes};

mod attributes;
mod bulk;
pub mod exemplars;
mod held;
mod pins;
mod received;
mod samples;
mod verdicts;
pub use attributes::SpanAttributes;
use attributes::{ChainAttributes, Dictionary};
use bulk::ANALYSED_AT_ONCE;
pub use held::HeldAnalysis;
use pins::Pins;
pub use received::{Handoff, JudgedChain, Keep, ReceivedChain};
use received::{HeldSpans, Holding};
use samples::EdgeSamples;
pub use verdicts::RECENT_SECONDS;
use verdicts::{Fate, HopRows, Judged, Recent, Verdicts};

/// The default for `--max-spans`.
pub const DEFAULT_MAX_SPANS: usize = 1_000_000;

/// The default for `--settle`: how long a chain must be quiet before it is judged.
pub const DEFAULT_SETTLE: std::time::Duration = std::time::Duration::from_secs(5);

/// How chains are held and judged: `--max-spans`, `--settle` and `--max-findings`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Retention {
    /// Spans held at most (oldest chains evicted first, judged as they go).
    pub max_spans: usize,
    /// How long a chain must be quiet before it is judged.
    pub settle: std::time::Duration,
    /// Findings a report lists at most (the counts stay exact).
    pub max_findings: usize,
}

impl Default for Retention {
    fn default() -> Self {
        Retention {
            max_spans: DEFAULT_MAX_SPANS,
            settle: DEFAULT_SETTLE,
            max_findings: DEFAULT_MAX_FINDINGS,
        }
    }
}

impl Retention {
    /// An empty store that holds and judges chains so.
    pub fn store(&self) -> Store {
        Store::new(self.max_spans)
            .with_settle(self.settle)
            .with_max_findings(self.max_findings)
    }
}

/// The most spans held for which a chain whose root is a call is judged for lost contexts
/// when it is evicted (a pass over every span held); one that settles first is always judged.
const LOST_CONTEXT_EVICTION_SPANS: u64 = 200_000;

/// Chains kept whole past their eviction per finding kind, for the HTML page (which draws as
/// many per kind): the ones with the most dead work (`CONVENTIONS.md` section 6).
pub const PINNED_PER_KIND: usize = 3;

/// The share of `--max-spans` that chains kept for the page may hold at most (1/4): they are
/// counted within it, and the rest of the bound keeps the newest chains.
const PINNED_SHARE: usize = 4;

/// Trace ids of evicted chains remembered, so that a span arriving for one is counted
/// (`spans_after_verdict`) rather than judged as a new chain. Older ones are forgotten.
const EVICTED_REMEMBERED: usize = 1 << 16;

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
    /// Spans that arrived for a chain already judged and evicted: counted, not judged.
    pub spans_after_verdict: u64,
    /// Times a chain still held was judged again because a span joined it after its verdict.
    pub chains_rejudged: u64,
    /// Bytes of spans as received held until their chains are judged (`serve --forward`):
    /// the batches they came in.
    pub received_bytes: u64,
    /// Spans as received not held, because their batch did not fit `--forward-buffer`'s share.
    pub received_not_held: u64,
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
    /// The latest analysis, without its edge samples (held packed in `samples`) and without its
    /// waterfall rows (rebuilt when asked for: [`Store::analysis`]).
    analysis: Option<Box<HeldAnalysis>>,
    /// The latest analysis's hop rows: what its hop samples are read from.
    hop_rows: HopRows,
    /// The latest analysis's edge samples, packed: they are in the edge aggregates, and are
    /// taken out again when the chain is analysed anew or evicted. `None` once the chain was
    /// judged at the end of a run ([`Fate::Final`]): [`Entry::edge_samples`] makes them again.
    samples: Option<EdgeSamples>,
    dirty: bool,
    /// When the chain's first span arrived ([`Store::set_clock`]).
    arrived_unix_nano: u64,
    /// When a span last joined it ([`Store::set_clock`]): it is judged `settle` after.
    last_span_unix_nano: u64,
    /// Set once the chain is judged: `analysis` and `samples` are what it was folded with.
    judged: Option<Judged>,
    /// Its calls that lost their context, judged across the chains held when it was judged:
    /// folded into every analysis of it from then on.
    lost: Vec<LostContext>,
    /// For how many finding kinds it is kept past its eviction ([`Pins`]); out of `order`
    /// while above 0.
    pins: u8,
    /// Where its spans as received are held until it is judged (`serve --forward`:
    /// [`Store::keep_received`]).
    received: HeldSpans,
}

impl Entry {
    /// The chain analysed again, with the calls that lost their context folded in as they were
    /// when it was judged; its edge samples apart.
    fn analyse_again(&self, options: &Options) -> (ChainAnalysis, Vec<EdgeSample>) {
        let mut fresh = self.chain.analyse(options);
        let mut edges = std::mem::take(&mut fresh.edges);
        if !self.lost.is_empty() {
            fresh.fold_lost_contexts(&mut edges, &self.lost, &self.chain);
        }
        (fresh, edges)
    }

    /// The edge samples of the latest analysis: unpacked, or, when the end of the run did not
    /// keep them ([`Fate::Final`]), made again from the chain (as it was judged: a span joining
    /// it makes them first).
    fn edge_samples(&self, options: &Options) -> Vec<EdgeSample> {
        match &self.samples {
            Some(samples) => samples.unpack(&self.chain),
            None => self.analyse_again(options).1,
        }
    }
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
    /// The totals of every judged chain, held or not, and the findings list.
    verdicts: Verdicts,
    /// How long a chain must be quiet before it is judged, ns.
    settle_ns: u64,
    /// Whether many chains waiting at once are analysed on two threads
    /// ([`Store::with_analyses_on_one_thread`]).
    two_threads: bool,
    /// Chains not judged yet, by first arrival (perhaps judged or evicted since: skipped).
    unjudged: VecDeque<TraceId>,
    /// When [`Store::judge_settled`] last looked at them.
    settled_at_unix_nano: u64,
    /// Recently evicted trace ids, oldest first, and the same as a set.
    evicted: VecDeque<TraceId>,
    evicted_set: foldhash::HashSet<TraceId>,
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
    /// The chains kept whole past their eviction for the page.
    pins: Pins,
    /// The spans as received, when they are kept for forwarding.
    holding: Option<Box<Holding>>,
}

/// The share of `--max-attribute-bytes` the dictionary of repeated attributes may take.
const DICTIONARY_SHARE: usize = 4;

impl Store {
    /// An empty store that holds at most `max_spans` spans (at least one).
    pub fn new(max_spans: usize) -> Self {
        Store {
            chains: HashMap::new(),
            order: VecDeque::new(),
            max_spans: max_spans.max(1),
            counters: StoreCounters::default(),
            options: Options::default(),
            verdicts: Verdicts {
                totals: Totals::new(),
                list: FindingList::new(DEFAULT_MAX_FINDINGS),
                folds: 0,
                recent: None,
                second: 0,
                hops: Vec::new(),
                exemplars: None,
                now_unix_nano: 0,
            },
            settle_ns: DEFAULT_SETTLE.as_nanos() as u64,
            two_threads: true,
            unjudged: VecDeque::new(),
            settled_at_unix_nano: 0,
            evicted: VecDeque::new(),
            evicted_set: foldhash::HashSet::default(),
            dirty: Vec::new(),
            max_attribute_bytes: batch::DEFAULT_MAX_ATTRIBUTE_BYTES,
            attribute_order: VecDeque::new(),
            attribute_seq: 0,
            dictionary: Dictionary::with_limit(
                batch::DEFAULT_MAX_ATTRIBUTE_BYTES / DICTIONARY_SHARE,
            ),
            clock_unix_nano: 0,
            pins: Pins::default(),
            holding: None,
        }
    }

    /// The same store holding each chain's spans as received (a batch's
    /// [`Batch::received`]) until it is judged, at most `max_bytes` of them, and handing on
    /// with its first verdict each chain `keep` keeps, with its spans ([`Store::take_handoffs`]),
    /// and each span that joins a chain after its verdict.
    pub fn keep_received(mut self, max_bytes: usize, keep: Keep) -> Self {
        self.holding = Some(Box::new(Holding::new(max_bytes, keep)));
        self
    }

    /// The chains judged for the first time since the last call, with their spans as received,
    /// and the spans that joined a chain after its verdict, in that order (empty unless
    /// [`Store::keep_received`]).
    pub fn take_handoffs(&mut self) -> Vec<Handoff> {
        self.holding
            .as_mut()
            .map(|h| std::mem::take(&mut h.handoffs))
            .unwrap_or_default()
    }

    /// The time the spans inserted from now on arrive at (the screen's clock, so a chain's
    /// [`ChainEntry::arrived_unix_nano`] says when it first showed up); 0 until set.
    pub fn set_clock(&mut self, now_unix_nano: u64) {
        self.clock_unix_nano = now_unix_nano;
        self.verdicts.second = now_unix_nano / 1_000_000_000;
        self.verdicts.now_unix_nano = now_unix_nano;
    }

    /// The store's clock ([`Store::set_clock`]).
    pub fn clock(&self) -> u64 {
        self.clock_unix_nano
    }

    /// The same store keeping the verdicts of the last minute apart too
    /// ([`Store::recent_totals`]: the screen's `m`).
    pub fn with_recent(mut self) -> Self {
        self.verdicts.recent = Some(Recent::default());
        self
    }

    /// The same store keeping, for each series of `serve`'s metrics, the latest judged chain
    /// that raised it ([`Store::exemplars`]: the metrics' exemplars).
    pub fn with_exemplars(mut self) -> Self {
        self.verdicts.exemplars = Some(exemplars::Exemplars::default());
        self
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

    /// The same store judging a chain once it has been quiet for `settle` (`--settle`).
    pub fn with_settle(mut self, settle: std::time::Duration) -> Self {
        self.settle_ns = u64::try_from(settle.as_nanos()).unwrap_or(u64::MAX);
        self
    }

    /// The same store making every analysis on its own thread, also when many chains wait at
    /// once. Two threads finish such a burst (the end of a run, a report) in less time, at more
    /// CPU for it (each analysis crosses to the other core to be folded, and what it allocated
    /// is freed there): what a file read against the clock wants, not a listening run whose end
    /// the user waits a moment for, nor a sidecar that shares its cores with the services
    /// (docs/performance.md, "One thread or two for a burst of analyses").
    pub fn with_analyses_on_one_thread(mut self) -> Self {
        self.two_threads = false;
        self
    }

    /// The same store listing at most `max` findings in its reports (`--max-findings`); the
    /// counts stay exact.
    pub fn with_max_findings(mut self, max: usize) -> Self {
        self.verdicts.list = FindingList::new(max);
        self
    }

    /// Adds a batch from ingest (its spans and, if kept, their raw attributes).
    pub fn insert_batch(&mut self, mut batch: Batch) {
        self.insert_batch_from(&mut batch);
    }

    /// The same, leaving the batch's memory to the caller (its spans taken, their vector
    /// and the raw attributes left as they were, copied into the store): the screen frees it
    /// on the thread that decoded it (see `ScreenData::add_batch`).
    pub fn insert_batch_from(&mut self, batch: &mut Batch) {
        let mut attributes = batch.attributes.iter();
        let received = batch.received.take().filter(|_| self.holding.is_some());
        let Some(received) = received else {
            for span in batch.spans.drain(..) {
                let attrs = attributes.next();
                self.insert_span(span, attrs, None);
            }
            return;
        };
        let number = match self.holding.as_mut() {
            Some(holding) => holding.take(received),
            None => return,
        };
        for (i, span) in batch.spans.drain(..).enumerate() {
            let attrs = attributes.next();
            self.insert_span(span, attrs, Some((number, i)));
        }
        if let Some(holding) = self.holding.as_mut() {
            holding.inserted(number);
        }
    }

    /// Adds spans without raw attributes.
    pub fn insert_spans(&mut self, spans: impl IntoIterator<Item = Span>) {
        for span in spans {
            self.insert_span(span, None, None);
        }
    }

    // Inlined into the loops above: a `Span` is 304 bytes, and each call by value copies it.
    #[inline]
    fn insert_span(
        &mut self,
        span: Span,
        attributes: Option<&RawAttributes>,
        received: Option<(u64, usize)>,
    ) {
        let trace_id = span.trace_id;
        let span_id = span.span_id;
        let max_spans = self.max_spans;
        // While one more span fits, a span of a chain held needs no eviction first: its entry
        // is looked up once (most spans: the map is large, and each lookup a cache miss).
        let room = self.counters.spans_held < max_spans as u64;
        let (entry, held) = if room && let Some(entry) = self.chains.get_mut(&trace_id) {
            let held = entry.chain.contains(span_id);
            if !held && entry.chain.len() >= max_spans {
                self.counters.spans_over_limit += 1;
                return;
            }
            (entry, held)
        } else {
            let known = self
                .chains
                .get(&trace_id)
                .map(|e| (e.chain.contains(span_id), e.chain.len() >= max_spans));
            match known {
                None if self.evicted_set.contains(&trace_id) => {
                    self.counters.spans_after_verdict += 1;
                    if let (Some(holding), Some((number, i))) = (self.holding.as_mut(), received) {
                        holding.late(trace_id, number, i);
                    }
                    return;
                }
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
            (entry, known.is_some_and(|(held, _)| held))
        };
        if entry.samples.is_none() {
            // Judged at the end of a run, and a span joins after all: its samples made again
            // first, from the chain as it was judged, to be taken out when it is judged again.
            entry.samples = Some(EdgeSamples::pack(
                &entry.edge_samples(&self.options),
                &entry.chain,
            ));
        }
        if held && let Some(samples) = entry.samples.as_mut().filter(|s| !s.is_empty()) {
            // The copy may win and bring another service to the position the packed samples
            // name it by: name them in full until the chain is analysed again.
            *samples = samples.detach(&entry.chain);
        }
        if let Some(judged) = entry.judged.as_mut()
            && entry.analysis.is_some()
            && judged.hops.is_none()
        {
            // The span may replace a hop: keep what the chain was judged with.
            judged.hops = Some(entry.hop_rows.samples(&entry.chain).into());
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
        if let (Some(holding), Some((number, i))) = (self.holding.as_mut(), received) {
            if entry.judged.is_some() {
                holding.late(trace_id, number, i);
            } else {
                holding.joined(&mut entry.received, number);
            }
        }
        let mut ordered = false;
        if let Some(attrs) = attributes.filter(|a| !a.is_empty()) {
            let dictionary_before = self.dictionary.bytes();
            entry
                .attributes
                .insert(&mut self.dictionary, span_id, attrs);
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
                ordered = true;
            }
        }
        entry.last_span_unix_nano = self.clock_unix_nano;
        if !entry.dirty {
            entry.dirty = true;
            self.dirty.push(trace_id);
            // The same for the chains waiting to be analysed (`check` analyses none before it
            // judges them).
            if self.dirty.len() > self.chains.len() * 2 + 1024 {
                let chains = &self.chains;
                self.dirty
                    .retain(|id| chains.get(id).is_some_and(|e| e.dirty));
            }
        }
        self.trim_attributes();
        if ordered {
            let chains = &self.chains;
            // Chains leave mostly oldest first: their places at the front go as they do, so the
            // queue stays about as long as the chains held (with only the sweep below, its
            // capacity grew to twice that).
            while self
                .attribute_order
                .front()
                .is_some_and(|(id, seq)| chains.get(id).is_none_or(|e| e.attribute_seq != *seq))
            {
                self.attribute_order.pop_front();
            }
        }
        // Chains evicted out of order leave their place behind: sweep now and then, so the
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
                hop_rows: HopRows::default(),
                samples: Some(EdgeSamples::default()),
                dirty: false,
                arrived_unix_nano: self.clock_unix_nano,
                last_span_unix_nano: self.clock_unix_nano,
                judged: None,
                lost: Vec::new(),
                pins: 0,
                received: HeldSpans::default(),
            }),
        );
        self.unjudged.push_back(trace_id);
        // Chains judged or evicted leave mostly oldest first: their places at the front go as
        // they do (as for `attribute_order`).
        let chains = &self.chains;
        while self
            .unjudged
            .front()
            .is_some_and(|id| chains.get(id).is_none_or(|e| e.judged.is_some()))
        {
            self.unjudged.pop_front();
        }
        self.counters.chains_held += 1;
        // Chains judged or evicted since leave their place behind: sweep now and then, so the
        // queue stays within a few times the chains held (`check --input` never waits for a
        // chain to settle).
        if self.unjudged.len() > self.chains.len() * 2 + 1024 {
            let chains = &self.chains;
            self.unjudged
                .retain(|id| chains.get(id).is_some_and(|e| e.judged.is_none()));
        }
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
        let Some(mut entry) = self.chains.remove(&trace_id) else {
            return;
        };
        // Judged now if it was not: nothing leaves the totals with the chain.
        let lost = if entry.judged.is_none()
            && entry.chain.roots_in_a_call()
            && self.counters.spans_held <= LOST_CONTEXT_EVICTION_SPANS
        {
            let held = self.chains.values().map(|e| &e.chain);
            lost_contexts(held.chain([&entry.chain]), &self.options)
        } else {
            Vec::new()
        };
        let unjudged = entry.judged.is_none();
        let fresh = Self::judge_entry(
            &mut entry,
            None,
            &self.options,
            &mut self.counters,
            &mut self.verdicts,
            &lost,
            Fate::Leaving,
        );
        if unjudged {
            Self::hand_on(&mut entry, self.holding.as_deref_mut());
        }
        let released = self.pin(trace_id, &mut entry);
        if entry.pins > 0 {
            // Kept whole for the page, out of the eviction order: held as any chain analysed.
            if let Some(edges) = fresh {
                entry.chain.shrink_to_fit();
                entry.samples = Some(EdgeSamples::pack(&edges, &entry.chain));
            }
            self.chains.insert(trace_id, entry);
        } else {
            self.let_go(trace_id, &mut entry);
        }
        for id in released {
            if let Some(mut e) = self.chains.remove(&id) {
                self.let_go(id, &mut e);
            }
        }
    }

    /// The chain leaves memory (judged already): counted as evicted, remembered so that a span
    /// arriving for it later is counted and not judged.
    fn let_go(&mut self, trace_id: TraceId, entry: &mut Entry) {
        let n = entry.chain.len() as u64;
        if let Some(holding) = self.holding.as_mut() {
            holding.release(&mut entry.received);
        }
        self.counters.attribute_bytes -= entry.attribute_bytes as u64;
        self.counters.spans_held -= n;
        self.counters.chains_held -= 1;
        self.counters.chains_evicted += 1;
        self.counters.spans_evicted += n;
        if !self.evicted_set.contains(&trace_id) {
            // The oldest forgotten first: the queue never holds more than it remembers (one
            // more doubled its capacity).
            if self.evicted.len() >= EVICTED_REMEMBERED
                && let Some(old) = self.evicted.pop_front()
            {
                self.evicted_set.remove(&old);
            }
            self.evicted_set.insert(trace_id);
            self.evicted.push_back(trace_id);
        }
    }

    /// Analyses one entry now (what the screen shows of it); a judged chain is judged again:
    /// its old contribution taken out of the totals, the new one folded in. Returns the fresh
    /// edge samples, held packed too unless the chain is [`Fate::Leaving`].
    fn analyse_entry(
        entry: &mut Entry,
        options: &Options,
        counters: &mut StoreCounters,
        verdicts: &mut Verdicts,
        fate: Fate,
    ) -> Vec<EdgeSample> {
        Self::take_analysis(entry, None, options, counters, verdicts, fate)
    }

    /// [`Store::analyse_entry`] with the chain's analysis when it was made already (on another
    /// thread: it is a function of the chain alone).
    fn take_analysis(
        entry: &mut Entry,
        made: Option<ChainAnalysis>,
        options: &Options,
        counters: &mut StoreCounters,
        verdicts: &mut Verdicts,
        fate: Fate,
    ) -> Vec<EdgeSample> {
        entry.dirty = false;
        if fate == Fate::Staying {
            entry.chain.shrink_to_fit();
        }
        entry.attributes.shrink();
        let held = entry.attributes.bytes_held();
        counters.attribute_bytes =
            counters.attribute_bytes + held as u64 - entry.attribute_bytes as u64;
        entry.attribute_bytes = held;
        let mut fresh = made.unwrap_or_else(|| entry.chain.analyse(options));
        let mut edges = std::mem::take(&mut fresh.edges);
        if !entry.lost.is_empty() {
            fresh.fold_lost_contexts(&mut edges, &entry.lost, &entry.chain);
        }
        let old_hops = std::mem::replace(&mut entry.hop_rows, HopRows::of(&fresh, &entry.chain));
        // The rows are rebuilt for the few chains a person opens ([`Store::analysis`]).
        fresh.rows = Vec::new();
        let trace_id = entry.chain.trace_id();
        let old = entry.analysis.as_mut().map(|held| held.lend(trace_id));
        // The old samples name services by positions of spans that are still there with the
        // same service (see `insert_span`).
        let old_edges =
            (old.is_some() && entry.judged.is_some()).then(|| entry.edge_samples(options));
        entry.samples = match fate {
            Fate::Staying => Some(EdgeSamples::pack(&edges, &entry.chain)),
            Fate::Leaving => Some(EdgeSamples::default()),
            Fate::Final => None,
        };
        if let Some(judged) = entry.judged.take() {
            if let (Some(old), Some(old_edges)) = (&old, old_edges) {
                verdicts.unfold(&judged, old, &old_hops, &old_edges, &entry.chain);
            }
            counters.chains_rejudged += 1;
            verdicts.fold(entry, &fresh, &edges);
        }
        // Into the old one's place when there is one: no allocation.
        match entry.analysis.as_mut() {
            Some(held) => held.put(fresh),
            None => entry.analysis = Some(Box::new(HeldAnalysis::of(fresh))),
        }
        edges
    }

    /// Judges one entry that is not judged yet: analysed first if a span joined it since, and
    /// with its calls that lost their context among `lost` (judged across the chains held).
    /// Returns the samples folded when it was analysed now (held packed unless it is leaving).
    fn judge_entry(
        entry: &mut Entry,
        made: Option<ChainAnalysis>,
        options: &Options,
        counters: &mut StoreCounters,
        verdicts: &mut Verdicts,
        lost: &[LostContext],
        fate: Fate,
    ) -> Option<Vec<EdgeSample>> {
        if entry.judged.is_some() {
            return None;
        }
        let analysed = entry.dirty || entry.analysis.is_none();
        let mut edges = if analysed {
            Self::take_analysis(entry, made, options, counters, verdicts, fate)
        } else {
            entry.edge_samples(options)
        };
        let trace_id = entry.chain.trace_id();
        let mine: Vec<LostContext> = lost
            .iter()
            .filter(|l| l.finding.trace_id == trace_id)
            .cloned()
            .collect();
        let Some(held) = entry.analysis.as_mut() else {
            return analysed.then_some(edges);
        };
        let mut analysis = held.lend(trace_id);
        if !mine.is_empty() {
            analysis.fold_lost_contexts(&mut edges, &mine, &entry.chain);
            entry.lost = mine;
            match fate {
                // Made again with the lost contexts just kept, should anything ask.
                Fate::Final => entry.samples = None,
                _ if !analysed || fate == Fate::Staying => {
                    entry.samples = Some(EdgeSamples::pack(&edges, &entry.chain));
                }
                _ => {}
            }
        }
        verdicts.fold(entry, &analysis, &edges);
        if let Some(held) = entry.analysis.as_mut() {
            held.put(analysis);
        }
        analysed.then_some(edges)
    }

    /// A chain judged just now, with its spans as received, for [`Store::take_handoffs`] (when
    /// the store keeps them): handed on once, at its first verdict.
    fn hand_on(entry: &mut Entry, holding: Option<&mut Holding>) {
        let (Some(holding), Some(held)) = (holding, entry.analysis.as_deref()) else {
            return;
        };
        if entry.judged.is_none() {
            return;
        }
        let verdict = || {
            let mut kinds = deadline_budget::analysis::KindSet::default();
            for finding in &held.findings {
                kinds.insert(finding.kind);
            }
            (kinds, held.summary.wasted_ms)
        };
        let trace_id = entry.chain.trace_id();
        holding.judged(trace_id, &mut entry.received, held.summary.worst, verdict);
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
        if self.two_threads && deadline.is_none() && self.dirty.len() >= 2 * ANALYSED_AT_ONCE {
            return self.analyse_dirty_on_two_threads();
        }
        let dirty = std::mem::take(&mut self.dirty);
        let mut analysed: usize = 0;
        let mut rest = dirty.into_iter();
        for trace_id in rest.by_ref() {
            let Some(entry) = self.chains.get_mut(&trace_id) else {
                continue; // evicted since
            };
            if entry.dirty {
                Self::analyse_entry(
                    entry,
                    &self.options,
                    &mut self.counters,
                    &mut self.verdicts,
                    Fate::Staying,
                );
                analysed += 1;
            }
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
        analysed
    }

    /// Judges every chain that has been quiet for `--settle` by the store's clock
    /// ([`Store::set_clock`]); returns how many. Looks at most ten times a settle period.
    pub fn judge_settled(&mut self) -> usize {
        let now = self.clock_unix_nano;
        if now
            < self
                .settled_at_unix_nano
                .saturating_add(self.settle_ns / 10)
        {
            return 0;
        }
        self.settled_at_unix_nano = now;
        let settle = self.settle_ns;
        // A chain that arrived less than `settle` ago cannot be quiet for that long yet.
        let arrived_before = now.saturating_sub(settle).saturating_add(1);
        self.judge_where(
            |e| e.last_span_unix_nano.saturating_add(settle) <= now,
            arrived_before,
            Fate::Staying,
        )
    }

    /// Judges every chain held that is not judged yet (the end of a run, or a report).
    pub fn judge_all(&mut self) -> usize {
        self.judge_where(|_| true, u64::MAX, Fate::Staying)
    }

    /// Judges the chains `due` says are, looking at the unjudged ones in arrival order up to
    /// the first that arrived at or after `arrived_before` (none after it can be due): a
    /// listening store's tick then looks at the chains of the last `settle`, not at every one.
    fn judge_where(
        &mut self,
        due: impl Fn(&Entry) -> bool,
        arrived_before: u64,
        fate: Fate,
    ) -> usize {
        let mut now: Vec<TraceId> = Vec::new();
        // Of them, those a span joined since their last analysis (counted as they are found:
        // a second walk of the map was a cache miss a chain).
        let mut to_analyse = 0;
        let mut any_root_call = false;
        // Chains looked at and kept for later are moved to the front, in their order.
        let (mut kept, mut looked) = (0, 0);
        while let Some(&trace_id) = self.unjudged.get(looked) {
            if let Some(entry) = self.chains.get(&trace_id)
                && entry.judged.is_none()
            {
                if entry.arrived_unix_nano >= arrived_before {
                    break;
                }
                if due(entry) {
                    any_root_call |= entry.chain.roots_in_a_call();
                    to_analyse += usize::from(entry.dirty);
                    now.push(trace_id);
                } else {
                    self.unjudged[kept] = trace_id;
                    kept += 1;
                }
            }
            // Else evicted (and judged) or judged since: it leaves the queue.
            looked += 1;
        }
        self.unjudged.drain(kept..looked);
        // Calls that lost their context, judged across every chain held: one pass for all the
        // chains judged now, and only when one of them is rooted in a call.
        let lost = if any_root_call {
            lost_contexts(self.chains.values().map(|e| &e.chain), &self.options)
        } else {
            Vec::new()
        };
        // Many to analyse first (the end of a run, a report): their analyses made on two
        // threads, a slice at a time, each folded with its fresh samples as it is taken in
        // (not packed, then unpacked again to be folded).
        let two_threads = self.two_threads && to_analyse >= 2 * ANALYSED_AT_ONCE;
        let slice = if two_threads {
            ANALYSED_AT_ONCE
        } else {
            now.len().max(1)
        };
        for ids in now.chunks(slice) {
            let made = if two_threads {
                self.analyses_on_two_threads(ids)
            } else {
                Vec::new()
            };
            let mut made = made.into_iter();
            for trace_id in ids {
                let made = made.next().flatten();
                if let Some(entry) = self.chains.get_mut(trace_id) {
                    Self::judge_entry(
                        entry,
                        made,
                        &self.options,
                        &mut self.counters,
                        &mut self.verdicts,
                        &lost,
                        fate,
                    );
                    Self::hand_on(entry, self.holding.as_deref_mut());
                }
            }
        }
        now.len()
    }

    /// Whether some chain waits for [`Store::analyse_dirty`].
    pub fn has_dirty(&self) -> bool {
        !self.dirty.is_empty()
    }

    /// Chain summaries, newest chain (by first arrival) first, then the chains kept whole past
    /// their eviction for the page. Chains not analysed yet are skipped.
    pub fn chains(&self) -> impl Iterator<Item = ChainEntry<'_>> + '_ {
        self.order
            .iter()
            .rev()
            .copied()
            .chain(self.pins.chains())
            .filter_map(|id| ChainEntry::of(id, self.chains.get(&id)?))
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

    /// The latest analysis of one chain (possibly stale: see [`Store::has_dirty`]), with its
    /// waterfall rows, rebuilt: the analysis again, with the calls that lost their context
    /// folded in as they were (the same rows as the analysis held had, unless spans joined the
    /// chain since).
    pub fn analysis(&self, trace_id: TraceId) -> Option<Arc<ChainAnalysis>> {
        let entry = self.chains.get(&trace_id)?;
        let held = entry.analysis.as_ref()?;
        let (fresh, edges) = entry.analyse_again(&self.options);
        // The samples held, or these when the end of the run did not keep them (the same: no
        // span joins a chain without making them again first).
        let samples = match &entry.samples {
            Some(samples) => samples.unpack(&entry.chain),
            None => edges,
        };
        Some(Arc::new(held.to_analysis(trace_id, fresh.rows, samples)))
    }

    /// The summary of one chain's latest analysis (what the chain list shows of it).
    pub fn summary(&self, trace_id: TraceId) -> Option<&ChainSummary> {
        Some(&self.chains.get(&trace_id)?.analysis.as_ref()?.summary)
    }

    /// The latest analysis of one chain as held: its summary and findings, without the copy
    /// [`Store::analysis`] makes to give back its rows and edge samples. For passes over every
    /// chain.
    pub fn held_analysis(&self, trace_id: TraceId) -> Option<&HeldAnalysis> {
        self.chains.get(&trace_id)?.analysis.as_deref()
    }

    /// Whether a chain held has been judged (folded into the totals).
    pub fn is_judged(&self, trace_id: TraceId) -> bool {
        self.chains
            .get(&trace_id)
            .is_some_and(|e| e.judged.is_some())
    }

    /// Store-wide counters.
    pub fn counters(&self) -> StoreCounters {
        let mut counters = self.counters;
        if let Some(holding) = &self.holding {
            counters.received_bytes = holding.bytes();
            counters.received_not_held = holding.not_held();
        }
        counters
    }
}

#[cfg(test)]
mod tests;

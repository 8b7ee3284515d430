//! The trace store: request chains assembled from spans as they arrive, analysed on demand,
//! judged once, and counted once in the running totals (`CONVENTIONS.md` section 6).
//!
//! One loop owns it (no lock between ingest and render): its pump ([`crate::pump`]) inserts
//! what ingest sends ([`Store::insert_batch`]) and judges on its tick ([`Store::judge_settled`]),
//! and the screen and the reports read chain summaries, a chain's analysis, and the totals.
//! Chains assemble in any order across batches; a chain is marked dirty when a span joins it
//! and analysed again on the next tick (what the screen shows of it). A chain is *judged* (its
//! analysis folded into the totals, once) when it has been quiet for `--settle`, when it must
//! be evicted, or when a report is written; a span for a judged chain still held judges it
//! again (its contribution replaced), one for an evicted chain is counted
//! (`spans_after_verdict`) and not judged. Retention is bounded by `max_spans`: the oldest
//! chains (by first arrival) are evicted first, so memory stays flat under any load, and
//! nothing evicted leaves the totals.
//!
//! Here: the store, its entries and their readers. Its jobs have rooms of their own: `arrival`
//! (spans joining chains), `eviction`, `judging` (analysing and judging, `two_threads` for many
//! at once), `verdicts` (the totals), `worst_chains` (kept whole for the page).

use std::collections::VecDeque;

use foldhash::{HashMap, HashMapExt as _};
use std::sync::Arc;

use deadline_budget::analysis::{
    Chain, ChainAnalysis, ChainSummary, DEFAULT_MAX_FINDINGS, EdgeSample, FindingList, LostContext,
    Options, Totals, TraceId,
};

use crate::batch;

mod arrival;
mod attributes;
mod eviction;
pub mod exemplars;
mod judging;
mod latest_analysis;
mod received;
mod samples;
mod two_threads;
mod verdicts;
mod worst_chains;
pub use attributes::SpanAttributes;
use attributes::{ChainAttributes, Dictionary};
pub use latest_analysis::LatestAnalysis;
pub use received::{Handoff, JudgedChain, Keep, ReceivedChain};
use received::{HeldSpans, Holding};
use samples::EdgeSamples;
pub use verdicts::RECENT_SECONDS;
use verdicts::{Fate, HopRows, Judged, Recent, Verdicts};
use worst_chains::WorstChains;

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

/// Chains kept whole past their eviction per finding kind, for the HTML page (which draws as
/// many per kind): the ones with the most dead work (`CONVENTIONS.md` section 6).
pub const WORST_CHAINS_PER_KIND: usize = 3;

/// The share of `--max-spans` that chains kept for the page may hold at most (1/4): they are
/// counted within it, and the rest of the bound keeps the newest chains.
const WORST_CHAINS_SHARE: usize = 4;

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
    analysis: Option<Box<LatestAnalysis>>,
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
    /// For how many finding kinds it is kept past its eviction ([`WorstChains`]); out of `order`
    /// while above 0.
    worst_of_kinds: u8,
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
    worst: WorstChains,
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
            worst: WorstChains::default(),
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
            .chain(self.worst.chains())
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
    pub fn latest_analysis(&self, trace_id: TraceId) -> Option<&LatestAnalysis> {
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

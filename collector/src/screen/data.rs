//! What the screen holds: the collector's [`Store`] (chains, analyses, edges) plus what only the
//! screen needs: the chain list in the chosen order and filter, the per-service figures of the
//! services view, and per-second rates for the header.
//!
//! Spans enter through [`ScreenData::add_batch`] (cheap: the store only marks chains dirty)
//! and the loop calls [`ScreenData::settle`] on its frame tick, which analyses the dirty chains
//! once and rebuilds the list. Nothing here knows ratatui or tokio.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::batch::Batch;
use crate::store::Store;
use crate::view_model::map::ServiceMap;
use deadline_budget::analysis::{Chain, ChainAnalysis, Row, Span, Totals, TraceId};

/// How many seconds the header's rate windows (spans/s, wasted ms/s) cover.
pub const RATE_WINDOW_SECS: u64 = 10;

/// The order of the chain list.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SortBy {
    /// Newest first.
    #[default]
    Time,
    /// Longest first.
    Duration,
    /// Most wasted work first.
    Waste,
}

impl SortBy {
    /// The next order, for the `s` key.
    pub fn next(self) -> Self {
        match self {
            SortBy::Time => SortBy::Duration,
            SortBy::Duration => SortBy::Waste,
            SortBy::Waste => SortBy::Time,
        }
    }
    /// A word for the header.
    pub fn label(self) -> &'static str {
        match self {
            SortBy::Time => "newest",
            SortBy::Duration => "longest",
            SortBy::Waste => "most waste",
        }
    }
}

/// Which chains the list keeps (the `f` key).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Filter {
    /// Every chain.
    #[default]
    All,
    /// Chains with at least one finding.
    Findings,
    /// Chains whose user got no answer they could use (504, shed, cancelled, error).
    Failed,
}

impl Filter {
    /// The next filter, for the `f` key.
    pub fn next(self) -> Self {
        match self {
            Filter::All => Filter::Findings,
            Filter::Findings => Filter::Failed,
            Filter::Failed => Filter::All,
        }
    }

    /// Words for the header; `None` when every chain shows.
    pub fn label(self) -> Option<&'static str> {
        match self {
            Filter::All => None,
            Filter::Findings => Some("only findings"),
            Filter::Failed => Some("only failed"),
        }
    }
}

/// Which chains the list shows, and in what order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ListQuery {
    /// Which chains are kept.
    pub filter: Filter,
    /// Case-insensitive search in any span's service or operation; empty shows all.
    pub search: String,
    /// The order.
    pub sort: SortBy,
}

/// One chain as the waterfall and the detail popup show it: its latest analysis (derefs to
/// it), and the chain whose spans its rows name.
#[derive(Clone, Debug)]
pub struct ChainView<'a> {
    analysis: Arc<ChainAnalysis>,
    chain: &'a Chain,
}

impl std::ops::Deref for ChainView<'_> {
    type Target = ChainAnalysis;
    fn deref(&self) -> &ChainAnalysis {
        &self.analysis
    }
}

impl ChainView<'_> {
    /// Waterfall row `i` and its span, at the times the analysis judged (a hop whose clock was
    /// off is on its caller's clock: `row.moved_ms`).
    pub fn row(&self, i: usize) -> Option<(&Row, Span)> {
        let row = self.analysis.rows.get(i)?;
        Some((row, self.span_of(row)?))
    }

    /// Every waterfall row with its span, in order, as [`ChainView::row`].
    pub fn rows(&self) -> impl Iterator<Item = (&Row, Span)> + '_ {
        self.analysis
            .rows
            .iter()
            .filter_map(|row| Some((row, self.span_of(row)?)))
    }

    fn span_of(&self, row: &Row) -> Option<Span> {
        let mut span = self.chain.span(row.span as usize)?;
        let by = i64::from(row.moved_ms) * 1_000_000;
        span.start_unix_nano = span.start_unix_nano.saturating_add_signed(by);
        span.end_unix_nano = span.end_unix_nano.saturating_add_signed(by);
        Some(span)
    }
}

pub use crate::service_figures::ServiceStats;

/// What a chain must go through for the Map's `o`: an edge's calls, or one of some services.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Through {
    /// Calls from the first service to the second.
    Edge(Arc<str>, Arc<str>),
    /// A hop (or call) of any of these services.
    Services(Vec<Arc<str>>),
}

impl Through {
    /// Whether a waterfall row of `service` (a hop when `hop`, under a row of `parent`) is
    /// where a chain goes through this: the callee's hop under its caller, or the service's
    /// first row.
    pub fn is_at(&self, service: &str, parent: Option<&str>, hop: bool) -> bool {
        match self {
            Through::Edge(caller, callee) => {
                hop && service == &**callee && parent == Some(&**caller)
            }
            Through::Services(names) => names.iter().any(|n| &**n == service),
        }
    }
}

/// Per-second sums over a short window, for "per second" figures in the header.
#[derive(Clone, Debug, Default)]
pub struct RateWindow {
    buckets: VecDeque<(u64, i64)>,
}

impl RateWindow {
    /// Add `amount` in the second of `now`.
    pub fn add(&mut self, now_unix_nano: u64, amount: i64) {
        let s = now_unix_nano / 1_000_000_000;
        match self.buckets.back_mut() {
            Some((sec, v)) if *sec == s => *v += amount,
            _ => self.buckets.push_back((s, amount)),
        }
        while self
            .buckets
            .front()
            .is_some_and(|(sec, _)| *sec + RATE_WINDOW_SECS * 2 < s)
        {
            self.buckets.pop_front();
        }
    }
    /// Mean per second over the `RATE_WINDOW_SECS` whole seconds before `now`.
    pub fn per_second(&self, now_unix_nano: u64) -> f64 {
        let s = now_unix_nano / 1_000_000_000;
        let from = s.saturating_sub(RATE_WINDOW_SECS);
        let sum: i64 = self
            .buckets
            .iter()
            .filter(|(sec, _)| *sec >= from && *sec < s)
            .map(|(_, v)| v)
            .sum();
        sum as f64 / RATE_WINDOW_SECS as f64
    }
}

/// How long a chain whose root has not arrived stays out of the list: a service's own work span
/// is often exported before the request span it belongs to, and "… assembling" rows at the top
/// of the list would push the chains a person can read down. Past this, the chain is listed (its
/// root may never come: an unsampled or uninstrumented caller).
pub const ROOTLESS_GRACE_NS: u64 = 5_000_000_000;

/// Frees what is left of a batch (its spans' vector, their raw attributes: allocated by the
/// receivers on the runtime's worker threads) on a worker thread too, when there is a runtime.
/// Freed on the screen's own thread, glibc keeps the small pieces in that thread's cache and
/// hands them out again to the store, whose chains then live scattered through the workers'
/// malloc arenas and hold their pages (docs/performance.md, "A batch's leftovers freed on a
/// worker").
fn free_on_a_worker(batch: Batch) {
    match tokio::runtime::Handle::try_current() {
        Ok(runtime) => drop(runtime.spawn(async move { drop(batch) })),
        Err(_) => drop(batch),
    }
}

/// The store and the screen's views of it.
#[derive(Debug)]
pub struct ScreenData {
    /// The collector's store: chains, analyses, edges.
    pub store: Store,
    /// The chain list: trace ids in the order and filter of the last query.
    pub visible: Vec<TraceId>,
    /// The services, worst dead-work share first, from the totals the tables show
    /// (recomputed once a second while a table is open).
    pub services: Vec<(Arc<str>, ServiceStats)>,
    /// The tables show the last minute (`m`): [`ScreenData::minute`], not the totals since
    /// start.
    pub last_minute: bool,
    /// The totals of the chains judged in the last minute (the store's
    /// [`Store::recent_totals`]), recomputed once a second while a table shows them.
    pub minute: Totals,
    /// The map of services of the totals the tables show, rebuilt with them while the Map
    /// shows it.
    pub map: Option<ServiceMap>,
    /// The Map is shown: the tables' rebuild builds the map too.
    pub map_wanted: bool,
    /// Spans per second.
    pub span_rate: RateWindow,
    /// Newly found wasted ms per second.
    pub waste_rate: RateWindow,
    wasted_total: i64,
    query_applied: Option<ListQuery>,
    services_second: Option<u64>,
    /// Analysed chains not yet in `visible` (the rebuild was throttled).
    list_stale: bool,
    last_rebuild: Option<Instant>,
    rebuild_cost: Duration,
    /// The earliest time a chain held back for [`ROOTLESS_GRACE_NS`] is due in the list.
    next_unhide: Option<u64>,
}

/// The most time one frame spends analysing chains that changed: a burst is analysed a slice per
/// frame (oldest first), so a key press never waits behind it for more than this.
pub const ANALYSIS_SLICE: Duration = Duration::from_millis(40);

/// Rebuilding the list costs O(chains held); below this it is done every tick, above it at most
/// once per ten times its cost, so a huge store never takes more than ~10 % of a core.
const CHEAP_REBUILD: Duration = Duration::from_millis(2);

impl ScreenData {
    /// Wrap a store (which keeps the last minute's verdicts apart from then on).
    pub fn new(store: Store) -> Self {
        ScreenData {
            store: store.with_recent(),
            visible: Vec::new(),
            services: Vec::new(),
            last_minute: false,
            minute: Totals::new(),
            map: None,
            map_wanted: false,
            span_rate: RateWindow::default(),
            waste_rate: RateWindow::default(),
            wasted_total: 0,
            query_applied: None,
            services_second: None,
            list_stale: false,
            last_rebuild: None,
            rebuild_cost: Duration::ZERO,
            next_unhide: None,
        }
    }

    /// Whether no chain is held.
    pub fn is_empty(&self) -> bool {
        self.store.counters().chains_held == 0
    }

    /// The latest analysis of a chain.
    pub fn analysis(&self, id: &TraceId) -> Option<Arc<ChainAnalysis>> {
        self.store.analysis(*id)
    }

    /// One chain's analysis with its spans, for the waterfall.
    pub fn chain_view(&self, id: &TraceId) -> Option<ChainView<'_>> {
        Some(ChainView {
            analysis: self.store.analysis(*id)?,
            chain: self.store.chain(*id)?,
        })
    }

    /// Take in a batch from ingest, received at `now`.
    pub fn add_batch(&mut self, mut batch: Batch, now_unix_nano: u64) {
        self.span_rate.add(now_unix_nano, batch.spans.len() as i64);
        self.store.set_clock(now_unix_nano);
        self.store.insert_batch_from(&mut batch);
        free_on_a_worker(batch);
    }

    /// Take in spans without raw attributes, received at `now` (the tests and benches feed
    /// fixtures this way).
    pub fn add_spans(&mut self, spans: Vec<Span>, now_unix_nano: u64) {
        self.span_rate.add(now_unix_nano, spans.len() as i64);
        self.store.set_clock(now_unix_nano);
        self.store.insert_spans(spans);
    }

    /// The totals the Edges and Services tables show: since start, or of the last minute.
    pub fn table_totals(&self) -> &Totals {
        if self.last_minute {
            &self.minute
        } else {
            self.store.totals()
        }
    }

    /// Show the tables over the last minute, or since start: recomputed now (also while
    /// paused), then once a second.
    pub fn set_last_minute(&mut self, last_minute: bool) {
        self.last_minute = last_minute;
        self.rebuild_tables();
    }

    /// Analyse what changed, rebuild the list (and the tables' figures when `tables` are
    /// shown, at most once a second). Returns whether the screen changed.
    pub fn settle(&mut self, query: &ListQuery, now_unix_nano: u64, tables: bool) -> bool {
        let analysed = self.store.analyse_dirty_for(ANALYSIS_SLICE);
        // Chains quiet for --settle are judged into the totals the header and tables read.
        self.store.set_clock(now_unix_nano);
        let judged = self.store.judge_settled();
        self.list_stale |=
            analysed > 0 || judged > 0 || self.next_unhide.is_some_and(|t| now_unix_nano >= t);
        let query_changed = self.query_applied.as_ref() != Some(query);
        let due = self.rebuild_cost < CHEAP_REBUILD
            || self
                .last_rebuild
                .is_none_or(|t| t.elapsed() >= self.rebuild_cost * 10);
        let mut changed = false;
        if query_changed || (self.list_stale && due) {
            let started = Instant::now();
            self.rebuild_list(query, now_unix_nano);
            self.rebuild_cost = started.elapsed();
            self.last_rebuild = Some(Instant::now());
            self.list_stale = false;
            changed = true;
        }
        let second = now_unix_nano / 1_000_000_000;
        if tables && (self.services_second != Some(second) || (judged > 0 && !self.last_minute)) {
            self.rebuild_tables();
            self.services_second = Some(second);
            changed = true;
        }
        changed
    }

    fn rebuild_list(&mut self, query: &ListQuery, now_unix_nano: u64) {
        let needle = query.search.to_lowercase();
        let mut wasted_total = 0;
        let held = self.store.counters().chains_held as usize;
        let mut rows: Vec<(TraceId, u64, i64, i64)> = Vec::with_capacity(held);
        let mut next_unhide: Option<u64> = None;
        // One walk over the store's own chains: the list keeps no copy of them.
        for entry in self.store.chains_unordered() {
            let s = entry.summary;
            wasted_total += s.wasted_ms;
            // A chain whose root has not arrived (a span names a parent it does not hold)
            // waits out its grace from when its first span arrived.
            let due = entry.arrived_unix_nano.saturating_add(ROOTLESS_GRACE_NS);
            if s.orphans > 0 && now_unix_nano < due {
                next_unhide = Some(next_unhide.map_or(due, |t| t.min(due)));
                continue;
            }
            let kept = match query.filter {
                Filter::All => true,
                Filter::Findings => s.worst.is_some(),
                Filter::Failed => s.outcome.failed(),
            };
            if !kept {
                continue;
            }
            if !needle.is_empty() && !self.matches(entry.trace_id, &needle) {
                continue;
            }
            rows.push((
                entry.trace_id,
                s.start_unix_nano,
                s.duration_ms,
                s.wasted_ms,
            ));
        }
        self.next_unhide = next_unhide;
        match query.sort {
            SortBy::Time => rows.sort_unstable_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0))),
            SortBy::Duration => {
                rows.sort_unstable_by(|a, b| b.2.cmp(&a.2).then(b.1.cmp(&a.1)).then(a.0.cmp(&b.0)))
            }
            SortBy::Waste => {
                rows.sort_unstable_by(|a, b| b.3.cmp(&a.3).then(b.1.cmp(&a.1)).then(a.0.cmp(&b.0)))
            }
        }
        self.visible = rows.into_iter().map(|r| r.0).collect();
        let delta = wasted_total - self.wasted_total;
        if delta > 0 && self.query_applied.is_some() {
            self.waste_rate.add(now_unix_nano, delta);
        }
        self.wasted_total = wasted_total;
        self.query_applied = Some(query.clone());
    }

    fn matches(&self, id: TraceId, needle: &str) -> bool {
        self.store.chain(id).is_some_and(|c| {
            c.spans().any(|s| {
                s.service.to_lowercase().contains(needle) || s.name.to_lowercase().contains(needle)
            })
        })
    }

    fn rebuild_tables(&mut self) {
        if self.last_minute {
            self.minute = self.store.recent_totals();
        }
        self.services = crate::service_figures::service_stats(self.table_totals());
        if self.map_wanted {
            self.map = Some(ServiceMap::of_totals(self.table_totals()));
        }
    }

    /// The tables' figures (and the map, when wanted) from the totals now, not at the next
    /// second: a view that shows them has just opened.
    pub(crate) fn refresh_tables(&mut self) {
        self.rebuild_tables();
    }

    /// The worst chain held that goes `through` an edge or a service: the one with the worst
    /// finding, then the most work for nobody, then a failed one, then the longest, then the
    /// newest. Chains are tried in that order, each looked at only as far as needed.
    pub fn worst_chain_through(&self, through: &Through) -> Option<TraceId> {
        let mut ranked: Vec<(TraceId, &deadline_budget::analysis::ChainSummary)> = self
            .store
            .chains_unordered()
            .map(|entry| (entry.trace_id, entry.summary))
            .collect();
        ranked.sort_by(|(a, x), (b, y)| {
            y.worst
                .cmp(&x.worst)
                .then(y.wasted_ms.cmp(&x.wasted_ms))
                .then(y.outcome.failed().cmp(&x.outcome.failed()))
                .then(y.duration_ms.cmp(&x.duration_ms))
                .then(y.start_unix_nano.cmp(&x.start_unix_nano))
                .then(a.cmp(b))
        });
        ranked.into_iter().map(|(id, _)| id).find(|&id| {
            let Some(chain) = self.store.chain(id) else {
                return false;
            };
            // Cheap first: a service of the edge or the box among the chain's spans.
            let named = |name: &str| {
                (0..chain.len()).any(|i| chain.service(i).is_some_and(|s| &**s == name))
            };
            match through {
                Through::Services(names) => names.iter().any(|n| named(n)),
                Through::Edge(caller, callee) => {
                    named(caller)
                        && self.store.analysis(id).is_some_and(|a| {
                            a.edges
                                .iter()
                                .any(|e| e.caller == *caller && e.callee == *callee)
                        })
                }
            }
        })
    }
}

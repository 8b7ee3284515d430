//! One request chain (one trace) being assembled from spans that arrive in any order.
//!
//! Spans enter with [`Chain::insert`], across as many batches as they take; the chain keeps them
//! in arrival order (with a `span_id -> index` map once it is large enough to need one), and [`Chain::analyse`](super::Chain::analyse)
//! rebuilds the tree from scratch each time it is asked. The tree is never stored: a chain that is
//! still growing is cheap to hold, and the analysis never sees a half-updated tree.
//!
//! Broken trees are expected, not exceptional: a parent that never arrived makes its child the
//! root of its own subtree ([`Link::Orphan`]); a span that is its own parent, or a loop of
//! parents, is cut at one member ([`Link::CycleCut`]). Every walk is iterative, so a chain
//! 100,000 hops deep costs time, not stack.

use foldhash::{HashMap, HashMapExt as _};

use std::sync::Arc;

use super::model::{
    BudgetFacts, BudgetSource, Outcome, Span, SpanId, SpanKind, SpanStatus, TraceId,
};

/// What [`Chain::insert`] did with a span.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Inserted {
    /// A span the chain did not have yet.
    New,
    /// A span with an id the chain already had, with the same contents (an exporter that
    /// re-sends a batch sends the same span): nothing changed.
    Replaced,
    /// A span with an id the chain already had but different contents. The copy kept is
    /// chosen by content, so the chain is the same whatever order the copies came in: the one
    /// that ends later (a finished span over a partial one), then the one with more budget
    /// facts, then the greater by its full contents.
    Conflicting,
    /// The span belongs to another trace; the chain ignored it.
    OtherTrace,
}

/// How a span hangs in the tree that the analysis built.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Link {
    /// It has no parent: a root of the chain.
    Root,
    /// It hangs under its parent.
    Child,
    /// It names a parent that is not in the chain (not arrived, or lost): it is shown as a root
    /// of its own subtree.
    Orphan,
    /// It was its own parent, or one member of a loop of parents: the analysis cut the link here
    /// and made it a root. The member cut is the earliest-starting one, so the result does not
    /// depend on arrival order.
    CycleCut,
}

/// Up to this many spans a chain finds a span id by scanning its spans: cheaper than hashing,
/// and no map to hold per chain (most chains are a few dozen spans). Past it, a map is built.
const SCAN_LIMIT: usize = 32;

/// Spans a new chain makes room for at once (a request through four services).
const TYPICAL_SPANS: usize = 8;

/// The `i64` facts of [`BudgetFacts`], in the order of their bits in [`Packed::present`].
const FACTS: usize = 12;
/// [`Packed::present`]: the span names a parent.
const HAS_PARENT: u32 = 1 << FACTS;
/// [`Packed::present`]: the span has an `error.type` (kept in [`Chain::error_types`]).
const HAS_ERROR_TYPE: u32 = 1 << (FACTS + 1);
/// [`Packed::present`]: the span recorded an `exception` event.
const HAS_EXCEPTION: u32 = 1 << (FACTS + 2);
/// [`Packed::present`]: the span's failure names another cause ([`BudgetFacts::other_cause`]).
const OTHER_CAUSE: u32 = 1 << (FACTS + 3);
/// [`Packed::present`]: the span names its callee (kept in [`Chain::callee_names`]).
const HAS_CALLEE_NAME: u32 = 1 << (FACTS + 4);
const FACT_BITS: u32 = (1 << FACTS) - 1;

fn facts_of(b: &BudgetFacts) -> [Option<i64>; FACTS] {
    [
        b.received_ms,
        b.default_ms,
        b.queue_wait_ms,
        b.remaining_at_start_ms,
        b.remaining_ms,
        b.forwarded_ms,
        b.timeout_ms,
        b.sla_ms,
        b.attempt,
        b.deadline_unix_ms,
        b.http_status,
        b.rpc_status,
    ]
}

/// The longest run of facts a span has, encoded: twelve varints of at most ten bytes.
const RUN_BYTES: usize = FACTS * 10;

/// Writes the present facts as zigzag varints into `out` (7 bits a byte, low first, the high bit
/// set on every byte but a value's last); returns the bytes written. A budget fact is a few ms,
/// a status or an attempt (one or two bytes) or a deadline in Unix ms (six): ~3 bytes a fact
/// instead of an `i64`'s 8.
fn encode_run(facts: &[Option<i64>; FACTS], out: &mut [u8; RUN_BYTES]) -> usize {
    let mut len = 0;
    for &v in facts.iter().flatten() {
        let mut z = ((v << 1) ^ (v >> 63)) as u64;
        while z >= 0x80 {
            out[len] = z as u8 | 0x80;
            len += 1;
            z >>= 7;
        }
        out[len] = z as u8;
        len += 1;
    }
    len
}

/// The varint at the front of `bytes` (as [`encode_run`] wrote it) and its length in bytes.
fn get_varint(bytes: &[u8]) -> (i64, usize) {
    let mut z: u64 = 0;
    for (i, &b) in bytes.iter().enumerate().take(10) {
        z |= u64::from(b & 0x7f) << (7 * i);
        if b & 0x80 == 0 {
            return (((z >> 1) as i64) ^ -((z & 1) as i64), i + 1);
        }
    }
    (0, bytes.len()) // never the case for what `encode_run` wrote
}

/// The length in bytes of the `count` varints at the front of `bytes`.
fn varints_len(bytes: &[u8], count: usize) -> usize {
    let mut len = 0;
    for _ in 0..count {
        len += get_varint(&bytes[len..]).1;
    }
    len
}

fn facts_from(f: [Option<i64>; FACTS], b: &mut BudgetFacts) {
    let [
        received_ms,
        default_ms,
        queue_wait_ms,
        remaining_at_start_ms,
        remaining_ms,
        forwarded_ms,
        timeout_ms,
        sla_ms,
        attempt,
        deadline_unix_ms,
        http_status,
        rpc_status,
    ] = f;
    b.received_ms = received_ms;
    b.default_ms = default_ms;
    b.queue_wait_ms = queue_wait_ms;
    b.remaining_at_start_ms = remaining_at_start_ms;
    b.remaining_ms = remaining_ms;
    b.forwarded_ms = forwarded_ms;
    b.timeout_ms = timeout_ms;
    b.sla_ms = sla_ms;
    b.attempt = attempt;
    b.deadline_unix_ms = deadline_unix_ms;
    b.http_status = http_status;
    b.rpc_status = rpc_status;
}

/// One span as a chain holds it: 80 bytes instead of a [`Span`]'s 304. The trace id is the
/// chain's; the budget facts that are present sit in the chain's `values`, from byte
/// `values_at`, one varint per bit set in `present`; an `error.type` sits in the chain's
/// `error_types`, a callee's name in its `callee_names`.
#[derive(Clone, Debug)]
struct Packed {
    span_id: SpanId,
    /// Meaningful when `present` has [`HAS_PARENT`].
    parent: SpanId,
    service: Arc<str>,
    name: Arc<str>,
    start_unix_nano: u64,
    end_unix_nano: u64,
    values_at: u32,
    present: u32,
    kind: SpanKind,
    status: SpanStatus,
    source: Option<BudgetSource>,
    outcome: Option<Outcome>,
}

// The size the memory figures in docs/performance.md count on.
const _: () = assert!(size_of::<Packed>() == 80);

impl Packed {
    fn parent(&self) -> Option<SpanId> {
        (self.present & HAS_PARENT != 0).then_some(self.parent)
    }
    fn is_root_call(&self) -> bool {
        self.kind.is_call() && self.parent().is_none()
    }
    fn fact_count(&self) -> usize {
        (self.present & FACT_BITS).count_ones() as usize
    }
}

/// One span of a chain as the analysis reads it: a [`Span`] borrowed from the chain instead of
/// unpacked into one. Unpacking clones the service and the name (two atomic increments, and
/// as many decrements when the copy is dropped) for every span of every analysis; a view
/// touches no reference count and allocates nothing.
#[derive(Debug)]
pub(crate) struct SpanView<'a> {
    pub span_id: SpanId,
    pub parent_span_id: Option<SpanId>,
    pub service: &'a Arc<str>,
    pub name: &'a Arc<str>,
    pub kind: SpanKind,
    pub start_unix_nano: u64,
    pub end_unix_nano: u64,
    pub status: SpanStatus,
    /// The budget facts, except `error_type` and `callee_name`, which are always `None`
    /// here: read [`SpanView::error_type`] and [`SpanView::callee_name`] (borrowed, not cloned).
    pub budget: BudgetFacts,
    pub error_type: Option<&'a Arc<str>>,
    pub callee_name: Option<&'a Arc<str>>,
}

impl SpanView<'_> {
    /// As [`Span::duration_ms`].
    pub fn duration_ms(&self) -> i64 {
        (self.end_unix_nano.saturating_sub(self.start_unix_nano) / 1_000_000) as i64
    }
}

/// The spans of one trace, deduplicated by span id, in arrival order. Spans are held packed
/// (see [`Chain::insert`]); [`Chain::span`] and [`Chain::spans`] give them back as [`Span`]s.
#[derive(Clone, Debug)]
pub struct Chain {
    trace_id: TraceId,
    spans: Vec<Packed>,
    /// The present budget facts of every span as zigzag varints ([`encode_run`]), each span's
    /// run from byte `values_at`.
    values: Vec<u8>,
    /// Bytes of `values` no span points at any more (left by replaced spans); compacted past
    /// half.
    garbage: u32,
    /// How many of its spans are calls without a parent ([`Chain::roots_in_a_call`]), kept as
    /// spans join: asked of every chain judged, it then reads no span.
    root_calls: u32,
    /// `error.type` by span position, for the few spans that carry one.
    error_types: Vec<(u32, Arc<str>)>,
    /// The callee a CLIENT span names, by span position, for the spans that name one.
    callee_names: Vec<(u32, Arc<str>)>,
    /// `span_id -> index`, only once the chain holds more than [`SCAN_LIMIT`] spans.
    // Boxed: 8 bytes in every chain instead of a 48-byte empty map.
    #[allow(clippy::box_collection)]
    index: Option<Box<HashMap<SpanId, u32>>>,
}

impl Chain {
    /// An empty chain for `trace_id`.
    pub fn new(trace_id: TraceId) -> Self {
        Chain {
            trace_id,
            spans: Vec::new(),
            values: Vec::new(),
            garbage: 0,
            root_calls: 0,
            error_types: Vec::new(),
            callee_names: Vec::new(),
            index: None,
        }
    }

    /// The position of the span with this id.
    fn position(&self, span_id: SpanId) -> Option<u32> {
        match &self.index {
            Some(index) => index.get(&span_id).copied(),
            None => self
                .spans
                .iter()
                .position(|s| s.span_id == span_id)
                .map(|i| i as u32),
        }
    }

    /// The trace this chain assembles.
    pub fn trace_id(&self) -> TraceId {
        self.trace_id
    }

    /// Add a span. A span id seen before with other contents replaces the earlier copy in
    /// place (its position in arrival order is kept) when it wins by content (see
    /// [`Inserted::Conflicting`]); a span of another trace is ignored.
    ///
    /// The chain holds the span packed: the trace id once for the whole chain, and only the
    /// budget facts the span has (a SERVER span has about five of the twelve), so a chain of
    /// spans costs well under half of the [`Span`]s it was given.
    pub fn insert(&mut self, span: Span) -> Inserted {
        if span.trace_id != self.trace_id {
            return Inserted::OtherTrace;
        }
        let at = self.position(span.span_id);
        let held = at.map(|i| self.unpack(i as usize));
        if let Some(held) = &held {
            if *held == span {
                return Inserted::Replaced;
            }
            // The winner by content, whatever the arrival order (last-one-wins moved the blame
            // with the order batches happened to arrive in).
            let rank = |s: &Span| {
                let facts = facts_of(&s.budget).iter().flatten().count()
                    + usize::from(s.budget.source.is_some())
                    + usize::from(s.budget.outcome.is_some())
                    + usize::from(s.budget.error_type.is_some())
                    + usize::from(s.budget.callee_name.is_some());
                (s.end_unix_nano, facts)
            };
            let keep_held = match rank(held).cmp(&rank(&span)) {
                std::cmp::Ordering::Equal => format!("{held:?}") > format!("{span:?}"),
                order => order == std::cmp::Ordering::Greater,
            };
            if keep_held {
                return Inserted::Conflicting;
            }
        }
        let Span {
            span_id,
            parent_span_id,
            service,
            name,
            kind,
            start_unix_nano,
            end_unix_nano,
            status,
            budget,
            ..
        } = span;
        let facts = facts_of(&budget);
        let mut present = 0u32;
        for (bit, f) in facts.iter().enumerate() {
            if f.is_some() {
                present |= 1 << bit;
            }
        }
        if parent_span_id.is_some() {
            present |= HAS_PARENT;
        }
        if budget.error_type.is_some() {
            present |= HAS_ERROR_TYPE;
        }
        if budget.exception_event {
            present |= HAS_EXCEPTION;
        }
        if budget.other_cause {
            present |= OTHER_CAUSE;
        }
        if budget.callee_name.is_some() {
            present |= HAS_CALLEE_NAME;
        }
        let mut packed = Packed {
            span_id,
            parent: parent_span_id.unwrap_or_default(),
            service,
            name,
            start_unix_nano,
            end_unix_nano,
            values_at: 0,
            present,
            kind,
            status,
            source: budget.source,
            outcome: budget.outcome,
        };
        let mut encoded = [0u8; RUN_BYTES];
        let run_len = encode_run(&facts, &mut encoded);
        let run = &encoded[..run_len];
        match at {
            Some(i) => {
                let old = &self.spans[i as usize];
                let at = old.values_at as usize;
                let old_len = varints_len(&self.values[at..], old.fact_count());
                if run.len() <= old_len {
                    packed.values_at = old.values_at;
                    self.values[at..at + run.len()].copy_from_slice(run);
                    self.garbage += (old_len - run.len()) as u32;
                } else {
                    packed.values_at = self.values.len() as u32;
                    self.values.extend_from_slice(run);
                    self.garbage += old_len as u32;
                }
                self.error_types.retain(|(at, _)| *at != i);
                if let Some(e) = budget.error_type {
                    self.error_types.push((i, e));
                }
                self.callee_names.retain(|(at, _)| *at != i);
                if let Some(n) = budget.callee_name {
                    self.callee_names.push((i, n));
                }
                self.root_calls = self.root_calls - u32::from(old.is_root_call())
                    + u32::from(packed.is_root_call());
                self.spans[i as usize] = packed;
                if self.garbage as usize > self.values.len() / 2 {
                    self.compact_values();
                }
                Inserted::Conflicting
            }
            None => {
                let i = self.spans.len() as u32;
                if i == 0 {
                    // Room for a typical chain at once, instead of a series of doublings (about
                    // five facts a span, ~3 bytes each).
                    self.spans.reserve_exact(TYPICAL_SPANS);
                    self.values.reserve_exact(TYPICAL_SPANS * 16);
                }
                match &mut self.index {
                    Some(index) => {
                        index.insert(span_id, i);
                    }
                    None if self.spans.len() >= SCAN_LIMIT => {
                        let mut index: HashMap<SpanId, u32> = self
                            .spans
                            .iter()
                            .enumerate()
                            .map(|(i, s)| (s.span_id, i as u32))
                            .collect();
                        index.insert(span_id, i);
                        self.index = Some(Box::new(index));
                    }
                    None => {}
                }
                packed.values_at = self.values.len() as u32;
                self.values.extend_from_slice(run);
                if let Some(e) = budget.error_type {
                    self.error_types.push((i, e));
                }
                if let Some(n) = budget.callee_name {
                    self.callee_names.push((i, n));
                }
                self.root_calls += u32::from(packed.is_root_call());
                self.spans.push(packed);
                Inserted::New
            }
        }
    }

    /// Rewrites `values` with only the runs spans point at.
    fn compact_values(&mut self) {
        let mut values = Vec::with_capacity(self.values.len() - self.garbage as usize);
        for s in &mut self.spans {
            let at = s.values_at as usize;
            let len = varints_len(&self.values[at..], s.fact_count());
            s.values_at = values.len() as u32;
            values.extend_from_slice(&self.values[at..at + len]);
        }
        self.values = values;
        self.garbage = 0;
    }

    /// Gives back memory the chain reserved for spans that may join it, when more than a
    /// quarter of a vector is unused: a store calls it after analysing a chain.
    pub fn shrink_to_fit(&mut self) {
        fn shrink<T>(v: &mut Vec<T>) {
            if v.capacity() - v.len() > v.len() / 4 {
                v.shrink_to_fit();
            }
        }
        if self.garbage > 0 {
            self.compact_values();
        }
        shrink(&mut self.spans);
        shrink(&mut self.values);
        shrink(&mut self.error_types);
        shrink(&mut self.callee_names);
    }

    /// How many distinct spans the chain holds.
    pub fn len(&self) -> usize {
        self.spans.len()
    }

    /// Whether the chain holds no span.
    pub fn is_empty(&self) -> bool {
        self.spans.is_empty()
    }

    /// The span at `index` in arrival order (as [`Row::span`](super::Row::span) names it).
    pub fn span(&self, index: usize) -> Option<Span> {
        (index < self.spans.len()).then(|| self.unpack(index))
    }

    /// The service of the span at `index`, without unpacking the span (the store's edge
    /// samples name services by span position).
    pub fn service(&self, index: usize) -> Option<&Arc<str>> {
        self.spans.get(index).map(|p| &p.service)
    }

    fn unpack(&self, index: usize) -> Span {
        let v = self.view(index);
        let mut budget = v.budget;
        budget.error_type = v.error_type.cloned();
        budget.callee_name = v.callee_name.cloned();
        Span {
            trace_id: self.trace_id,
            span_id: v.span_id,
            parent_span_id: v.parent_span_id,
            service: v.service.clone(),
            name: v.name.clone(),
            kind: v.kind,
            start_unix_nano: v.start_unix_nano,
            end_unix_nano: v.end_unix_nano,
            status: v.status,
            budget,
        }
    }

    /// The span at `index` as a [`SpanView`]: what [`Chain::unpack`] gives, borrowed.
    pub(crate) fn view(&self, index: usize) -> SpanView<'_> {
        let p = &self.spans[index];
        let mut budget = BudgetFacts {
            source: p.source,
            outcome: p.outcome,
            exception_event: p.present & HAS_EXCEPTION != 0,
            other_cause: p.present & OTHER_CAUSE != 0,
            ..BudgetFacts::default()
        };
        let mut facts = [None; FACTS];
        let mut values = &self.values[p.values_at as usize..];
        for (bit, f) in facts.iter_mut().enumerate() {
            if p.present & (1 << bit) != 0 {
                let (v, len) = get_varint(values);
                *f = Some(v);
                values = &values[len..];
            }
        }
        facts_from(facts, &mut budget);
        let error_type = if p.present & HAS_ERROR_TYPE != 0 {
            self.error_types
                .iter()
                .find(|(at, _)| *at as usize == index)
                .map(|(_, e)| e)
        } else {
            None
        };
        let callee_name = if p.present & HAS_CALLEE_NAME != 0 {
            self.callee_names
                .iter()
                .find(|(at, _)| *at as usize == index)
                .map(|(_, n)| n)
        } else {
            None
        };
        SpanView {
            span_id: p.span_id,
            parent_span_id: p.parent(),
            service: &p.service,
            name: &p.name,
            kind: p.kind,
            start_unix_nano: p.start_unix_nano,
            end_unix_nano: p.end_unix_nano,
            status: p.status,
            budget,
            error_type,
            callee_name,
        }
    }

    /// The spans, in arrival order.
    pub fn spans(&self) -> impl ExactSizeIterator<Item = Span> + '_ {
        (0..self.spans.len()).map(|i| self.unpack(i))
    }

    /// Whether the span at `index` is a hop (SERVER or CONSUMER), read from the packed span.
    pub fn is_hop(&self, index: usize) -> bool {
        self.spans.get(index).is_some_and(|s| s.kind.is_hop())
    }

    /// Whether a span of the chain is a call with no parent: a call that may have lost its
    /// request's context. Counted as spans join or are replaced: reads no span.
    pub fn roots_in_a_call(&self) -> bool {
        self.root_calls > 0
    }

    /// Whether the chain has a span with this id.
    pub fn contains(&self, span_id: SpanId) -> bool {
        self.position(span_id).is_some()
    }

    /// The span with this id, if the chain has it.
    pub fn get(&self, span_id: SpanId) -> Option<Span> {
        self.position(span_id).and_then(|i| self.span(i as usize))
    }

    /// How many spans name a parent the chain does not hold (yet). Zero means every parent
    /// arrived; the store can use it to decide how long a chain should wait before it is
    /// reported as final. Costs one map lookup per span.
    pub fn missing_parents(&self) -> usize {
        self.spans
            .iter()
            .filter(|s| {
                s.parent()
                    .is_some_and(|p| p != s.span_id && self.position(p).is_none())
            })
            .count()
    }

    pub(crate) fn parent_index(&self, i: usize) -> Option<Result<u32, ()>> {
        let p = self.spans[i].parent()?;
        Some(self.position(p).ok_or(()))
    }
}

/// Group spans into chains, one per trace, ordered by trace id. Duplicates are handled as
/// [`Chain::insert`] does.
pub fn chains_from_spans(spans: impl IntoIterator<Item = Span>) -> Vec<Chain> {
    let mut by_trace: HashMap<TraceId, Chain> = HashMap::new();
    for span in spans {
        by_trace
            .entry(span.trace_id)
            .or_insert_with(|| Chain::new(span.trace_id))
            .insert(span);
    }
    let mut chains: Vec<Chain> = by_trace.into_values().collect();
    chains.sort_unstable_by_key(|c| c.trace_id);
    chains
}

/// "No index": used in the index vectors instead of `Option<u32>` to halve their size.
pub(crate) const NONE: u32 = u32::MAX;

/// `v` emptied and refilled with `n` copies of `value`, keeping its allocation: the analysis
/// reuses its per-span vectors from one chain to the next instead of allocating them anew.
pub(crate) fn refill<T: Clone>(v: &mut Vec<T>, n: usize, value: T) {
    v.clear();
    v.resize(n, value);
}

/// The tree of one chain as the analysis sees it: parents resolved to indices, links classified,
/// children sorted by start time, and a depth-first order. Built without recursion.
///
/// [`Tree::build`] reuses the vectors of the tree it is called on (the analysis keeps one tree
/// per thread), so building the tree of a chain of a typical size allocates nothing.
#[derive(Debug, Default)]
pub(crate) struct Tree {
    /// Parent index of each span (`NONE` for roots, orphans and cut cycle members).
    pub parent: Vec<u32>,
    /// How each span hangs.
    pub link: Vec<Link>,
    /// Depth of each span (roots are 0).
    pub depth: Vec<u32>,
    /// Span indices in depth-first pre-order, roots and siblings by (start, span id).
    pub order: Vec<u32>,
    /// Children of span `i` are `children[child_start[i]..child_start[i + 1]]`, sorted.
    child_start: Vec<u32>,
    children: Vec<u32>,
    // Working space of `build`, kept for the next chain.
    state: Vec<u8>,
    path: Vec<u32>,
    fill: Vec<u32>,
    stack: Vec<u32>,
}

impl Tree {
    /// Rebuild this tree as the tree of `chain`.
    pub fn build(&mut self, chain: &Chain) {
        let Tree {
            parent,
            link,
            depth,
            order,
            child_start,
            children,
            state,
            path,
            fill,
            stack,
        } = self;
        let spans = &chain.spans;
        let n = spans.len();
        refill(parent, n, NONE);
        refill(link, n, Link::Root);
        for i in 0..n {
            match chain.parent_index(i) {
                None => {}
                Some(Err(())) => link[i] = Link::Orphan,
                Some(Ok(p)) if p as usize == i => link[i] = Link::CycleCut,
                Some(Ok(p)) => {
                    parent[i] = p;
                    link[i] = Link::Child;
                }
            }
        }

        // Break loops of parents: follow each span's parent pointers until a span already known
        // to reach a root; meeting a span of the current path again means a loop.
        let key = |i: usize| (spans[i].start_unix_nano, spans[i].span_id);
        refill(state, n, 0u8); // 0 unseen, 1 on the current path, 2 reaches a root
        for i in 0..n {
            if state[i] != 0 {
                continue;
            }
            path.clear();
            let mut j = i;
            loop {
                if state[j] == 2 {
                    break;
                }
                if state[j] == 1 {
                    let from = path.iter().rposition(|&x| x as usize == j).unwrap_or(0);
                    let cut = path[from..]
                        .iter()
                        .map(|&x| x as usize)
                        .min_by_key(|&x| key(x))
                        .unwrap_or(j);
                    parent[cut] = NONE;
                    link[cut] = Link::CycleCut;
                    break;
                }
                state[j] = 1;
                path.push(j as u32);
                if parent[j] == NONE {
                    break;
                }
                j = parent[j] as usize;
            }
            for &x in path.iter() {
                state[x as usize] = 2;
            }
        }

        // Children in compressed rows: count, prefix-sum, fill, sort each row.
        refill(child_start, n + 1, 0u32);
        for &p in parent.iter() {
            if p != NONE {
                child_start[p as usize + 1] += 1;
            }
        }
        for i in 0..n {
            child_start[i + 1] += child_start[i];
        }
        fill.clear();
        fill.extend_from_slice(child_start);
        refill(children, child_start[n] as usize, 0u32);
        // The roots go on the stack of the depth-first walk below, last first.
        stack.clear();
        for (i, &p) in parent.iter().enumerate() {
            if p == NONE {
                stack.push(i as u32);
            } else {
                let slot = &mut fill[p as usize];
                children[*slot as usize] = i as u32;
                *slot += 1;
            }
        }
        for i in 0..n {
            let (a, b) = (child_start[i] as usize, child_start[i + 1] as usize);
            if b - a > 1 {
                children[a..b].sort_unstable_by_key(|&c| key(c as usize));
            }
        }
        stack.sort_unstable_by_key(|&r| key(r as usize));
        stack.reverse();

        // Depth-first pre-order with an explicit stack.
        refill(depth, n, 0u32);
        order.clear();
        while let Some(i) = stack.pop() {
            order.push(i);
            let (a, b) = (
                child_start[i as usize] as usize,
                child_start[i as usize + 1] as usize,
            );
            for &c in children[a..b].iter().rev() {
                depth[c as usize] = depth[i as usize] + 1;
                stack.push(c);
            }
        }
    }

    /// The children of span `i`, by (start, span id).
    pub fn children(&self, i: usize) -> &[u32] {
        &self.children[self.child_start[i] as usize..self.child_start[i + 1] as usize]
    }
}

//! What the analysis of one chain yields: a summary for the chain list, rows for a waterfall,
//! the findings, and the edge samples the per-edge aggregates are fed with.

use std::sync::Arc;

use super::chain::Link;
use super::finding_kind::{FindingKind, KindCounts, KindSet, Severity, SeverityCounts};
use super::model::{BudgetSource, ChainOutcome, Finding, Span, SpanId, TraceId};

/// The knobs of the rules of `CONVENTIONS.md` section 3. `Options::default()` is the contract.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Options {
    /// `tol`: slack for comparing budgets and times, in ms, before the carrier's rounding
    /// ([`Options::tolerance_for`]). Default 5. The same for every carrier, absolute ones too:
    /// a clock that may be off is measured and corrected, never absorbed by a wider tolerance.
    pub tolerance_ms: i64,
    /// `clock_skew`: how far an absolute deadline may differ from the relative view, in ms.
    /// Default 1000.
    pub skew_threshold_ms: i64,
    /// `clock_skew`: how far a child may start before its parent, in ms. Default 1.
    pub parent_start_tolerance_ms: i64,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            tolerance_ms: 5,
            skew_threshold_ms: 1000,
            parent_start_tolerance_ms: 1,
        }
    }
}

impl Options {
    /// `tol` for a budget that arrived through `source`: the base tolerance plus the carrier's
    /// rounding (1 ms for a unit coarser than a millisecond or a fraction of a second; the
    /// other carriers are exact).
    pub fn tolerance_for(&self, source: Option<BudgetSource>) -> i64 {
        self.tolerance_ms
            + match source {
                // Seconds with a fraction, or milliseconds.
                Some(BudgetSource::XRequestDeadline) => 1,
                Some(BudgetSource::GrpcTimeout) => 1,
                Some(BudgetSource::Header(form)) => form.rounding_ms(),
                _ => 0,
            }
    }
}

/// One line of the waterfall: one span, in depth-first order (children by start time). The
/// span itself stays in the chain: `chain.span(row.span as usize)` gives it (the analysis of a
/// chain is held beside the chain, and sharing the spans keeps a row at 20 bytes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Row {
    /// The span's position in the chain, in arrival order ([`Chain::span`](super::Chain::span)).
    pub span: u32,
    /// Depth in the tree; roots are 0.
    pub depth: u32,
    /// The row of its parent, when it hangs under one.
    pub parent_row: Option<u32>,
    /// How it hangs (root, child, orphan, cut cycle).
    pub link: Link,
    /// The finding kinds on this span.
    pub findings: KindSet,
    /// A hop's dead work, ms: its time after everyone above it had stopped waiting, less its
    /// waits on calls whose callee hop is in the chain (`CONVENTIONS.md` section 3), its waits
    /// on untraced callees included. Zero for other spans.
    pub dead_ms: u32,
    /// The part of this span's own bar that a waterfall paints as work for nobody, ms (its
    /// last part): a hop's own work past its give-up, an internal span's part past it, a call's
    /// wait on an untraced callee past it; never a wait on a callee hop of the chain.
    pub late_ms: u32,
    /// A hop's time past its give-up spent waiting on its calls, ms: drawn as waiting, just
    /// before its `late_ms` (what it waited for is the callee's dead work, or the call's).
    pub waiting_ms: u32,
    /// The part of `waiting_ms` spent on calls whose callee hop is in the chain: the request
    /// held for nobody, what it waited for counted as the callee's dead work (a wait on an
    /// untraced callee is in `dead_ms` already).
    pub held_ms: u32,
    /// A call that is one attempt of a retried call: its hop made calls of this name more
    /// than once, one with `budget.attempt > 1` (every attempt is marked, the first too).
    pub retried: bool,
    /// A call that was sent (not refused) and has no callee hop in the chain: its callee's
    /// spans are still on their way, or the callee sends none (see
    /// [`ChainAnalysis::awaits_callee`]).
    pub awaits_callee: bool,
    /// The ms the analysis added to this span's times to put its hop on its caller's clock
    /// (`CONVENTIONS.md` section 3, "Clocks that disagree"); 0 when not moved. A waterfall
    /// draws the span at its times plus this.
    pub moved_ms: i32,
}

impl Row {
    /// The worst severity of the findings on this span.
    pub fn worst(&self) -> Option<Severity> {
        self.findings.worst()
    }
}

/// One call seen on an edge in one chain: the callee hop and the call (CLIENT span) that led to
/// it, if any. A SERVER span directly under another service's SERVER/INTERNAL span (a proxy
/// that records one span, an uninstrumented client) also makes a sample, that span standing
/// for the call; so does a CLIENT span with no callee hop in the chain (an untraced callee: a
/// database, a third-party API), named by what the call says of its callee.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EdgeSample {
    /// The calling service (the service of the callee hop's parent span).
    pub caller: Arc<str>,
    /// The called service.
    pub callee: Arc<str>,
    /// The budget the callee hop received (`budget.received_ms`).
    pub received_ms: Option<i64>,
    /// The budget the call forwarded (`budget.forwarded_ms` on the CLIENT span).
    pub forwarded_ms: Option<i64>,
    /// Findings on this call and this callee hop (and the spans inside that hop); `None` when
    /// there are none (most calls: 8 bytes instead of 88 in every sample a store holds).
    pub findings: Option<Box<KindCounts>>,
    /// The dead work this call explains, ms: the callee hop's own work past its give-up; for an
    /// untraced callee, the caller's wait on it past the caller's give-up.
    pub wasted_ms: i64,
    /// The call's duration: the CLIENT span's, or that of the call a proxy's span stands for
    /// (from the callee's start until it answered, or until the proxy's span ended).
    pub latency_ms: Option<i64>,
    /// The timeout the call declared (`budget.timeout_ms`).
    pub timeout_ms: Option<i64>,
    /// The CLIENT span's duration, when the call got no answer (a client-side timeout or abort).
    pub unanswered_ms: Option<i64>,
    /// The call's span, when there is one.
    pub call: Option<SpanId>,
    /// For a call that declares no timeout and forwards no budget: how long a timeout could be
    /// before it reached past its hop's give-up limit. An edge's timeout inferred over many
    /// chains is judged against it when a report is written (`timeout_inverted`).
    pub wait_slack: Option<WaitSlack>,
    /// The call's attempt (`budget.attempt` on the CLIENT span), when it says: an edge whose
    /// calls reach attempt 2 retries, and its advice checks that the attempts fit.
    pub attempt: Option<i64>,
    /// The calling hop's budget (what it received, else its default): what the advice's retry
    /// check fits the attempts into, and caps its timeout with.
    pub caller_budget_ms: Option<i64>,
    /// The callee sends no spans: a database, a third-party API, a service without tracing.
    pub untraced: bool,
    /// The call was answered after its caller's give-up time: dead work, not a good call (the
    /// advice leaves it out).
    pub answered_for_nobody: bool,
    /// The chain's root answered while this call (its one span standing for it) was still open
    /// and its callee still working: see [`RootLeft`].
    pub root_left: Option<RootLeft>,
    /// What remained of the calling hop's deadline when the call was sent
    /// (`budget.remaining_ms`, else derived from that hop's deadline), when known.
    pub remaining_ms: Option<i64>,
}

/// A root that answered while the call its span stands for was still open (a proxy that
/// records one span): it relayed nothing. Its chain is `deadline_exceeded` when the call lasted
/// the edge's inferred timeout (it gave up on its callee), judged per edge when a report is
/// written; otherwise `cancelled` (its caller hung up) or the failure it answered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RootLeft {
    /// How long the call had lasted when the root answered, ms.
    pub after_ms: i64,
    /// The root's status said it answered (2xx, UNSET): its chain is counted `cancelled`
    /// until the edge's timeout says otherwise; else `error`.
    pub answered: bool,
}

/// How much time a call that declares no timeout had before everyone above stopped waiting:
/// what `timeout_inverted` needs to judge a timeout inferred later, over every chain.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WaitSlack {
    /// The longest timeout, in whole ms, that would not be `timeout_inverted` (the wait limit
    /// plus the tolerance, from the call's start; below a reset or drop, the hop's own deadline
    /// if later).
    pub slack_ms: i64,
    /// What was left of the wait limit at the call's start, ms (the finding's `remaining_ms`).
    pub left_ms: i64,
    /// The calling hop's budget, when it had one (the finding's `received_ms`).
    pub hop_budget_ms: Option<i64>,
}

impl EdgeSample {
    /// How many findings of `kind` are on this call.
    pub fn count(&self, kind: FindingKind) -> u64 {
        self.findings.as_ref().map_or(0, |f| f.get(kind))
    }
}

/// The chain at a glance, for the chain list.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ChainSummary {
    /// The service of the root span (the earliest-starting root).
    pub root_service: Arc<str>,
    /// The name of the root span.
    pub root_name: Arc<str>,
    /// Earliest span start, Unix ns.
    pub start_unix_nano: u64,
    /// Latest span end, Unix ns.
    pub end_unix_nano: u64,
    /// `end - start` in ms.
    pub duration_ms: i64,
    /// The budget at the edge: what the first hop received, or its default.
    pub edge_budget_ms: Option<i64>,
    /// Where that budget came from.
    pub edge_budget_source: Option<BudgetSource>,
    /// Distinct spans.
    pub spans: u32,
    /// Hops (SERVER/CONSUMER spans).
    pub hops: u32,
    /// Hops whose budget is known: received, defaulted, or read from a captured carrier.
    pub hops_with_budget: u32,
    /// Spans whose parent is not in the chain.
    pub orphans: u32,
    /// Parent loops cut (a self-parent counts as one).
    pub cycles_cut: u32,
    /// Findings by severity.
    pub findings: SeverityCounts,
    /// The worst severity found, if any finding.
    pub worst: Option<Severity>,
    /// The chain's wasted ms: the sum of its hops' dead work (service time spent for nobody).
    pub wasted_ms: i64,
    /// How the request ended for its user, read from the root hop.
    pub outcome: ChainOutcome,
}

impl ChainSummary {
    /// When `span` started, in ms after the chain's start.
    pub fn offset_ms(&self, span: &Span) -> i64 {
        (span.start_unix_nano as i128 - self.start_unix_nano as i128).div_euclid(1_000_000) as i64
    }
}

/// How long after a chain's last span ended a call without its callee's hop is taken to be a
/// call to a service that sends no spans, rather than one whose spans are still on the way.
pub const CALLEE_GRACE_NS: u64 = 5_000_000_000;

/// The analysis of one chain; see [`Chain::analyse`](super::Chain::analyse).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChainAnalysis {
    /// The trace.
    pub trace_id: TraceId,
    /// The chain at a glance.
    pub summary: ChainSummary,
    /// Every span, depth-first.
    pub rows: Vec<Row>,
    /// Every finding, ordered by span start, then span id, then kind.
    pub findings: Vec<Finding>,
    /// One sample per call that reached a callee hop, for [`EdgeStats`](super::EdgeStats).
    pub edges: Vec<EdgeSample>,
    /// The services of hops whose budget is not known (coverage), sorted, once each.
    pub services_without_budget: Vec<Arc<str>>,
}

impl ChainAnalysis {
    /// The findings about one span.
    pub fn findings_on(&self, span_id: SpanId) -> impl Iterator<Item = &Finding> {
        self.findings.iter().filter(move |f| f.span_id == span_id)
    }

    /// Whether the chain may still be waiting for a callee's spans at `now_unix_nano`: a row
    /// [`awaits_callee`](Row::awaits_callee), and the chain ended less than
    /// [`CALLEE_GRACE_NS`] ago. Past that, such a call is taken to be a call to a service that
    /// sends no spans.
    pub fn awaits_callee(&self, now_unix_nano: u64) -> bool {
        let ended = self
            .summary
            .start_unix_nano
            .saturating_add(self.summary.duration_ms.max(0) as u64 * 1_000_000);
        if now_unix_nano.saturating_sub(ended) > CALLEE_GRACE_NS {
            return false;
        }
        self.rows.iter().any(|r| r.awaits_callee)
    }

    /// Whether any finding reaches `severity`.
    pub fn has_at_least(&self, severity: Severity) -> bool {
        self.summary.worst.is_some_and(|w| w >= severity)
    }
}

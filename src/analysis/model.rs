//! The data the analysis reads (one [`Span`] per OTLP span, already decoded) and what it writes
//! ([`Finding`]s and the [`Report`] of `CONVENTIONS.md` section 4).
//!
//! Both sides of the pipeline share these types: the collector turns OTLP into [`Span`]s, the
//! analysis turns spans into findings, and the check command and the screen read the findings.

use std::fmt;
use std::sync::Arc;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::finding_kind::{FindingKind, Severity, SeverityCounts};

/// Where a hop's budget came from: it lives beside the carriers, whose table names it.
pub use crate::carrier::BudgetSource;

use super::distribution::Distribution;
use super::sketch::Sketch;

/// A 16-byte trace id; shown as 32 lowercase hex digits.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct TraceId(pub [u8; 16]);

/// An 8-byte span id; shown as 16 lowercase hex digits.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct SpanId(pub [u8; 8]);

fn write_hex(f: &mut fmt::Formatter<'_>, bytes: &[u8]) -> fmt::Result {
    for b in bytes {
        write!(f, "{b:02x}")?;
    }
    Ok(())
}

impl fmt::Display for TraceId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_hex(f, &self.0)
    }
}
impl fmt::Debug for TraceId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "TraceId({self})")
    }
}
impl fmt::Display for SpanId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_hex(f, &self.0)
    }
}
impl fmt::Debug for SpanId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SpanId({self})")
    }
}

impl Serialize for TraceId {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}
impl Serialize for SpanId {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// Reads `N` bytes from exactly `2 * N` hex digits (a report read back to be merged).
fn read_hex<'de, D: serde::Deserializer<'de>, const N: usize>(d: D) -> Result<[u8; N], D::Error> {
    let text = <std::borrow::Cow<'de, str>>::deserialize(d)?;
    let digits = text.as_bytes();
    let mut out = [0u8; N];
    let nibble = |c: u8| (c as char).to_digit(16).map(|v| v as u8);
    if digits.len() != 2 * N {
        return Err(serde::de::Error::custom(format!(
            "expected {} hex digits, found {:?}",
            2 * N,
            text
        )));
    }
    for (i, pair) in digits.chunks_exact(2).enumerate() {
        match (nibble(pair[0]), nibble(pair[1])) {
            (Some(h), Some(l)) => out[i] = h << 4 | l,
            _ => {
                return Err(serde::de::Error::custom(format!(
                    "expected hex digits, found {text:?}"
                )));
            }
        }
    }
    Ok(out)
}

impl<'de> Deserialize<'de> for TraceId {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        read_hex(d).map(TraceId)
    }
}
impl<'de> Deserialize<'de> for SpanId {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        read_hex(d).map(SpanId)
    }
}

/// The OpenTelemetry span kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum SpanKind {
    /// Unspecified or internal work inside a hop.
    #[default]
    Internal,
    /// A hop handling a request.
    Server,
    /// A call made by a hop.
    Client,
    /// A message sent by a hop (a call).
    Producer,
    /// A message handled by a hop (a hop).
    Consumer,
}

impl SpanKind {
    /// A hop: one service handling the request.
    pub fn is_hop(self) -> bool {
        matches!(self, SpanKind::Server | SpanKind::Consumer)
    }
    /// A call: one outgoing request from a hop.
    pub fn is_call(self) -> bool {
        matches!(self, SpanKind::Client | SpanKind::Producer)
    }
}

/// The OpenTelemetry span status.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum SpanStatus {
    /// Not set.
    #[default]
    Unset,
    /// Explicitly OK.
    Ok,
    /// An error.
    Error,
}

/// How a hop's work or a call ended (`budget.outcome`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Outcome {
    /// `ok`
    Ok,
    /// `shed_full`: 503, the queue was full.
    ShedFull,
    /// `shed_expired`: 504, expired before work started.
    ShedExpired,
    /// `deadline_exceeded`
    DeadlineExceeded,
    /// `cancelled`: the caller went away.
    Cancelled,
    /// `error`
    Error,
    /// `refused`: a call not made, no budget left.
    Refused,
}

impl Outcome {
    /// The contract's string for this outcome.
    pub fn as_str(self) -> &'static str {
        use crate::semconv::outcome as o;
        match self {
            Outcome::Ok => o::OK,
            Outcome::ShedFull => o::SHED_FULL,
            Outcome::ShedExpired => o::SHED_EXPIRED,
            Outcome::DeadlineExceeded => o::DEADLINE_EXCEEDED,
            Outcome::Cancelled => o::CANCELLED,
            Outcome::Error => o::ERROR,
            Outcome::Refused => o::REFUSED,
        }
    }

    /// Parse the contract's string; unknown strings give `None`.
    pub fn parse(value: &str) -> Option<Self> {
        use crate::semconv::outcome as o;
        Some(match value {
            o::OK => Outcome::Ok,
            o::SHED_FULL => Outcome::ShedFull,
            o::SHED_EXPIRED => Outcome::ShedExpired,
            o::DEADLINE_EXCEEDED => Outcome::DeadlineExceeded,
            o::CANCELLED => Outcome::Cancelled,
            o::ERROR => Outcome::Error,
            o::REFUSED => Outcome::Refused,
            _ => return None,
        })
    }
}

/// The budget facts of one span: the contract's `budget.*` attributes, already decoded, plus
/// what the collector derived from captured headers and status codes. `None` means absent.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BudgetFacts {
    /// `budget.received_ms`
    pub received_ms: Option<i64>,
    /// `budget.source`
    pub source: Option<BudgetSource>,
    /// `budget.default_ms`
    pub default_ms: Option<i64>,
    /// `budget.queue_wait_ms`
    pub queue_wait_ms: Option<i64>,
    /// `budget.remaining_at_start_ms`
    pub remaining_at_start_ms: Option<i64>,
    /// `budget.outcome`
    pub outcome: Option<Outcome>,
    /// `budget.remaining_ms`
    pub remaining_ms: Option<i64>,
    /// `budget.forwarded_ms`
    pub forwarded_ms: Option<i64>,
    /// `budget.timeout_ms`
    pub timeout_ms: Option<i64>,
    /// `budget.sla_ms`
    pub sla_ms: Option<i64>,
    /// `budget.attempt`
    pub attempt: Option<i64>,
    /// An absolute deadline the hop received (`x-request-deadline`), in Unix ms, when known:
    /// compared with the relative view to find clock skew.
    pub deadline_unix_ms: Option<i64>,
    /// `http.response.status_code`
    pub http_status: Option<i64>,
    /// `rpc.grpc.status_code` or `rpc.status_code`
    pub rpc_status: Option<i64>,
    /// `error.type` (an integer is kept as its digits), else the type of its `exception` event
    pub error_type: Option<Arc<str>>,
    /// The span recorded an `exception` event.
    pub exception_event: bool,
    /// The failure's words (its `error.type`, its exception's type or message, its status
    /// message) name a cause other than a missing answer: a refused connection, a DNS failure,
    /// a constraint or syntax error ([`failure_cause`](super::failure_cause)).
    pub other_cause: bool,
    /// The callee a CLIENT span names: the first of
    /// [`CALLEE_NAME_KEYS`](crate::semconv::CALLEE_NAME_KEYS) it has (`peer.service`, else
    /// `server.address` / `net.peer.name`, else `db.system.name` / `db.system`). What names the
    /// edge of a call with no hop of its callee in the chain.
    pub callee_name: Option<Arc<str>>,
}

impl BudgetFacts {
    /// The budget a hop worked to: what it received, else its own default. The one rule the
    /// analysis and every view use.
    pub fn budget_ms(&self) -> Option<i64> {
        self.received_ms.or(self.default_ms)
    }
}

/// One span as the analysis sees it: ids, service, timing and the budget facts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Span {
    /// The trace (request chain) it belongs to.
    pub trace_id: TraceId,
    /// Its own id.
    pub span_id: SpanId,
    /// Its parent, if any.
    pub parent_span_id: Option<SpanId>,
    /// The resource's `service.name` (interned by the collector).
    pub service: Arc<str>,
    /// The span name.
    pub name: Arc<str>,
    /// The span kind.
    pub kind: SpanKind,
    /// Start, Unix nanoseconds.
    pub start_unix_nano: u64,
    /// End, Unix nanoseconds.
    pub end_unix_nano: u64,
    /// The span status.
    pub status: SpanStatus,
    /// The budget facts.
    pub budget: BudgetFacts,
}

impl Span {
    /// The span's duration in whole ms (zero when it ends before it starts).
    pub fn duration_ms(&self) -> i64 {
        (self.end_unix_nano.saturating_sub(self.start_unix_nano) / 1_000_000) as i64
    }
}

/// One finding about one span, with the numbers behind it. Serialises as one element of the
/// report's `findings` array (`CONVENTIONS.md` section 4); numbers that do not apply are `null`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Finding {
    /// What was found.
    pub kind: FindingKind,
    /// Its severity (always `kind.severity()`).
    pub severity: Severity,
    /// The trace.
    pub trace_id: TraceId,
    /// The span the finding is about.
    pub span_id: SpanId,
    /// The span's service.
    pub service: Arc<str>,
    /// The span's name.
    pub span_name: Arc<str>,
    /// A sentence a person can read, with the numbers.
    pub message: String,
    /// The budget the hop received, when it applies.
    pub received_ms: Option<i64>,
    /// What remained, when it applies.
    pub remaining_ms: Option<i64>,
    /// What was forwarded, when it applies.
    pub forwarded_ms: Option<i64>,
    /// Milliseconds of work done for nobody that this finding explains (`ran_after_expiry`,
    /// `orphaned_work`, and a reset or drop that caused dead work below it). Not additive across
    /// findings: the same milliseconds can be explained twice.
    pub wasted_ms: Option<i64>,
    /// For `context_lost`: the trace of the one request whose hop enclosed the call, when
    /// exactly one did (absent from the JSON otherwise).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub linked_trace_id: Option<TraceId>,
    /// For a finding judged per edge from its totals (`timeout_oversized`, `timeout_inverted`
    /// against an inferred timeout): how many findings this one entry stands for (the summary
    /// counts each); absent on a chain's own finding.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count: Option<u64>,
}

/// How a request ended for its user (`CONVENTIONS.md` section 3, "Chain outcome"), read from
/// the root hop.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ChainOutcome {
    /// The root hop has not arrived (or not ended): nothing is final yet.
    #[default]
    InFlight,
    /// Answered.
    Ok,
    /// Answered, not a failure, after the budget the root hop received had run out: whether
    /// its caller still waited is not in the spans.
    Late,
    /// 504, gRPC `DEADLINE_EXCEEDED`, or `budget.outcome = "deadline_exceeded"`.
    DeadlineExceeded,
    /// 503, gRPC `RESOURCE_EXHAUSTED`, `shed_full` or `shed_expired`.
    Shed,
    /// The caller went away (gRPC `CANCELLED`).
    Cancelled,
    /// Any other failure.
    Error,
}

impl ChainOutcome {
    /// Every outcome, in the report's order.
    pub const ALL: [ChainOutcome; 7] = [
        ChainOutcome::InFlight,
        ChainOutcome::Ok,
        ChainOutcome::Late,
        ChainOutcome::DeadlineExceeded,
        ChainOutcome::Shed,
        ChainOutcome::Cancelled,
        ChainOutcome::Error,
    ];

    /// The contract's name (`summary.outcomes` keys).
    pub fn as_str(self) -> &'static str {
        match self {
            ChainOutcome::InFlight => "in_flight",
            ChainOutcome::Ok => "ok",
            ChainOutcome::Late => "late",
            ChainOutcome::DeadlineExceeded => "deadline_exceeded",
            ChainOutcome::Shed => "shed",
            ChainOutcome::Cancelled => "cancelled",
            ChainOutcome::Error => "error",
        }
    }

    /// Whether the user got no answer they could use (a late answer is an answer).
    pub fn failed(self) -> bool {
        !matches!(
            self,
            ChainOutcome::InFlight | ChainOutcome::Ok | ChainOutcome::Late
        )
    }
}

impl std::fmt::Display for ChainOutcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Chains by how they ended for their user (the report's `summary.outcomes`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OutcomeCounts {
    /// The root has not arrived or not ended.
    pub in_flight: u64,
    /// Answered.
    pub ok: u64,
    /// Answered (not a failure) after the budget the root received had run out.
    pub late: u64,
    /// 504 / `DEADLINE_EXCEEDED`.
    pub deadline_exceeded: u64,
    /// 503 / `RESOURCE_EXHAUSTED` / shed.
    pub shed: u64,
    /// The caller went away.
    pub cancelled: u64,
    /// Any other failure.
    pub error: u64,
}

impl OutcomeCounts {
    fn slot(&mut self, outcome: ChainOutcome) -> &mut u64 {
        match outcome {
            ChainOutcome::InFlight => &mut self.in_flight,
            ChainOutcome::Ok => &mut self.ok,
            ChainOutcome::Late => &mut self.late,
            ChainOutcome::DeadlineExceeded => &mut self.deadline_exceeded,
            ChainOutcome::Shed => &mut self.shed,
            ChainOutcome::Cancelled => &mut self.cancelled,
            ChainOutcome::Error => &mut self.error,
        }
    }

    /// Count one chain.
    pub fn add(&mut self, outcome: ChainOutcome) {
        *self.slot(outcome) += 1;
    }

    /// Take one chain back.
    pub fn remove(&mut self, outcome: ChainOutcome) {
        let n = self.slot(outcome);
        *n = n.saturating_sub(1);
    }

    /// The count for one outcome.
    pub fn get(&self, outcome: ChainOutcome) -> u64 {
        let mut copy = *self;
        *copy.slot(outcome)
    }

    /// Count up to `n` chains of outcome `from` as `to` instead (fewer when `from` has fewer).
    pub fn shift(&mut self, from: ChainOutcome, to: ChainOutcome, n: u64) {
        let moved = n.min(self.get(from));
        *self.slot(from) -= moved;
        *self.slot(to) += moved;
    }
}

/// What the analysis could see (the report's `summary.coverage`): a report without findings
/// means little when most hops carried no budget.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Coverage {
    /// Hops whose budget is known (received, defaulted, or from a captured carrier).
    pub hops_with_budget: u64,
    /// Hops with none.
    pub hops_without_budget: u64,
    /// The services of those hops, sorted.
    pub services_without_budget: Vec<Arc<str>>,
}

impl Coverage {
    /// Whether most hops carry no budget: the report should say it could not see much.
    pub fn is_blind(&self) -> bool {
        self.hops_without_budget > self.hops_with_budget
    }

    /// "budget known on 0 of 80 hops: add a carrier with --budget-header, or the contract's
    /// attributes (no budget: worker, edge)", when most hops carry no budget.
    pub fn warning(&self) -> Option<String> {
        if !self.is_blind() {
            return None;
        }
        const NAMED: usize = 6;
        let mut names: Vec<&str> = self
            .services_without_budget
            .iter()
            .take(NAMED)
            .map(|s| &**s)
            .collect();
        let more = self.services_without_budget.len().saturating_sub(NAMED);
        let more = if more > 0 {
            format!(" and {more} more")
        } else {
            String::new()
        };
        if names.is_empty() {
            names.push("?");
        }
        Some(format!(
            "budget known on {} of {} hops: add a carrier with --budget-header, or the contract's attributes (no budget: {}{more})",
            self.hops_with_budget,
            self.hops_with_budget + self.hops_without_budget,
            names.join(", ")
        ))
    }
}

/// The report's `summary` object.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Summary {
    /// Request chains seen.
    pub traces: u64,
    /// Spans seen (after removing duplicates).
    pub spans: u64,
    /// Hops (SERVER/CONSUMER spans) seen.
    pub hops: u64,
    /// Findings by severity (exact, whether listed or not).
    pub findings: SeverityCounts,
    /// Findings by kind (exact; only kinds that occurred).
    #[serde(default)]
    pub findings_by_kind: BTreeMap<FindingKind, u64>,
    /// Entries in the report's `findings` list.
    #[serde(default)]
    pub findings_listed: u64,
    /// Findings counted and left out of the list (`--max-findings`).
    #[serde(default)]
    pub findings_omitted: u64,
    /// The sum of every chain's wasted ms (its hops' dead work).
    pub wasted_ms: i64,
    /// Chains by outcome.
    pub outcomes: OutcomeCounts,
    /// What the analysis could see.
    pub coverage: Coverage,
    /// Calls counted on the edge `other -> other`: past 10,000 edges the totals keep no new
    /// one apart (`CONVENTIONS.md` section 6).
    #[serde(default)]
    pub edge_calls_folded: u64,
    /// Hops counted on the service `other`, past 10,000 services.
    #[serde(default)]
    pub service_hops_folded: u64,
}

/// One element of the report's `edges` array: one caller → callee link.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EdgeReport {
    /// The calling service.
    pub caller: Arc<str>,
    /// The called service.
    pub callee: Arc<str>,
    /// The callee sends no spans (a database, a third-party API, a service without tracing):
    /// named by what its calls say of it, it has no hop of its own.
    #[serde(default)]
    pub untraced: bool,
    /// Calls seen on this edge.
    pub calls: u64,
    /// Findings on this edge, by kind (only kinds that occurred).
    pub findings: BTreeMap<FindingKind, u64>,
    /// The dead work this edge explains, ms: the own work of the hops it leads into past their
    /// give-up; for an untraced callee, the callers' waits on it past theirs.
    pub wasted_ms: i64,
    /// The edge's timeout: the largest its calls declare, else the one inferred from calls
    /// that got no answer; `null` when neither.
    pub timeout_ms: Option<i64>,
    /// Whether `timeout_ms` was inferred.
    pub timeout_inferred: bool,
    /// The median of the caller's CLIENT span durations.
    pub latency_p50_ms: Option<i64>,
    /// The 99th percentile of the same.
    pub latency_p99_ms: Option<i64>,
    /// What to set: the timeout its measured latency suggests (`CONVENTIONS.md` section 4,
    /// "Advice"), derived from `totals`.
    #[serde(default)]
    pub advice: Advice,
    /// What the figures above rest on, kept so that reports merge exactly.
    #[serde(default)]
    pub totals: EdgeTotals,
}

/// An edge's advice (`CONVENTIONS.md` section 4, "Advice: from the finding to the fix"):
/// the timeout its answered calls' p99.9 suggests, or how many more calls it needs.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Advice {
    /// The timeout to set, ms: the p99.9 latency of the answered calls rounded up to two
    /// significant figures, capped by the caller's budget p50 and by the callee's when budgets
    /// flow; `null` under 100 answered calls.
    pub timeout_ms: Option<i64>,
    /// The p99.9 latency of the answered calls, ms (within the sketch's 1 %).
    pub p999_ms: Option<i64>,
    /// The budget p50 that capped the suggestion (the caller's or the callee's, the smaller).
    pub capped_by_budget_ms: Option<i64>,
    /// Whether budgets flow on the edge: the timeout is then `min(remaining, timeout_ms)`.
    pub budget_flows: bool,
    /// The edge's current timeout (declared, else inferred).
    pub current_timeout_ms: Option<i64>,
    /// Whether the current timeout was inferred.
    pub current_timeout_inferred: bool,
    /// The answered calls the advice rests on.
    pub calls: u64,
    /// How many more answered calls it needs before it advises (0 when it does).
    pub calls_needed: u64,
    /// How many answered calls the suggestion would have cut.
    pub would_cut: u64,
    /// The same as a share of the answered calls (0..=1).
    pub would_cut_share: Share,
    /// When the edge retries: whether its attempts fit the caller's budget.
    pub retry: Option<RetryCheck>,
    /// One sentence a person can read.
    pub sentence: String,
}

/// A share (0..=1), compared bit for bit so that a report stays `Eq`.
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Share(pub f64);

impl PartialEq for Share {
    fn eq(&self, other: &Self) -> bool {
        self.0.to_bits() == other.0.to_bits()
    }
}
impl Eq for Share {}

/// The advice's retry check: attempts × per-attempt timeout + backoff must fit the caller's
/// budget p50 (the backoff is not in the spans: counted as 0).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RetryCheck {
    /// The most attempts a call of the edge made (`budget.attempt`).
    pub attempts: i64,
    /// The per-attempt timeout checked: the current one, else the suggested one.
    pub attempt_timeout_ms: i64,
    /// The caller's budget p50, ms.
    pub caller_budget_ms: i64,
    /// Whether `attempts × attempt_timeout_ms` fits `caller_budget_ms`.
    pub fits: bool,
    /// How many attempts do fit.
    pub attempts_that_fit: i64,
}

/// An edge's mergeable figures: sketches (`[[value_ms, count], ...]`, within 1 %) and exact
/// per-millisecond counts.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct EdgeTotals {
    /// The callers' CLIENT span durations.
    pub latency_ms: Sketch,
    /// Budgets the callee received.
    pub received_ms: Sketch,
    /// Budgets the caller forwarded.
    pub forwarded_ms: Sketch,
    /// Timeouts the calls declared, exactly.
    pub declared_timeouts_ms: Distribution,
    /// Durations of the calls that got no answer, exactly.
    pub unanswered_ms: Distribution,
    /// The wait slacks of the calls that declare no timeout, exactly (an inferred timeout is
    /// `timeout_inverted` on the calls whose slack it exceeds).
    pub wait_slack_ms: Distribution,
    /// The slowest call: its latency, trace and span.
    pub slowest: Option<(i64, TraceId, SpanId)>,
    /// The calls' attempt numbers (`budget.attempt`), exactly.
    pub attempts: Distribution,
    /// The calling hops' budgets.
    pub caller_budget_ms: Sketch,
    /// Calls whose callee sent no spans (the edge is untraced when all of its calls are).
    pub untraced_calls: u64,
    /// Durations of the calls answered after their caller's give-up, exactly: dead work, left
    /// out of the advice's answered calls.
    pub answered_for_nobody_ms: Distribution,
    /// Durations of the calls a root left open while its callee worked, the root answering
    /// (2xx, UNSET), exactly: its chain `deadline_exceeded` at the edge's timeout, else
    /// `cancelled` ([`RootLeft`](super::RootLeft)).
    pub root_left_ms: Distribution,
    /// The same, the root failing (a 5xx of its own): `deadline_exceeded` at the edge's
    /// timeout, else `error`.
    pub root_left_failed_ms: Distribution,
    /// What remained of the calling hops' deadlines when the calls were sent.
    pub remaining_ms: Sketch,
}

/// One element of the report's `services` array: one service over every judged chain.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServiceReport {
    /// The service.
    pub service: Arc<str>,
    /// Hops it handled.
    pub hops: u64,
    /// Time in service, ms.
    pub work_ms: i64,
    /// Its dead work, ms.
    pub wasted_ms: i64,
    /// The time its hops held requests for nobody, waiting on callee hops past their give-up,
    /// ms (what they waited for is dead work below them, counted there).
    #[serde(default)]
    pub held_ms: i64,
    /// The median queue wait of its hops that queued.
    pub queue_wait_p50_ms: Option<i64>,
    /// The 99th percentile of the same.
    pub queue_wait_p99_ms: Option<i64>,
    /// The queue waits, as a sketch (so that reports merge).
    #[serde(default)]
    pub queue_wait_ms: Sketch,
}

/// The headless report of `CONVENTIONS.md` section 4, serialised as one JSON object.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Report {
    /// Totals.
    pub summary: Summary,
    /// The findings listed (at most `--max-findings`), in trace order; the edges' own last.
    pub findings: Vec<Finding>,
    /// Every caller → callee edge seen.
    pub edges: Vec<EdgeReport>,
    /// Every service seen, by name.
    #[serde(default)]
    pub services: Vec<ServiceReport>,
}

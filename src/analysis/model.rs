//! The data the analysis reads (one [`Span`] per OTLP span, already decoded) and what it writes
//! ([`Finding`]s and the [`Report`] of `CONVENTIONS.md` section 4).
//!
//! Both sides of the pipeline share these types: the collector turns OTLP into [`Span`]s, the
//! analysis turns spans into findings, and the check command and the screen read the findings.

use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

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

/// Where a hop's budget came from (`budget.source`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BudgetSource {
    /// `x-budget-ms`
    XBudgetMs,
    /// `grpc-timeout`
    GrpcTimeout,
    /// `connect-timeout-ms`
    ConnectTimeoutMs,
    /// `x-request-deadline` (absolute, skew-prone)
    XRequestDeadline,
    /// `x-envoy-expected-rq-timeout-ms`
    XEnvoyExpectedRqTimeoutMs,
    /// The edge set its own budget.
    Default,
    /// A carrier was present but invalid.
    Invalid,
    /// No budget.
    None,
}

impl BudgetSource {
    /// The contract's string for this source.
    pub fn as_str(self) -> &'static str {
        use crate::semconv::source as s;
        match self {
            BudgetSource::XBudgetMs => s::X_BUDGET_MS,
            BudgetSource::GrpcTimeout => s::GRPC_TIMEOUT,
            BudgetSource::ConnectTimeoutMs => s::CONNECT_TIMEOUT_MS,
            BudgetSource::XRequestDeadline => s::X_REQUEST_DEADLINE,
            BudgetSource::XEnvoyExpectedRqTimeoutMs => s::X_ENVOY_EXPECTED_RQ_TIMEOUT_MS,
            BudgetSource::Default => s::DEFAULT,
            BudgetSource::Invalid => s::INVALID,
            BudgetSource::None => s::NONE,
        }
    }

    /// Parse the contract's string; unknown strings give `None`.
    pub fn parse(value: &str) -> Option<Self> {
        use crate::semconv::source as s;
        Some(match value {
            s::X_BUDGET_MS => BudgetSource::XBudgetMs,
            s::GRPC_TIMEOUT => BudgetSource::GrpcTimeout,
            s::CONNECT_TIMEOUT_MS => BudgetSource::ConnectTimeoutMs,
            s::X_REQUEST_DEADLINE => BudgetSource::XRequestDeadline,
            s::X_ENVOY_EXPECTED_RQ_TIMEOUT_MS => BudgetSource::XEnvoyExpectedRqTimeoutMs,
            s::DEFAULT => BudgetSource::Default,
            s::INVALID => BudgetSource::Invalid,
            s::NONE => BudgetSource::None,
            _ => return None,
        })
    }

    /// Whether the hop had a budget it could work to (received or its own default).
    pub fn has_budget(self) -> bool {
        !matches!(self, BudgetSource::Invalid | BudgetSource::None)
    }
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
    /// `error.type`
    pub error_type: Option<Arc<str>>,
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

/// The kinds of finding of `CONVENTIONS.md` section 3.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FindingKind {
    /// A call forwarded more than remained, or a hop received more than its caller forwarded.
    BudgetReset,
    /// A hop with a budget called without forwarding one, or a hop lost its caller's budget.
    BudgetDropped,
    /// Work started after the deadline.
    RanAfterExpiry,
    /// A hop kept working after its caller stopped waiting.
    OrphanedWork,
    /// A queued item was dropped at dequeue because it had expired (right behaviour).
    ShedExpired,
    /// Rejected with 503 because the queue was full (right behaviour).
    ShedFull,
    /// Queue wait took more than half of the received budget.
    QueuePressure,
    /// Retries together forwarded more than remained, or an attempt started after the deadline.
    RetryOverBudget,
    /// Absolute and relative views disagree by more than 1 s, or a child starts before its parent.
    ClockSkew,
}

impl FindingKind {
    /// Every kind, in the contract's order.
    pub const ALL: [FindingKind; 9] = [
        FindingKind::BudgetReset,
        FindingKind::BudgetDropped,
        FindingKind::RanAfterExpiry,
        FindingKind::OrphanedWork,
        FindingKind::ShedExpired,
        FindingKind::ShedFull,
        FindingKind::QueuePressure,
        FindingKind::RetryOverBudget,
        FindingKind::ClockSkew,
    ];

    /// The contract's name for this kind.
    pub fn as_str(self) -> &'static str {
        match self {
            FindingKind::BudgetReset => "budget_reset",
            FindingKind::BudgetDropped => "budget_dropped",
            FindingKind::RanAfterExpiry => "ran_after_expiry",
            FindingKind::OrphanedWork => "orphaned_work",
            FindingKind::ShedExpired => "shed_expired",
            FindingKind::ShedFull => "shed_full",
            FindingKind::QueuePressure => "queue_pressure",
            FindingKind::RetryOverBudget => "retry_over_budget",
            FindingKind::ClockSkew => "clock_skew",
        }
    }

    /// The contract's severity for this kind.
    pub fn severity(self) -> Severity {
        match self {
            FindingKind::BudgetReset
            | FindingKind::BudgetDropped
            | FindingKind::RanAfterExpiry
            | FindingKind::OrphanedWork => Severity::Error,
            FindingKind::ShedExpired | FindingKind::ShedFull => Severity::Info,
            FindingKind::QueuePressure | FindingKind::RetryOverBudget | FindingKind::ClockSkew => {
                Severity::Warning
            }
        }
    }
}

impl fmt::Display for FindingKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How bad a finding is. Ordered: `Info < Warning < Error`.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, Default,
)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    /// The right behaviour, shown so it can be seen working.
    #[default]
    Info,
    /// Worth a look.
    Warning,
    /// Budget propagation is broken here.
    Error,
}

impl Severity {
    /// The contract's name.
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Info => "info",
            Severity::Warning => "warning",
            Severity::Error => "error",
        }
    }
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One finding about one span, with the numbers behind it. Serialises as one element of the
/// report's `findings` array (`CONVENTIONS.md` section 4); numbers that do not apply are `null`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
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
    /// Milliseconds of work done for nobody (`ran_after_expiry`, `orphaned_work`).
    pub wasted_ms: Option<i64>,
}

/// Counts of findings by severity, as in the report's summary.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct SeverityCounts {
    /// Error findings.
    pub error: u64,
    /// Warning findings.
    pub warning: u64,
    /// Info findings.
    pub info: u64,
}

/// The report's `summary` object.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Summary {
    /// Request chains seen.
    pub traces: u64,
    /// Spans seen (after removing duplicates).
    pub spans: u64,
    /// Hops (SERVER/CONSUMER spans) seen.
    pub hops: u64,
    /// Findings by severity.
    pub findings: SeverityCounts,
}

/// One element of the report's `edges` array: one caller → callee link.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct EdgeReport {
    /// The calling service.
    pub caller: Arc<str>,
    /// The called service.
    pub callee: Arc<str>,
    /// Calls seen on this edge.
    pub calls: u64,
    /// Findings on this edge, by kind name (only kinds that occurred).
    pub findings: std::collections::BTreeMap<&'static str, u64>,
}

/// The headless report of `CONVENTIONS.md` section 4, serialised as one JSON object.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Report {
    /// Totals.
    pub summary: Summary,
    /// Every finding, in trace then span start order.
    pub findings: Vec<Finding>,
    /// Every caller → callee edge seen.
    pub edges: Vec<EdgeReport>,
}

//! The kinds of finding (`CONVENTIONS.md` section 3): each kind's name, severity and meaning
//! in plain words, and the sets and counts the analysis keeps per kind and per severity.
//!
//! A new kind of finding is this file (the variant, its place in [`FindingKind::ALL`], its name,
//! severity and meaning: the compiler points at each) and its rule's file in `rules/`.

use std::fmt;

use serde::{Deserialize, Serialize};

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
    /// A call's timeout reached past the moment everyone above would stop waiting.
    TimeoutInverted,
    /// An edge's timeout is more than 10 times its callee's p99 latency.
    TimeoutOversized,
    /// A root hop answered after the budget it received had run out.
    LateAnswer,
    /// A call made outside its request's trace: its caller dropped the request's context.
    ContextLost,
    /// Retries in several layers multiplied: one request reached a callee more times than any
    /// one layer tried.
    RetryAmplified,
}

impl FindingKind {
    /// How many kinds there are.
    pub const COUNT: usize = FindingKind::ALL.len();

    /// Every kind, in the contract's order.
    pub const ALL: [FindingKind; 14] = [
        FindingKind::BudgetReset,
        FindingKind::BudgetDropped,
        FindingKind::RanAfterExpiry,
        FindingKind::OrphanedWork,
        FindingKind::ShedExpired,
        FindingKind::ShedFull,
        FindingKind::QueuePressure,
        FindingKind::RetryOverBudget,
        FindingKind::ClockSkew,
        FindingKind::TimeoutInverted,
        FindingKind::TimeoutOversized,
        FindingKind::LateAnswer,
        FindingKind::ContextLost,
        FindingKind::RetryAmplified,
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
            FindingKind::TimeoutInverted => "timeout_inverted",
            FindingKind::TimeoutOversized => "timeout_oversized",
            FindingKind::LateAnswer => "late_answer",
            FindingKind::ContextLost => "context_lost",
            FindingKind::RetryAmplified => "retry_amplified",
        }
    }

    /// The contract's severity for this kind.
    pub fn severity(self) -> Severity {
        match self {
            FindingKind::BudgetReset
            | FindingKind::BudgetDropped
            | FindingKind::RanAfterExpiry
            | FindingKind::OrphanedWork => Severity::Error,
            FindingKind::ShedExpired | FindingKind::ShedFull | FindingKind::TimeoutOversized => {
                Severity::Info
            }
            FindingKind::QueuePressure
            | FindingKind::RetryOverBudget
            | FindingKind::ClockSkew
            | FindingKind::TimeoutInverted
            | FindingKind::LateAnswer
            | FindingKind::ContextLost
            | FindingKind::RetryAmplified => Severity::Warning,
        }
    }

    /// This kind in plain words: what happened and why it matters. The screen's legend, the
    /// waterfall's panel and the HTML page all explain a finding with it.
    pub fn meaning(self) -> &'static str {
        match self {
            FindingKind::BudgetReset => {
                "Reset: a service forwarded more time than it had left, so the next one works to a deadline nobody is waiting for."
            }
            FindingKind::BudgetDropped => {
                "Dropped: the budget was not passed on, so everything downstream works with no deadline at all."
            }
            FindingKind::RanAfterExpiry => {
                "Ran after expiry: work started when the budget was already gone; its result can only be thrown away."
            }
            FindingKind::OrphanedWork => {
                "Orphaned work: this hop kept working after its caller had stopped waiting; that time was spent for nobody."
            }
            FindingKind::ShedExpired => {
                "Shed (expired): a queued request was dropped because its deadline had passed. The right behaviour."
            }
            FindingKind::ShedFull => {
                "Shed (full): rejected at once because the queue was full, instead of waiting uselessly. The right behaviour."
            }
            FindingKind::QueuePressure => {
                "Queue pressure: waiting in the queue took more than half of the budget this hop received."
            }
            FindingKind::RetryOverBudget => {
                "Retry over budget: the retries together asked for more time than remained, or one started after the deadline."
            }
            FindingKind::ClockSkew => {
                "Clock skew: an absolute deadline and the relative budget disagree by over a second, or a child starts before its parent."
            }
            FindingKind::TimeoutInverted => {
                "Timeout inverted: this call's timeout reaches past the moment everyone above stops waiting; had the callee been slow, the hop would wait for an answer nobody reads."
            }
            FindingKind::TimeoutOversized => {
                "Timeout oversized: the timeout is more than ten times what the callee takes (p99), so it cuts nothing a user would still wait for."
            }
            FindingKind::ContextLost => {
                "Context lost: a call made without its request's context (Go's context.Background(), a pool that does not carry it): no deadline, no cancellation and no trace reached the callee, which starts a trace of its own."
            }
            FindingKind::LateAnswer => {
                "Late answer: the first service answered after the budget its caller sent had run out. Whether the caller still waited is not in the spans: if it did not, the work was for nobody."
            }
            FindingKind::RetryAmplified => {
                "Retry amplified: retries in several layers multiply; one request reached this callee more times than any one layer tried."
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

/// Counts of findings by severity, as in the report's summary.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SeverityCounts {
    /// Error findings.
    pub error: u64,
    /// Warning findings.
    pub warning: u64,
    /// Info findings.
    pub info: u64,
}

impl SeverityCounts {
    /// Count one finding of `severity`.
    pub fn bump(&mut self, severity: Severity) {
        match severity {
            Severity::Error => self.error += 1,
            Severity::Warning => self.warning += 1,
            Severity::Info => self.info += 1,
        }
    }

    /// Add every count of `other`.
    pub fn add(&mut self, other: SeverityCounts) {
        self.error += other.error;
        self.warning += other.warning;
        self.info += other.info;
    }

    /// Take back every count of `other`, added before.
    pub fn subtract(&mut self, other: SeverityCounts) {
        self.error = self.error.saturating_sub(other.error);
        self.warning = self.warning.saturating_sub(other.warning);
        self.info = self.info.saturating_sub(other.info);
    }

    /// All findings.
    pub fn total(&self) -> u64 {
        self.error + self.warning + self.info
    }
}

/// A set of [`FindingKind`]s (one bit each): which findings sit on a row, without allocating.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct KindSet(u16);

// One bit per kind.
const _: () = assert!(FindingKind::COUNT <= 16);

impl KindSet {
    /// Add a kind.
    pub fn insert(&mut self, kind: FindingKind) {
        self.0 |= 1 << kind as u16;
    }
    /// Whether the set holds `kind`.
    pub fn contains(self, kind: FindingKind) -> bool {
        self.0 & (1 << kind as u16) != 0
    }
    /// Whether the set is empty.
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }
    /// The kinds in the set, in contract order.
    pub fn iter(self) -> impl Iterator<Item = FindingKind> {
        FindingKind::ALL
            .into_iter()
            .filter(move |&k| self.contains(k))
    }
    /// The worst severity in the set.
    pub fn worst(self) -> Option<Severity> {
        self.iter().map(FindingKind::severity).max()
    }
}

/// Counts per [`FindingKind`], indexed by `kind as usize` (the order of [`FindingKind::ALL`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KindCounts(pub [u64; FindingKind::COUNT]);

impl KindCounts {
    /// The count for one kind.
    pub fn get(&self, kind: FindingKind) -> u64 {
        self.0[kind as usize]
    }
    /// Add one finding of `kind`.
    pub fn bump(&mut self, kind: FindingKind) {
        self.0[kind as usize] += 1;
    }
    /// The total over all kinds.
    pub fn total(&self) -> u64 {
        self.0.iter().sum()
    }
    /// The kinds with a non-zero count, in contract order.
    pub fn iter(&self) -> impl Iterator<Item = (FindingKind, u64)> + '_ {
        FindingKind::ALL
            .iter()
            .map(|&k| (k, self.get(k)))
            .filter(|&(_, n)| n > 0)
    }
    /// The worst severity among the kinds counted, as [`KindSet::worst`]. (Not a search of
    /// `[Error, Warning, Info]` for one the kinds have: at opt-level 3 LLVM's loop passes all
    /// but never end on that, docs/performance.md, "A release build".)
    pub fn worst(&self) -> Option<Severity> {
        self.iter().map(|(k, _)| k.severity()).max()
    }
}

//! An edge's figures as every table of edges shows them (the screen's edges view, the page's
//! edges table): the worst-first order, the LATE column, the count of one severity, and what
//! the TIMEOUT column marks. Read from the analysis's aggregates: nothing is judged here.

use deadline_budget::analysis::{EdgeAggregate, FindingKind, Severity};

/// An edge's findings of one severity.
pub fn of_severity(e: &EdgeAggregate, severity: Severity) -> u64 {
    e.findings
        .iter()
        .filter(|(k, _)| k.severity() == severity)
        .map(|(_, n)| n)
        .sum()
}

/// The LATE column: work after the deadline or after the caller gave up
/// (`ran_after_expiry` + `orphaned_work`).
pub fn late(e: &EdgeAggregate) -> u64 {
    e.findings.get(FindingKind::RanAfterExpiry) + e.findings.get(FindingKind::OrphanedWork)
}

/// Edges worst first: most error findings, then most dead work, then most calls, names breaking
/// ties.
pub fn worst_first(rows: &mut [&EdgeAggregate]) {
    rows.sort_by(|a, b| {
        of_severity(b, Severity::Error)
            .cmp(&of_severity(a, Severity::Error))
            .then(b.wasted_ms.cmp(&a.wasted_ms))
            .then(b.calls.cmp(&a.calls))
            .then((&a.caller, &a.callee).cmp(&(&b.caller, &b.callee)))
    });
}

/// What the TIMEOUT column marks beside an edge's timeout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimeoutMark {
    /// `timeout_inverted` found it: the timeout reaches past the callers' deadline.
    Inverted,
    /// `timeout_oversized`: far longer than the callee takes.
    Oversized,
}

impl TimeoutMark {
    /// The mark of `e`'s timeout, if any (inverted first).
    pub fn of(e: &EdgeAggregate) -> Option<TimeoutMark> {
        if e.findings.get(FindingKind::TimeoutInverted) > 0 {
            Some(TimeoutMark::Inverted)
        } else if e.oversized().is_some() {
            Some(TimeoutMark::Oversized)
        } else {
            None
        }
    }
}

//! `late_answer`: a root hop that answered, not with a failure, after the budget it received
//! had run out. Only a warning: whether its caller still waited is not in the spans, so none of
//! it is dead work (`CONVENTIONS.md` section 3, "Only what the spans prove"). A failure (5xx,
//! a gRPC error, status ERROR) answered after the deadline is the deadline being enforced.

use crate::analysis::finding_kind::FindingKind;

use super::pass::{Numbers, RulePass, thousands};
use super::timing::{Timing, status_outcome};
use crate::analysis::model::Outcome;

impl RulePass<'_> {
    /// `late_answer` on hop `i`, when it is a root that answered late, not with a failure.
    pub(super) fn late_answer(&mut self, i: usize) {
        let s = &self.spans[i];
        let answered =
            s.budget.outcome.is_none_or(|o| o == Outcome::Ok) && status_outcome(s) == Outcome::Ok;
        if !answered {
            return;
        }
        let Some(late) = Timing::late_by(self.spans, self.tree, i, self.opts) else {
            return;
        };
        let b = s.budget.received_ms.unwrap_or_default();
        let status = match (s.budget.http_status, s.budget.rpc_status) {
            (Some(h), _) => format!(" (status {h})"),
            (None, Some(r)) => format!(" (gRPC status {r})"),
            (None, None) => String::new(),
        };
        let message = format!(
            "{} answered{status} {} ms after the {b} ms budget it received ran out",
            s.service,
            thousands(late)
        );
        let numbers = Numbers {
            received: Some(b),
            remaining: Some(late.saturating_neg()),
            ..Numbers::default()
        };
        self.push(i, FindingKind::LateAnswer, message, numbers);
    }
}

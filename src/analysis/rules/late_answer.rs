//! `late_answer`: a root hop that answered after the budget it received had run out. Only a
//! warning: whether its caller still waited is not in the spans, so none of it is dead work
//! (`CONVENTIONS.md` section 3, "Only what the spans prove").

use crate::analysis::finding_kind::FindingKind;

use super::pass::{Numbers, RulePass, thousands};
use super::timing::Timing;

impl RulePass<'_> {
    /// `late_answer` on hop `i`, when it is a root that answered late, whatever its status.
    pub(super) fn late_answer(&mut self, i: usize) {
        let Some(late) = Timing::late_by(self.spans, self.tree, i, self.opts) else {
            return;
        };
        let s = &self.spans[i];
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

//! Timeouts that nobody declared, or declared too long: `timeout_inverted`, a call that could
//! wait past the moment everyone above stops waiting (its hop's wait limit, measured in
//! `timing`). `timeout_oversized` compares an edge's timeout with its callee's latency over
//! many chains: it is judged per edge, in `edges`.

use crate::analysis::chain_analysis::WaitSlack;
use crate::analysis::finding_kind::FindingKind;
use crate::analysis::model::Outcome;

use super::pass::{Numbers, RulePass};
use super::timing::{MS, NEVER, ms, ns};

impl RulePass<'_> {
    /// `timeout_inverted` on CLIENT call `c` of hop `h`.
    pub(super) fn timeout_inverted(&mut self, c: usize, h: usize) {
        let spans = self.spans;
        let s = &spans[c];
        if s.budget.outcome == Some(Outcome::Refused) {
            return;
        }
        let limit = self.timing.wait_limit[h];
        self.wait_slack(c, h);
        let Some((timeout, inferred)) = self.timeout(c) else {
            return;
        };
        if limit == NEVER {
            return;
        }
        let start = ns(s.start_unix_nano);
        let until = start.saturating_add(timeout.saturating_mul(MS));
        let tol = self.opts.tolerance_for(spans[h].budget.source) * MS;
        if until <= limit.saturating_add(tol) {
            return;
        }
        // Blame stays with the cause: below a reset or a drop, a hop that honours the budget it
        // was given is not at fault.
        if self.state.caused_above[h]
            && self
                .deadline(h)
                .is_none_or(|d| until <= d.saturating_add(tol))
        {
            return;
        }
        let left = ms(limit.saturating_sub(start));
        let kind = if inferred { "inferred" } else { "declared" };
        let callee = self
            .callee(c)
            .map(|x| format!(" for {}", spans[x].service))
            .unwrap_or_default();
        let message = if left <= 0 {
            format!(
                "{} called{callee} with a {timeout} ms timeout ({kind}) after everyone above had stopped waiting",
                spans[h].service
            )
        } else {
            format!(
                "{} would wait {timeout} ms{callee} ({kind} timeout) when everyone above stops waiting within {left} ms",
                spans[h].service
            )
        };
        let numbers = Numbers {
            received: spans[h].budget.budget_ms(),
            remaining: Some(left),
            forwarded: s.budget.forwarded_ms,
            wasted: None,
        };
        self.push(c, FindingKind::TimeoutInverted, message, numbers);
    }

    /// The slack of CLIENT call `c` of hop `h` that declares no timeout and forwards no
    /// budget: the same rule as above, kept as the longest timeout that would pass, so that a
    /// timeout inferred over many chains is judged per edge, exactly, when a report is written.
    fn wait_slack(&mut self, c: usize, h: usize) {
        let s = &self.spans[c];
        if s.budget.timeout_ms.is_some() || s.budget.forwarded_ms.is_some() {
            return;
        }
        self.state.wait_slack[c] = self.slack_from(ns(s.start_unix_nano), h);
    }

    /// The wait slack of a call of hop `h` that started at `start` (ns), declaring no timeout.
    pub(super) fn slack_from(&self, start: i64, h: usize) -> Option<WaitSlack> {
        let limit = self.timing.wait_limit[h];
        if limit == NEVER {
            return None;
        }
        let tol = self.opts.tolerance_for(self.spans[h].budget.source) * MS;
        // Blame stays with the cause (as above): below a reset or a drop, only a timeout past
        // the hop's own deadline is the hop's.
        let threshold = if self.state.caused_above[h] {
            limit.max(self.deadline(h)?)
        } else {
            limit
        };
        Some(WaitSlack {
            slack_ms: threshold
                .saturating_add(tol)
                .saturating_sub(start)
                .div_euclid(MS),
            left_ms: ms(limit.saturating_sub(start)),
            hop_budget_ms: self.spans[h].budget.budget_ms(),
        })
    }
}

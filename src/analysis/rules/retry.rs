//! Retries: the calls of one hop with one span name, when one of them carries
//! `budget.attempt > 1`. `retry_over_budget` when the attempts together forwarded more than
//! remained at the first (a late attempt is found with the spans that started after their
//! hop's deadline, in `expiry`).

use crate::analysis::chain::NONE;
use crate::analysis::finding_kind::FindingKind;

use super::pass::{Numbers, RulePass};

impl RulePass<'_> {
    /// Retry groups: mark the calls of each retried call (and the attempts after the first),
    /// and apply the sum rule.
    pub(super) fn retries(&mut self) {
        let spans = self.spans;
        let hop_of = &self.timing.hop_of;
        let mut calls = std::mem::take(&mut self.calls);
        calls.clear();
        calls.extend(
            (0..spans.len() as u32)
                .filter(|&i| spans[i as usize].kind.is_call() && hop_of[i as usize] != NONE),
        );
        let key = |i: u32| {
            let s = &spans[i as usize];
            (hop_of[i as usize], &**s.name, s.start_unix_nano, s.span_id)
        };
        calls.sort_unstable_by(|&a, &b| key(a).cmp(&key(b)));
        let attempt = |i: u32| spans[i as usize].budget.attempt.unwrap_or(1);
        let mut g0 = 0;
        while g0 < calls.len() {
            let (h, name) = (
                self.timing.hop_of[calls[g0] as usize],
                &spans[calls[g0] as usize].name,
            );
            let mut g1 = g0 + 1;
            while g1 < calls.len()
                && self.timing.hop_of[calls[g1] as usize] == h
                && spans[calls[g1] as usize].name == *name
            {
                g1 += 1;
            }
            let group = &calls[g0..g1];
            g0 = g1;
            if !group.iter().any(|&c| attempt(c) > 1) {
                continue;
            }
            for (k, &c) in group.iter().enumerate() {
                self.state.retried[c as usize] = true;
                if k > 0 || attempt(c) > 1 {
                    self.state.is_retry[c as usize] = true;
                }
            }
            let Some((rem0, extra)) = self.remaining(group[0] as usize) else {
                continue;
            };
            let tol = self.opts.tolerance_ms + extra;
            let (mut sum, mut counted) = (0i64, 0usize);
            for &c in group {
                let Some(fw) = spans[c as usize].budget.forwarded_ms else {
                    continue;
                };
                sum = sum.saturating_add(fw);
                counted += 1;
                if counted >= 2 && sum > rem0.saturating_add(tol) {
                    let message = format!(
                        "{counted} attempts forwarded {sum} ms in total with only {rem0} ms left at the first"
                    );
                    let numbers = Numbers {
                        received: spans[h as usize].budget.budget_ms(),
                        remaining: Some(rem0),
                        forwarded: Some(sum),
                        wasted: None,
                    };
                    self.push(c as usize, FindingKind::RetryOverBudget, message, numbers);
                    break;
                }
            }
        }
        self.calls = calls;
    }
}

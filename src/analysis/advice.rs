//! What to set, from measured latency (`CONVENTIONS.md` section 4, "Advice: from the finding
//! to the fix"): per edge, the timeout its answered calls' p99.9 suggests (an answer after its
//! caller's give-up is dead work, not among them), rounded up to two significant figures and
//! capped by the caller's budget p50 and the callee's when budgets flow, beside the
//! current timeout, the share of calls it would have cut and, when the edge retries, whether
//! the attempts fit the caller's budget. Derived from the edge's totals only, so a merged report
//! gives the advice one instance would have given.

use std::borrow::Cow;

use super::edges::EdgeAggregate;
use super::model::{Advice, RetryCheck, Share};
use super::rules::thousands;
use super::sketch::Sketch;

/// Answered calls an edge needs before it advises a timeout.
pub const MIN_ADVICE_CALLS: u64 = 100;
/// The share of good calls a timeout may cut: it sits at this percentile (p99.9).
pub const ADVICE_QUANTILE: f64 = 0.999;

/// `ms` rounded up to two significant figures (1,520 -> 1,600; 95 -> 95; 101 -> 110); at
/// least 1.
pub fn round_up_two_figures(ms: i64) -> i64 {
    let ms = ms.max(1);
    let mut unit = 1i64;
    while ms / unit >= 100 {
        unit *= 10;
    }
    (ms / unit + i64::from(ms % unit != 0)).saturating_mul(unit)
}

impl EdgeAggregate {
    /// The latencies of the calls that were answered in time: every call's duration but those
    /// of the calls that got no answer and of those answered after their caller's give-up.
    pub fn answered_latency(&self) -> Cow<'_, Sketch> {
        if self.unanswered.is_empty() && self.answered_for_nobody.is_empty() {
            return Cow::Borrowed(&self.latency);
        }
        let mut gone = Sketch::new();
        for (v, n) in self
            .unanswered
            .values()
            .chain(self.answered_for_nobody.values())
        {
            gone.add_n(v, n);
        }
        let mut answered = self.latency.clone();
        answered.unmerge(&gone);
        Cow::Owned(answered)
    }

    /// The edge's advice; see the module documentation.
    pub fn advice(&self) -> Advice {
        let answered = self.answered_latency();
        let calls = answered.len();
        let current = self.timeout();
        let budget_p50 = self.received.p50();
        let mut advice = Advice {
            current_timeout_ms: current.map(|t| t.0),
            current_timeout_inferred: current.is_some_and(|t| t.1),
            calls,
            budget_flows: budget_p50.is_some(),
            ..Advice::default()
        };
        let edge = format!("{} → {}", self.caller, self.callee);
        let now = match current {
            Some((t, false)) => format!("{} ms declared", thousands(t)),
            Some((t, true)) => format!("{} ms inferred", thousands(t)),
            None => "no timeout".to_owned(),
        };
        if calls < MIN_ADVICE_CALLS {
            advice.calls_needed = MIN_ADVICE_CALLS - calls;
            advice.sentence = format!(
                "{edge}: {now}, {calls} answered call(s): advice after {} more",
                advice.calls_needed
            );
            return advice;
        }
        let Some(p999) = answered.percentile(ADVICE_QUANTILE) else {
            return advice;
        };
        let rounded = round_up_two_figures(p999);
        // A timeout longer than what the caller has left waits for answers nobody reads.
        let caller_p50 = self.caller_budget.p50();
        let cap = [(caller_p50, "caller"), (budget_p50, "callee")]
            .into_iter()
            .filter_map(|(b, whose)| Some((b?.max(1), whose)))
            .min_by_key(|&(b, _)| b)
            .filter(|&(b, _)| b < rounded);
        let timeout = match cap {
            Some((b, _)) => {
                advice.capped_by_budget_ms = Some(b);
                b
            }
            None => rounded,
        };
        advice.p999_ms = Some(p999);
        advice.timeout_ms = Some(timeout);
        advice.would_cut = answered.count_above(timeout);
        advice.would_cut_share = Share(advice.would_cut as f64 / calls as f64);
        advice.retry = self.retry_check(current.map_or(timeout, |t| t.0));
        let set = if advice.budget_flows {
            format!("min(remaining, {} ms)", thousands(timeout))
        } else {
            format!("{} ms", thousands(timeout))
        };
        let cap = cap.map_or(String::new(), |(b, whose)| {
            format!(" (capped by the {whose}'s budget p50, {} ms)", thousands(b))
        });
        let retry = advice.retry.as_ref().map_or(String::new(), |r| {
            let (attempts, timeout, budget) = (
                r.attempts,
                thousands(r.attempt_timeout_ms),
                thousands(r.caller_budget_ms),
            );
            let does = if r.attempts_that_fit == 1 {
                "1 attempt does".to_owned()
            } else {
                format!("{} attempts do", r.attempts_that_fit)
            };
            if r.fits {
                format!(
                    "; {attempts} attempts × {timeout} ms fit {}'s {budget} ms",
                    self.caller
                )
            } else {
                format!(
                    "; {attempts} attempts × {timeout} ms do not fit {}'s {budget} ms: {does}",
                    self.caller
                )
            }
        });
        advice.sentence = format!(
            "{edge}: {now}, p99.9 {} ms over {calls} calls: time out at {set}{cap}{retry}",
            thousands(p999)
        );
        advice
    }

    /// When the edge retries (a call reached attempt 2) and the caller's budget is known: whether
    /// attempts × `attempt_timeout_ms` fit the caller's budget p50 (backoff, not in the spans,
    /// counts as 0), and how many attempts do.
    pub fn retry_check(&self, attempt_timeout_ms: i64) -> Option<RetryCheck> {
        let attempts = self.attempts.max().filter(|&a| a > 1)?;
        let budget = self.caller_budget.p50()?;
        let per_attempt = attempt_timeout_ms.max(1);
        Some(RetryCheck {
            attempts,
            attempt_timeout_ms: per_attempt,
            caller_budget_ms: budget,
            fits: attempts.saturating_mul(per_attempt) <= budget,
            attempts_that_fit: budget.max(0) / per_attempt,
        })
    }
}

//! Work for nobody: `ran_after_expiry` (work that started after its hop's deadline) and
//! `orphaned_work` (a hop that kept working after its caller had stopped waiting).

use crate::analysis::chain::NONE;
use crate::analysis::finding_kind::FindingKind;
use crate::analysis::model::{Outcome, SpanKind};

use super::pass::{Numbers, RulePass, thousands};
use super::timing::{MAX_SPAN_MS, MS, is_shed, ms, ns};

impl RulePass<'_> {
    /// `ran_after_expiry` on hop `i`: it started work with no budget left (after its queue
    /// wait, or on arrival).
    pub(super) fn hop_ran_after_expiry(&mut self, i: usize) {
        let spans = self.spans;
        let s = &spans[i];
        let f = &s.budget;
        let budget = f.budget_ms();
        let start = ns(s.start_unix_nano);
        // Without `remaining_at_start_ms`, a queue wait that used up the budget says the same,
        // unless the item was cancelled: its caller hung up while it waited, and it never left
        // the queue.
        let at_start = f.remaining_at_start_ms.or_else(|| {
            if f.outcome == Some(Outcome::Cancelled) {
                return None;
            }
            let (q, b) = (f.queue_wait_ms?, budget?);
            Some(b.saturating_sub(q))
        });
        if let Some(r) = at_start
            && r <= 0
            && !is_shed(self.timing.outcome[i])
            && !self.timing.absurd[i]
        {
            let work_start = match (f.queue_wait_ms, self.deadline(i)) {
                (Some(_), _) => self.timing.work_start[i],
                (None, Some(d)) => d.max(start),
                (None, None) => start,
            };
            let wasted =
                ms(self.timing.extent_end[i].saturating_sub(work_start)).clamp(0, MAX_SPAN_MS);
            self.state.expired_hop[i] = true;
            let message = if r < 0 {
                format!(
                    "{} started work {} ms after its deadline and worked {wasted} ms for nobody",
                    s.service,
                    r.saturating_neg()
                )
            } else {
                format!(
                    "{} started work just as its deadline passed and worked {wasted} ms for nobody",
                    s.service
                )
            };
            let numbers = Numbers {
                received: f.received_ms,
                remaining: Some(r),
                wasted: Some(wasted),
                ..Numbers::default()
            };
            self.push(i, FindingKind::RanAfterExpiry, message, numbers);
        }
    }

    /// A span of a hop (not the hop itself) that started after the hop's deadline:
    /// `ran_after_expiry`, or `retry_over_budget` when it is a retry attempt.
    pub(super) fn started_after_deadline(&mut self, i: usize) {
        let spans = self.spans;
        let s = &spans[i];
        let (h, p) = (self.timing.hop_of[i], self.tree.parent[i]);
        if s.kind.is_hop() || h == NONE || p == NONE || self.state.expired_hop[h as usize] {
            return;
        }
        let hop = &spans[h as usize];
        if is_shed(self.timing.outcome[h as usize]) || s.budget.outcome == Some(Outcome::Refused) {
            return;
        }
        let Some(deadline) = self.deadline(h as usize) else {
            return;
        };
        let limit = deadline.saturating_add(self.opts.tolerance_for(hop.budget.source) * MS);
        let start = ns(s.start_unix_nano);
        if start <= limit || ns(spans[p as usize].start_unix_nano) > limit {
            return;
        }
        let late = ms(start.saturating_sub(deadline));
        let numbers = Numbers {
            received: hop.budget.budget_ms(),
            remaining: s.budget.remaining_ms.or(Some(-late)),
            forwarded: s.budget.forwarded_ms,
            wasted: None,
        };
        if self.state.is_retry[i] {
            let attempt = s
                .budget
                .attempt
                .map_or_else(|| "a retry".to_owned(), |a| format!("attempt {a}"));
            let message = format!(
                "{attempt} started {late} ms after the deadline of {}",
                hop.service
            );
            self.push(i, FindingKind::RetryOverBudget, message, numbers);
        } else if !self.timing.absurd[i] {
            let wasted = ms(ns(s.end_unix_nano).saturating_sub(start)).clamp(0, MAX_SPAN_MS);
            let message = format!(
                "{} started \"{}\" {late} ms after its deadline and worked {wasted} ms for nobody",
                hop.service, s.name
            );
            let numbers = Numbers {
                wasted: Some(wasted),
                ..numbers
            };
            self.push(i, FindingKind::RanAfterExpiry, message, numbers);
        }
    }

    /// `orphaned_work`: the hop's spans went on past the moment its caller stopped waiting: its
    /// caller's call ended, or the hop that made the call answered while the call was still
    /// open (it left the call open: an abandoned call).
    pub(super) fn orphaned(&mut self, i: usize) {
        let spans = self.spans;
        let s = &spans[i];
        if s.kind != SpanKind::Server || is_shed(self.timing.outcome[i]) || self.timing.absurd[i] {
            return;
        }
        let p = self.tree.parent[i];
        let start = ns(s.start_unix_nano);
        let tol = self.opts.tolerance_ms * MS;
        let (stop, who) = if p == NONE {
            // The root: its caller had the answer (or hung up) when its span ended.
            (self.timing.give_up[i], None)
        } else {
            let ps = &spans[p as usize];
            let calls_it = ps.kind == SpanKind::Client || self.timing.proxied[i];
            if !calls_it {
                return;
            }
            let call_end = ns(ps.end_unix_nano);
            let h = self.timing.hop_of[p as usize];
            match Some(h).filter(|&h| h != NONE && h as usize != p as usize) {
                Some(h) if ns(spans[h as usize].end_unix_nano).saturating_add(tol) < call_end => (
                    ns(spans[h as usize].end_unix_nano),
                    Some((h as usize, true)),
                ),
                _ => (call_end, Some((p as usize, false))),
            }
        };
        let end = self.timing.extent_end[i];
        if end <= stop.saturating_add(tol + self.timing.transit[i]) {
            return;
        }
        let went_on = ms(end - stop.max(start)).clamp(0, MAX_SPAN_MS);
        let own = self.timing.own_dead[i];
        let (below, tail) = self.dead_below(i, false);
        let worked = if self.timing.waiting[i] == 0 {
            format!("worked {} ms", thousands(own))
        } else if own == 0 {
            format!("went on {} ms, waiting on its calls,", thousands(went_on))
        } else {
            format!(
                "went on {} ms ({} ms of its own work)",
                thousands(went_on),
                thousands(own)
            )
        };
        let message = match who {
            Some((h, true)) => {
                let left = &spans[h];
                let at = ms(ns(left.end_unix_nano) - ns(left.start_unix_nano));
                format!(
                    "{} answered at {} ms and left its call open: {} {} for nobody{tail}",
                    left.service,
                    thousands(at),
                    s.service,
                    worked.trim_end_matches(',')
                )
            }
            Some((c, false)) => format!(
                "{} {worked} after {} stopped waiting{tail}",
                s.service, spans[c].service
            ),
            None => format!(
                "{} kept working {} ms after it answered or its caller hung up{tail}",
                s.service,
                thousands(own)
            ),
        };
        let forwarded = (p != NONE)
            .then(|| spans[p as usize].budget.forwarded_ms)
            .flatten();
        let numbers = Numbers {
            received: s.budget.received_ms,
            forwarded,
            wasted: Some(own.saturating_add(below)),
            ..Numbers::default()
        };
        self.push(i, FindingKind::OrphanedWork, message, numbers);
    }
}

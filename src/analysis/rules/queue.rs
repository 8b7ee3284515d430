//! Queues: `shed_expired` and `shed_full` (the right behaviour, shown so it can be seen
//! working) and `queue_pressure` (a queue wait that took more than half of the budget).

use crate::analysis::finding_kind::FindingKind;
use crate::analysis::model::Outcome;

use super::pass::{Numbers, RulePass};

impl RulePass<'_> {
    /// `shed_expired` / `shed_full` on hop `i`, from its outcome (`budget.outcome`, else what
    /// its status implies).
    pub(super) fn shed_hop(&mut self, i: usize) {
        let spans = self.spans;
        let f = &spans[i].budget;
        let budget = f.budget_ms();
        match self.timing.outcome[i] {
            Some(Outcome::ShedExpired) => {
                let message = match (f.queue_wait_ms, budget) {
                    (Some(q), Some(b)) => format!(
                        "shed at dequeue: expired after {q} ms in the queue with a {b} ms budget"
                    ),
                    _ if f.outcome.is_none() => {
                        "answered 504 before any work started: dropped unworked".to_owned()
                    }
                    (None, Some(b)) if b <= 0 => {
                        "refused on arrival: its budget had already run out".to_owned()
                    }
                    _ => "shed: its budget ran out before work started".to_owned(),
                };
                let numbers = Numbers {
                    received: f.received_ms,
                    remaining: f.remaining_at_start_ms,
                    ..Numbers::default()
                };
                self.push(i, FindingKind::ShedExpired, message, numbers);
            }
            Some(Outcome::ShedFull) => {
                let message = if f.outcome.is_none() && f.http_status.is_none() {
                    "rejected with RESOURCE_EXHAUSTED: no room to take the request".to_owned()
                } else {
                    "rejected with 503: the queue was full".to_owned()
                };
                let numbers = Numbers {
                    received: f.received_ms,
                    ..Numbers::default()
                };
                self.push(i, FindingKind::ShedFull, message, numbers);
            }
            _ => {}
        }
    }

    /// `shed_expired` / `shed_full` on call `i`, from its `budget.outcome`, when no callee hop
    /// is in the chain to report it.
    pub(super) fn shed_call(&mut self, i: usize) {
        if self.callee(i).is_some() {
            return;
        }
        let spans = self.spans;
        let f = &spans[i].budget;
        let shed = match f.outcome {
            Some(Outcome::ShedExpired) => Some((
                FindingKind::ShedExpired,
                "the callee shed this call: it expired in its queue",
            )),
            Some(Outcome::ShedFull) => Some((
                FindingKind::ShedFull,
                "the callee rejected this call with 503: its queue was full",
            )),
            _ => None,
        };
        if let Some((kind, text)) = shed {
            let numbers = Numbers {
                remaining: f.remaining_ms,
                forwarded: f.forwarded_ms,
                ..Numbers::default()
            };
            self.push(i, kind, text.to_owned(), numbers);
        }
    }

    /// `queue_pressure` on hop `i`: its queue wait took more than half of its budget.
    pub(super) fn queue_pressure(&mut self, i: usize) {
        let spans = self.spans;
        let f = &spans[i].budget;
        if let (Some(q), Some(b)) = (f.queue_wait_ms, f.budget_ms())
            && b > 0
            && q.saturating_mul(2) > b
        {
            let message = if q >= b {
                format!("waited {q} ms in the queue: all of its {b} ms budget")
            } else {
                let share = i128::from(q) * 1000 / i128::from(b);
                format!(
                    "waited {q} ms in the queue: more than half ({}.{} %) of its {b} ms budget",
                    share / 10,
                    share % 10
                )
            };
            let numbers = Numbers {
                received: Some(b),
                remaining: f.remaining_at_start_ms,
                ..Numbers::default()
            };
            self.push(i, FindingKind::QueuePressure, message, numbers);
        }
    }
}

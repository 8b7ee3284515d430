//! `budget_reset` and `budget_dropped`: a budget made larger than what remained, or not passed
//! on at all. Found on the call that forwarded too much or nothing, and on the hop that
//! received more than its caller forwarded, or none although its caller had one.

use crate::analysis::chain::NONE;
use crate::analysis::finding_kind::FindingKind;
use crate::analysis::model::{BudgetSource, Outcome};

use super::pass::{Numbers, RulePass};
use super::timing::has_budget;

impl RulePass<'_> {
    /// The call whose forwarded budget reaches span `i` (see `PassState::upstream`); parents
    /// are visited first.
    pub(super) fn upstream_of(&self, i: usize) -> u32 {
        let s = &self.spans[i];
        let p = self.tree.parent[i];
        if s.kind.is_call() && s.budget.forwarded_ms.is_some() {
            return i as u32;
        }
        if p == NONE {
            return NONE;
        }
        if s.kind.is_call() {
            let h = self.timing.hop_of[i];
            let transparent = h != NONE && {
                let hf = &self.spans[h as usize].budget;
                hf.source.is_none() && hf.received_ms.is_none()
            };
            if !transparent {
                return NONE;
            }
        }
        self.state.upstream[p as usize]
    }

    /// `budget_reset` on hop `i`: it received more than the nearest budget forwarded above it.
    pub(super) fn received_reset(&mut self, i: usize) {
        let spans = self.spans;
        let s = &spans[i];
        let f = &s.budget;
        let p = self.tree.parent[i];
        let tol = self.opts.tolerance_for(f.source);
        let up = if p == NONE {
            NONE
        } else {
            self.state.upstream[p as usize]
        };
        if up != NONE
            && let (Some(r), Some(fw)) = (f.received_ms, spans[up as usize].budget.forwarded_ms)
            && r > fw.saturating_add(tol)
        {
            let caller = &spans[up as usize].service;
            let (wasted, tail) = self.dead_below(i, true);
            let message = if up == p {
                format!("received {r} ms but {caller} forwarded only {fw} ms{tail}")
            } else {
                format!("received {r} ms but {caller} forwarded only {fw} ms upstream{tail}")
            };
            let numbers = Numbers {
                received: Some(r),
                forwarded: Some(fw),
                wasted: (wasted > 0).then_some(wasted),
                ..Numbers::default()
            };
            self.push(i, FindingKind::BudgetReset, message, numbers);
        }
    }

    /// `budget_dropped` on hop `i`: it says it received no budget (or fell back to its own
    /// default) although its caller had one.
    pub(super) fn received_dropped(&mut self, i: usize) {
        let spans = self.spans;
        let s = &spans[i];
        let f = &s.budget;
        if !matches!(f.source, Some(BudgetSource::None | BudgetSource::Default)) {
            return;
        }
        let p = self.tree.parent[i];
        let parent = (p != NONE).then(|| &spans[p as usize]);
        let caller_call = parent.filter(|ps| ps.kind.is_call());
        let forwarded = caller_call.and_then(|c| c.budget.forwarded_ms);
        let got = match (f.source, f.default_ms) {
            (Some(BudgetSource::Default), Some(d)) => {
                format!("fell back to its own default of {d} ms")
            }
            (Some(BudgetSource::Default), None) => "fell back to its own default".to_owned(),
            _ => "received no budget".to_owned(),
        };
        let caller_budget = if let (Some(c), Some(fw)) = (caller_call, forwarded) {
            Some(format!("{} forwarded {fw} ms", c.service))
        } else if caller_call.is_none()
            && let Some(ps) = parent
            && ps.service != s.service
            && let Some(ch) = Some(self.timing.hop_of[p as usize]).filter(|&h| h != NONE)
            && has_budget(&spans[ch as usize].budget)
        {
            let caller = &spans[ch as usize];
            Some(match caller.budget.budget_ms() {
                Some(b) => format!("its caller {} had a {b} ms budget", caller.service),
                None => format!("its caller {} had a budget", caller.service),
            })
        } else {
            None
        };
        if let Some(why) = caller_budget {
            let (wasted, tail) = self.dead_below(i, true);
            let message = format!("{} {got} although {why}{tail}", s.service);
            let numbers = Numbers {
                received: f.received_ms,
                forwarded,
                wasted: (wasted > 0).then_some(wasted),
                ..Numbers::default()
            };
            self.push(i, FindingKind::BudgetDropped, message, numbers);
        }
    }

    /// `budget_reset` on call `i`: it forwarded more than remained. Whether it was found.
    pub(super) fn forwarded_reset(&mut self, i: usize) -> bool {
        let spans = self.spans;
        let f = &spans[i].budget;
        if let (Some(fw), Some((rem, extra))) = (f.forwarded_ms, self.remaining(i))
            && fw > rem.saturating_add(self.opts.tolerance_ms + extra)
        {
            let (wasted, tail) = self.dead_below(i, true);
            let message = format!("forwarded {fw} ms with only {rem} ms left{tail}");
            let numbers = Numbers {
                remaining: Some(rem),
                forwarded: Some(fw),
                wasted: (wasted > 0).then_some(wasted),
                ..Numbers::default()
            };
            self.push(i, FindingKind::BudgetReset, message, numbers);
            return true;
        }
        false
    }

    /// `budget_dropped` on call `i`: its hop had a budget and the call, a request that could
    /// carry one, forwarded none (and its callee did not receive one either).
    pub(super) fn forwarded_dropped(&mut self, i: usize) {
        let spans = self.spans;
        let f = &spans[i].budget;
        let h = self.timing.hop_of[i];
        let callee = self.callee(i);
        let carries = f.remaining_ms.is_some() || f.timeout_ms.is_some() || callee.is_some();
        if f.forwarded_ms.is_none()
            && f.outcome != Some(Outcome::Refused)
            && carries
            && h != NONE
            && has_budget(&spans[h as usize].budget)
            && callee.is_none_or(|x| spans[x].budget.received_ms.is_none())
        {
            let remaining = self.remaining(i);
            let hop = &spans[h as usize];
            let (wasted, tail) = self.dead_below(i, true);
            let message = match remaining {
                Some((rem, _)) => format!(
                    "{} had {rem} ms left but forwarded no budget on this call{tail}",
                    hop.service
                ),
                None => format!(
                    "{} had a budget but forwarded none on this call{tail}",
                    hop.service
                ),
            };
            let numbers = Numbers {
                received: hop.budget.budget_ms(),
                remaining: remaining.map(|r| r.0),
                wasted: (wasted > 0).then_some(wasted),
                ..Numbers::default()
            };
            self.push(i, FindingKind::BudgetDropped, message, numbers);
        }
    }
}

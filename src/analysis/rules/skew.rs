//! Clocks that disagree (`clock_skew`): a span too long to be real, an absolute deadline that
//! disagrees with the relative view, and a child that starts before its parent.

use crate::analysis::chain::NONE;
use crate::analysis::finding_kind::FindingKind;
use crate::analysis::model::BudgetSource;

use crate::analysis::clocks::Evidence;

use super::pass::{Numbers, RulePass, thousands};
use super::timing::{MS, ms, ns};

impl RulePass<'_> {
    /// A hop longer than 24 h: a clock or an exporter is wrong, and none of its time counts.
    pub(super) fn absurd_span(&mut self, i: usize) {
        if !self.timing.absurd[i] {
            return;
        }
        let s = &self.spans[i];
        let message = format!(
            "{} ends {} h after it starts: a clock or an exporter is wrong; none of its time counts as waste",
            s.service,
            ms(ns(s.end_unix_nano).saturating_sub(ns(s.start_unix_nano))) / 3_600_000
        );
        self.push(i, FindingKind::ClockSkew, message, Numbers::default());
    }

    /// Hop `i`'s absolute deadline against its relative view, once: `deadline_unix_ms` against
    /// arrival + budget, else (a budget from an absolute carrier) what it received against
    /// what its caller forwarded.
    pub(super) fn clock_skew(&mut self, i: usize) {
        let spans = self.spans;
        let s = &spans[i];
        let f = &s.budget;
        let p = self.tree.parent[i];
        let forwarded = self.forwarded_into(i);
        let mut skewed = false;
        if let (Some(d), Some(b)) = (f.deadline_unix_ms, f.budget_ms()) {
            // On the hop's own clock: before any correction.
            let start =
                ns(s.start_unix_nano).saturating_sub(self.clocks.shift_ms[i].saturating_mul(MS));
            let relative = ms(start).saturating_add(b);
            let diff = d.saturating_sub(relative);
            if diff.saturating_abs() > self.opts.skew_threshold_ms {
                skewed = true;
                let side = if diff > 0 { "later" } else { "earlier" };
                let budget = if b >= 0 {
                    format!("+ {b} ms budget")
                } else {
                    format!("- {} ms (a budget already spent)", b.saturating_neg())
                };
                let message = format!(
                    "absolute deadline is {} ms {side} than arrival {budget} by the clock of {}",
                    diff.saturating_abs(),
                    s.service
                );
                let numbers = Numbers {
                    received: f.received_ms,
                    ..Numbers::default()
                };
                self.push(i, FindingKind::ClockSkew, message, numbers);
            }
        }
        if !skewed
            && f.source.is_some_and(BudgetSource::is_absolute)
            && let (Some(r), Some(fw)) = (f.received_ms, forwarded)
        {
            // The caller meant `fw` ms; an absolute deadline read on another clock gave `r`.
            let diff = r.saturating_sub(fw);
            if diff.saturating_abs() > self.opts.skew_threshold_ms {
                let caller = &spans[p as usize].service;
                let moved = match self.clocks.evidence[i] {
                    Some(Evidence::Deadline { .. }) => {
                        let (side, way) = if diff > 0 {
                            ("behind", "later")
                        } else {
                            ("ahead", "earlier")
                        };
                        format!(
                            " ({}'s is {side}); its spans were moved {} ms {way}, onto the clock of {caller} (~ on the waterfall)",
                            s.service,
                            thousands(diff.saturating_abs())
                        )
                    }
                    _ => String::new(),
                };
                let message = format!(
                    "received {r} ms from an absolute deadline but {caller} meant {fw} ms: the clocks differ by about {} ms{moved}",
                    diff.saturating_abs()
                );
                let numbers = Numbers {
                    received: Some(r),
                    forwarded: Some(fw),
                    ..Numbers::default()
                };
                self.push(i, FindingKind::ClockSkew, message, numbers);
            }
        }
    }

    /// A span that starts before its parent: the two clocks disagree. A hop that did so was
    /// moved onto its caller's clock (see [`Clocks`](crate::analysis::clocks::Clocks)): the
    /// finding says by how much.
    pub(super) fn skewed_start(&mut self, i: usize) {
        let p = self.tree.parent[i];
        if p == NONE {
            return;
        }
        let spans = self.spans;
        let (s, ps) = (&spans[i], &spans[p as usize]);
        match self.clocks.evidence[i] {
            Some(Evidence::StartedBefore { ahead_ms }) => {
                let moved = self.clocks.shift_ms[i];
                let message = format!(
                    "{} starts {} ms before its parent in {}: its clock is at least that far behind; its spans were moved {} ms later, onto the clock of {} (~ on the waterfall)",
                    s.service,
                    thousands(ahead_ms),
                    ps.service,
                    thousands(moved),
                    ps.service
                );
                self.push(i, FindingKind::ClockSkew, message, Numbers::default());
                return;
            }
            // Said by `clock_skew`.
            Some(Evidence::Deadline { .. }) => return,
            None => {}
        }
        let ahead = ns(ps.start_unix_nano).saturating_sub(ns(s.start_unix_nano));
        if ahead > self.opts.parent_start_tolerance_ms.saturating_mul(MS) {
            let message = format!(
                "{} starts {} ms before its parent in {}: the clocks disagree",
                s.service,
                ms(ahead),
                ps.service
            );
            self.push(i, FindingKind::ClockSkew, message, Numbers::default());
        }
    }
}

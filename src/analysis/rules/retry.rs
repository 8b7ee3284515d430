//! Retries: the calls of one hop with one span name, when one of them carries
//! `budget.attempt > 1`. `retry_over_budget` when the attempts together forwarded more than
//! remained at the first (a late attempt is found with the spans that started after their
//! hop's deadline, in `expiry`). `retry_amplified` when retries in several layers multiply:
//! the retried calls of one layer (one caller service, one span name, one callee) reached
//! from the attempts of a retrying layer above, more in the chain than any one layer tried.

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
        // The retried groups, as ranges of `calls` (allocates only when a call was retried).
        let mut groups: Vec<(usize, usize)> = Vec::new();
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
            if !group.iter().any(|&c| attempt(c) > 1) {
                g0 = g1;
                continue;
            }
            groups.push((g0, g1));
            g0 = g1;
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
        if groups.len() >= 2 {
            self.amplified(&calls, &groups);
        }
        self.calls = calls;
    }

    /// `retry_amplified`: `groups` are the retried calls of each hop (ranges of `calls`).
    /// A layer is the groups of one caller service, call name and callee; it lies under the
    /// layer whose attempts reached every hop that made it. A layer under another that made
    /// more calls than the largest group of the chain is reported on the call that went over.
    fn amplified(&mut self, calls: &[u32], groups: &[(usize, usize)]) {
        let spans = self.spans;
        let hop_of = &self.timing.hop_of;
        let callee_of = |g: (usize, usize)| {
            calls[g.0..g.1]
                .iter()
                .find_map(|&c| self.callee(c as usize))
                .map(|x| &**spans[x].service)
        };
        // Per group: its layer, and the group whose attempt reached its hop (if retried).
        let mut layers: Vec<Layer<'_>> = Vec::new();
        let mut layer_of = Vec::with_capacity(groups.len());
        for &g in groups {
            let first = calls[g.0] as usize;
            let hop = hop_of[first] as usize;
            let key = (&**spans[hop].service, &**spans[first].name, callee_of(g));
            let at = match layers.iter().position(|l| l.key == key) {
                Some(at) => at,
                None => {
                    layers.push(Layer {
                        key,
                        calls: 0,
                        largest: 0,
                        uniform: true,
                        upper: None,
                        reached_from: true,
                    });
                    layers.len() - 1
                }
            };
            let size = g.1 - g.0;
            let layer = &mut layers[at];
            if layer.calls > 0 && size != layer.largest {
                layer.uniform = false;
            }
            layer.calls += size;
            layer.largest = layer.largest.max(size);
            layer_of.push(at);
        }
        for (k, &g) in groups.iter().enumerate() {
            let hop = hop_of[calls[g.0] as usize];
            let p = self.tree.parent[hop as usize];
            let upper = groups
                .iter()
                .position(|u| p != NONE && calls[u.0..u.1].contains(&p))
                .map(|u| layer_of[u]);
            let layer = &mut layers[layer_of[k]];
            match (upper, layer.upper) {
                (Some(u), None) if layer.reached_from => layer.upper = Some(u),
                (Some(u), Some(v)) if u == v => {}
                _ => {
                    layer.upper = None;
                    layer.reached_from = false;
                }
            }
        }
        let most = groups.iter().map(|g| g.1 - g.0).max().unwrap_or(0);
        for at in 0..layers.len() {
            let layer = &layers[at];
            if layer.upper.is_none() || layer.calls <= most {
                continue;
            }
            // The path, top layer first (a cycle of layers cannot be a chain's: stop at one).
            let (mut path, mut top) = (vec![at], at);
            while let Some(u) = layers[top].upper {
                if path.contains(&u) {
                    break;
                }
                path.push(u);
                top = u;
            }
            let steps: Vec<String> = path
                .iter()
                .rev()
                .enumerate()
                .map(|(depth, &l)| layers[l].step(depth > 0))
                .collect();
            let (_, name, callee) = layer.key;
            let message = format!(
                "{} was called {} times for one request: {}",
                callee.unwrap_or(name),
                layer.calls,
                steps.join(", ")
            );
            // The call that went over: the first, in time, beyond the largest layer's count.
            let mut own: Vec<u32> = groups
                .iter()
                .zip(&layer_of)
                .filter(|&(_, &l)| l == at)
                .flat_map(|(g, _)| calls[g.0..g.1].iter().copied())
                .collect();
            own.sort_unstable_by_key(|&c| (spans[c as usize].start_unix_nano, c));
            let Some(&over) = own.get(most) else {
                continue;
            };
            self.push(
                over as usize,
                FindingKind::RetryAmplified,
                message,
                Numbers::default(),
            );
        }
    }
}

/// The retried calls of one caller service, with one span name, into one callee, in a chain.
struct Layer<'a> {
    /// (caller service, call name, callee service when a callee hop is in the chain).
    key: (&'a str, &'a str, Option<&'a str>),
    /// Attempts in all.
    calls: usize,
    /// The most attempts one hop made.
    largest: usize,
    /// Every hop made as many.
    uniform: bool,
    /// The layer whose attempts reached every hop of this one.
    upper: Option<usize>,
    /// No hop of this one was reached otherwise (once false, `upper` stays `None`).
    reached_from: bool,
}

impl Layer<'_> {
    /// "bff tried orders 3 times" ("… each" below another layer, "up to" when they differ).
    fn step(&self, each: bool) -> String {
        let (caller, name, callee) = self.key;
        let up_to = if self.uniform { "" } else { "up to " };
        let each = if each { " each" } else { "" };
        format!(
            "{caller} tried {} {up_to}{} times{each}",
            callee.unwrap_or(name),
            self.largest
        )
    }
}

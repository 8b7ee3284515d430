//! Dead work (`CONVENTIONS.md` section 3, "Dead work"): a hop's time past its give-up, less the
//! time it waited on calls whose callee hop is in the chain (what such a call waits for is the
//! callee's own dead work, so one instant of one path is counted once; calls in parallel each
//! leave it to their callee), plus the time it waited on calls whose callee sends no spans (a
//! database, a third-party API): dead work all the same, counted on that call's own edge. An
//! internal span with no call under it is work even while a call is open (done in parallel).
//! Also what a waterfall draws of it: a hop's own work past its give-up, and its waiting then.

use crate::analysis::chain::{NONE, SpanView, Tree, refill};
use crate::analysis::chain_analysis::Options;
use crate::analysis::model::{Outcome, SpanKind};

use super::timing::{MAX_SPAN_MS, MS, NEVER, Timing, callee, is_shed, ms, ns};

/// Whole ms of ns, within a span's possible length.
fn whole_ms(d: i64) -> i64 {
    ms(d).clamp(0, MAX_SPAN_MS)
}

/// What a span of a hop is to its dead work: in `Timing::waits`' fourth place.
const TRACED: u32 = NONE;
const WORK: u32 = NONE - 1;

/// Intervals sorted by start, within `[from, to]`, merged into disjoint ones in `out`.
fn merge_within(
    intervals: impl Iterator<Item = (i64, i64)>,
    from: i64,
    to: i64,
    out: &mut Vec<(i64, i64)>,
) {
    out.clear();
    for (a, b) in intervals {
        let (a, b) = (a.max(from), b.min(to));
        if a >= b {
            continue;
        }
        match out.last_mut() {
            Some(last) if a <= last.1 => last.1 = last.1.max(b),
            _ => out.push((a, b)),
        }
    }
}

/// The length of `x` outside `y`, two lists of disjoint intervals sorted by start.
fn outside(x: &[(i64, i64)], y: &[(i64, i64)]) -> i64 {
    x.iter().map(|(a, b)| b - a).sum::<i64>() - overlap(x, y)
}

/// The length of the overlap of two lists of disjoint intervals sorted by start.
fn overlap(x: &[(i64, i64)], y: &[(i64, i64)]) -> i64 {
    let (mut i, mut j, mut sum) = (0, 0, 0);
    while i < x.len() && j < y.len() {
        let (a, b) = (x[i].0.max(y[j].0), x[i].1.min(y[j].1));
        sum += (b - a).max(0);
        if x[i].1 < y[j].1 {
            i += 1;
        } else {
            j += 1;
        }
    }
    sum
}

impl Timing {
    /// Each hop's dead work, its own part, its waiting, each untraced call's wait, and the
    /// dead work in each subtree; after the give-up times and the extents are known.
    pub(super) fn measure_dead(&mut self, spans: &[SpanView<'_>], tree: &Tree, opts: &Options) {
        let n = spans.len();
        // Spans with a call or a callee hop below them: not work done beside a call.
        refill(&mut self.calls_below, n, false);
        for &i in tree.order.iter().rev() {
            let (i, p) = (i as usize, tree.parent[i as usize]);
            if p != NONE
                && (self.calls_below[i] || spans[i].kind.is_call() || spans[i].kind.is_hop())
            {
                self.calls_below[p as usize] = true;
            }
        }
        // Every wait and every internal work span of every hop: (hop, from, to, what: the
        // untraced call, TRACED or WORK).
        let waits = &mut self.waits;
        waits.clear();
        for c in 0..n {
            let (s, h) = (&spans[c], self.hop_of[c]);
            if h == NONE || self.absurd[c] {
                continue;
            }
            let (from, to) = (ns(s.start_unix_nano), ns(s.end_unix_nano));
            if s.kind == SpanKind::Client && s.budget.outcome != Some(Outcome::Refused) {
                let untraced = callee(spans, tree, c).is_none();
                waits.push((h, from, to, if untraced { c as u32 } else { TRACED }));
            } else if s.kind == SpanKind::Internal && !self.calls_below[c] {
                waits.push((h, from, to, WORK));
            } else if self.proxied[c] {
                // The proxy's one span stands for the call: it waited from the callee's start
                // (an uninstrumented client's own span: that span) until the callee was done.
                let p = tree.parent[c] as usize;
                let caller = self.hop_of[p];
                let ps = &spans[p];
                let wait = if ps.kind == SpanKind::Internal {
                    (ns(ps.start_unix_nano), ns(ps.end_unix_nano))
                } else {
                    (from, to.max(self.extent_end[c]))
                };
                waits.push((caller, wait.0, wait.1, TRACED));
            }
        }
        waits.sort_unstable();

        refill(&mut self.dead, n, 0i64);
        refill(&mut self.own_dead, n, 0i64);
        refill(&mut self.waiting, n, 0i64);
        refill(&mut self.held, n, 0i64);
        refill(&mut self.waited, n, 0i64);
        let [mut merged, mut work, mut traced] = std::mem::take(&mut self.intervals);
        for (h, s) in spans.iter().enumerate() {
            if !s.kind.is_hop()
                || self.absurd[h]
                || is_shed(self.outcome[h])
                || self.give_up[h] == NEVER
            {
                continue;
            }
            let first = waits.partition_point(|w| (w.0 as usize) < h);
            let last = waits.partition_point(|w| (w.0 as usize) <= h);
            let mine = &waits[first..last];
            let give_up = self.give_up[h];
            let from = give_up.max(self.work_start[h]);
            let end = self.extent_end[h];
            // Its spans of one sort (by `Timing::waits`' fourth place) within its own time past
            // its give-up, merged.
            let within = |sort: fn(u32) -> bool, out: &mut Vec<(i64, i64)>| {
                merge_within(
                    mine.iter().filter(|w| sort(w.3)).map(|w| (w.1, w.2)),
                    from,
                    end,
                    out,
                );
            };
            // Its waits then, less the work it did meanwhile.
            within(|what| what != WORK, &mut merged);
            within(|what| what == WORK, &mut work);
            let waited_own = outside(&merged, &work);
            // The transit allowance and the tolerance are thresholds, never subtracted from
            // what is reported. A wait on an untraced callee past the hop's own end counts too.
            let reach = mine
                .iter()
                .filter(|w| w.3 < WORK)
                .map(|w| w.2)
                .fold(end, i64::max);
            let over = reach.saturating_sub(give_up.saturating_add(self.transit[h]));
            if over <= opts.tolerance_ms * MS {
                continue;
            }
            // Its waiting then, drawn as waiting; the part on callee hops of the chain is the
            // request held for nobody (a wait on an untraced callee is dead work already).
            self.waiting[h] = whole_ms(waited_own);
            within(|what| what == TRACED, &mut traced);
            self.held[h] = whole_ms(outside(&traced, &work));
            let own = whole_ms(end.saturating_sub(from).max(0) - waited_own);
            let mut dead = own;
            for &(_, a, b, c) in mine.iter().filter(|w| w.3 < WORK) {
                let w = whole_ms(b.saturating_sub(a.max(from)));
                self.waited[c as usize] = w;
                dead = dead.saturating_add(w);
            }
            self.own_dead[h] = own;
            self.dead[h] = dead.min(MAX_SPAN_MS);
        }

        merged.clear();
        work.clear();
        traced.clear();
        self.intervals = [merged, work, traced];
        self.below.clear();
        self.below.extend_from_slice(&self.dead);
        for &i in tree.order.iter().rev() {
            let p = tree.parent[i as usize];
            if p != NONE {
                self.below[p as usize] =
                    self.below[p as usize].saturating_add(self.below[i as usize]);
            }
        }
    }

    /// How much of span `i`'s own bar a waterfall paints as work for nobody, ms: a hop's own
    /// dead work (its last part), an internal span's part past its hop's give-up while that hop
    /// has some, an untraced call's dead wait; never a call whose callee is in the chain (that
    /// is waiting: the callee's row shows what it waited for).
    pub(super) fn late_ms(&self, spans: &[SpanView<'_>], i: usize) -> u32 {
        let h = self.hop_of[i];
        if h == NONE || self.absurd[i] {
            return 0;
        }
        let h = h as usize;
        let s = &spans[i];
        let late = if h == i {
            self.own_dead[i]
        } else if s.kind.is_call() {
            self.waited[i]
        } else if self.own_dead[h] == 0 {
            0
        } else {
            let from = ns(s.start_unix_nano).max(self.give_up[h]);
            let to = ns(s.end_unix_nano).min(self.extent_end[h]);
            ms(to.saturating_sub(from)).max(0)
        };
        u32::try_from(late).unwrap_or(u32::MAX)
    }
}

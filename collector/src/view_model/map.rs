//! The map of services: who calls whom, with the budget on every edge and the dead work in every
//! box, as the screen's Map and the page's map draw it. Read from the totals the Edges and
//! Services tables show (their figures and findings): nothing is judged here.
//!
//! In: a [`MapInput`], the services with their figures and the calls between them, each call
//! saying whether its callee is traced (an untraced one, a database or a third-party API, is a
//! leaf box drawn apart); [`MapInput::of`] reads it from [`Totals`]. Out: a [`ServiceMap`]: at
//! most [`MAX_BOXES`] boxes (the busiest, the rest folded into `other`) with their words, the
//! edges between them with their worst finding and their label in every length, and the
//! [`Layout`] both pictures draw. A view picks the longest label that fits its gaps
//! ([`ServiceMap::label`]); the shortening order is [`MapEdge::labels`]'s.

use std::sync::Arc;

use foldhash::{HashMap, HashMapExt as _};

use deadline_budget::analysis::{
    EdgeAggregate, FindingKind, KindCounts, ServiceTotals, Severity, Totals,
};

use super::edges::worst_first;
use super::format::{fit, ms_digits, rate, severity_glyph, unicode_width};
use super::layout::{Layout, Link, Node};
use crate::service_figures::{ServiceStats, service_stats};
use crate::span_text::for_screen;

/// The most boxes a map draws: past it, the busiest `MAX_BOXES - 1` and `other`.
pub const MAX_BOXES: usize = 50;
/// The box the services past [`MAX_BOXES`] fold into.
pub const OTHER: &str = "other";
/// The most cells of a name in a box (longer ones end in `…`).
pub const NAME_CELLS: usize = 18;
/// Rows of a box: its border, its name, λ, its dead-work share.
pub const BOX_ROWS: u16 = 5;
/// The dead-work share from which a service is said to work for nobody: its box is
/// cross-hatched, and the Services table's share is red.
pub const NOBODY_SHARE: f64 = 0.25;

/// One call edge as the map reads it: the Edges figures, and whether its callee sends spans.
#[derive(Clone, Copy, Debug)]
pub struct MapCall<'a> {
    /// The edge's totals.
    pub edge: &'a EdgeAggregate,
    /// Its callee sends no spans (a database, a third-party API): a leaf box drawn apart.
    pub untraced: bool,
}

/// What a map is drawn from.
#[derive(Clone, Debug, Default)]
pub struct MapInput<'a> {
    /// The traced services and their figures.
    pub services: Vec<(Arc<str>, ServiceStats)>,
    /// The calls between them (and to untraced callees).
    pub calls: Vec<MapCall<'a>>,
    /// The time the rates are over, ns.
    pub window_ns: u64,
}

impl<'a> MapInput<'a> {
    /// The services and edges of `totals`; a callee is untraced when its edge says so (every
    /// call to it was to a callee that sent no spans: a database, a third-party API).
    pub fn of(totals: &'a Totals) -> Self {
        MapInput {
            services: service_stats(totals),
            calls: totals
                .edges
                .sorted()
                .into_iter()
                .map(|edge| MapCall {
                    edge,
                    untraced: edge.untraced(),
                })
                .collect(),
            window_ns: totals.traffic_ns(),
        }
    }
}

/// One box of the map: a service, an untraced callee, or `other`.
#[derive(Clone, Debug, PartialEq)]
pub struct MapBox {
    /// The service's name, as the totals have it.
    pub name: Arc<str>,
    /// The name as drawn: cleaned of what would move the cursor, at most [`NAME_CELLS`] cells.
    pub shown: String,
    /// A callee that sends no spans.
    pub untraced: bool,
    /// Arrivals per second (for an untraced callee, the calls into it).
    pub lambda: f64,
    /// The share of its work done for nobody (0..=1).
    pub dead_share: f64,
    /// Its dead work, ms.
    pub dead_ms: i64,
    /// The share of its time spent holding requests for nobody, waiting on its calls after
    /// everyone above had stopped waiting (0..=1): its callees' dead work, not its own.
    pub held_share: f64,
    /// The services `other` stands for (empty for any other box).
    pub folded: Vec<Arc<str>>,
    /// Its row in the Services table: the service, or `other`'s busiest; `None` untraced.
    pub row: Option<Arc<str>>,
}

impl MapBox {
    /// It works for nobody: at least [`NOBODY_SHARE`] of its work came after everyone above
    /// had stopped waiting (its box is cross-hatched).
    pub fn works_for_nobody(&self) -> bool {
        self.dead_ms > 0 && self.dead_share >= NOBODY_SHARE
    }

    /// It waits for nobody, and does not work for nobody: at least [`NOBODY_SHARE`] of its
    /// time was spent waiting on its calls after everyone above had stopped waiting (its box
    /// is filled with the waterfall's `▒`; what it waited for is dead work below it).
    pub fn waits_for_nobody(&self) -> bool {
        !self.works_for_nobody() && self.held_share >= NOBODY_SHARE
    }

    /// Its words, one a row: the name, λ, and the dead-work share (or `untraced`).
    pub fn lines(&self) -> [String; 3] {
        let third = if self.untraced {
            "untraced".to_string()
        } else if self.dead_ms > 0 && self.dead_share < 0.005 {
            "dead <1%".to_string()
        } else {
            format!("dead {:.0}%", self.dead_share * 100.0)
        };
        [
            self.shown.clone(),
            format!("λ {}/s", rate(self.lambda)),
            third,
        ]
    }

    fn width(&self) -> u16 {
        let inside = self
            .lines()
            .iter()
            .map(|l| unicode_width(l))
            .max()
            .unwrap_or(0);
        // Its borders and a cell after the words, so a box that works for nobody always shows
        // its hatch.
        (inside + 3) as u16
    }
}

/// One edge of the map: the calls from one box to another.
#[derive(Clone, Debug, PartialEq)]
pub struct MapEdge {
    /// The calling box.
    pub from: usize,
    /// The called box.
    pub to: usize,
    /// The worst severity of its findings (its calls' and its own).
    pub worst: Option<Severity>,
    /// Its label, longest first: words shorten first (`timeout` to `tmo`, units go), then the
    /// calls/s go, then the timeout; then the waste (or first a budget that was fine, when the
    /// waste fits alone), `fwd`, and last all but the glyph.
    pub labels: Vec<String>,
    /// Its row in the Edges table (for an edge into or out of `other`, its worst member's).
    pub row: (Arc<str>, Arc<str>),
    /// Calls in all.
    pub calls: u64,
    /// Dead work in the callee, ms.
    pub wasted_ms: i64,
}

impl MapEdge {
    /// Its worst finding's glyph (`✖ ▲ ●`), if any.
    pub fn glyph(&self) -> Option<&'static str> {
        self.worst.map(severity_glyph)
    }
}

/// The map. See the module documentation.
#[derive(Clone, Debug, Default)]
pub struct ServiceMap {
    /// The boxes: by name, `other` last.
    pub boxes: Vec<MapBox>,
    /// The edges, in the order of [`Layout::routes`].
    pub edges: Vec<MapEdge>,
    /// Where everything goes.
    pub layout: Layout,
    /// How many services are folded into `other`.
    pub folded: usize,
    /// Boxes there would be without folding.
    pub services: usize,
}

/// A box there could be, before the busiest are kept.
struct Candidate<'a> {
    name: Arc<str>,
    stats: Option<&'a ServiceStats>,
    /// Hops, or for an untraced callee the calls into it.
    busy: u64,
    untraced: bool,
}

/// The fewest cells of label a gap gets: the glyph, a space and a short budget.
pub const MIN_LABEL: u16 = 10;

impl ServiceMap {
    /// The map of `input`.
    pub fn of(input: &MapInput<'_>) -> ServiceMap {
        // Every box there could be: the traced services, the callers and the untraced callees
        // (busy by the calls into them), each once.
        let mut all: Vec<Candidate<'_>> = input
            .services
            .iter()
            .map(|(name, s)| Candidate {
                name: name.clone(),
                stats: Some(s),
                busy: s.totals.hops,
                untraced: false,
            })
            .collect();
        let mut index: HashMap<Arc<str>, usize> = all
            .iter()
            .enumerate()
            .map(|(i, c)| (c.name.clone(), i))
            .collect();
        for call in &input.calls {
            for (name, untraced) in [
                (&call.edge.caller, false),
                (&call.edge.callee, call.untraced),
            ] {
                let i = *index.entry(name.clone()).or_insert_with(|| {
                    all.push(Candidate {
                        name: name.clone(),
                        stats: None,
                        busy: 0,
                        untraced: false,
                    });
                    all.len() - 1
                });
                let c = &mut all[i];
                if untraced && c.stats.is_none() {
                    c.untraced = true;
                    c.busy += call.edge.calls;
                }
            }
        }
        let services = all.len();
        all.sort_by(|a, b| b.busy.cmp(&a.busy).then(a.name.cmp(&b.name)));
        let mut other_members: Vec<Candidate<'_>> = Vec::new();
        if all.len() > MAX_BOXES {
            // What the totals already count as `other` (past their own cap) joins the fold.
            if let Some(i) = all.iter().position(|c| &*c.name == OTHER) {
                other_members.push(all.remove(i));
            }
            other_members.extend(all.split_off(MAX_BOXES - 1));
        }
        let mut kept = all;
        kept.sort_by(|a, b| a.name.cmp(&b.name));
        let window_s = input.window_ns as f64 / 1e9;
        let per_s = |n: f64| if window_s > 0.0 { n / window_s } else { 0.0 };
        let mut boxes: Vec<MapBox> = kept
            .iter()
            .map(|c| {
                let (lambda, dead_share, dead_ms, held_share) = match c.stats {
                    Some(s) => (
                        s.littles_law().0,
                        s.dead_share(),
                        s.totals.wasted_ms,
                        s.totals.held_share(),
                    ),
                    None => (per_s(c.busy as f64), 0.0, 0, 0.0),
                };
                MapBox {
                    name: c.name.clone(),
                    shown: fit(&for_screen(&c.name), NAME_CELLS).into_owned(),
                    untraced: c.untraced,
                    lambda,
                    dead_share,
                    dead_ms,
                    held_share,
                    folded: Vec::new(),
                    row: (!c.untraced).then(|| c.name.clone()),
                }
            })
            .collect();
        if !other_members.is_empty() {
            // The figures the shares are read from, summed (not the queue waits' sketches).
            let (mut sum, mut lambda) = (ServiceTotals::default(), 0.0);
            for c in &other_members {
                match c.stats {
                    Some(s) => {
                        sum.work_ms += s.totals.work_ms;
                        sum.wasted_ms += s.totals.wasted_ms;
                        sum.held_ms += s.totals.held_ms;
                        lambda += s.littles_law().0;
                    }
                    None => lambda += per_s(c.busy as f64),
                }
            }
            let traced = other_members.iter().any(|c| c.stats.is_some());
            boxes.push(MapBox {
                name: Arc::from(OTHER),
                shown: format!("{OTHER} ({})", other_members.len()),
                untraced: !traced,
                lambda,
                dead_share: sum.dead_share(),
                dead_ms: sum.wasted_ms,
                held_share: sum.held_share(),
                folded: other_members.iter().map(|c| c.name.clone()).collect(),
                row: other_members
                    .iter()
                    .find(|c| c.stats.is_some())
                    .map(|c| c.name.clone()),
            });
        }
        let mut box_of: HashMap<Arc<str>, usize> = boxes
            .iter()
            .enumerate()
            .map(|(i, b)| (b.name.clone(), i))
            .collect();
        if !other_members.is_empty() {
            let other = boxes.len() - 1;
            for c in &other_members {
                box_of.insert(c.name.clone(), other);
            }
        }
        // Edges between boxes, members of one merged.
        let mut members: Vec<((usize, usize), Vec<&EdgeAggregate>)> = Vec::new();
        let mut member_of: HashMap<(usize, usize), usize> = HashMap::new();
        for call in &input.calls {
            let (Some(&from), Some(&to)) =
                (box_of.get(&call.edge.caller), box_of.get(&call.edge.callee))
            else {
                continue;
            };
            let i = *member_of.entry((from, to)).or_insert_with(|| {
                members.push(((from, to), Vec::new()));
                members.len() - 1
            });
            members[i].1.push(call.edge);
        }
        let edges: Vec<MapEdge> = members
            .into_iter()
            .map(|((from, to), mut group)| edge(from, to, &mut group, window_s))
            .collect();
        let nodes: Vec<Node> = boxes
            .iter()
            .map(|b| Node {
                width: b.width(),
                min_height: BOX_ROWS,
                apart: b.untraced,
            })
            .collect();
        let links: Vec<Link> = edges
            .iter()
            .map(|e| Link {
                from: e.from,
                to: e.to,
            })
            .collect();
        ServiceMap {
            layout: Layout::of(&nodes, &links),
            folded: other_members.len(),
            services,
            boxes,
            edges,
        }
    }

    /// The map of the totals the tables show.
    pub fn of_totals(totals: &Totals) -> ServiceMap {
        ServiceMap::of(&MapInput::of(totals))
    }

    /// The label room that fits the map in `width` columns, between [`MIN_LABEL`] and the
    /// longest label (past that, room is wasted).
    pub fn label_room(&self, width: u16) -> u16 {
        let gaps = self.layout.tracks.len() as u16;
        let longest = self
            .edges
            .iter()
            .filter_map(|e| e.labels.first())
            .map(|l| unicode_width(l) as u16)
            .max()
            .unwrap_or(0)
            .max(MIN_LABEL);
        if gaps == 0 {
            return longest;
        }
        let spare = width.saturating_sub(self.layout.fixed_width()) / gaps;
        spare.clamp(MIN_LABEL, longest)
    }

    /// Edge `e`'s longest label that fits `room` cells (its glyph alone when none does).
    pub fn label(&self, e: usize, room: u16) -> &str {
        let labels = &self.edges[e].labels;
        labels
            .iter()
            .find(|l| unicode_width(l) <= room as usize)
            .or(labels.last())
            .map_or("", String::as_str)
    }

    /// The box of the service `name`, if drawn (a folded service's: `other`).
    pub fn box_named(&self, name: &str) -> Option<usize> {
        self.boxes
            .iter()
            .position(|b| &*b.name == name || b.folded.iter().any(|f| &**f == name))
    }

    /// The edge from box `from` to box `to`, if any.
    pub fn edge_between(&self, from: usize, to: usize) -> Option<usize> {
        self.edges.iter().position(|e| e.from == from && e.to == to)
    }

    /// The edge to show first: the worst (the Edges table's first), if any.
    pub fn worst_edge(&self) -> Option<usize> {
        (0..self.edges.len()).max_by(|&a, &b| {
            let (x, y) = (&self.edges[a], &self.edges[b]);
            x.worst
                .cmp(&y.worst)
                .then(x.wasted_ms.cmp(&y.wasted_ms))
                .then(x.calls.cmp(&y.calls))
                .then(b.cmp(&a))
        })
    }
}

/// The map edge from box `from` to box `to` standing for `group` (one edge, or several folded
/// into `other`): counts added, the budget and timeout of its busiest member, its row its
/// worst member's.
fn edge(from: usize, to: usize, group: &mut [&EdgeAggregate], window_s: f64) -> MapEdge {
    let calls: u64 = group.iter().map(|e| e.calls).sum();
    let wasted_ms: i64 = group.iter().map(|e| e.wasted_ms).sum();
    let mut findings = KindCounts::default();
    for e in group.iter() {
        for (n, k) in findings.0.iter_mut().zip(e.all_findings().0) {
            *n += k;
        }
    }
    let worst = findings.worst();
    let busiest = group
        .iter()
        .max_by(|a, b| a.calls.cmp(&b.calls).then(b.callee.cmp(&a.callee)))
        .copied();
    worst_first(group);
    let row = group
        .first()
        .map(|e| (e.caller.clone(), e.callee.clone()))
        .unwrap_or_default();
    let per_s = |n: f64| if window_s > 0.0 { n / window_s } else { 0.0 };
    let labels = busiest.map_or_else(Vec::new, |e| {
        labels(
            worst,
            per_s(calls as f64),
            e,
            Broken {
                reset: findings.get(FindingKind::BudgetReset) > 0,
                dropped: findings.get(FindingKind::BudgetDropped) > 0,
            },
            per_s(wasted_ms as f64),
        )
    });
    MapEdge {
        from,
        to,
        worst,
        labels,
        row,
        calls,
        wasted_ms,
    }
}

/// What the findings say of an edge's budget: it forwarded more than remained, or none.
#[derive(Clone, Copy, Debug)]
struct Broken {
    reset: bool,
    dropped: bool,
}

/// An edge's label in every length, longest first (see [`MapEdge::labels`]): `e` gives the
/// budget forwarded (and what remained, on a reset) and the timeout. Short of room, a broken
/// budget outlasts the waste, and the waste outlasts a budget that was fine.
fn labels(
    worst: Option<Severity>,
    calls_per_s: f64,
    e: &EdgeAggregate,
    broken: Broken,
    waste_per_s: f64,
) -> Vec<String> {
    let reset = broken.reset;
    let glyph = worst.map_or(String::new(), |s| format!("{} ", severity_glyph(s)));
    let (budget, bare) = match (e.forwarded.p50(), e.remaining.p50()) {
        (None, _) => ("no budget".to_string(), "none".to_string()),
        // The medians read as a reset only when most calls reset: else `968>990` would say
        // that a call forwarded less than remained broke its budget.
        (Some(f), Some(r)) if reset && f > r => (
            format!("fwd {}>{}", ms_digits(f), ms_digits(r)),
            format!("{}>{}", ms_digits(f), ms_digits(r)),
        ),
        (Some(f), _) => (format!("fwd {}", ms_digits(f)), ms_digits(f)),
    };
    let timeout = e.timeout().map(|(t, inferred)| {
        let mark = if inferred { "~" } else { "" };
        (
            format!("timeout {mark}{}ms", ms_digits(t)),
            format!("tmo {mark}{}", ms_digits(t)),
        )
    });
    let waste = (waste_per_s > 0.0).then(|| {
        (
            format!("wasted {}ms/s", rate(waste_per_s)),
            format!("waste {}/s", rate(waste_per_s)),
        )
    });
    let calls = format!("{}/s", rate(calls_per_s));
    let join = |parts: &[Option<&str>], sep: &str| {
        let words: Vec<&str> = parts.iter().flatten().copied().collect();
        format!("{glyph}{}", words.join(sep))
    };
    let (t_long, t_short) = match &timeout {
        Some((l, s)) => (Some(l.as_str()), Some(s.as_str())),
        None => (None, None),
    };
    let (w_long, w_short) = match &waste {
        Some((l, s)) => (Some(l.as_str()), Some(s.as_str())),
        None => (None, None),
    };
    let mut out = vec![
        join(&[Some(&calls), Some(&budget), t_long, w_long], " · "),
        join(&[Some(&calls), Some(&budget), t_short, w_short], " "),
        join(&[Some(&budget), t_short, w_short], " "),
        join(&[Some(&budget), w_short], " "),
    ];
    // A budget that was fine gives way to the waste first, when there is room for that.
    let budget_broken = broken.reset || (broken.dropped && e.forwarded.is_empty());
    if !budget_broken && w_short.is_some() {
        out.push(join(&[w_short], " "));
    }
    out.push(join(&[Some(&budget)], " "));
    out.push(join(&[Some(&bare)], " "));
    out.push(glyph.trim_end().to_string());
    out.dedup();
    out
}

#[cfg(test)]
mod tests;

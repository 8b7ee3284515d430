//! A chain's waterfall on the page, drawn in SVG from the same [`RowMarks`] the screen draws in
//! cells: one row per hop and call (at most [`ROWS_PER_CHAIN`], those with findings or work for
//! nobody first, with the rows above them), each a `<details>` whose summary is the drawing and
//! whose body is the row's detail.

use std::fmt::Write as _;

use deadline_budget::analysis::{
    BudgetSource, Chain, ChainAnalysis, Finding, FindingKind, Row, Span,
};

use super::{CHAIN_BYTES, Esc, Page, ROWS_PER_CHAIN};
use crate::span_text::for_report;
use crate::view_model::format::{
    axis_step, count, counted, ms, ms_grouped, opt_ms_grouped, severity_glyph,
};
use crate::view_model::legend::MarkRole;
use crate::view_model::row_marks::{ChainScale, RowKind, RowMarks, Tone};

/// Width of a waterfall's timeline, in CSS pixels.
const TIMELINE_PX: f64 = 600.0;
/// Height of a waterfall row's drawing.
pub(super) const ROW_PX: u32 = 18;
/// Deepest indentation of a row's label.
pub(super) const MAX_INDENT: u32 = 12;

impl Page<'_> {
    pub(super) fn waterfall(
        &mut self,
        a: &ChainAnalysis,
        chain: &Chain,
        kind: Option<FindingKind>,
    ) {
        let spans: Vec<Option<Span>> = a.rows.iter().map(|r| chain.span(r.span as usize)).collect();
        let scale = ChainScale::of(a, spans.iter().flatten());
        let g = Geometry {
            horizon_ms: scale.horizon_ms,
        };
        let edge_deadline = scale.edge_deadline;
        let _ = write!(
            self.out,
            r#"<div class="wf">
<div class="wf-axis" aria-hidden="true"><span></span><span></span><span>HOP / CALL</span><span class="num">BUDGET ms</span><svg class="axis" width="{w}" height="{ROW_PX}">"#,
            w = TIMELINE_PX,
        );
        g.axis(&mut self.out);
        self.out.push_str("</svg></div>\n");
        let rows = chosen_rows(a, kind, ROWS_PER_CHAIN);
        let mut next = 0usize;
        let mut drawn = 0usize;
        for &i in &rows {
            if self.over_cap() {
                break;
            }
            if i > next {
                gap(&mut self.out, i - next);
            }
            next = i + 1;
            if let (Some(row), Some(Some(span))) = (a.rows.get(i), spans.get(i)) {
                self.row(a, row, span, &g, edge_deadline);
                drawn += 1;
            }
        }
        if a.rows.len() > next {
            gap(&mut self.out, a.rows.len() - next);
        }
        if drawn < a.rows.len() {
            let why = if drawn < rows.len() {
                format!("the page's {} KB for chains is used up", CHAIN_BYTES / 1000)
            } else {
                format!("at most {ROWS_PER_CHAIN} a chain")
            };
            let _ = writeln!(
                self.out,
                r#"<p class="cut">{} of {} rows drawn ({why}).</p>"#,
                count(drawn as u64),
                count(a.rows.len() as u64)
            );
        }
        self.out.push_str("</div>\n");
    }

    fn row(
        &mut self,
        a: &ChainAnalysis,
        row: &Row,
        span: &Span,
        g: &Geometry,
        edge_deadline: Option<i64>,
    ) {
        let on_row: Vec<&Finding> = a.findings_on(span.span_id).collect();
        let reset = on_row
            .iter()
            .find(|f| f.kind == FindingKind::BudgetReset)
            .copied();
        let marks = RowMarks::of(a, row, span);
        let label = if marks.kind == RowKind::Call {
            format!("→ {}", for_report(&span.name))
        } else {
            format!("{} {}", for_report(&span.service), for_report(&span.name))
        };
        // As the screen's wide waterfall writes them.
        let (numbers, tone) = marks.numbers(true);
        let worst = marks.worst;
        let _ = write!(
            self.out,
            r#"<details class="row"><summary><span class="g{gclass}"{gtitle}>{glyph}</span><span class="lbl {lclass} d{depth}" title="{label}">{label}</span><span class="num{nclass}">{numbers}</span><svg class="bar" width="{w}" height="{ROW_PX}" role="img"><title>{label}: {description}</title>"#,
            gclass = worst.map(|s| format!(" sev-{s}")).unwrap_or_default(),
            gtitle = worst.map(|s| format!(" title=\"{s}\"")).unwrap_or_default(),
            glyph = worst.map(severity_glyph).unwrap_or(""),
            lclass = match marks.kind {
                RowKind::Call => "call",
                RowKind::Hop => "hop",
                RowKind::Internal => "internal",
            },
            depth = row.depth.min(MAX_INDENT),
            label = Esc(&label),
            nclass = if tone == Tone::Late { " late-text" } else { "" },
            numbers = Esc(&numbers),
            w = TIMELINE_PX,
            description = Esc(&describe(&marks, span, row, reset)),
        );
        if let Some(d) = edge_deadline {
            let x = g.x(d);
            if d <= g.horizon_ms {
                let _ = write!(
                    self.out,
                    r#"<line class="m-edge" x1="{x:.1}" x2="{x:.1}" y1="0" y2="{ROW_PX}"/>"#
                );
            }
        }
        bar(&mut self.out, g, &marks);
        self.out.push_str("</svg></summary>\n");
        self.detail(a, row, span, &on_row, marks.start);
        self.out.push_str("</details>\n");
    }
}

fn gap(out: &mut String, n: usize) {
    let _ = writeln!(
        out,
        "<div class=\"gap\">⋯ {} not drawn</div>",
        counted(n as u64, "row")
    );
}

/// The rows of a chain to draw, in order: all of them when they fit; otherwise rows with
/// findings of `kind`, then other rows with findings or work for nobody, each with as many of
/// the rows above it as fit (so it is drawn in its context), then the first rows, up to `cap`.
fn chosen_rows(a: &ChainAnalysis, kind: Option<FindingKind>, cap: usize) -> Vec<usize> {
    let n = a.rows.len();
    if n <= cap {
        return (0..n).collect();
    }
    let mut keep = vec![false; n];
    let mut kept = 0usize;
    let passes: [&dyn Fn(&Row) -> bool; 2] = [
        &|r: &Row| kind.is_some_and(|k| r.findings.contains(k)),
        &|r: &Row| !r.findings.is_empty() || r.late_ms > 0 || r.dead_ms > 0,
    ];
    for wanted in passes {
        for i in 0..n {
            if kept >= cap {
                break;
            }
            if keep[i] || !wanted(&a.rows[i]) {
                continue;
            }
            // The row, then the rows above it, nearest first; each step keeps one more row, so
            // the walk ends within the cap.
            let mut at = Some(i);
            while let Some(j) = at {
                if keep[j] || kept >= cap {
                    break;
                }
                keep[j] = true;
                kept += 1;
                at = a.rows[j].parent_row.map(|p| p as usize).filter(|&p| p < n);
            }
        }
    }
    for k in keep.iter_mut() {
        if kept >= cap {
            break;
        }
        if !*k {
            *k = true;
            kept += 1;
        }
    }
    (0..n).filter(|&i| keep[i]).collect()
}

/// The row's drawing in words: its hover text and accessible name.
fn describe(m: &RowMarks, span: &Span, row: &Row, reset: Option<&Finding>) -> String {
    let b = &span.budget;
    let mut parts = vec![format!(
        "from +{} to +{}",
        ms_grouped(m.start),
        ms_grouped(m.end)
    )];
    if m.kind == RowKind::Hop {
        match (b.source, b.budget_ms()) {
            (Some(src), _) if !src.has_budget() => {
                parts.push(format!("no budget ({})", src.as_str()))
            }
            (Some(BudgetSource::Default), Some(v)) => {
                parts.push(format!("its own budget of {}", ms_grouped(v)))
            }
            (_, Some(v)) => parts.push(format!("received a budget of {}", ms_grouped(v))),
            (_, None) => parts.push("no budget".into()),
        }
        if let Some(q) = b.queue_wait_ms.filter(|q| *q > 0) {
            parts.push(format!("waited {} in the queue", ms_grouped(q)));
        }
        match m.shed {
            Some(shed) if shed.full => parts.push("shed: the queue was full".into()),
            Some(_) => parts.push("shed as it left the queue: expired".into()),
            None => {}
        }
    } else if m.kind == RowKind::Call {
        if m.refused {
            parts.push("refused: no budget left to call".into());
        } else if let Some(f) = reset {
            parts.push(format!(
                "forwarded {} with only {} left",
                opt_ms_grouped(f.forwarded_ms),
                opt_ms_grouped(f.remaining_ms)
            ));
        } else if let Some(f) = b.forwarded_ms {
            parts.push(format!("forwarded {}", ms_grouped(f)));
        } else if m.dropped {
            parts.push("forwarded no budget".into());
        }
    }
    if row.waiting_ms > 0 {
        parts.push(format!(
            "{} waiting on its calls for nobody",
            ms_grouped(i64::from(row.waiting_ms))
        ));
    }
    if row.late_ms > 0 {
        parts.push(format!(
            "the last {} of it for nobody",
            ms_grouped(i64::from(row.late_ms))
        ));
    }
    let kinds: Vec<String> = row
        .findings
        .iter()
        .map(|k| format!("{k} ({})", k.severity()))
        .collect();
    if !kinds.is_empty() {
        parts.push(kinds.join(", "));
    }
    parts.join("; ")
}

/// A waterfall's time axis.
struct Geometry {
    horizon_ms: i64,
}

impl Geometry {
    /// The x of a time, clamped to the timeline.
    fn x(&self, at_ms: i64) -> f64 {
        at_ms.clamp(0, self.horizon_ms) as f64 * TIMELINE_PX / self.horizon_ms as f64
    }

    fn axis(&self, out: &mut String) {
        let step = axis_step(self.horizon_ms, 8);
        let mut t = 0;
        // Bounded: the step puts about eight ticks on the axis.
        for _ in 0..64 {
            if t > self.horizon_ms {
                break;
            }
            let x = self.x(t);
            // A label near the end of the axis ends at its tick instead of running off.
            let (tx, anchor) = if x > TIMELINE_PX - 40.0 {
                (x - 2.0, " text-anchor=\"end\"")
            } else {
                (x + 2.0, "")
            };
            let _ = write!(
                out,
                r#"<line x1="{x:.1}" x2="{x:.1}" y1="12" y2="{ROW_PX}"/><text x="{tx:.1}" y="10"{anchor}>{label}</text>"#,
                label = ms(t),
            );
            t = t.saturating_add(step);
        }
    }
}

/// Draws one row's marks, as the screen does: a hop's budget up to its deadline, queue wait,
/// work and the part of it done for nobody, a shed; a call's bar, the budget it forwarded (past
/// what remained when it was a reset), a dropped budget, a refusal.
fn bar(out: &mut String, g: &Geometry, m: &RowMarks) {
    let (s, e) = (m.start, m.end);
    let mid = f64::from(ROW_PX) / 2.0;
    let rect = |out: &mut String, class: &str, from: i64, to: i64, y: f64, h: f64| {
        let (x0, x1) = (g.x(from), g.x(to));
        let _ = write!(
            out,
            r#"<rect class="{class}" x="{x0:.1}" y="{y:.1}" width="{:.1}" height="{h:.1}"/>"#,
            (x1 - x0).max(1.0)
        );
    };
    let line = |out: &mut String, class: &str, from: i64, to: i64| {
        if to > from {
            let _ = write!(
                out,
                r#"<line class="{class}" x1="{:.1}" x2="{:.1}" y1="{mid}" y2="{mid}"/>"#,
                g.x(from),
                g.x(to)
            );
        }
    };
    let glyph = |out: &mut String, class: &str, at: i64, text: &str| {
        let _ = write!(
            out,
            r#"<text class="m-glyph {class}" x="{:.1}" y="14">{text}</text>"#,
            (g.x(at) - 4.0).max(0.0)
        );
    };
    match m.kind {
        RowKind::Hop => {
            if let Some(d) = m.deadline {
                line(out, "m-budget", s, d);
            }
            let q = m.queue_ms;
            if q > 0 {
                rect(out, "m-queue", s, s + q, 3.0, 12.0);
            }
            if m.shed.is_none() {
                // Work, then its waiting for nobody, then its work for nobody.
                let work_from = s + q;
                let late_from = m.late_from.unwrap_or(e).max(work_from);
                let waiting_from = m
                    .waiting_from
                    .unwrap_or(late_from)
                    .clamp(work_from, late_from);
                for (class, from, to) in [
                    ("m-work", work_from, waiting_from),
                    ("m-waiting", waiting_from, late_from),
                    ("m-late", late_from, e),
                ] {
                    if to > from || (class == "m-work" && from == e) {
                        rect(out, class, from, to, 3.0, 12.0);
                    }
                }
            }
            if let Some(d) = m.deadline.filter(|d| *d <= g.horizon_ms) {
                let x = g.x(d);
                let _ = write!(
                    out,
                    r#"<rect class="m-deadline" x="{:.1}" y="1" width="2.5" height="{}"/>"#,
                    (x - 1.25).max(0.0),
                    ROW_PX - 2
                );
            }
            if let Some(shed) = m.shed {
                glyph(out, "queue", shed.at, "⊘");
            }
        }
        RowKind::Call => {
            if let Some(f) = m.forwarded {
                match f.remaining_until {
                    Some(r) => {
                        line(out, "m-fwd", e, r);
                        line(out, "m-fwd over", r.max(e), f.until);
                        if r <= g.horizon_ms {
                            rect(out, "m-remaining", r, r, 1.0, f64::from(ROW_PX) - 2.0);
                        }
                    }
                    None => line(out, "m-fwd", e, f.until),
                }
            }
            rect(out, "m-call", s, e, 6.0, 6.0);
            if let Some(late_from) = m.late_from {
                rect(out, "m-late", late_from, e, 5.0, 8.0);
            }
            if m.dropped {
                glyph(out, "late", s, "✕");
            }
            if m.refused {
                glyph(out, "dim", s, "⊘");
            }
        }
        RowKind::Internal => {
            rect(out, "m-internal", s, e, 8.0, 2.0);
            if let Some(late_from) = m.late_from {
                rect(out, "m-late", late_from, e, 7.0, 4.0);
            }
        }
    }
}

/// The legend's drawing of one mark, in the waterfall's own shapes.
pub(super) fn legend_sample(glyph: &str, role: MarkRole) -> &'static str {
    match (glyph, role) {
        ("╌┃", _) => {
            r#"<line class="m-budget" x1="2" x2="50" y1="9" y2="9"/><rect class="m-deadline" x="50" y="1" width="2.5" height="16"/>"#
        }
        ("░", _) => r#"<rect class="m-queue" x="2" y="3" width="56" height="12"/>"#,
        ("█", _) => r#"<rect class="m-work" x="2" y="3" width="56" height="12"/>"#,
        ("▓", _) => r#"<rect class="m-late" x="2" y="3" width="56" height="12"/>"#,
        ("▒", _) => r#"<rect class="m-waiting" x="2" y="3" width="56" height="12"/>"#,
        ("━", _) => r#"<rect class="m-call" x="2" y="6" width="56" height="6"/>"#,
        ("┄", _) => {
            r#"<line class="m-fwd" x1="2" x2="30" y1="9" y2="9"/><line class="m-fwd over" x1="30" x2="58" y1="9" y2="9"/>"#
        }
        ("│", _) => r#"<rect class="m-remaining" x="28" y="1" width="1" height="16"/>"#,
        ("✕", _) => r#"<text class="m-glyph late" x="24" y="14">✕</text>"#,
        ("⊘", _) => r#"<text class="m-glyph queue" x="24" y="14">⊘</text>"#,
        (_, MarkRole::Dim) => r#"<line class="m-edge" x1="30" x2="30" y1="0" y2="18"/>"#,
        _ => "",
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use deadline_budget::analysis::{BudgetSource, SpanKind, TraceId};

    use super::*;

    /// A chain `depth` hops deep (a call between each two), every budget honoured except the
    /// last call's, which forwards 3000 ms with 100 ms left.
    fn deep_chain(depth: u64) -> ChainAnalysis {
        use deadline_budget::analysis::{BudgetFacts, SpanId, SpanStatus};
        let trace = TraceId([7; 16]);
        let mut chain = Chain::new(trace);
        let ms = 1_000_000u64;
        let t0 = 1_764_374_400_000 * ms;
        // Hops at even positions, the calls between them at odd ones; a hop last.
        let n = depth * 2 - 1;
        for i in 0..n {
            let hop = i % 2 == 0;
            let mut budget = BudgetFacts::default();
            if hop {
                budget.source = Some(BudgetSource::XBudgetMs);
                budget.received_ms = Some(match i {
                    0 => 10_000,
                    _ if i + 1 == n => 3000,
                    _ => 4000,
                });
            } else {
                let last = i + 2 == n;
                budget.remaining_ms = Some(if last { 100 } else { 4000 });
                budget.forwarded_ms = Some(if last { 3000 } else { 4000 });
            }
            chain.insert(Span {
                trace_id: trace,
                span_id: SpanId((i + 1).to_be_bytes()),
                parent_span_id: (i > 0).then(|| SpanId(i.to_be_bytes())),
                service: Arc::from(format!("s{}", i / 2)),
                name: Arc::from("work"),
                kind: if hop {
                    SpanKind::Server
                } else {
                    SpanKind::Client
                },
                start_unix_nano: t0 + i * ms,
                end_unix_nano: t0 + (1000 - i) * ms,
                status: SpanStatus::Unset,
                budget,
            });
        }
        chain.analyse(&deadline_budget::analysis::Options::default())
    }

    #[test]
    fn a_finding_deep_in_a_huge_chain_is_drawn_with_the_rows_above_it() {
        let a = deep_chain(60);
        let reset = a
            .rows
            .iter()
            .position(|r| r.findings.contains(FindingKind::BudgetReset))
            .expect("the last call is a reset");
        assert!(reset > ROWS_PER_CHAIN, "{reset}");
        let rows = chosen_rows(&a, Some(FindingKind::BudgetReset), ROWS_PER_CHAIN);
        assert_eq!(rows.len(), ROWS_PER_CHAIN);
        assert!(rows.contains(&reset), "{rows:?}");
        // Its parent (the hop that made the call) is drawn too.
        let parent = a.rows[reset].parent_row.expect("a call has a hop above it") as usize;
        assert!(rows.contains(&parent), "{rows:?}");
        assert!(rows.windows(2).all(|w| w[0] < w[1]), "in order: {rows:?}");
        // A chain that fits is drawn whole.
        let small = deep_chain(5);
        assert_eq!(
            chosen_rows(&small, None, ROWS_PER_CHAIN),
            (0..small.rows.len()).collect::<Vec<_>>()
        );
    }
}

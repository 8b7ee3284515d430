//! The waterfall of one chain: one row per hop and call, indented by depth, on a time axis.
//!
//! A hop's row shows the budget it received as a dashed bar up to its deadline (`┃`), the queue
//! wait (`░`) and the work (`█`); work done after everyone above had stopped waiting (the
//! analysis's dead work) is `▓` and red. A call's row shows the call (`━`) and the budget it
//! forwarded (`┄`); a `budget_reset` is red past what remained (`│`) up to what it forwarded, a
//! `budget_dropped` is `✕` at the call, a shed `⊘` where it was shed. The original caller's
//! deadline is the dotted column `┊`. Below, the selected row's finding is explained in words.
//!
//! Every mark comes from the analysis (the row's findings, its `late_ms`, the budget helper of
//! the library): the screen judges nothing itself, so a mark never disagrees with a finding.

use crossterm::event::KeyCode;
use deadline_budget::analysis::{
    BudgetSource, ChainAnalysis, ChainOutcome, Finding, FindingKind, Outcome, Row, Span, SpanId,
};
use ratatui::buffer::Buffer;
use ratatui::layout::{Position, Rect};
use ratatui::text::{Line, Span as TextSpan};
use ratatui::widgets::{Paragraph, Widget, Wrap};

use super::popup::meaning;
use super::text::ms;
use super::theme::{Theme, severity_glyph};
use super::{Pane, ScreenLayout, put, put_right, scroll_offset, step};
use crate::legend::carrier_tag;
use crate::screen::{ChainView, Overlay, State, View};
use crate::span_text::for_screen;

struct Geometry {
    label_w: u16,
    nums_w: u16,
    tl_x: u16,
    tl_w: u16,
    horizon_ms: i64,
}

impl Geometry {
    fn col(&self, at_ms: i64) -> i64 {
        if self.horizon_ms <= 0 {
            return 0;
        }
        (at_ms.max(0) as i128 * self.tl_w as i128 / self.horizon_ms as i128) as i64
    }

    /// The column of a marker at `at_ms`: one that falls exactly on the end of the axis is
    /// drawn in the last column instead of being cut off.
    fn mark_col(&self, at_ms: i64) -> Option<u16> {
        let c = self.col(at_ms);
        let cells = i64::from(self.tl_w);
        if at_ms <= self.horizon_ms {
            Some(c.clamp(0, cells - 1) as u16)
        } else {
            None
        }
    }
}

/// A span's start and end in ms after the chain's start.
fn ms_of(chain: &ChainAnalysis, span: &Span) -> (i64, i64) {
    let start = chain.summary.offset_ms(span);
    (start, start + span.duration_ms().max(0))
}

fn geometry(chain: &ChainView<'_>, area: Rect) -> Geometry {
    let label_w = (area.width * 30 / 100).clamp(20, 48);
    let nums_w = if area.width >= 120 { 18 } else { 12 };
    let tl_x = area.x + label_w + nums_w + 1;
    let tl_w = area.width.saturating_sub(label_w + nums_w + 2).max(1);
    let dur = chain.summary.duration_ms.max(1);
    let mut far = dur;
    for (_, s) in chain.rows() {
        let s = &s;
        let start = chain.summary.offset_ms(s);
        if s.kind.is_hop()
            && let Some(b) = s.budget.budget_ms()
        {
            far = far.max(start + b);
        }
        if s.kind.is_call()
            && let Some(f) = s.budget.forwarded_ms
        {
            far = far.max(start + f);
        }
    }
    // A huge reset would squeeze the real work into one cell: show at most 4 times the chain.
    let horizon_ms = far.min(dur * 4).max(1);
    Geometry {
        label_w,
        nums_w,
        tl_x,
        tl_w,
        horizon_ms,
    }
}

fn panel_height(area: Rect) -> u16 {
    if area.height >= 30 {
        7
    } else if area.height >= 14 {
        5
    } else {
        0
    }
}

/// The key to the figures and thin rows, one line above the panel (when there is a panel).
fn key_height(area: Rect) -> u16 {
    u16::from(panel_height(area) > 0)
}

/// What the waterfall's abbreviations mean, longest first: the longest that fits is shown.
const KEYS: [&str; 4] = [
    "rcv: budget received (grpc, abs… its carrier) · own: the edge's own · fwd: forwarded (fwd 3000>937: 3000 with 937 left) · q: time queued · ─: the hop's own work · ? legend",
    "rcv: received · own: edge's own · fwd: forwarded (3000>937: 3000 with 937 left) · q: queued · ─: own work · ? legend",
    "rcv got · fwd sent (3000>937: 937 left) · q queued · ─ own work · ? legend",
    "rcv got · fwd sent · q queued · ? legend",
];

/// The Waterfall tab: the selected chain, one row per span.
#[derive(Debug)]
pub(crate) struct Waterfall;

impl Pane for Waterfall {
    fn title(&self) -> &'static str {
        "Waterfall"
    }

    fn hints(&self) -> &'static [&'static str] {
        &[
            "↑↓/jk row  n/N finding  Enter detail  Esc back  Tab view  e export  space pause  ? legend  q quit",
            "↑↓ row  n/N finding  ⏎ detail  Esc back  Tab view  ␣ pause  ? legend  q quit",
            "↑↓ row  n/N finding  ⏎ detail  Esc back  Tab view  ? legend  q quit",
        ]
    }

    fn arrange(&self, body: Rect, layout: &mut ScreenLayout) {
        layout.waterfall = Some(body);
    }

    fn render(&self, state: &State, theme: Theme, layout: &ScreenLayout, buf: &mut Buffer) {
        if let Some(r) = layout.waterfall {
            render(state, theme, r, buf);
        }
    }

    fn move_by(&self, state: &mut State, delta: isize) {
        let len = state.selected_chain().map(|c| c.rows.len()).unwrap_or(0);
        state.ui.span_row = step(state.ui.span_row, len, delta);
    }

    fn on_key(&self, state: &mut State, key: KeyCode) -> Option<bool> {
        match key {
            KeyCode::Char('n') => state.next_finding(true),
            KeyCode::Char('N') => state.next_finding(false),
            KeyCode::Char('e') => state.export_selected_here(),
            KeyCode::Enter => {
                if state.selected_span().is_none() {
                    return Some(false);
                }
                state.ui.overlay = Overlay::Detail;
                state.ui.popup_scroll = 0;
            }
            KeyCode::Esc => state.ui.view = View::Chains,
            _ => return None,
        }
        Some(true)
    }

    fn click(&self, state: &mut State, layout: &ScreenLayout, pos: Position) -> bool {
        click(state, layout, pos)
    }
}

/// A click on a waterfall row (the tab's, or the preview under the chain list) selects that
/// span, and keeps it selected as the chain grows.
pub(crate) fn click(state: &mut State, layout: &ScreenLayout, pos: Position) -> bool {
    let Some(r) = layout.waterfall.filter(|r| r.contains(pos)) else {
        return false;
    };
    let Some(i) = row_at(state, r, pos.y) else {
        return false;
    };
    state.ui.span_row = i;
    state.ui.pinned_span = state.selected_span();
    true
}

/// The waterfall row at screen row `y`.
pub fn row_at(state: &State, area: Rect, y: u16) -> Option<usize> {
    let chain = state.selected_chain()?;
    let n = chain.rows.len();
    let body = area
        .height
        .saturating_sub(2 + panel_height(area) + key_height(area)) as usize;
    if y < area.y + 2 || (y - area.y - 2) as usize >= body {
        return None;
    }
    let offset = scroll_offset(state.ui.span_row, n, body);
    let i = offset + (y - area.y - 2) as usize;
    (i < n).then_some(i)
}

/// The findings about one span.
pub fn findings_of(chain: &ChainAnalysis, span: SpanId) -> impl Iterator<Item = &Finding> {
    chain.findings.iter().filter(move |f| f.span_id == span)
}

/// Draw the selected chain's waterfall.
pub fn render(state: &State, theme: Theme, area: Rect, buf: &mut Buffer) {
    if area.height < 3 || area.width < 40 {
        return;
    }
    let Some(chain) = state.selected_chain() else {
        put(
            buf,
            area.x + 2,
            area.y,
            "no chain selected",
            area.width,
            theme.dim(),
        );
        return;
    };
    let g = geometry(&chain, area);
    let rows = &chain.rows;
    let s = &chain.summary;

    // Title line.
    let y = area.y;
    let mut title = format!(
        "─ {} {}  budget {}  used {}  {}  {} ",
        for_screen(&s.root_service),
        for_screen(&s.root_name),
        s.edge_budget_ms.map(ms).unwrap_or_else(|| "none".into()),
        ms(s.duration_ms),
        super::text::counted(s.hops as u64, "hop"),
        super::text::counted(chain.findings.len() as u64, "finding"),
    );
    // The trace id only whole (to copy it into a trace search), when it fits.
    let trace = format!(" trace {} ", chain.trace_id);
    if super::unicode_width(&title) + trace.len() < area.width as usize {
        title.push_str(&trace);
    }
    for x in area.x..area.x + area.width {
        put(buf, x, y, "─", 1, theme.dim());
    }
    put(buf, area.x, y, &title, area.width, theme.title());

    // Axis line.
    let y = area.y + 1;
    put(buf, area.x + 2, y, "HOP / CALL", g.label_w, theme.dim());
    put_right(
        buf,
        area.x + g.label_w,
        y,
        "BUDGET ms",
        g.nums_w,
        theme.dim(),
    );
    draw_axis(&g, buf, y, theme);

    // Rows.
    let panel_h = panel_height(area);
    let key_h = key_height(area);
    let body = area.height.saturating_sub(2 + panel_h + key_h) as usize;
    let offset = scroll_offset(state.ui.span_row, rows.len(), body);
    let edge_deadline = chain.rows().find_map(|(_, span)| {
        let budget = span.budget.budget_ms().filter(|_| span.kind.is_hop())?;
        Some(chain.summary.offset_ms(&span) + budget)
    });
    for i in offset..rows.len().min(offset + body) {
        let Some((row, span)) = chain.row(i) else {
            continue;
        };
        let y = area.y + 2 + (i - offset) as u16;
        let selected = i == state.ui.span_row;
        let at = ms_of(&chain, &span);
        let reset = findings_of(&chain, span.span_id).find(|f| f.kind == FindingKind::BudgetReset);
        let label = label_of(&chain, row, &span);
        draw_row(
            row,
            &span,
            &label,
            reset,
            at,
            &g,
            buf,
            area,
            y,
            selected,
            edge_deadline,
            theme,
        );
    }

    if key_h > 0 {
        let y = area.y + area.height - panel_h - key_h;
        let room = area.width.saturating_sub(2) as usize;
        let key = KEYS
            .iter()
            .find(|k| super::unicode_width(k) <= room)
            .unwrap_or(&KEYS[KEYS.len() - 1]);
        put(
            buf,
            area.x + 1,
            y,
            key,
            area.width.saturating_sub(1),
            theme.dim(),
        );
    }
    if panel_h > 0 {
        let panel = Rect::new(area.x, area.y + area.height - panel_h, area.width, panel_h);
        let selected = chain.row(state.ui.span_row).map(|(_, span)| span);
        draw_explanation(
            &chain,
            selected.as_ref(),
            state.focus_kinds(),
            panel,
            buf,
            theme,
        );
    }
}

/// Under the chain list when no waterfall fits: the selected row's finding (the same panel the
/// waterfall has), so the list alone still says what went wrong and why it matters.
pub fn render_finding(state: &State, theme: Theme, area: Rect, buf: &mut Buffer) {
    if area.height < 2 {
        return;
    }
    let Some(chain) = state.selected_chain() else {
        return;
    };
    let selected = chain.row(state.ui.span_row).map(|(_, span)| span);
    draw_explanation(
        &chain,
        selected.as_ref(),
        state.focus_kinds(),
        area,
        buf,
        theme,
    );
}

/// A row's label: a call's name (with its attempt when retried), a hop's service and name,
/// and for a hop's own internal span only its name (the service is the row above's).
fn label_of(chain: &ChainView<'_>, row: &Row, span: &Span) -> String {
    let indent = " ".repeat(row.depth.min(12) as usize);
    if span.kind.is_call() {
        // The attempt first: a long name is cut at its end, the attempt must show.
        let attempt = match span.budget.attempt {
            Some(a) if row.retried => format!("#{a} "),
            _ => String::new(),
        };
        return format!("{indent}→ {attempt}{}", for_screen(&span.name));
    }
    let parent_service = row
        .parent_row
        .and_then(|p| chain.row(p as usize))
        .map(|(_, parent)| parent.service.clone());
    if !span.kind.is_hop() && parent_service.as_deref() == Some(&*span.service) {
        format!("{indent}{}", for_screen(&span.name))
    } else {
        // `~`: a hop moved onto its caller's clock (its clock_skew finding says by how much).
        let moved = if span.kind.is_hop() && row.moved_ms != 0 {
            "~"
        } else {
            ""
        };
        format!(
            "{indent}{moved}{} {}",
            for_screen(&span.service),
            for_screen(&span.name)
        )
    }
}

fn draw_axis(g: &Geometry, buf: &mut Buffer, y: u16, theme: Theme) {
    let step = nice_step(g.horizon_ms, g.tl_w);
    let mut t = 0;
    let mut next_free = g.tl_x;
    while t <= g.horizon_ms {
        let x = g.tl_x + g.col(t) as u16;
        if x >= g.tl_x + g.tl_w {
            break;
        }
        if x >= next_free {
            let label = format!("┆{}", ms(t));
            let end = put(buf, x, y, &label, g.tl_x + g.tl_w - x, theme.dim());
            next_free = end + 1;
        }
        t += step;
    }
}

/// A round tick step (1, 2, 5 × 10^n ms) that puts a label every 10 or so cells.
fn nice_step(horizon_ms: i64, width: u16) -> i64 {
    let ticks = (width as i64 / 10).max(1);
    let raw = (horizon_ms / ticks).max(1);
    let mut p = 1;
    while p * 10 <= raw {
        p *= 10;
    }
    for m in [1, 2, 5, 10] {
        if p * m >= raw {
            return p * m;
        }
    }
    p * 10
}

#[allow(clippy::too_many_arguments)]
fn draw_row(
    row: &Row,
    span: &Span,
    label: &str,
    reset: Option<&Finding>,
    (start_ms, end_ms): (i64, i64),
    g: &Geometry,
    buf: &mut Buffer,
    area: Rect,
    y: u16,
    selected: bool,
    edge_deadline: Option<i64>,
    theme: Theme,
) {
    let row_style = if selected {
        theme.selected()
    } else {
        theme.text()
    };
    buf.set_style(Rect::new(area.x, y, area.width, 1), row_style);
    put(
        buf,
        area.x,
        y,
        if selected { "▶" } else { " " },
        1,
        row_style,
    );
    let worst = row.worst();
    if let Some(sev) = worst {
        put(
            buf,
            area.x + 1,
            y,
            severity_glyph(sev),
            1,
            theme.severity(sev),
        );
    }
    // Label.
    let label_style = if span.kind.is_call() {
        theme.call()
    } else {
        theme.title()
    };
    let label_w = g.label_w.saturating_sub(3);
    put(
        buf,
        area.x + 2,
        y,
        &super::text::fit(label, label_w as usize),
        label_w,
        label_style.patch(bg(row_style)),
    );

    // Numbers.
    let b = &span.budget;
    let nx = area.x + g.label_w;
    let late = theme.late().patch(bg(row_style));
    if span.kind.is_hop() {
        let (text, style) = match (b.source, span.budget.budget_ms()) {
            (Some(src), _) if !src.has_budget() => (src.as_str().to_string(), theme.dim()),
            (Some(BudgetSource::Default), Some(v)) => (format!("own {}", short(v)), theme.text()),
            (source, Some(v)) => {
                // The carrier, when it is not our own header (wide screens only).
                let via = match source.map(carrier_tag) {
                    Some(tag) if g.nums_w >= 18 && !tag.is_empty() => format!(" {tag}"),
                    _ => String::new(),
                };
                (format!("rcv {}{via}", short(v)), theme.text())
            }
            (_, None) => ("none".to_string(), theme.dim()),
        };
        let text = match b.queue_wait_ms {
            Some(q) if g.nums_w >= 18 && q > 0 => format!("{text} q{}", short(q)),
            _ => text,
        };
        put_right(buf, nx, y, &text, g.nums_w, style.patch(bg(row_style)));
    } else if span.kind.is_call() {
        let dropped = row.findings.contains(FindingKind::BudgetDropped);
        let (text, style) = match (reset, b.forwarded_ms) {
            _ if b.outcome == Some(Outcome::Refused) => ("refused".to_string(), theme.dim()),
            (Some(f), _) => (
                format!(
                    "fwd {}>{}",
                    f.forwarded_ms.map(short).unwrap_or_default(),
                    f.remaining_ms.map(short).unwrap_or_default()
                ),
                late,
            ),
            (None, Some(f)) => (format!("fwd {}", short(f)), theme.text()),
            (None, None) if dropped => ("fwd ✕ none".to_string(), late),
            (None, None) => (String::new(), theme.text()),
        };
        put_right(buf, nx, y, &text, g.nums_w, style.patch(bg(row_style)));
    }

    // Timeline.
    let (s, e) = (start_ms, end_ms);
    let cells = g.tl_w as i64;
    let fill = |buf: &mut Buffer, from: i64, to: i64, glyph: &str, style: ratatui::style::Style| {
        let a = g.col(from).clamp(0, cells);
        let z = g.col(to).clamp(0, cells);
        for c in a..z.max(a + 1).min(cells) {
            put(
                buf,
                g.tl_x + c as u16,
                y,
                glyph,
                1,
                style.patch(bg(row_style)),
            );
        }
    };
    if let Some(x) = edge_deadline.and_then(|d| g.mark_col(d)) {
        put(buf, g.tl_x + x, y, "┊", 1, theme.dim().patch(bg(row_style)));
    }
    // The part of the bar done for nobody: the last `late_ms` of it (from the analysis).
    let late_from = e - i64::from(row.late_ms).min(e - s);
    let cell_ms = |c: i64| (c as i128 * g.horizon_ms as i128 / (g.tl_w.max(1)) as i128) as i64;
    if span.kind.is_hop() {
        let budget = span.budget.budget_ms();
        let deadline = budget.map(|v| s + v);
        if let Some(d) = deadline {
            fill(buf, s, d, "╌", theme.budget());
        }
        let q = b.queue_wait_ms.unwrap_or(0).clamp(0, e - s);
        if q > 0 {
            fill(buf, s, s + q, "░", theme.queue());
        }
        let shed = if row.findings.contains(FindingKind::ShedExpired) {
            // Dropped as it left the queue: marked there, and no work drawn.
            Some(s + q)
        } else if row.findings.contains(FindingKind::ShedFull) {
            Some(s)
        } else {
            None
        };
        let a = g.col(s + q).clamp(0, cells);
        let z = g.col(e).clamp(0, cells).max(a + 1).min(cells);
        let mut work_end = a;
        if shed.is_none() {
            // Work, cell by cell so the part done for nobody turns red.
            for c in a..z {
                let (glyph, style) = if row.late_ms > 0 && cell_ms(c + 1) > late_from {
                    ("▓", theme.late())
                } else {
                    ("█", theme.work())
                };
                put(
                    buf,
                    g.tl_x + c as u16,
                    y,
                    glyph,
                    1,
                    style.patch(bg(row_style)),
                );
            }
            work_end = z;
        }
        if let Some(x) = deadline.and_then(|d| g.mark_col(d))
            && i64::from(x) >= work_end
        {
            put(
                buf,
                g.tl_x + x,
                y,
                "┃",
                1,
                theme.budget().patch(bg(row_style)),
            );
        }
        if let Some(at) = shed {
            put(
                buf,
                g.tl_x + g.col(at).clamp(0, cells - 1) as u16,
                y,
                "⊘",
                1,
                theme.queue().patch(bg(row_style)),
            );
        }
    } else if span.kind.is_call() {
        if let Some(f) = b.forwarded_ms {
            match reset.and_then(|r| r.remaining_ms) {
                Some(r) => {
                    fill(buf, e, s + r, "┄", theme.budget());
                    fill(buf, (s + r).max(e), s + f, "┄", theme.late());
                    if g.col(s + r) < cells {
                        put(
                            buf,
                            g.tl_x + g.col(s + r) as u16,
                            y,
                            "│",
                            1,
                            theme.queue().patch(bg(row_style)),
                        );
                    }
                }
                None if s + f > e => fill(buf, e, s + f, "┄", theme.budget()),
                None => {}
            }
        }
        fill(buf, s, e, "━", theme.call());
        if row.late_ms > 0 {
            fill(buf, late_from, e, "━", theme.late());
        }
        if row.findings.contains(FindingKind::BudgetDropped) {
            put(
                buf,
                g.tl_x + g.col(s).clamp(0, cells - 1) as u16,
                y,
                "✕",
                1,
                late,
            );
        }
        if b.outcome == Some(Outcome::Refused) {
            put(
                buf,
                g.tl_x + g.col(s).clamp(0, cells - 1) as u16,
                y,
                "⊘",
                1,
                theme.dim().patch(bg(row_style)),
            );
        }
    } else {
        fill(buf, s, e, "─", theme.dim());
        if row.late_ms > 0 {
            fill(buf, late_from, e, "─", theme.late());
        }
    }
}

/// Milliseconds without the unit (the column head says ms), unless they are large.
fn short(v: i64) -> String {
    if v.abs() < 100_000 {
        v.to_string()
    } else {
        ms(v)
    }
}

fn bg(style: ratatui::style::Style) -> ratatui::style::Style {
    ratatui::style::Style { fg: None, ..style }
}

fn draw_explanation(
    chain: &ChainAnalysis,
    span: Option<&Span>,
    focus: &[FindingKind],
    area: Rect,
    buf: &mut Buffer,
    theme: Theme,
) {
    for x in area.x..area.x + area.width {
        put(buf, x, area.y, "─", 1, theme.dim());
    }
    let inner = Rect::new(
        area.x + 1,
        area.y + 1,
        area.width.saturating_sub(2),
        area.height - 1,
    );
    let total = chain.findings.len();
    let mut here: Vec<&Finding> = span
        .map(|s| findings_of(chain, s.span_id).collect())
        .unwrap_or_default();
    // What the demo teaches first (a 504 shed at dequeue before the queue pressure beside it).
    here.sort_by_key(|f| {
        focus
            .iter()
            .position(|k| *k == f.kind)
            .unwrap_or(usize::MAX)
    });
    let mut lines: Vec<Line<'_>> = Vec::new();
    if total == 0 {
        put(
            buf,
            area.x + 1,
            area.y,
            " no findings ",
            area.width,
            theme.title(),
        );
        lines.push(Line::from(
            "Every hop kept within the budget it was given: nothing was reset, dropped or wasted.",
        ));
        if chain.summary.outcome == ChainOutcome::DeadlineExceeded {
            lines.push(Line::from(
                "It ended in a 504 for its user: a slow step was cut where the budget ran out, and nothing went on working for nobody.",
            ));
        }
    } else if here.is_empty() {
        put(
            buf,
            area.x + 1,
            area.y,
            &format!(
                " {} in this chain ",
                super::text::counted(total as u64, "finding")
            ),
            area.width,
            theme.title(),
        );
        lines.push(Line::from(
            "This row has no finding. n / N jump to the next / previous finding.",
        ));
        for f in chain
            .findings
            .iter()
            .take(inner.height.saturating_sub(1) as usize)
        {
            lines.push(Line::from(vec![
                TextSpan::styled(
                    format!("{} {} ", severity_glyph(f.severity), f.kind.as_str()),
                    theme.severity(f.severity),
                ),
                TextSpan::raw(for_screen(&f.message).into_owned()),
            ]));
        }
    } else {
        let first = here[0];
        let pos = chain
            .findings
            .iter()
            .position(|f| std::ptr::eq(f, first))
            .unwrap_or(0)
            + 1;
        let title = format!(
            " finding {pos}/{total}: {} {} ({}) at {} ",
            severity_glyph(first.severity),
            first.kind.as_str(),
            first.severity,
            for_screen(&first.service)
        );
        put(
            buf,
            area.x + 1,
            area.y,
            &title,
            area.width,
            theme.severity(first.severity),
        );
        // The finding, what it means, then the others on this row: on a short panel the
        // explanation is never pushed out by a second message.
        for (i, f) in here.iter().enumerate() {
            let mut parts = vec![TextSpan::styled(
                for_screen(&f.message).into_owned(),
                theme.title(),
            )];
            if let Some(w) = f.wasted_ms.filter(|w| *w > 0) {
                parts.push(TextSpan::styled(
                    format!("  ({} wasted)", ms(w)),
                    theme.late(),
                ));
            }
            lines.push(Line::from(parts));
            if i == 0 {
                lines.push(Line::styled(meaning(first.kind).to_string(), theme.text()));
            }
        }
        if total > here.len() {
            lines.push(Line::styled(
                format!("The whole chain: {}", story(chain)),
                theme.dim(),
            ));
        }
    }
    Paragraph::new(lines)
        .wrap(Wrap { trim: true })
        .render(inner, buf);
}

/// The chain's findings as one sentence: "orders: forwarded 3000 ms with only 700 ms left;
/// inventory worked 280 ms after orders stopped waiting".
fn story(chain: &ChainAnalysis) -> String {
    let parts: Vec<String> = chain
        .findings
        .iter()
        .map(|f| {
            let message = for_screen(&f.message);
            if message.starts_with(&*f.service) {
                message.into_owned()
            } else {
                format!("{}: {message}", for_screen(&f.service))
            }
        })
        .collect();
    parts.join("; ")
}

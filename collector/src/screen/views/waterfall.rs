//! The waterfall of one chain: one row per hop and call, indented by depth, on a time axis.
//!
//! A hop's row shows the budget it received as a dashed bar up to its deadline (`┃`), the queue
//! wait (`░`) and the work (`█`); work done after everyone above had stopped waiting (the
//! analysis's dead work) is `▓` and red, and its waiting on its calls then `▒` (what it
//! waited for is counted in the callee's row). A call's row shows the call (`━`) and the budget it
//! forwarded (`┄`); a `budget_reset` is red past what remained (`│`) up to what it forwarded, a
//! `budget_dropped` is `✕` at the call, a shed `⊘` where it was shed. The original caller's
//! deadline is the dotted column `┊`. Below, the selected row's finding is explained in words.
//!
//! Every mark comes from the analysis through [`RowMarks`] (the same marks the HTML page draws):
//! the screen judges nothing itself, so a mark never disagrees with a finding.

use crossterm::event::KeyCode;
use deadline_budget::analysis::{ChainAnalysis, ChainOutcome, Finding, FindingKind, Row, Span};
use ratatui::buffer::Buffer;
use ratatui::layout::{Position, Rect};
use ratatui::text::{Line, Span as TextSpan};
use ratatui::widgets::{Paragraph, Widget, Wrap};

use super::keys::{self, Key};
use super::theme::Theme;
use super::{Needs, Pane, ScreenLayout, hyperlink, put, put_right, scroll_offset, step};
use crate::screen::{ChainView, Overlay, State};
use crate::span_text::for_screen;
use crate::view_model::format::{
    axis_step, counted, fit, ms, ms_grouped, severity_glyph, unicode_width,
};
use crate::view_model::row_marks::{ChainScale, RowKind, RowMarks, Tone};

struct Geometry {
    label_w: u16,
    nums_w: u16,
    tl_x: u16,
    tl_w: u16,
    horizon_ms: i64,
    /// The original caller's deadline, ms from the chain's start.
    edge_deadline: Option<i64>,
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

fn geometry(scale: &ChainScale, area: Rect) -> Geometry {
    let label_w = (area.width * 30 / 100).clamp(20, 48);
    let nums_w = if area.width >= 120 { 18 } else { 12 };
    let tl_x = area.x + label_w + nums_w + 1;
    let tl_w = area.width.saturating_sub(label_w + nums_w + 2).max(1);
    Geometry {
        label_w,
        nums_w,
        tl_x,
        tl_w,
        horizon_ms: scale.horizon_ms,
        edge_deadline: scale.edge_deadline,
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
const FIGURE_KEYS: [&str; 4] = [
    "rcv: budget received (grpc, abs… its carrier) · own: the edge's own · fwd: forwarded (fwd 3000>937: 3000 with 937 left) · q: time queued · ─: the hop's own work · ? legend",
    "rcv: received · own: edge's own · fwd: forwarded (3000>937: 3000 with 937 left) · q: queued · ─: own work · ? legend",
    "rcv got · fwd sent (3000>937: 937 left) · q queued · ─ own work · ? legend",
    "rcv got · fwd sent · q queued · ? legend",
];

/// The Waterfall tab: the selected chain, one row per span. Its selection is `ui.span_row`.
#[derive(Debug)]
pub(crate) struct Waterfall;

/// `n`/`N`: the next or previous finding of the selected chain (the chain list answers it too).
pub(super) const NEXT_FINDING: Key = Key {
    codes: &[KeyCode::Char('n'), KeyCode::Char('N')],
    long: "n/N",
    short: "n/N",
    does: "finding",
    shown: 3,
    answer: next_finding,
};

/// `e`: append the selected chain to the export file (the chain list answers it too).
pub(super) const EXPORT: Key = Key {
    codes: &[KeyCode::Char('e')],
    long: "e",
    short: "e",
    does: "export",
    shown: 1,
    answer: export,
};

const KEYS: [Key; 9] = [
    keys::MOVE.doing("row").shown_in(3),
    NEXT_FINDING,
    Key {
        codes: &[KeyCode::Enter],
        long: "Enter",
        short: "⏎",
        does: "detail",
        shown: 3,
        answer: open_detail,
    },
    keys::BACK.shown_in(3),
    keys::TAB.shown_in(3),
    EXPORT,
    keys::PAUSE.shown_in(2),
    keys::LEGEND.shown_in(3),
    keys::QUIT.shown_in(3),
];

fn next_finding(state: &mut State, key: KeyCode) -> bool {
    state.next_finding(key == KeyCode::Char('n'));
    true
}

fn export(state: &mut State, _key: KeyCode) -> bool {
    state.export_selected_here();
    true
}

/// Enter: the selected row's detail.
fn open_detail(state: &mut State, _key: KeyCode) -> bool {
    if state.selected_span().is_none() {
        return false;
    }
    state.ui.overlay = Overlay::Detail;
    state.ui.popup_scroll = 0;
    true
}

impl Pane for Waterfall {
    fn title(&self) -> &'static str {
        "Waterfall"
    }

    fn keys(&self) -> &'static [Key] {
        &KEYS
    }

    fn needs(&self) -> Needs {
        Needs {
            chosen_chain: true,
            ..Needs::default()
        }
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
    let scale = ChainScale::of(&chain, chain.rows().map(|(_, span)| span));
    let g = geometry(&scale, area);
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
        counted(s.hops as u64, "hop"),
        counted(chain.findings.len() as u64, "finding"),
    );
    // The link to the trace (--trace-url) when it fits, else the trace id (to copy it into a
    // trace search), each only whole; a hyperlink where the terminal takes one.
    let link = state.links.as_ref().map(|l| l.link(chain.trace_id));
    let head = unicode_width(&title);
    let tail = [link.clone(), Some(format!("trace {}", chain.trace_id))]
        .into_iter()
        .flatten()
        .find(|text| head + unicode_width(text) + 2 < area.width as usize);
    if let Some(tail) = &tail {
        title.push(' ');
        title.push_str(tail);
        title.push(' ');
    }
    for x in area.x..area.x + area.width {
        put(buf, x, y, "─", 1, theme.dim());
    }
    put(buf, area.x, y, &title, area.width, theme.title());
    if let (Some(link), Some(tail), true) = (&link, &tail, state.hyperlinks) {
        let x = area.x + head as u16 + 1;
        let id = chain.trace_id.to_string();
        hyperlink(buf, (x, y), unicode_width(tail) as u16, link, &id);
    }

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
    for i in offset..rows.len().min(offset + body) {
        let Some((row, span)) = chain.row(i) else {
            continue;
        };
        let y = area.y + 2 + (i - offset) as u16;
        let selected = i == state.ui.span_row;
        let marks = RowMarks::of(&chain, row, &span);
        let label = label_of(&chain, row, &span, &marks);
        draw_row(&marks, &label, &g, buf, (area, y), selected, theme);
    }

    if key_h > 0 {
        let y = area.y + area.height - panel_h - key_h;
        let room = area.width.saturating_sub(2) as usize;
        let key = FIGURE_KEYS
            .iter()
            .find(|k| unicode_width(k) <= room)
            .unwrap_or(&FIGURE_KEYS[FIGURE_KEYS.len() - 1]);
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
fn label_of(chain: &ChainView<'_>, row: &Row, span: &Span, marks: &RowMarks) -> String {
    let indent = " ".repeat(row.depth.min(12) as usize);
    if span.kind.is_call() {
        // The attempt first: a long name is cut at its end, the attempt must show.
        let attempt = marks.attempt.map(|a| format!("#{a} ")).unwrap_or_default();
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
    // A label every 10 or so cells.
    let step = axis_step(g.horizon_ms, (i64::from(g.tl_w) / 10).max(1));
    let mut t = 0;
    let mut next_free = g.tl_x;
    while t <= g.horizon_ms {
        let x = g.tl_x + g.col(t) as u16;
        if x >= g.tl_x + g.tl_w {
            break;
        }
        let label = format!("┆{}", ms(t));
        let room = g.tl_x + g.tl_w - x;
        // A label only whole: `┆3000ms` cut to `┆30` would read as 30.
        if x >= next_free && unicode_width(&label) <= room as usize {
            let end = put(buf, x, y, &label, room, theme.dim());
            next_free = end + 1;
        }
        t += step;
    }
}

fn draw_row(
    marks: &RowMarks,
    label: &str,
    g: &Geometry,
    buf: &mut Buffer,
    (area, y): (Rect, u16),
    selected: bool,
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
    if let Some(sev) = marks.worst {
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
    let label_style = if marks.kind == RowKind::Call {
        theme.call()
    } else {
        theme.title()
    };
    let label_w = g.label_w.saturating_sub(3);
    put(
        buf,
        area.x + 2,
        y,
        &fit(label, label_w as usize),
        label_w,
        label_style.patch(bg(row_style)),
    );

    // Numbers: the carrier and the queue wait on wide screens only.
    let late = theme.late().patch(bg(row_style));
    let (text, tone) = marks.numbers(g.nums_w >= 18);
    let style = match tone {
        Tone::Plain => theme.text(),
        Tone::Dim => theme.dim(),
        Tone::Late => late,
    };
    put_right(
        buf,
        area.x + g.label_w,
        y,
        &text,
        g.nums_w,
        style.patch(bg(row_style)),
    );

    // Timeline.
    let (s, e) = (marks.start, marks.end);
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
    let glyph_at = |buf: &mut Buffer, at: i64, glyph: &str, style: ratatui::style::Style| {
        put(
            buf,
            g.tl_x + g.col(at).clamp(0, cells - 1) as u16,
            y,
            glyph,
            1,
            style,
        );
    };
    if let Some(x) = g.edge_deadline.and_then(|d| g.mark_col(d)) {
        put(buf, g.tl_x + x, y, "┊", 1, theme.dim().patch(bg(row_style)));
    }
    let cell_ms = |c: i64| (c as i128 * g.horizon_ms as i128 / (g.tl_w.max(1)) as i128) as i64;
    match marks.kind {
        RowKind::Hop => {
            if let Some(d) = marks.deadline {
                fill(buf, s, d, "╌", theme.budget());
            }
            let q = marks.queue_ms;
            if q > 0 {
                fill(buf, s, s + q, "░", theme.queue());
            }
            let a = g.col(s + q).clamp(0, cells);
            let z = g.col(e).clamp(0, cells).max(a + 1).min(cells);
            let mut work_end = a;
            if marks.shed.is_none() {
                // Work, cell by cell so the part done for nobody turns red.
                for c in a..z {
                    let past = |from: Option<i64>| from.is_some_and(|l| cell_ms(c + 1) > l);
                    let (glyph, style) = if past(marks.late_from) {
                        ("▓", theme.late())
                    } else if past(marks.waiting_from) {
                        ("▒", theme.waiting())
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
            if let Some(x) = marks.deadline.and_then(|d| g.mark_col(d))
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
            if let Some(shed) = marks.shed {
                glyph_at(buf, shed.at, "⊘", theme.queue().patch(bg(row_style)));
            }
        }
        RowKind::Call => {
            if let Some(f) = marks.forwarded {
                match f.remaining_until {
                    Some(r) => {
                        fill(buf, e, r, "┄", theme.budget());
                        fill(buf, r.max(e), f.until, "┄", theme.late());
                        if g.col(r) < cells {
                            put(
                                buf,
                                g.tl_x + g.col(r) as u16,
                                y,
                                "│",
                                1,
                                theme.queue().patch(bg(row_style)),
                            );
                        }
                    }
                    None if f.until > e => fill(buf, e, f.until, "┄", theme.budget()),
                    None => {}
                }
            }
            fill(buf, s, e, "━", theme.call());
            if let Some(l) = marks.late_from {
                fill(buf, l, e, "━", theme.late());
            }
            if marks.dropped {
                glyph_at(buf, s, "✕", late);
            }
            if marks.refused {
                glyph_at(buf, s, "⊘", theme.dim().patch(bg(row_style)));
            }
        }
        RowKind::Internal => {
            fill(buf, s, e, "─", theme.dim());
            if let Some(l) = marks.late_from {
                fill(buf, l, e, "─", theme.late());
            }
        }
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
        .map(|s| chain.findings_on(s.span_id).collect())
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
            &format!(" {} in this chain ", counted(total as u64, "finding")),
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
                    format!("  ({} wasted)", ms_grouped(w)),
                    theme.late(),
                ));
            }
            lines.push(Line::from(parts));
            if i == 0 {
                lines.push(Line::styled(first.kind.meaning().to_string(), theme.text()));
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

//! The chain list: one row per request chain, newest first (or by the chosen order), with the
//! edge budget, the time used, the hops and the worst finding coloured by severity.
//!
//! Only the rows on screen are touched, so the cost of a frame does not grow with the number
//! of chains held.

use crossterm::event::KeyCode;
use deadline_budget::analysis::{ChainOutcome, Severity};
use ratatui::buffer::Buffer;
use ratatui::layout::{Position, Rect};

use super::keys::{self, Key};
use super::theme::Theme;
use super::{Needs, Pane, ScreenLayout, put, put_right, scroll_offset, step, waterfall};
use crate::present::format::{clock, fit, ms, severity_glyph, unicode_width};
use crate::screen::{State, View};
use crate::span_text::for_screen;

/// The Chains tab: the chain list, with the selected chain's waterfall below it when there is
/// room (else its finding in words). Its selection is `ui.selected` (and the preview's row,
/// `ui.span_row`).
#[derive(Debug)]
pub(crate) struct Chains;

const KEYS: [Key; 12] = [
    keys::MOVE.shown_in(4),
    Key {
        codes: &[KeyCode::Enter],
        long: "Enter",
        short: "⏎",
        does: "open",
        shown: 4,
        answer: open,
    },
    waterfall::NEXT_FINDING.shown_in(4),
    keys::TAB.shown_in(4),
    keys::SEARCH.shown_in(3),
    keys::FILTER.shown_in(4),
    keys::SORT.shown_in(4),
    waterfall::EXPORT,
    keys::PAUSE.shown_in(2),
    keys::LEGEND.shown_in(4),
    keys::QUIT.shown_in(4),
    // Not in the hints: the search line says "Esc clears" while typing.
    Key {
        codes: &[KeyCode::Esc],
        long: "Esc",
        short: "Esc",
        does: "clear search",
        shown: 0,
        answer: clear_search,
    },
];

/// Enter: the selected chain's waterfall, on the row its preview showed.
fn open(state: &mut State, _key: KeyCode) -> bool {
    if state.selected_chain().is_none() {
        return false;
    }
    state.ui.view = View::Waterfall;
    state.ui.span_row = state.preview_row();
    true
}

/// Esc: clear the search, when there is one.
fn clear_search(state: &mut State, _key: KeyCode) -> bool {
    if state.ui.query.search.is_empty() {
        return false;
    }
    state.ui.query.search.clear();
    true
}

impl Pane for Chains {
    fn title(&self) -> &'static str {
        "Chains"
    }

    fn keys(&self) -> &'static [Key] {
        &KEYS
    }

    fn needs(&self) -> Needs {
        Needs {
            chain_preview: true,
            ..Needs::default()
        }
    }

    fn arrange(&self, body: Rect, layout: &mut ScreenLayout) {
        if body.height >= 30 {
            let list_h = (body.height * 2 / 5).max(8);
            layout.list = Some(Rect::new(body.x, body.y, body.width, list_h));
            layout.waterfall = Some(Rect::new(
                body.x,
                body.y + list_h,
                body.width,
                body.height - list_h,
            ));
        } else if body.height >= 10 {
            // No room for the waterfall: the selected chain's finding, in words, under the list.
            let strip_h = if body.height >= 15 { 5 } else { 4 };
            let list_h = body.height - strip_h;
            layout.list = Some(Rect::new(body.x, body.y, body.width, list_h));
            layout.finding = Some(Rect::new(body.x, body.y + list_h, body.width, strip_h));
        } else {
            layout.list = Some(body);
        }
    }

    fn render(&self, state: &State, theme: Theme, layout: &ScreenLayout, buf: &mut Buffer) {
        if let Some(r) = layout.list {
            render(state, theme, r, buf);
        }
        if let Some(r) = layout.waterfall {
            waterfall::render(state, theme, r, buf);
        }
        if let Some(r) = layout.finding {
            waterfall::render_finding(state, theme, r, buf);
        }
    }

    fn move_by(&self, state: &mut State, delta: isize) {
        state.select(step(state.ui.selected, state.data.visible.len(), delta));
    }

    fn click(&self, state: &mut State, layout: &ScreenLayout, pos: Position) -> bool {
        if let Some(r) = layout.list
            && r.contains(pos)
        {
            let Some(i) = row_at(state, r, pos.y) else {
                return false;
            };
            // A click on the selected chain opens it.
            if state.ui.selected == i {
                state.ui.view = View::Waterfall;
                state.ui.span_row = state.preview_row();
            }
            state.select(i);
            return true;
        }
        waterfall::click(state, layout, pos)
    }
}

struct Columns {
    start: u16,
    root: u16,
    budget: u16,
    used: u16,
    hops: u16,
    wasted: u16,
    outcome: u16,
    worst: u16,
    trace: u16,
}

/// The OUTCOME column's word for how the request ended for its user.
pub fn outcome_label(outcome: ChainOutcome) -> &'static str {
    match outcome {
        ChainOutcome::InFlight => "in flight",
        ChainOutcome::Ok => "ok",
        ChainOutcome::Late => "late",
        ChainOutcome::DeadlineExceeded => "504",
        ChainOutcome::Shed => "shed",
        ChainOutcome::Cancelled => "cancelled",
        ChainOutcome::Error => "error",
    }
}

/// The style of an outcome: failures stand out, in flight is quiet.
pub fn outcome_style(outcome: ChainOutcome, theme: Theme) -> ratatui::style::Style {
    match outcome {
        ChainOutcome::InFlight | ChainOutcome::Ok => theme.dim(),
        ChainOutcome::Shed | ChainOutcome::Late => theme.severity(Severity::Warning),
        ChainOutcome::DeadlineExceeded | ChainOutcome::Cancelled | ChainOutcome::Error => {
            theme.severity(Severity::Error)
        }
    }
}

fn columns(width: u16) -> Columns {
    let wide = width >= 120;
    let wider = width >= 160;
    let wasted = if wide { 9 } else { 0 };
    let trace = if width >= 190 {
        33
    } else if wider {
        17
    } else {
        0
    };
    // Narrow screens: the time to the second and tighter figures, so the name keeps room.
    let (start, figure) = if width >= 100 { (13, 8) } else { (9, 7) };
    let hops = 5;
    // Room for the longest kind's name whole ("▲ timeout_inverted").
    let worst = if wide { 24 } else { 20 };
    let outcome = 10;
    let fixed = 2 + start + 2 * figure + hops + outcome + worst + wasted + trace;
    Columns {
        start,
        // Wider than this, the figures drift far from the name they belong to.
        root: width.saturating_sub(fixed).clamp(8, 60),
        budget: figure,
        used: figure,
        hops,
        wasted,
        outcome,
        worst,
        trace,
    }
}

/// The list row at screen row `y`, if a chain is drawn there.
pub fn row_at(state: &State, area: Rect, y: u16) -> Option<usize> {
    let rows = area.height.saturating_sub(1) as usize;
    if y <= area.y {
        return None;
    }
    let offset = scroll_offset(state.ui.selected, state.data.visible.len(), rows);
    let i = offset + (y - area.y - 1) as usize;
    (i < state.data.visible.len()).then_some(i)
}

/// Draw the list into `area` (first row: column heads).
pub fn render(state: &State, theme: Theme, area: Rect, buf: &mut Buffer) {
    if area.height == 0 || area.width < 20 {
        return;
    }
    let c = columns(area.width);
    let head = theme.title();
    let mut x = area.x + 2;
    let y = area.y;
    // A head too long for its column ends with `…` rather than a word cut short.
    let mut col = |buf: &mut Buffer, s: &str, w: u16, right: bool| {
        let room = w.saturating_sub(1);
        let s = fit(s, room as usize);
        if right {
            put_right(buf, x, y, &s, room, head);
        } else {
            put(buf, x, y, &s, room, head);
        }
        x += w;
    };
    col(buf, "START", c.start, false);
    // At 80 columns the root column has 19 cells: the head drops ROOT, whose rows say it.
    let root_head = ["ROOT SERVICE / OPERATION", "SERVICE / OPERATION"]
        .into_iter()
        .find(|h| unicode_width(h) < c.root as usize)
        .unwrap_or("SERVICE / OPERATION");
    col(buf, root_head, c.root, false);
    col(buf, "BUDGET", c.budget, true);
    col(buf, "USED", c.used, true);
    col(buf, "HOPS", c.hops, true);
    if c.wasted > 0 {
        col(buf, "WASTED", c.wasted, true);
    }
    col(buf, " OUTCOME", c.outcome, false);
    // In the demo the column names what the scenario teaches when a chain shows it.
    let focus = state.focus_kinds();
    let head = if focus.is_empty() {
        " WORST FINDING"
    } else {
        " FINDING"
    };
    col(buf, head, c.worst, false);
    if c.trace > 0 {
        col(buf, "TRACE", c.trace, false);
    }

    let rows = area.height.saturating_sub(1) as usize;
    let visible = &state.data.visible;
    if visible.is_empty() {
        let why = if state.ui.query.filter.label().is_some() || !state.ui.query.search.is_empty() {
            "no chain matches the filter (f toggles it, Esc clears the search)"
        } else {
            "no chains"
        };
        put(
            buf,
            area.x + 2,
            area.y + 1,
            why,
            area.width.saturating_sub(2),
            theme.dim(),
        );
        return;
    }
    let offset = scroll_offset(state.ui.selected, visible.len(), rows);
    for (i, id) in visible.iter().enumerate().skip(offset).take(rows) {
        let Some(chain) = state.data.store.latest_analysis(*id) else {
            continue;
        };
        let s = &chain.summary;
        let y = area.y + 1 + (i - offset) as u16;
        let selected = i == state.ui.selected;
        let row_style = if selected {
            theme.selected()
        } else {
            theme.text()
        };
        buf.set_style(Rect::new(area.x, y, area.width, 1), row_style);
        let worst = chain
            .findings
            .iter()
            .map(|f| f.kind)
            .max_by(|a, b| a.severity().cmp(&b.severity()).then(b.cmp(a)));
        let lesson = focus
            .iter()
            .find(|k| chain.findings.iter().any(|f| f.kind == **k))
            .copied();
        let worst = lesson.or(worst);
        let mut x = area.x;
        let marker = if selected { "▶" } else { " " };
        put(buf, x, y, marker, 1, row_style);
        x += 2;
        let mut start = clock(s.start_unix_nano);
        if c.start < 13 {
            start.truncate(8);
        }
        put(buf, x, y, &start, c.start, theme.dim().patch(row_style));
        x += c.start;
        let root = format!(
            "{} {}",
            for_screen(&s.root_service),
            for_screen(&s.root_name)
        );
        let root_w = c.root.saturating_sub(1);
        put(buf, x, y, &fit(&root, root_w as usize), root_w, row_style);
        x += c.root;
        let budget = s.edge_budget_ms.map(ms).unwrap_or_else(|| "none".into());
        put_right(buf, x, y, &budget, c.budget - 1, row_style);
        x += c.budget;
        let over = s.edge_budget_ms.is_some_and(|b| s.duration_ms > b);
        let used_style = if over {
            theme.late().patch(bg_of(row_style))
        } else {
            row_style
        };
        put_right(buf, x, y, &ms(s.duration_ms), c.used - 1, used_style);
        x += c.used;
        put_right(buf, x, y, &s.hops.to_string(), c.hops - 1, row_style);
        x += c.hops;
        if c.wasted > 0 {
            let text = if s.wasted_ms > 0 {
                ms(s.wasted_ms)
            } else {
                String::new()
            };
            put_right(
                buf,
                x,
                y,
                &text,
                c.wasted - 1,
                theme.late().patch(bg_of(row_style)),
            );
            x += c.wasted;
        }
        put(
            buf,
            x,
            y,
            &format!(" {}", outcome_label(s.outcome)),
            c.outcome,
            outcome_style(s.outcome, theme).patch(bg_of(row_style)),
        );
        x += c.outcome;
        match worst {
            Some(kind) => {
                let sev = kind.severity();
                let more = chain.findings.len().saturating_sub(1);
                let name = format!(" {} {}", severity_glyph(sev), kind.as_str());
                // The name stays whole; the count of the other findings only when it fits.
                let label = match format!("{name} +{more}") {
                    full if more > 0 && unicode_width(&full) <= c.worst as usize => full,
                    _ => name,
                };
                put(
                    buf,
                    x,
                    y,
                    &label,
                    c.worst,
                    theme.severity(sev).patch(bg_of(row_style)),
                );
            }
            // A chain whose root has not arrived (the list holds such chains back for a few
            // seconds): say why it is in flight.
            None if s.orphans > 0 => {
                put(
                    buf,
                    x,
                    y,
                    " … root missing",
                    c.worst,
                    theme.dim().patch(bg_of(row_style)),
                );
            }
            None => {}
        }
        x += c.worst;
        if c.trace > 0 {
            let t = id.to_string();
            put(
                buf,
                x,
                y,
                &t[..16.min(t.len())],
                c.trace,
                theme.dim().patch(bg_of(row_style)),
            );
        }
    }
}

/// Only the background and modifiers of the selection, so a coloured cell keeps its colour.
fn bg_of(style: ratatui::style::Style) -> ratatui::style::Style {
    ratatui::style::Style { fg: None, ..style }
}

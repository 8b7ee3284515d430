//! The edges view (caller → callee: which link breaks propagation) and the services view (per
//! service over the last 10 s: λ, W, L = λW by Little's law and the queue wait; and the share of
//! work done for callers who had given up).

use std::sync::Arc;

use crossterm::event::KeyCode;
use deadline_budget::analysis::Severity;
use ratatui::buffer::Buffer;
use ratatui::layout::{Position, Rect};

use super::text::{count, ms, opt_ms, rate};
use super::theme::Theme;
use super::{Pane, ScreenLayout, put, put_right, scroll_offset, step};
use crate::screen::data::ServiceStats;
use crate::screen::{State, View};
use crate::span_text::for_screen;
use deadline_budget::analysis::{EdgeAggregate, FindingKind};

/// The Edges tab: caller → callee links, worst first.
#[derive(Debug)]
pub(crate) struct Edges;

/// The Services tab: per-service Little's law and dead work.
#[derive(Debug)]
pub(crate) struct Services;

const HINTS: [&str; 2] = [
    "↑↓/jk move  Enter its chains  Tab view  Esc back  space pause  ? legend  q quit",
    "↑↓ move  ⏎ its chains  Tab view  Esc back  ? legend  q quit",
];

impl Pane for Edges {
    fn title(&self) -> &'static str {
        "Edges"
    }

    fn hints(&self) -> &'static [&'static str] {
        &HINTS
    }

    fn render(&self, state: &State, theme: Theme, layout: &ScreenLayout, buf: &mut Buffer) {
        render_edges(state, theme, layout.body, buf);
    }

    fn move_by(&self, state: &mut State, delta: isize) {
        state.ui.table_row = step(state.ui.table_row, state.data.store.edges().len(), delta);
    }

    fn on_key(&self, state: &mut State, key: KeyCode) -> Option<bool> {
        let callee = edge_rows(state)
            .get(state.ui.table_row)
            .map(|e| e.callee.to_string());
        table_key(state, key, callee)
    }

    fn click(&self, state: &mut State, layout: &ScreenLayout, pos: Position) -> bool {
        click(state, layout, pos)
    }
}

impl Pane for Services {
    fn title(&self) -> &'static str {
        "Services"
    }

    fn hints(&self) -> &'static [&'static str] {
        &HINTS
    }

    fn render(&self, state: &State, theme: Theme, layout: &ScreenLayout, buf: &mut Buffer) {
        render_services(state, theme, layout.body, buf);
    }

    fn move_by(&self, state: &mut State, delta: isize) {
        state.ui.table_row = step(state.ui.table_row, state.data.services.len(), delta);
    }

    fn on_key(&self, state: &mut State, key: KeyCode) -> Option<bool> {
        let service = service_rows(state)
            .get(state.ui.table_row)
            .map(|(n, _)| n.to_string());
        table_key(state, key, service)
    }

    fn click(&self, state: &mut State, layout: &ScreenLayout, pos: Position) -> bool {
        click(state, layout, pos)
    }
}

/// The tables' keys: Enter goes to the chains through the selected row's service (`service`),
/// Esc back to the chains.
fn table_key(state: &mut State, key: KeyCode, service: Option<String>) -> Option<bool> {
    match key {
        KeyCode::Enter => {
            let Some(name) = service else {
                return Some(false);
            };
            state.ui.query.search = name.chars().filter(|c| !c.is_control()).take(64).collect();
            state.ui.view = View::Chains;
            state.ui.selected = 0;
            state.ui.selected_id = None;
        }
        KeyCode::Esc => state.ui.view = View::Chains,
        _ => return None,
    }
    Some(true)
}

/// A click on a table row selects it.
fn click(state: &mut State, layout: &ScreenLayout, pos: Position) -> bool {
    if !layout.body.contains(pos) {
        return false;
    }
    match row_at(state, layout.body, pos.y) {
        Some(i) => {
            state.ui.table_row = i;
            true
        }
        None => false,
    }
}

/// An edge's findings of one severity (the analysis's severities: nothing is judged here).
fn of_severity(e: &EdgeAggregate, severity: Severity) -> u64 {
    e.findings
        .iter()
        .filter(|(k, _)| k.severity() == severity)
        .map(|(_, n)| n)
        .sum()
}

/// The edges, worst first (most error findings, then most dead work, then most calls), names
/// breaking ties.
pub fn edge_rows(state: &State) -> Vec<&EdgeAggregate> {
    let mut rows = state.data.store.edges();
    rows.sort_by(|a, b| {
        of_severity(b, Severity::Error)
            .cmp(&of_severity(a, Severity::Error))
            .then(b.wasted_ms.cmp(&a.wasted_ms))
            .then(b.calls.cmp(&a.calls))
            .then((&a.caller, &a.callee).cmp(&(&b.caller, &b.callee)))
    });
    rows
}

/// The edge's timeout for its column: `2000ms`, `~2000ms` when inferred from calls that got
/// no answer, `·` when unknown; marked when `timeout_oversized` or `timeout_inverted` found it.
fn timeout_cell(e: &EdgeAggregate, theme: Theme) -> (String, ratatui::style::Style) {
    match e.timeout() {
        None => ("·".into(), theme.dim()),
        Some((t, inferred)) => {
            let text = format!("{}{}", if inferred { "~" } else { "" }, ms(t));
            let style = if e.findings.get(FindingKind::TimeoutInverted) > 0 {
                theme.severity(Severity::Warning)
            } else if e.oversized().is_some() {
                theme.severity(Severity::Info)
            } else {
                theme.text()
            };
            (text, style)
        }
    }
}

/// The services, as the last settle ordered them (most dead work first).
pub fn service_rows(state: &State) -> &[(Arc<str>, ServiceStats)] {
    &state.data.services
}

fn table_len(state: &State) -> usize {
    match state.ui.view {
        View::Edges => state.data.store.edges().len(),
        _ => state.data.services.len(),
    }
}

/// The table row at screen row `y`.
pub fn row_at(state: &State, area: Rect, y: u16) -> Option<usize> {
    let rows = area.height.saturating_sub(3) as usize;
    if y < area.y + 1 {
        return None;
    }
    let offset = scroll_offset(state.ui.table_row, table_len(state), rows);
    let i = offset + (y - area.y - 1) as usize;
    (i < table_len(state) && ((y - area.y - 1) as usize) < rows).then_some(i)
}

struct Table<'a> {
    heads: &'a [(&'a str, u16)],
    first_w: u16,
}

impl Table<'_> {
    /// The body rows that fit under the heading, scrolled so that `selected` shows: each row's
    /// index and screen line, with its style; the selected row is highlighted and marked `▶`.
    fn body(
        &self,
        buf: &mut Buffer,
        area: Rect,
        selected: usize,
        len: usize,
        theme: Theme,
    ) -> Vec<(usize, u16, ratatui::style::Style)> {
        let body = area.height.saturating_sub(3) as usize;
        let offset = scroll_offset(selected, len, body);
        (offset..len.min(offset + body))
            .map(|i| {
                let y = area.y + 1 + (i - offset) as u16;
                let row_style = if i == selected {
                    theme.selected()
                } else {
                    theme.text()
                };
                buf.set_style(Rect::new(area.x, y, area.width, 1), row_style);
                if i == selected {
                    put(buf, area.x, y, "▶", 1, row_style);
                }
                (i, y, row_style)
            })
            .collect()
    }

    fn head(&self, buf: &mut Buffer, area: Rect, first: &str, theme: Theme) {
        put(buf, area.x + 2, area.y, first, self.first_w, theme.title());
        let mut x = area.x + 2 + self.first_w;
        for (h, w) in self.heads {
            put_right(buf, x, area.y, h, w - 1, theme.title());
            x += w;
        }
    }
    fn cells(
        &self,
        buf: &mut Buffer,
        area: Rect,
        y: u16,
        first: &str,
        cells: &[(String, ratatui::style::Style)],
        row_style: ratatui::style::Style,
    ) {
        put(
            buf,
            area.x + 2,
            y,
            first,
            self.first_w.saturating_sub(1),
            row_style,
        );
        let mut x = area.x + 2 + self.first_w;
        for ((_, w), (text, style)) in self.heads.iter().zip(cells) {
            put_right(
                buf,
                x,
                y,
                text,
                w - 1,
                style.patch(ratatui::style::Style {
                    fg: None,
                    ..row_style
                }),
            );
            x += w;
        }
    }
}

fn first_width(area: Rect, heads: &[(&str, u16)]) -> u16 {
    let rest: u16 = heads.iter().map(|(_, w)| *w).sum();
    // Wider than this, the figures drift far from the name they belong to.
    area.width.saturating_sub(rest + 3).clamp(10, 48)
}

/// Draw the edges view.
pub fn render_edges(state: &State, theme: Theme, area: Rect, buf: &mut Buffer) {
    if area.height < 3 {
        return;
    }
    let wide = area.width >= 120;
    let heads: &[(&str, u16)] = if wide {
        &[
            ("CALLS", 8),
            ("RESETS", 8),
            ("DROPS", 7),
            ("LATE", 6),
            ("WARN", 6),
            ("LAT p50", 9),
            ("LAT p99", 9),
            ("TIMEOUT", 10),
            ("RCV p50", 9),
            ("WASTED", 9),
        ]
    } else {
        &[
            ("CALLS", 7),
            ("RESET", 6),
            ("DROP", 5),
            ("LATE", 5),
            ("p99", 7),
            ("TMO", 8),
            ("WASTE", 7),
        ]
    };
    let t = Table {
        heads,
        first_w: first_width(area, heads),
    };
    t.head(buf, area, "CALLER → CALLEE", theme);
    let rows = edge_rows(state);
    let err = theme.severity(Severity::Error);
    let flag = |n: u64, style| {
        (
            if n > 0 { count(n) } else { "·".into() },
            if n > 0 { style } else { theme.dim() },
        )
    };
    for (i, y, row_style) in t.body(buf, area, state.ui.table_row, rows.len(), theme) {
        let e = &rows[i];
        let name = format!("{} → {}", for_screen(&e.caller), for_screen(&e.callee));
        let n = |k| e.findings.get(k);
        let late = n(FindingKind::RanAfterExpiry) + n(FindingKind::OrphanedWork);
        let mut cells = vec![
            (count(e.calls), theme.text()),
            flag(n(FindingKind::BudgetReset), err),
            flag(n(FindingKind::BudgetDropped), err),
            flag(late, err),
        ];
        if wide {
            cells.push(flag(
                of_severity(e, Severity::Warning),
                theme.severity(Severity::Warning),
            ));
            cells.push((opt_ms(e.latency.p50()), theme.text()));
        }
        cells.push((opt_ms(e.latency.p99()), theme.text()));
        cells.push(timeout_cell(e, theme));
        if wide {
            cells.push((opt_ms(e.received.p50()), theme.text()));
        }
        cells.push((
            if e.wasted_ms > 0 {
                ms(e.wasted_ms)
            } else {
                "·".into()
            },
            if e.wasted_ms > 0 { err } else { theme.dim() },
        ));
        t.cells(buf, area, y, &name, &cells, row_style);
    }
    if rows.is_empty() {
        put(
            buf,
            area.x + 2,
            area.y + 1,
            "no calls seen yet",
            area.width,
            theme.dim(),
        );
    }
    let note = fitting_note(
        area.width,
        &[
            "RESETS forwarded more than remained · DROPS forwarded none · LATE work after the deadline or after the caller gave up · WARN warnings · LAT the call's duration · TIMEOUT ~ inferred · RCV budget received · WASTED dead work in the callee",
            "RESETS fwd > left · DROPS fwd none · LATE work for nobody · LAT call duration · TIMEOUT ~ inferred · WASTED dead work",
            "RESET fwd > left · DROP fwd none · LATE work for nobody · TMO timeout (~ inferred) · WASTE dead work",
            "RESET fwd>left · DROP none · LATE for nobody · TMO ~inferred",
        ],
    );
    put(
        buf,
        area.x + 1,
        area.y + area.height - 1,
        note,
        area.width.saturating_sub(1),
        theme.dim(),
    );
}

/// Draw the services view.
pub fn render_services(state: &State, theme: Theme, area: Rect, buf: &mut Buffer) {
    if area.height < 3 {
        return;
    }
    let wide = area.width >= 120;
    let heads: &[(&str, u16)] = if wide {
        &[
            ("λ /s", 9),
            ("W", 9),
            ("L = λW", 9),
            ("QUEUE p50", 11),
            ("QUEUE p99", 11),
            ("HOPS", 9),
            ("DEAD WORK", 11),
            ("", 22),
        ]
    } else {
        &[
            ("λ/s", 7),
            ("W", 8),
            ("L", 6),
            ("Q p50", 7),
            ("Q p99", 7),
            ("DEAD", 7),
        ]
    };
    let t = Table {
        heads,
        first_w: first_width(area, heads),
    };
    t.head(buf, area, "SERVICE", theme);
    let rows = service_rows(state);
    for (i, y, row_style) in t.body(buf, area, state.ui.table_row, rows.len(), theme) {
        let (name, s) = &rows[i];
        let (lambda, w, l) = s.littles_law();
        let dead = s.dead_share();
        let dead_style = if dead >= 0.25 {
            theme.severity(Severity::Error)
        } else if dead > 0.0 {
            theme.severity(Severity::Warning)
        } else {
            theme.dim()
        };
        let mut cells = vec![
            (rate(lambda), theme.text()),
            (format!("{}ms", w.round() as i64), theme.text()),
            (format!("{l:.1}"), theme.accent()),
            (opt_ms(s.queue_wait.p50()), theme.text()),
            (opt_ms(s.queue_wait.p99()), theme.text()),
        ];
        if wide {
            cells.push((count(s.hops), theme.text()));
        }
        cells.push((format!("{:.0}%", dead * 100.0), dead_style));
        if wide {
            let filled = (dead * 20.0).round() as usize;
            cells.push((
                format!("{}{}", "▓".repeat(filled), "░".repeat(20 - filled.min(20))),
                dead_style,
            ));
        }
        t.cells(buf, area, y, &for_screen(name), &cells, row_style);
    }
    let note = fitting_note(
        area.width,
        &[
            "last 10 s: λ arrivals/s · W mean time in the service, queue included (a shed request ~0 ms) · L = λ×W in flight (Little's law) · QUEUE wait of those that queued · DEAD WORK for nobody",
            "last 10 s: λ arrivals/s · W mean time inside, queue included (sheds ~0 ms) · L = λ×W (Little's law) · QUEUE wait of those queued · DEAD WORK for nobody",
            "L = λ×W (Little's law), last 10 s · DEAD = work for callers who gave up",
        ],
    );
    put(
        buf,
        area.x + 1,
        area.y + area.height - 1,
        note,
        area.width.saturating_sub(1),
        theme.dim(),
    );
}

/// The longest of `notes` (longest first) that fits a table's bottom line of `width`, else the
/// last one.
fn fitting_note(width: u16, notes: &[&'static str]) -> &'static str {
    let room = width.saturating_sub(1) as usize;
    notes
        .iter()
        .find(|n| super::unicode_width(n) <= room)
        .or(notes.last())
        .copied()
        .unwrap_or("")
}

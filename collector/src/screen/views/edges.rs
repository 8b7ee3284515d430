//! The edges view: caller → callee, which link breaks propagation, worst first.

use crossterm::event::KeyCode;
use deadline_budget::analysis::{EdgeAggregate, FindingKind, Severity};
use ratatui::buffer::Buffer;
use ratatui::layout::{Position, Rect};

use super::keys::Key;
use super::table::{self, Table, first_width, fitting_note};
use super::theme::Theme;
use super::{Needs, Pane, ScreenLayout, put, step};
use crate::screen::State;
use crate::span_text::for_screen;
use crate::view_model::edges::{TimeoutMark, late, of_severity, worst_first};
use crate::view_model::format::{count, ms, opt_ms};

/// The Edges tab: caller → callee links, worst first. Its selection is `ui.edge_row`.
#[derive(Debug)]
pub(crate) struct Edges;

const KEYS: [Key; 8] = table::keys(enter);

/// Enter: the chains through the selected edge's callee.
fn enter(state: &mut State, _key: KeyCode) -> bool {
    let callee = edge_rows(state)
        .get(state.ui.edge_row)
        .map(|e| e.callee.to_string());
    table::to_chains_of(state, callee)
}

impl Pane for Edges {
    fn title(&self) -> &'static str {
        "Edges"
    }

    fn keys(&self) -> &'static [Key] {
        &KEYS
    }

    fn needs(&self) -> Needs {
        Needs {
            table_figures: true,
            ..Needs::default()
        }
    }

    fn enter(&self, state: &mut State) {
        state.ui.edge_row = 0;
    }

    fn render(&self, state: &State, theme: Theme, layout: &ScreenLayout, buf: &mut Buffer) {
        render_edges(state, theme, layout.body, buf);
    }

    fn move_by(&self, state: &mut State, delta: isize) {
        let len = state.data.table_totals().edges.sorted().len();
        state.ui.edge_row = step(state.ui.edge_row, len, delta);
    }

    fn click(&self, state: &mut State, layout: &ScreenLayout, pos: Position) -> bool {
        let len = state.data.table_totals().edges.sorted().len();
        match table::clicked(layout, pos, state.ui.edge_row, len) {
            Some(i) => {
                state.ui.edge_row = i;
                true
            }
            None => false,
        }
    }
}

/// The edges of the totals shown (since start, or the last minute: `m`), worst first (most
/// error findings, then most dead work, then most calls), names breaking ties.
pub fn edge_rows(state: &State) -> Vec<&EdgeAggregate> {
    let mut rows = state.data.table_totals().edges.sorted();
    worst_first(&mut rows);
    rows
}

/// The edge's timeout for its column: `2000ms`, `~2000ms` when inferred from calls that got
/// no answer, `·` when unknown; marked when `timeout_oversized` or `timeout_inverted` found it.
fn timeout_cell(e: &EdgeAggregate, theme: Theme) -> (String, ratatui::style::Style) {
    match e.timeout() {
        None => ("·".into(), theme.dim()),
        Some((t, inferred)) => {
            let text = format!("{}{}", if inferred { "~" } else { "" }, ms(t));
            let style = match TimeoutMark::of(e) {
                Some(TimeoutMark::Inverted) => theme.severity(Severity::Warning),
                Some(TimeoutMark::Oversized) => theme.severity(Severity::Info),
                None => theme.text(),
            };
            (text, style)
        }
    }
}

/// The timeout the edge's advice suggests (`CONVENTIONS.md` section 4, "Advice"), `·` while it
/// has fewer than 100 answered calls (the sentence under the table says how many more).
fn advice_cell(e: &EdgeAggregate, theme: Theme) -> (String, ratatui::style::Style) {
    match e.advice().timeout_ms {
        Some(t) => (ms(t), theme.text()),
        None => ("·".into(), theme.dim()),
    }
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
            ("ADVICE", 9),
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
            ("ADV", 7),
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
    for (i, y, row_style) in t.body(buf, area, state.ui.edge_row, rows.len(), theme) {
        let e = &rows[i];
        let name = format!("{} → {}", for_screen(&e.caller), for_screen(&e.callee));
        let n = |k| e.findings.get(k);
        let mut cells = vec![
            (count(e.calls), theme.text()),
            flag(n(FindingKind::BudgetReset), err),
            flag(n(FindingKind::BudgetDropped), err),
            flag(late(e), err),
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
        cells.push(advice_cell(e, theme));
        t.cells(buf, area, y, &name, &cells, row_style);
    }
    if rows.is_empty() {
        put(
            buf,
            area.x + 2,
            area.y + 1,
            if state.data.last_minute {
                "no call judged in the last minute (m: since start)"
            } else {
                "no calls seen yet"
            },
            area.width,
            theme.dim(),
        );
    }
    if let Some(e) = rows.get(state.ui.edge_row) {
        put(
            buf,
            area.x + 1,
            area.y + area.height - 2,
            &for_screen(&e.advice().sentence),
            area.width.saturating_sub(1),
            theme.text(),
        );
    }
    let note = fitting_note(
        area.width,
        &[
            "RESETS forwarded more than remained · DROPS forwarded none · LATE work after the deadline or after the caller gave up · WARN warnings · LAT the call's duration · TIMEOUT ~ inferred · RCV budget received · WASTED dead work in the callee · ADVICE timeout at the p99.9",
            "RESETS fwd > left · DROPS fwd none · LATE work for nobody · LAT call duration · TIMEOUT ~ inferred · WASTED dead work · ADVICE timeout to set",
            "RESET fwd > left · DROP fwd none · LATE work for nobody · TMO timeout (~ inferred) · WASTE dead work · ADV advised",
            "RESET fwd>left · DROP none · LATE for nobody · TMO ~inferred · ADV to set",
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

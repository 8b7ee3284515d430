//! The services view: per service over every chain judged since start (or in the last minute:
//! `m`), λ, W and L = λW by Little's law, the queue wait, and the share of work done for
//! callers who had given up; read from the store's totals.

use std::sync::Arc;

use crossterm::event::KeyCode;
use deadline_budget::analysis::Severity;
use ratatui::buffer::Buffer;
use ratatui::layout::{Position, Rect};

use super::keys::Key;
use super::table::{self, Table, first_width, fitting_note};
use super::theme::Theme;
use super::{Needs, Pane, ScreenLayout, put, step};
use crate::screen::State;
use crate::service_figures::ServiceStats;
use crate::span_text::for_screen;
use crate::view_model::format::{count, opt_ms, rate};
use crate::view_model::map::NOBODY_SHARE;

/// The Services tab: per-service Little's law and dead work. Its selection is `ui.service_row`.
#[derive(Debug)]
pub(crate) struct Services;

const KEYS: [Key; 8] = table::keys(enter);

/// Enter: the chains through the selected service.
fn enter(state: &mut State, _key: KeyCode) -> bool {
    let service = service_rows(state)
        .get(state.ui.service_row)
        .map(|(n, _)| n.to_string());
    table::to_chains_of(state, service)
}

impl Pane for Services {
    fn title(&self) -> &'static str {
        "Services"
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
        state.ui.service_row = 0;
    }

    fn render(&self, state: &State, theme: Theme, layout: &ScreenLayout, buf: &mut Buffer) {
        render_services(state, theme, layout.body, buf);
    }

    fn move_by(&self, state: &mut State, delta: isize) {
        state.ui.service_row = step(state.ui.service_row, state.data.services.len(), delta);
    }

    fn click(&self, state: &mut State, layout: &ScreenLayout, pos: Position) -> bool {
        let len = state.data.services.len();
        match table::clicked(layout, pos, state.ui.service_row, len) {
            Some(i) => {
                state.ui.service_row = i;
                true
            }
            None => false,
        }
    }
}

/// The services, as the last settle ordered them (most dead work first).
pub fn service_rows(state: &State) -> &[(Arc<str>, ServiceStats)] {
    &state.data.services
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
    for (i, y, row_style) in t.body(buf, area, state.ui.service_row, rows.len(), theme) {
        let (name, s) = &rows[i];
        let (lambda, w, l) = s.littles_law();
        let dead = s.dead_share();
        let dead_style = if dead >= NOBODY_SHARE {
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
            (opt_ms(s.totals.queue_wait.p50()), theme.text()),
            (opt_ms(s.totals.queue_wait.p99()), theme.text()),
        ];
        if wide {
            cells.push((count(s.totals.hops), theme.text()));
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
    let notes: [&str; 3] = if state.data.last_minute {
        [
            "last minute (m: since start): λ arrivals/s · W mean time in the service, queue included (a shed request ~0 ms) · L = λ×W in flight (Little's law) · QUEUE wait of those that queued · DEAD WORK for nobody",
            "last minute (m: since start): λ arrivals/s · W mean time inside · L = λ×W (Little's law) · QUEUE wait of those queued · DEAD WORK for nobody",
            "last minute (m: since start) · L = λ×W (Little's law) · DEAD work for nobody",
        ]
    } else {
        [
            "since start (m: last minute): λ arrivals/s · W mean time in the service, queue included (a shed request ~0 ms) · L = λ×W in flight (Little's law) · QUEUE wait of those that queued · DEAD WORK for nobody",
            "since start (m: last minute): λ arrivals/s · W mean time inside · L = λ×W (Little's law) · QUEUE wait of those queued · DEAD WORK for nobody",
            "since start (m: last minute) · L = λ×W (Little's law) · DEAD work for nobody",
        ]
    };
    let note = fitting_note(area.width, &notes);
    put(
        buf,
        area.x + 1,
        area.y + area.height - 1,
        note,
        area.width.saturating_sub(1),
        theme.dim(),
    );
}

//! The chain list: one row per request chain, newest first (or by the chosen order), with the
//! edge budget, the time used, the hops and the worst finding coloured by severity. Its
//! columns are one table (`COLUMNS`: head, width, cell), drawn by one loop.
//!
//! Only the rows on screen are touched, so the cost of a frame does not grow with the number
//! of chains held.

use crossterm::event::KeyCode;
use deadline_budget::analysis::{ChainOutcome, FindingKind, Severity, TraceId};
use ratatui::buffer::Buffer;
use ratatui::layout::{Position, Rect};
use ratatui::style::Style;

use super::keys::{self, Key};
use super::theme::Theme;
use super::{Needs, Pane, ScreenLayout, put, put_right, scroll_offset, step, waterfall};
use crate::screen::{State, View};
use crate::span_text::for_screen;
use crate::store::LatestAnalysis;
use crate::view_model::format::{clock, fit, ms, severity_glyph, unicode_width};

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
pub fn outcome_style(outcome: ChainOutcome, theme: Theme) -> Style {
    match outcome {
        ChainOutcome::InFlight | ChainOutcome::Ok => theme.dim(),
        ChainOutcome::Shed | ChainOutcome::Late => theme.severity(Severity::Warning),
        ChainOutcome::DeadlineExceeded | ChainOutcome::Cancelled | ChainOutcome::Error => {
            theme.severity(Severity::Error)
        }
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

/// One column of the chain list: its head, its width, where its text stands, and its cell for
/// a chain. The list is drawn from `COLUMNS` alone (tokio-console's `TableList`).
struct Column {
    head: fn(&Heading) -> &'static str,
    width: Width,
    align: Align,
    /// The text and style of a row's cell, its text in at most the room given.
    cell: fn(&Row, u16) -> (String, Style),
}

/// What a head depends on: its room, and whether the demo names the lesson's findings.
struct Heading {
    room: u16,
    lesson: bool,
}

enum Width {
    /// The cells at a screen's width; 0 leaves the column out at that width.
    At(fn(u16) -> u16),
    /// What the other columns leave, within bounds.
    Rest { min: u16, max: u16 },
}

/// Where a column's text stands. Its room is its width less one cell, the gap.
enum Align {
    /// From the first cell; the gap after it.
    Left,
    /// Against the gap at the end: the figures.
    Right,
    /// The words after the figures: the gap first, then the text.
    Spaced,
}

/// One chain as its cells read it.
struct Row<'a> {
    id: TraceId,
    chain: &'a LatestAnalysis,
    /// The FINDING column's kind: the lesson's when the chain shows it, else its worst.
    finding: Option<FindingKind>,
    selected: bool,
    theme: Theme,
    /// The row's style (selected or not).
    style: Style,
}

impl Row<'_> {
    /// `style` on the row's background, so a coloured cell keeps its colour when selected.
    fn on_row(&self, style: Style) -> Style {
        style.patch(Style {
            fg: None,
            ..self.style
        })
    }
}

/// Narrow screens: the time to the second and tighter figures, so the name keeps room.
fn figure(width: u16) -> u16 {
    if width >= 100 { 8 } else { 7 }
}

static COLUMNS: [Column; 10] = [
    Column {
        head: |_| "",
        width: Width::At(|_| 2),
        align: Align::Left,
        cell: |r, _| ((if r.selected { "▶" } else { "" }).into(), r.style),
    },
    Column {
        head: |_| "START",
        width: Width::At(|w| if w >= 100 { 13 } else { 9 }),
        align: Align::Left,
        cell: |r, room| {
            let mut start = clock(r.chain.summary.start_unix_nano);
            start.truncate(room as usize);
            (start, r.theme.dim().patch(r.style))
        },
    },
    Column {
        // At 80 columns the root column has 19 cells: the head drops ROOT, whose rows say it.
        head: |h| {
            ["ROOT SERVICE / OPERATION", "SERVICE / OPERATION"]
                .into_iter()
                .find(|t| unicode_width(t) <= h.room as usize)
                .unwrap_or("SERVICE / OPERATION")
        },
        // Wider than this, the figures drift far from the name they belong to.
        width: Width::Rest { min: 8, max: 60 },
        align: Align::Left,
        cell: |r, room| {
            let s = &r.chain.summary;
            let root = format!(
                "{} {}",
                for_screen(&s.root_service),
                for_screen(&s.root_name)
            );
            (fit(&root, room as usize).into_owned(), r.style)
        },
    },
    Column {
        head: |_| "BUDGET",
        width: Width::At(figure),
        align: Align::Right,
        cell: |r, _| {
            let budget = r.chain.summary.edge_budget_ms;
            (budget.map(ms).unwrap_or_else(|| "none".into()), r.style)
        },
    },
    Column {
        head: |_| "USED",
        width: Width::At(figure),
        align: Align::Right,
        cell: |r, _| {
            let s = &r.chain.summary;
            let over = s.edge_budget_ms.is_some_and(|b| s.duration_ms > b);
            let style = if over {
                r.on_row(r.theme.late())
            } else {
                r.style
            };
            (ms(s.duration_ms), style)
        },
    },
    Column {
        head: |_| "HOPS",
        width: Width::At(|_| 5),
        align: Align::Right,
        cell: |r, _| (r.chain.summary.hops.to_string(), r.style),
    },
    Column {
        head: |_| "WASTED",
        width: Width::At(|w| if w >= 120 { 9 } else { 0 }),
        align: Align::Right,
        cell: |r, _| {
            let wasted = r.chain.summary.wasted_ms;
            let text = if wasted > 0 {
                ms(wasted)
            } else {
                String::new()
            };
            (text, r.on_row(r.theme.late()))
        },
    },
    Column {
        head: |_| "OUTCOME",
        width: Width::At(|_| 10),
        align: Align::Spaced,
        cell: |r, _| {
            let outcome = r.chain.summary.outcome;
            let style = r.on_row(outcome_style(outcome, r.theme));
            (outcome_label(outcome).into(), style)
        },
    },
    Column {
        // In the demo the column names what the scenario teaches when a chain shows it.
        head: |h| {
            if h.lesson { "FINDING" } else { "WORST FINDING" }
        },
        // Room for the longest kind's name whole ("▲ timeout_inverted").
        width: Width::At(|w| if w >= 120 { 24 } else { 20 }),
        align: Align::Spaced,
        cell: |r, room| match r.finding {
            Some(kind) => {
                let sev = kind.severity();
                let more = r.chain.findings.len().saturating_sub(1);
                let name = format!("{} {}", severity_glyph(sev), kind.as_str());
                // The name stays whole; the count of the other findings only when it fits.
                let label = match format!("{name} +{more}") {
                    full if more > 0 && unicode_width(&full) <= room as usize => full,
                    _ => name,
                };
                (label, r.on_row(r.theme.severity(sev)))
            }
            // A chain whose root has not arrived (the list holds such chains back for a few
            // seconds): say why it is in flight.
            None if r.chain.summary.orphans > 0 => {
                ("… root missing".into(), r.on_row(r.theme.dim()))
            }
            None => (String::new(), r.style),
        },
    },
    Column {
        head: |_| "TRACE",
        width: Width::At(|w| {
            if w >= 190 {
                33
            } else if w >= 160 {
                17
            } else {
                0
            }
        }),
        align: Align::Left,
        cell: |r, _| {
            let mut trace = r.id.to_string();
            trace.truncate(16);
            (trace, r.on_row(r.theme.dim()))
        },
    },
];

/// The columns shown at a screen's `width`, each with its width.
fn shown(width: u16) -> impl Iterator<Item = (&'static Column, u16)> {
    let at = |c: &Column| match c.width {
        Width::At(at) => at(width),
        Width::Rest { .. } => 0,
    };
    let fixed: u16 = COLUMNS.iter().map(at).sum();
    COLUMNS
        .iter()
        .map(move |c| match c.width {
            Width::At(at) => (c, at(width)),
            Width::Rest { min, max } => (c, width.saturating_sub(fixed).clamp(min, max)),
        })
        .filter(|(_, w)| *w > 0)
}

impl Column {
    /// Draws `text` in this column, `width` cells from (x, y); empty text draws nothing.
    fn draw(&self, buf: &mut Buffer, (x, y): (u16, u16), width: u16, text: &str, style: Style) {
        if text.is_empty() {
            return;
        }
        let room = width.saturating_sub(1);
        match self.align {
            Align::Left => {
                put(buf, x, y, text, room, style);
            }
            Align::Right => put_right(buf, x, y, text, room, style),
            Align::Spaced => {
                put(buf, x, y, &format!(" {text}"), width, style);
            }
        }
    }
}

/// Draw the list into `area` (first row: column heads).
pub fn render(state: &State, theme: Theme, area: Rect, buf: &mut Buffer) {
    if area.height == 0 || area.width < 20 {
        return;
    }
    let focus = state.focus_kinds();
    let mut x = area.x;
    for (column, width) in shown(area.width) {
        let room = width.saturating_sub(1);
        let heading = Heading {
            room,
            lesson: !focus.is_empty(),
        };
        // A head too long for its column ends with `…` rather than a word cut short.
        let head = fit((column.head)(&heading), room as usize);
        column.draw(buf, (x, area.y), width, &head, theme.title());
        x += width;
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
        let y = area.y + 1 + (i - offset) as u16;
        let selected = i == state.ui.selected;
        let style = if selected {
            theme.selected()
        } else {
            theme.text()
        };
        buf.set_style(Rect::new(area.x, y, area.width, 1), style);
        let worst = chain
            .findings
            .iter()
            .map(|f| f.kind)
            .max_by(|a, b| a.severity().cmp(&b.severity()).then(b.cmp(a)));
        let lesson = focus
            .iter()
            .find(|k| chain.findings.iter().any(|f| f.kind == **k))
            .copied();
        let row = Row {
            id: *id,
            chain,
            finding: lesson.or(worst),
            selected,
            theme,
            style,
        };
        let mut x = area.x;
        for (column, width) in shown(area.width) {
            let (text, style) = (column.cell)(&row, width.saturating_sub(1));
            column.draw(buf, (x, y), width, &text, style);
            x += width;
        }
    }
}

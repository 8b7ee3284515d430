//! What the edges and services tables share: a head, rows scrolled to keep the selection in
//! view, right-aligned figures, a note on the bottom line, and the keys (Enter: the chains
//! through the selected row's service; Esc: back to the chains).

use crossterm::event::KeyCode;
use ratatui::buffer::Buffer;
use ratatui::layout::{Position, Rect};

use super::keys::{self, Key};
use super::theme::Theme;
use super::{ScreenLayout, put, put_right, scroll_offset, unicode_width};
use crate::screen::{State, View};
use crate::view_model::format::fit;

/// `m`: both tables over the last minute, or since start again.
pub(super) const MINUTE: Key = Key {
    codes: &[KeyCode::Char('m')],
    long: "m",
    short: "m",
    does: "minute/all",
    shown: 2,
    answer: |state, _| {
        let minute = !state.data.last_minute;
        state.data.set_last_minute(minute);
        state.ui.edge_row = 0;
        state.ui.service_row = 0;
        true
    },
};

/// The tables' keys; `enter` is the pane's Enter (the chains through its selected row).
pub(super) const fn keys(enter: super::keys::Answer) -> [Key; 8] {
    [
        keys::MOVE.shown_in(2),
        Key {
            codes: &[KeyCode::Enter],
            long: "Enter",
            short: "⏎",
            does: "its chains",
            shown: 2,
            answer: enter,
        },
        MINUTE,
        keys::TAB.shown_in(2),
        keys::BACK.shown_in(2),
        keys::PAUSE.shown_in(1),
        keys::LEGEND.shown_in(2),
        keys::QUIT.shown_in(2),
    ]
}

/// Enter: the chain list, searching for the selected row's service (`service`).
pub(super) fn to_chains_of(state: &mut State, service: Option<String>) -> bool {
    let Some(name) = service else {
        return false;
    };
    state.ui.query.search = name.chars().filter(|c| !c.is_control()).take(64).collect();
    state.ui.view = View::Chains;
    state.ui.selected = 0;
    state.ui.selected_id = None;
    true
}

/// The row at screen row `y` of a table of `len` rows drawn in `area` with `selected` in view.
pub(super) fn row_at(area: Rect, y: u16, selected: usize, len: usize) -> Option<usize> {
    let rows = area.height.saturating_sub(3) as usize;
    if y < area.y + 1 {
        return None;
    }
    let offset = scroll_offset(selected, len, rows);
    let i = offset + (y - area.y - 1) as usize;
    (i < len && ((y - area.y - 1) as usize) < rows).then_some(i)
}

/// The row a left click at `pos` lands on, if it lands on one.
pub(super) fn clicked(
    layout: &ScreenLayout,
    pos: Position,
    selected: usize,
    len: usize,
) -> Option<usize> {
    if !layout.body.contains(pos) {
        return None;
    }
    row_at(layout.body, pos.y, selected, len)
}

pub(super) struct Table<'a> {
    pub heads: &'a [(&'a str, u16)],
    pub first_w: u16,
}

impl Table<'_> {
    /// The body rows that fit under the heading, scrolled so that `selected` shows: each row's
    /// index and screen line, with its style; the selected row is highlighted and marked `▶`.
    pub fn body(
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

    pub fn head(&self, buf: &mut Buffer, area: Rect, first: &str, theme: Theme) {
        let room = self.first_w.saturating_sub(1);
        put(
            buf,
            area.x + 2,
            area.y,
            &fit(first, room as usize),
            room,
            theme.title(),
        );
        let mut x = area.x + 2 + self.first_w;
        for (h, w) in self.heads {
            put_right(buf, x, area.y, h, w - 1, theme.title());
            x += w;
        }
    }
    pub fn cells(
        &self,
        buf: &mut Buffer,
        area: Rect,
        y: u16,
        first: &str,
        cells: &[(String, ratatui::style::Style)],
        row_style: ratatui::style::Style,
    ) {
        // A caller → callee or service name too long for the column ends with `…`.
        let room = self.first_w.saturating_sub(1);
        put(
            buf,
            area.x + 2,
            y,
            &fit(first, room as usize),
            room,
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

pub(super) fn first_width(area: Rect, heads: &[(&str, u16)]) -> u16 {
    let rest: u16 = heads.iter().map(|(_, w)| *w).sum();
    // Wider than this, the figures drift far from the name they belong to.
    area.width.saturating_sub(rest + 3).clamp(10, 48)
}

/// The longest of `notes` (longest first) that fits a table's bottom line of `width`, else the
/// last one.
pub(super) fn fitting_note(width: u16, notes: &[&'static str]) -> &'static str {
    let room = width.saturating_sub(1) as usize;
    notes
        .iter()
        .find(|n| unicode_width(n) <= room)
        .or(notes.last())
        .copied()
        .unwrap_or("")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(buf: &Buffer, y: u16) -> String {
        (0..buf.area.width)
            .map(|x| buf[(x, y)].symbol())
            .collect::<String>()
    }

    #[test]
    fn a_name_too_long_for_the_first_column_ends_with_an_ellipsis() {
        let area = Rect::new(0, 0, 40, 3);
        let mut buf = Buffer::empty(area);
        let t = Table {
            heads: &[("CALLS", 6)],
            first_w: 14,
        };
        let theme = Theme { color: false };
        t.head(&mut buf, area, "CALLER → CALLEE LONG", theme);
        let style = ratatui::style::Style::default();
        t.cells(
            &mut buf,
            area,
            1,
            "checkout-frontend → payments",
            &[("12".into(), style)],
            style,
        );
        t.cells(
            &mut buf,
            area,
            2,
            "bff → orders",
            &[("3".into(), style)],
            style,
        );
        assert_eq!(row(&buf, 0).trim_end(), "  CALLER → CAL… CALLS");
        assert_eq!(row(&buf, 1).trim_end(), "  checkout-fro…    12");
        assert_eq!(row(&buf, 2).trim_end(), "  bff → orders      3");
    }
}

//! Rendering: a pure function of the [`State`] into a ratatui `Buffer`.
//!
//! Nothing here reads a clock or the environment: the loop puts `now` and the colour choice in
//! the state, so the same state always draws the same screen (and the snapshot tests can pin
//! it). [`layout`] is shared by [`render`] and [`hit`], so a mouse click lands on the row that
//! was drawn there.

pub mod chains;
pub mod empty;
pub mod header;
pub mod popup;
pub mod tables;
pub mod text;
pub mod theme;
pub mod waterfall;

use ratatui::buffer::Buffer;
use ratatui::layout::{Position, Rect};

use crate::screen::{Overlay, State, View};
pub use theme::Theme;

/// Heights of the fixed parts.
const HEADER_ROWS: u16 = 3;

/// Where each part of the screen goes for a given state and size.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ScreenLayout {
    /// The header (addresses, rates, counts, tabs).
    pub header: Rect,
    /// The main area of the view.
    pub body: Rect,
    /// The chain list, when shown.
    pub list: Option<Rect>,
    /// The waterfall, when shown.
    pub waterfall: Option<Rect>,
    /// Under the chain list when no waterfall fits: the selected chain's finding in words.
    pub finding: Option<Rect>,
    /// The footer (keys, search prompt, demo lesson).
    pub footer: Rect,
}

/// The most rows the demo's lesson wraps onto.
pub const LESSON_ROWS: usize = 3;

/// The demo's lesson, wrapped to the screen's width (at most [`LESSON_ROWS`] lines).
pub fn lesson_lines(state: &State, width: u16) -> Vec<String> {
    state.demo.as_ref().map_or_else(Vec::new, |demo| {
        // A number and its unit stay on one line ("~600 ms", not "~600" then "ms").
        let lesson = text::clean(&demo.lesson).replace(" ms", "\u{a0}ms");
        let mut lines = text::wrap(&lesson, width as usize, LESSON_ROWS);
        for line in &mut lines {
            *line = line.replace('\u{a0}', " ");
        }
        lines
    })
}

/// How many footer rows: the key hints, and with the demo its scenario line and the lesson.
fn footer_rows(state: &State, area: Rect) -> u16 {
    let rows = match state.demo {
        Some(_) => 2 + lesson_lines(state, area.width).len() as u16,
        None => 1,
    };
    rows.min(area.height.saturating_sub(HEADER_ROWS + 3))
}

/// Lay the screen out.
pub fn layout(state: &State, area: Rect) -> ScreenLayout {
    let header_h = HEADER_ROWS.min(area.height);
    let footer_h = footer_rows(state, area);
    let body_h = area.height.saturating_sub(header_h + footer_h);
    let header = Rect::new(area.x, area.y, area.width, header_h);
    let body = Rect::new(area.x, area.y + header_h, area.width, body_h);
    let footer = Rect::new(area.x, area.y + header_h + body_h, area.width, footer_h);
    let (list, waterfall, finding) = match state.ui.view {
        _ if state.data.is_empty() => (None, None, None),
        View::Chains if body.height >= 30 => {
            let list_h = (body.height * 2 / 5).max(8);
            (
                Some(Rect::new(body.x, body.y, body.width, list_h)),
                Some(Rect::new(
                    body.x,
                    body.y + list_h,
                    body.width,
                    body.height - list_h,
                )),
                None,
            )
        }
        // No room for the waterfall: the selected chain's finding, in words, under the list.
        View::Chains if body.height >= 10 => {
            let strip_h = if body.height >= 15 { 5 } else { 4 };
            let list_h = body.height - strip_h;
            (
                Some(Rect::new(body.x, body.y, body.width, list_h)),
                None,
                Some(Rect::new(body.x, body.y + list_h, body.width, strip_h)),
            )
        }
        View::Chains => (Some(body), None, None),
        View::Waterfall => (None, Some(body), None),
        View::Edges | View::Services => (None, None, None),
    };
    ScreenLayout {
        header,
        body,
        list,
        waterfall,
        finding,
        footer,
    }
}

/// The smallest screen the views are laid out for.
pub const MIN_SIZE: (u16, u16) = (80, 24);

/// Draw the whole screen.
pub fn render(state: &State, area: Rect, buf: &mut Buffer) {
    let theme = Theme {
        color: state.ui.color,
    };
    if area.width < MIN_SIZE.0 || area.height < MIN_SIZE.1 {
        too_small(area, buf, theme);
        return;
    }
    let l = layout(state, area);
    header::render(state, theme, l.header, buf);
    if state.data.is_empty() {
        empty::render(state, theme, l.body, buf);
    } else {
        match state.ui.view {
            View::Chains | View::Waterfall => {
                if let Some(r) = l.list {
                    chains::render(state, theme, r, buf);
                }
                if let Some(r) = l.waterfall {
                    waterfall::render(state, theme, r, buf);
                }
                if let Some(r) = l.finding {
                    waterfall::render_finding(state, theme, r, buf);
                }
            }
            View::Edges => tables::render_edges(state, theme, l.body, buf),
            View::Services => tables::render_services(state, theme, l.body, buf),
        }
    }
    header::render_footer(state, theme, l.footer, buf);
    match state.ui.overlay {
        Overlay::None => {}
        Overlay::Legend => popup::render_legend(theme, area, state.ui.popup_scroll, buf),
        Overlay::Detail => popup::render_detail(state, theme, area, state.ui.popup_scroll, buf),
    }
}

/// Below [`MIN_SIZE`]: what to do about it, instead of a screen cut to pieces.
fn too_small(area: Rect, buf: &mut Buffer, theme: Theme) {
    use ratatui::text::Line;
    use ratatui::widgets::{Paragraph, Widget, Wrap};
    let (w, h) = MIN_SIZE;
    let lines = vec![
        Line::styled(
            format!("budget-top needs a window of at least {w}×{h}."),
            theme.title(),
        ),
        Line::raw(format!(
            "This one is {}×{}: make it bigger. q quits.",
            area.width, area.height
        )),
    ];
    let top = area.height.saturating_sub(2) / 2;
    let inner = Rect::new(
        area.x + 1.min(area.width),
        area.y + top,
        area.width.saturating_sub(2),
        area.height - top,
    );
    Paragraph::new(lines)
        .wrap(Wrap { trim: true })
        .render(inner, buf);
}

/// What a mouse click landed on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Hit {
    /// A chain list row (index into the list).
    Chain(usize),
    /// A waterfall row.
    SpanRow(usize),
    /// An edges/services table row.
    TableRow(usize),
}

/// Which row is at `pos` on a screen of size `area`.
pub fn hit(state: &State, area: Rect, pos: Position) -> Option<Hit> {
    if state.ui.overlay != Overlay::None || area.width < MIN_SIZE.0 || area.height < MIN_SIZE.1 {
        return None;
    }
    let l = layout(state, area);
    if let Some(r) = l.list
        && r.contains(pos)
    {
        return chains::row_at(state, r, pos.y).map(Hit::Chain);
    }
    if let Some(r) = l.waterfall
        && r.contains(pos)
    {
        return waterfall::row_at(state, r, pos.y).map(Hit::SpanRow);
    }
    if matches!(state.ui.view, View::Edges | View::Services) && l.body.contains(pos) {
        return tables::row_at(state, l.body, pos.y).map(Hit::TableRow);
    }
    None
}

/// The first visible row of a scrolled list of `len` rows in `height` rows with `selected`
/// kept in view (stateless: the same selection always scrolls the same way).
pub fn scroll_offset(selected: usize, len: usize, height: usize) -> usize {
    if height == 0 || len <= height {
        return 0;
    }
    let half = height / 2;
    selected.saturating_sub(half).min(len - height)
}

/// Write `s` at (x, y) clipped to `width` cells; returns the x after it.
pub fn put(
    buf: &mut Buffer,
    x: u16,
    y: u16,
    s: &str,
    width: u16,
    style: ratatui::style::Style,
) -> u16 {
    if width == 0 {
        return x;
    }
    buf.set_stringn(x, y, s, width as usize, style).0
}

/// Right-align `s` in a field of `width` at (x, y).
pub fn put_right(
    buf: &mut Buffer,
    x: u16,
    y: u16,
    s: &str,
    width: u16,
    style: ratatui::style::Style,
) {
    let w = unicode_width(s).min(width as usize) as u16;
    put(buf, x + width - w, y, s, w, style);
}

/// The display width of `s`.
pub fn unicode_width(s: &str) -> usize {
    ratatui::text::Span::raw(s).width()
}

/// Draw a box with a title; returns the inside.
pub fn boxed(buf: &mut Buffer, area: Rect, title: &str, theme: Theme) -> Rect {
    use ratatui::widgets::{Block, BorderType, Borders, Clear, Widget};
    Clear.render(area, buf);
    let block = Block::default()
        .borders(Borders::ALL)
        .border_type(BorderType::Rounded)
        .title(ratatui::text::Span::styled(
            format!(" {title} "),
            theme.title(),
        ));
    let inner = block.inner(area);
    block.render(area, buf);
    inner
}

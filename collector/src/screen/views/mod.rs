//! Drawing: a pure function of the [`State`] into a ratatui `Buffer`, and the views themselves.
//!
//! Nothing here reads a clock or the environment: the loop puts `now` and the colour choice in
//! the state, so the same state always draws the same screen (and the snapshot tests can pin
//! it). Each top-level view (a tab) is a [`Pane`] in its own file: what it draws in the body,
//! where a click lands, and the keys it answers beyond the screen's own. [`pane`] registers it.
//! [`layout`] is shared by [`render`] and the clicks, so a click lands on the row drawn there.

pub mod chains;
pub mod detail;
pub mod edges;
pub mod empty;
pub mod header;
pub(crate) mod keys;
pub mod legend;
pub mod map;
mod popup;
pub mod services;
mod table;
pub mod theme;
pub mod waterfall;

use crossterm::event::KeyCode;
use ratatui::buffer::Buffer;
use ratatui::layout::{Position, Rect};

use crate::screen::{Overlay, State, View};
pub use theme::Theme;

/// What a view needs computed on the frame tick beyond the chain list (costly data only the
/// views that show it ask for).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Needs {
    /// The Edges and Services tables' figures (`ScreenData::services`, and
    /// `ScreenData::minute` when they show the last minute).
    pub table_figures: bool,
    /// The view shows the chain list with the selected chain's preview: the selection follows
    /// the newest chain (or the demo's lesson) and the preview its chosen row.
    pub chain_preview: bool,
    /// The view shows one chain chosen in the list: when the screen starts over (a new demo
    /// scenario) it goes back to the list.
    pub chosen_chain: bool,
    /// The map of services (`ScreenData::map`), built with the tables' figures.
    pub map: bool,
}

/// A top-level view: one tab of the screen. It owns its selection (a field of [`Ui`] only it
/// moves), its keys (a table its `on_key` reads and the footer's hints are made from) and its
/// drawing, and says what data it needs.
///
/// [`Ui`]: crate::screen::Ui
pub(crate) trait Pane {
    /// Its tab's title in the header.
    fn title(&self) -> &'static str;
    /// Its key table: the footer's hints and [`Pane::on_key`] read it.
    fn keys(&self) -> &'static [keys::Key];
    /// Its key hints for the footer, longest first: the longest that fits is shown.
    fn hints(&self) -> Vec<String> {
        keys::hints(self.keys())
    }
    /// What it needs computed on the frame tick.
    fn needs(&self) -> Needs {
        Needs::default()
    }
    /// Tab or Shift-Tab made it the view.
    fn enter(&self, _state: &mut State) {}
    /// Where its parts of the body go (the chain list, the waterfall, the finding strip); by
    /// default the body is one part.
    fn arrange(&self, _body: Rect, _layout: &mut ScreenLayout) {}
    /// Draw the body (there are chains: the empty screen draws itself).
    fn render(&self, state: &State, theme: Theme, layout: &ScreenLayout, buf: &mut Buffer);
    /// Move its selection by `delta` rows (arrows, j/k, pages, Home/End, the wheel).
    fn move_by(&self, state: &mut State, delta: isize);
    /// The arrows and `j`/`k` (the screen's own keys): by default a row down or up.
    fn move_key(&self, state: &mut State, key: KeyCode) {
        let down = matches!(key, KeyCode::Down | KeyCode::Char('j'));
        self.move_by(state, if down { 1 } else { -1 });
    }
    /// The wheel sideways: whether anything changed (by default nothing moves sideways).
    fn move_sideways(&self, _state: &mut State, _delta: isize) -> bool {
        false
    }
    /// A drag with the left button held, now at `pos`: whether anything changed.
    fn drag(&self, _state: &mut State, _layout: &ScreenLayout, _pos: Position) -> bool {
        false
    }
    /// A key the screen's own keys left: `None` when this view does not use it (it then goes to
    /// the demo), else whether the screen changed. The answer is the key table's.
    fn on_key(&self, state: &mut State, key: KeyCode) -> Option<bool> {
        keys::answer(self.keys(), state, key)
    }
    /// A left click at `pos` on the screen laid out as `layout`: whether anything changed.
    fn click(&self, state: &mut State, layout: &ScreenLayout, pos: Position) -> bool;
}

/// The view behind each tab: adding a view is its file, a [`View`] variant and a line here.
pub(crate) fn pane(view: View) -> &'static dyn Pane {
    match view {
        View::Chains => &chains::Chains,
        View::Waterfall => &waterfall::Waterfall,
        View::Edges => &edges::Edges,
        View::Services => &services::Services,
        View::Map => &map::Map,
    }
}

impl View {
    /// What the view needs computed on the frame tick (its pane says).
    pub(crate) fn needs(self) -> Needs {
        pane(self).needs()
    }
}

/// `current` moved by `delta` within `0..len` (0 when there is nothing).
pub(crate) fn step(current: usize, len: usize, delta: isize) -> usize {
    if len == 0 {
        0
    } else {
        (current as isize)
            .saturating_add(delta)
            .clamp(0, len as isize - 1) as usize
    }
}

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
        let lesson = crate::span_text::for_screen(&demo.lesson).replace(" ms", "\u{a0}ms");
        let mut lines = crate::view_model::format::wrap(&lesson, width as usize, LESSON_ROWS);
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
    let mut layout = ScreenLayout {
        header,
        body,
        list: None,
        waterfall: None,
        finding: None,
        footer,
    };
    if !state.data.is_empty() {
        pane(state.ui.view).arrange(body, &mut layout);
    }
    layout
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
        pane(state.ui.view).render(state, theme, &l, buf);
    }
    header::render_footer(state, theme, l.footer, buf);
    match state.ui.overlay {
        Overlay::None => {}
        Overlay::Legend => legend::render(theme, area, state.ui.popup_scroll, buf),
        Overlay::Detail => detail::render(state, theme, area, state.ui.popup_scroll, buf),
    }
}

/// How far the open overlay can scroll on a screen of size `area` (0 when it all fits).
pub fn max_scroll(state: &State, area: Rect) -> u16 {
    let theme = Theme {
        color: state.ui.color,
    };
    match state.ui.overlay {
        Overlay::None => 0,
        Overlay::Legend => popup::max_scroll(
            area,
            legend::LEGEND_WIDTH,
            legend::lines(
                theme,
                legend::LEGEND_WIDTH.min(area.width).saturating_sub(2),
            ),
        ),
        Overlay::Detail => match detail::lines(state, theme, area.width) {
            Some((_, lines)) => popup::max_scroll(area, detail::DETAIL_WIDTH, lines),
            None => 0,
        },
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

pub use crate::view_model::format::unicode_width;

/// Makes the `width` cells at (x, y), as drawn, one OSC 8 hyperlink to `uri` (from
/// [`crate::view_model::trace_url`]: the template's text and a hex id, nothing a span sent): the
/// first cell holds the sequence and the text of all of them, told to take `width` columns, and
/// the others are skipped, so ratatui's accounting of columns stays that of the text. `id`
/// joins the pieces of one link cut over several rows.
pub fn hyperlink(buf: &mut Buffer, (x, y): (u16, u16), width: u16, uri: &str, id: &str) {
    use ratatui::buffer::CellDiffOption;
    let area = buf.area;
    let width = width.min((area.x + area.width).saturating_sub(x));
    let Some(columns) = std::num::NonZeroU16::new(width) else {
        return;
    };
    if y < area.y || y >= area.y + area.height || x < area.x {
        return;
    }
    let mut text = String::new();
    for dx in 0..width {
        text.push_str(buf[(x + dx, y)].symbol());
    }
    let uri = crate::view_model::trace_url::osc8_uri(uri);
    let first = &mut buf[(x, y)];
    first.set_symbol(&format!("\x1b]8;id={id};{uri}\x1b\\{text}\x1b]8;;\x1b\\"));
    first.set_diff_option(CellDiffOption::ForcedWidth(columns));
    for dx in 1..width {
        buf[(x + dx, y)].set_diff_option(CellDiffOption::Skip);
    }
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

//! What the overlays share: a box fitted to its text and centred, text with a hanging indent, and
//! scrolling with a hint on the box's edge. The overlays themselves are `legend.rs` (`?`) and
//! `detail.rs` (Enter on a waterfall row); this file imports neither.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span as TextSpan};
use ratatui::widgets::{Paragraph, Widget, Wrap};

use super::Theme;
use crate::view_model::format::{unicode_width, wrap};

fn centered(area: Rect, width: u16, height: u16) -> Rect {
    let w = width.min(area.width);
    let h = height.min(area.height);
    Rect::new(
        area.x + (area.width - w) / 2,
        area.y + (area.height - h) / 2,
        w,
        h,
    )
}

/// A popup box as wide as `width` and as tall as its `lines` need (within the screen, one row
/// of the screen left above and below when it can be), centred.
pub(super) fn fitted(area: Rect, width: u16, lines: &[Line<'_>]) -> Rect {
    let w = width.min(area.width);
    let rows = wrapped(lines.to_vec(), w.saturating_sub(2)).area.height;
    let room = if area.height > 12 {
        area.height - 2
    } else {
        area.height
    };
    centered(area, w, rows.saturating_add(2).min(room))
}

/// The inside of a box drawn by [`boxed`].
fn inside(rect: Rect) -> Rect {
    use ratatui::widgets::{Block, Borders};
    Block::default().borders(Borders::ALL).inner(rect)
}

/// `head` then `text` word-wrapped to `width`, its continuation lines indented under the text's
/// start (a hanging indent), so a wrapped explanation does not run back under its label.
pub(super) fn hanging(
    head: TextSpan<'static>,
    text: &str,
    style: ratatui::style::Style,
    width: u16,
) -> Vec<Line<'static>> {
    let indent = head.width();
    let room = (width as usize).saturating_sub(indent);
    if room < 20 {
        return vec![Line::from(vec![
            head,
            TextSpan::styled(text.to_owned(), style),
        ])];
    }
    wrap(text, room, usize::MAX)
        .into_iter()
        .enumerate()
        .map(|(i, part)| {
            let lead = if i == 0 {
                head.clone()
            } else {
                TextSpan::raw(" ".repeat(indent))
            };
            Line::from(vec![lead, TextSpan::styled(part, style)])
        })
        .collect()
}

/// How far a popup of `lines`, at most `width` wide, can scroll on a screen of size `area` (0
/// when it all fits).
pub(super) fn max_scroll(area: Rect, width: u16, lines: Vec<Line<'_>>) -> u16 {
    let rect = fitted(area, width, &lines);
    let inner = inside(rect);
    let rows = wrapped(lines, inner.width).area.height;
    rows.saturating_sub(inner.height)
}

/// `lines` word-wrapped to `width` into a buffer just tall enough for them.
fn wrapped(lines: Vec<Line<'_>>, width: u16) -> Buffer {
    if width == 0 {
        return Buffer::empty(Rect::default());
    }
    // Word wrapping never takes more than twice the rows of the text cut at the width.
    let bound: usize = lines
        .iter()
        .map(|l| 2 * (l.width() / width as usize) + 1)
        .sum();
    let tall = Rect::new(0, 0, width, bound.clamp(1, 4000) as u16);
    let mut scratch = Buffer::empty(tall);
    Paragraph::new(lines)
        .wrap(Wrap { trim: false })
        .render(tall, &mut scratch);
    let used = (0..tall.height)
        .rev()
        .find(|y| (0..width).any(|x| scratch[(x, *y)].symbol() != " "))
        .map_or(0, |y| y + 1);
    scratch.resize(Rect::new(0, 0, width, used));
    scratch
}

/// Draw `lines` into `inner` (the inside of the box `rect`) from row `scroll` on, with a hint on
/// the box's bottom edge when there is more above or below; returns the row drawn first (the
/// scroll, kept within the text).
pub(super) fn scrolled(
    buf: &mut Buffer,
    rect: Rect,
    inner: Rect,
    lines: Vec<Line<'_>>,
    scroll: u16,
    theme: Theme,
) -> u16 {
    let text = wrapped(lines, inner.width);
    let rows = text.area.height;
    let scroll = scroll.min(rows.saturating_sub(inner.height));
    for y in 0..inner.height.min(rows - scroll) {
        for x in 0..inner.width {
            buf[(inner.x + x, inner.y + y)] = text[(x, scroll + y)].clone();
        }
    }
    let (above, below) = (scroll > 0, scroll + inner.height < rows);
    let hint = match (above, below) {
        (false, false) => return scroll,
        (false, true) => " ↓ more: ↓ PgDn ",
        (true, true) => " ↑↓ more: ↑ ↓ PgUp PgDn ",
        (true, false) => " ↑ more: ↑ PgUp ",
    };
    let width = unicode_width(hint) as u16;
    if rect.height >= 2 && rect.width > width + 2 {
        let x = rect.x + rect.width - width - 2;
        super::put(buf, x, rect.y + rect.height - 1, hint, width, theme.title());
    }
    scroll
}

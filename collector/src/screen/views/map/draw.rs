//! The map drawn: boxes, the lines between them with arrowheads and labels, and the selection
//! in words under it.

use deadline_budget::analysis::Severity;
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::Style;

use super::super::put;
use super::super::theme::Theme;
use super::frame::Frame;
use super::{Picked, map_area, picked};
use crate::screen::State;
use crate::view_model::format::{fit, ms_grouped, unicode_width};
use crate::view_model::layout::{Placed, Pointing};
use crate::view_model::map::{MapBox, ServiceMap};

const UP: u8 = 1;

const RIGHT: u8 = 2;

const DOWN: u8 = 4;

const LEFT: u8 = 8;

/// What runs through one cell of the view.
#[derive(Clone, Copy, Debug, Default)]
struct Cell {
    dirs: u8,
    /// Lines through it.
    lines: u8,
    /// Of which from an edge with an error.
    errors: u8,
    /// The mildest severity among them (`None` once one has no finding).
    mildest: Option<Option<Severity>>,
    selected: bool,
}

/// The cells of a polyline with the directions each runs in.
fn line_cells(points: &[(u16, u16)], mut visit: impl FnMut(u16, u16, u8)) {
    for w in points.windows(2) {
        let ((x0, y0), (x1, y1)) = (w[0], w[1]);
        if y0 == y1 {
            let (a, b) = (x0.min(x1), x0.max(x1));
            for x in a..=b {
                visit(
                    x,
                    y0,
                    if x > a { LEFT } else { 0 } | if x < b { RIGHT } else { 0 },
                );
            }
        } else {
            let (a, b) = (y0.min(y1), y0.max(y1));
            for y in a..=b {
                visit(
                    x0,
                    y,
                    if y > a { UP } else { 0 } | if y < b { DOWN } else { 0 },
                );
            }
        }
    }
}

/// Every map cell edge `e` covers: its line (its label lies on it).
pub(super) fn edge_cells(placed: &Placed<'_>, e: usize) -> Vec<(u16, u16)> {
    let mut out = Vec::new();
    if let Some(points) = placed.line(e) {
        line_cells(&points, |x, y, _| out.push((x, y)));
    }
    out
}

fn line_glyph(dirs: u8, heavy: bool) -> &'static str {
    match dirs {
        d if d == RIGHT | LEFT || d == RIGHT || d == LEFT => {
            if heavy {
                "━"
            } else {
                "─"
            }
        }
        d if d == UP | DOWN || d == UP || d == DOWN => {
            if heavy {
                "┃"
            } else {
                "│"
            }
        }
        d if d == RIGHT | DOWN => "┌",
        d if d == LEFT | DOWN => "┐",
        d if d == RIGHT | UP => "└",
        d if d == LEFT | UP => "┘",
        d if d == UP | DOWN | RIGHT => "├",
        d if d == UP | DOWN | LEFT => "┤",
        d if d == LEFT | RIGHT | DOWN => "┬",
        d if d == LEFT | RIGHT | UP => "┴",
        d if d == UP | DOWN | LEFT | RIGHT => "┼",
        _ => " ",
    }
}

/// Draw the Map.
pub fn render(state: &State, theme: Theme, body: Rect, buf: &mut Buffer) {
    let area = map_area(body);
    let foot = |buf: &mut Buffer, row: u16, text: &str, style: Style| {
        if body.height > row {
            let y = body.y + body.height - 1 - row;
            put(
                buf,
                body.x + 1,
                y,
                &fit(text, body.width.saturating_sub(1) as usize),
                body.width.saturating_sub(1),
                style,
            );
        }
    };
    let Some(map) = state.data.map.as_ref().filter(|m| !m.boxes.is_empty()) else {
        let empty = if state.data.last_minute {
            "no chain judged in the last minute (m: since start)"
        } else {
            "no chain judged yet: the map draws the services of the chains judged"
        };
        put(
            buf,
            body.x + 2,
            body.y + 1,
            empty,
            body.width.saturating_sub(2),
            theme.dim(),
        );
        return;
    };
    let view = Frame::of(state, map, area);
    let pick = picked(state, map);
    draw_lines(map, &view, pick, theme, buf);
    for b in 0..map.boxes.len() {
        draw_box(map, &view, b, pick == Some(Picked::Box(b)), theme, buf);
    }
    // The selection in words, then the note.
    let words = match pick {
        Some(Picked::Edge(e)) => {
            let edge = &map.edges[e];
            let (from, to) = (&map.boxes[edge.from].shown, &map.boxes[edge.to].shown);
            let label = edge.labels.first().map_or("", String::as_str);
            format!("{from} → {to}  {label}")
        }
        Some(Picked::Box(b)) => box_words(&map.boxes[b]),
        None => String::new(),
    };
    let style = match pick {
        Some(Picked::Edge(e)) => map.edges[e]
            .worst
            .map_or(theme.text(), |s| theme.severity(s)),
        _ => theme.text(),
    };
    foot(buf, 1, &words, style);
    let since = if state.data.last_minute {
        "last minute (m: since start)"
    } else {
        "since start (m: last minute)"
    };
    let (folded, folded_short) = if map.folded > 0 {
        (
            format!(" · {} quieter services in other", map.folded),
            format!(" · {} in other", map.folded),
        )
    } else {
        (String::new(), String::new())
    };
    let since_short = if state.data.last_minute {
        "last minute"
    } else {
        "since start"
    };
    let notes = [
        format!(
            "{since}{folded} · ▓ works for nobody · ▒ waits for nobody · ✖ ▲ ● worst finding on the edge · fwd a>b: forwarded a with b left · ~ timeout inferred · ┄ untraced · hjkl pan"
        ),
        format!(
            "{since}{folded} · ▓ works ▒ waits for nobody · ✖▲● worst finding · ~ inferred · ┄ untraced"
        ),
        format!("{since}{folded} · ▓ works ▒ waits for nobody · ✖▲● worst"),
        format!("{since_short}{folded_short} · ▓ works ▒ waits for nobody · ✖▲● worst"),
        format!("{since_short}{folded_short} · ▓▒ for nobody · ✖▲● worst"),
    ];
    let room = body.width.saturating_sub(1) as usize;
    let note = notes
        .iter()
        .find(|n| unicode_width(n) <= room)
        .unwrap_or(&notes[notes.len() - 1]);
    foot(buf, 0, note, theme.dim());
}

/// A selected box in words.
fn box_words(b: &MapBox) -> String {
    let [name, lambda, dead] = b.lines();
    let rest = if b.untraced {
        "untraced: what its callers waited on it is on their edges".to_string()
    } else if b.dead_ms > 0 {
        format!("{dead}: {} of work for nobody", ms_grouped(b.dead_ms))
    } else if b.waits_for_nobody() {
        format!(
            "no work for nobody; {:.0}% of its time waiting on its calls for nobody",
            b.held_share * 100.0
        )
    } else {
        "no work for nobody".to_string()
    };
    let folded = if b.folded.is_empty() {
        String::new()
    } else {
        format!(" of {} services", b.folded.len())
    };
    format!("{name}{folded}  {lambda}  {rest}")
}

/// The edges: lines, arrowheads, labels, the selected one on top.
fn draw_lines(
    map: &ServiceMap,
    view: &Frame<'_>,
    pick: Option<Picked>,
    theme: Theme,
    buf: &mut Buffer,
) {
    let (w, h) = (view.area.width as usize, view.area.height as usize);
    let mut cells = vec![Cell::default(); w * h];
    let at = |x: u16, y: u16| -> Option<usize> {
        let (sx, sy) = view.to_screen(x, y)?;
        Some((sy - view.area.y) as usize * w + (sx - view.area.x) as usize)
    };
    for (e, edge) in map.edges.iter().enumerate() {
        let Some(points) = view.placed.line(e) else {
            continue;
        };
        let selected = pick == Some(Picked::Edge(e));
        line_cells(&points, |x, y, dirs| {
            if let Some(i) = at(x, y) {
                let c = &mut cells[i];
                c.dirs |= dirs;
                c.lines = c.lines.saturating_add(1);
                if edge.worst == Some(Severity::Error) {
                    c.errors = c.errors.saturating_add(1);
                }
                c.mildest = Some(match c.mildest {
                    None => edge.worst,
                    Some(m) => m.min(edge.worst),
                });
                c.selected |= selected;
            }
        });
    }
    for (i, c) in cells.iter().enumerate() {
        if c.lines == 0 {
            continue;
        }
        let (x, y) = (view.area.x + (i % w) as u16, view.area.y + (i / w) as u16);
        let heavy = c.errors == c.lines;
        let mut style = c
            .mildest
            .flatten()
            .map_or(theme.dim(), |s| theme.severity(s));
        if c.selected {
            style = theme.selected();
        }
        buf[(x, y)]
            .set_symbol(line_glyph(c.dirs, heavy))
            .set_style(style);
    }
    // Labels and arrowheads, the selected edge's last (on top).
    let mut order: Vec<usize> = (0..map.edges.len()).collect();
    if let Some(Picked::Edge(s)) = pick {
        order.retain(|&e| e != s);
        order.push(s);
    }
    for e in order {
        let edge = &map.edges[e];
        let selected = pick == Some(Picked::Edge(e));
        let style = edge.worst.map_or(theme.text(), |s| theme.severity(s));
        let (line_style, text_style) = if selected {
            (theme.selected(), theme.selected())
        } else {
            (style, theme.text())
        };
        if let Some((x, y, pointing)) = view.placed.arrow(e)
            && let Some((sx, sy)) = view.to_screen(x, y)
        {
            let glyph = match pointing {
                Pointing::Right => "▶",
                Pointing::Left => "◀",
            };
            buf[(sx, sy)].set_symbol(glyph).set_style(line_style);
        }
        let Some((x, y, room)) = view.placed.label(e) else {
            continue;
        };
        let label = map.label(e, room);
        // The glyph in the edge's severity, the words plain; clipped to the view.
        let mut cx = x;
        for (k, ch) in label.chars().enumerate() {
            let s = ch.to_string();
            let cw = unicode_width(&s) as u16;
            if let Some((sx, sy)) = view.to_screen(cx, y) {
                let st = if k == 0 && edge.worst.is_some() {
                    line_style
                } else {
                    text_style
                };
                buf[(sx, sy)].set_symbol(&s).set_style(st);
            }
            cx += cw.max(1);
        }
    }
}

/// One box: its border (rounded; dashed when untraced; double when selected), its words, and
/// the cross-hatch in its free cells when it works for nobody (`▒` when it only waits for
/// nobody). A line that leaves or enters it
/// turns its border cell into a junction.
fn draw_box(
    map: &ServiceMap,
    view: &Frame<'_>,
    b: usize,
    selected: bool,
    theme: Theme,
    buf: &mut Buffer,
) {
    let mb = &map.boxes[b];
    let (x, y, w, h) = view.placed.node(b);
    let border = if selected {
        theme.selected()
    } else if mb.works_for_nobody() {
        theme.late()
    } else {
        theme.dim()
    };
    let (tl, tr, bl, br, hz, vt) = if selected {
        ("╔", "╗", "╚", "╝", "═", "║")
    } else if mb.untraced {
        ("┌", "┐", "└", "┘", "╌", "╎")
    } else {
        ("╭", "╮", "╰", "╯", "─", "│")
    };
    let lines = mb.lines();
    let dead_style = if mb.works_for_nobody() {
        theme.severity(Severity::Error)
    } else if mb.dead_ms > 0 {
        theme.severity(Severity::Warning)
    } else {
        theme.dim()
    };
    // The border rows lines leave from (right side) or end at (left side, a reversed link).
    let attached = |dx: u16, row: u16| {
        map.layout.routes.iter().flatten().any(|r| {
            if dx == w - 1 {
                r.left == b && !r.reversed && r.hops.first().is_some_and(|h| h.from_row == row)
            } else {
                r.right == b && r.reversed && r.hops.last().is_some_and(|h| h.to_row == row)
            }
        })
    };
    for dy in 0..h {
        for dx in 0..w {
            let Some((sx, sy)) = view.to_screen(x + dx, y + dy) else {
                continue;
            };
            let edge_row = dy == 0 || dy == h - 1;
            let edge_col = dx == 0 || dx == w - 1;
            let attached = edge_col && !edge_row && attached(dx, y + dy);
            let cell = &mut buf[(sx, sy)];
            let (symbol, style) = match (edge_row, edge_col) {
                (true, true) => (
                    match (dy == 0, dx == 0) {
                        (true, true) => tl,
                        (true, false) => tr,
                        (false, true) => bl,
                        (false, false) => br,
                    },
                    border,
                ),
                (true, false) => (hz, border),
                (false, true) if attached && !selected => (if dx == 0 { "┤" } else { "├" }, border),
                (false, true) if attached => (if dx == 0 { "╢" } else { "╟" }, border),
                (false, true) => (vt, border),
                (false, false) => {
                    if mb.works_for_nobody() {
                        ("▓", theme.late())
                    } else if mb.waits_for_nobody() {
                        ("▒", theme.waiting())
                    } else {
                        (" ", theme.text())
                    }
                }
            };
            cell.set_symbol(symbol).set_style(style);
        }
    }
    for (k, text) in lines.iter().enumerate() {
        let row = y + 1 + k as u16;
        if row + 1 >= y + h {
            break;
        }
        let style = match k {
            0 if selected => theme.selected(),
            0 => theme.title(),
            1 => theme.text(),
            _ => dead_style,
        };
        let mut cx = x + 1;
        for ch in text.chars() {
            let s = ch.to_string();
            let cw = unicode_width(&s) as u16;
            if cx + cw > x + w - 1 {
                break;
            }
            if let Some((sx, sy)) = view.to_screen(cx, row) {
                buf[(sx, sy)].set_symbol(&s).set_style(style);
            }
            cx += cw.max(1);
        }
    }
}

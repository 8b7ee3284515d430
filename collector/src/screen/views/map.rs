//! The Map: services as boxes in layers (callers on the left), the calls between them as lines
//! with arrowheads and labels, the worst finding's glyph on each edge and the cross-hatch on
//! every box that works for nobody; drawn from the [`ServiceMap`] the data side built from the
//! Edges and Services totals (`present::map`), which the page draws too.
//!
//! Its selection (`ui.map_pick`) is a box or an edge, by name: the arrows move it from box to
//! box along the edges; `h`/`j`/`k`/`l`, the wheel and a drag pan (`ui.map_pan`, from where the
//! selection puts the view). Enter opens the selected edge's Edges row or the box's Services
//! row; `c` the worst chain through it, in its waterfall.

use std::sync::Arc;

use crossterm::event::KeyCode;
use deadline_budget::analysis::Severity;
use ratatui::buffer::Buffer;
use ratatui::layout::{Position, Rect};
use ratatui::style::Style;

use super::keys::{self, Key};
use super::table::MINUTE;
use super::theme::Theme;
use super::{Needs, Pane, ScreenLayout, edges, put, services};
use crate::present::format::{fit, ms_grouped, unicode_width};
use crate::present::layout::{Placed, Pointing};
use crate::present::map::{MapBox, ServiceMap};
use crate::screen::state::MapPick;
use crate::screen::{State, View};

/// The Map tab. Its selection is `ui.map_pick`, its pan `ui.map_pan`.
#[derive(Debug)]
pub(crate) struct Map;

/// Rows under the map: the selection in words, and the note.
const FOOT_ROWS: u16 = 2;
/// How far `h`/`l` pan, in columns (`j`/`k` pan a row, the wheel three).
const PAN_COLUMNS: i32 = 8;

const KEYS: [Key; 12] = [
    keys::MOVE.shown_in(0),
    Key {
        codes: &[KeyCode::Left, KeyCode::Right],
        long: "←→↑↓",
        short: "←→",
        does: "select",
        shown: 3,
        answer: |state, key| {
            select(
                state,
                if key == KeyCode::Left {
                    Step::Left
                } else {
                    Step::Right
                },
            )
        },
    },
    Key {
        codes: &[KeyCode::Char('h'), KeyCode::Char('l')],
        long: "hjkl",
        short: "hjkl",
        does: "pan",
        shown: 2,
        answer: |state, key| {
            let dx = if key == KeyCode::Char('h') {
                -PAN_COLUMNS
            } else {
                PAN_COLUMNS
            };
            state.ui.map_pan.0 = state.ui.map_pan.0.saturating_add(dx);
            true
        },
    },
    Key {
        codes: &[KeyCode::Enter],
        long: "Enter",
        short: "⏎",
        does: "its row",
        shown: 3,
        answer: open_row,
    },
    Key {
        codes: &[KeyCode::Char('c')],
        long: "c",
        short: "c",
        does: "worst chain",
        shown: 3,
        answer: worst_chain,
    },
    MINUTE,
    keys::TAB.shown_in(3),
    keys::BACK.shown_in(2),
    keys::PAGE,
    keys::PAUSE.shown_in(1),
    keys::LEGEND.shown_in(3),
    keys::QUIT.shown_in(3),
];

impl Pane for Map {
    fn title(&self) -> &'static str {
        "Map"
    }

    fn keys(&self) -> &'static [Key] {
        &KEYS
    }

    fn needs(&self) -> Needs {
        Needs {
            table_figures: true,
            map: true,
            ..Needs::default()
        }
    }

    fn enter(&self, state: &mut State) {
        state.data.map_wanted = true;
        state.data.refresh_tables();
        state.ui.map_pan = (0, 0);
        keep_pick(state);
    }

    fn render(&self, state: &State, theme: Theme, layout: &ScreenLayout, buf: &mut Buffer) {
        render(state, theme, layout.body, buf);
    }

    /// The wheel, pages, `j`/`k`: pan up and down.
    fn move_by(&self, state: &mut State, delta: isize) {
        let delta = delta.clamp(-10_000, 10_000) as i32;
        state.ui.map_pan.1 = state.ui.map_pan.1.saturating_add(delta);
    }

    fn move_key(&self, state: &mut State, key: KeyCode) {
        match key {
            KeyCode::Up => {
                select(state, Step::Up);
            }
            KeyCode::Down => {
                select(state, Step::Down);
            }
            KeyCode::Char('j') => self.move_by(state, 1),
            _ => self.move_by(state, -1),
        }
    }

    fn move_sideways(&self, state: &mut State, delta: isize) -> bool {
        let delta = delta.clamp(-10_000, 10_000) as i32;
        state.ui.map_pan.0 = state.ui.map_pan.0.saturating_add(delta);
        true
    }

    fn click(&self, state: &mut State, layout: &ScreenLayout, pos: Position) -> bool {
        let area = map_area(layout.body);
        state.ui.map_drag = area.contains(pos).then_some((pos.x, pos.y));
        let Some(map) = state.data.map.as_ref() else {
            return false;
        };
        let view = Frame::of(state, map, area);
        let Some(at) = view.to_map(pos) else {
            return false;
        };
        let picked = (0..map.boxes.len())
            .find(|&i| {
                let (x, y, w, h) = view.placed.node(i);
                at.0 >= x && at.0 < x + w && at.1 >= y && at.1 < y + h
            })
            .map(|i| MapPick::Box(map.boxes[i].name.clone()))
            .or_else(|| {
                (0..map.edges.len())
                    .find(|&e| edge_cells(&view.placed, e).contains(&at))
                    .map(|e| pick_edge(map, e))
            });
        match picked {
            Some(p) => {
                state.ui.map_pick = Some(p);
                state.ui.map_pan = (0, 0);
                true
            }
            None => false,
        }
    }

    fn drag(&self, state: &mut State, _layout: &ScreenLayout, pos: Position) -> bool {
        let Some((x, y)) = state.ui.map_drag else {
            return false;
        };
        let (dx, dy) = (
            i32::from(x) - i32::from(pos.x),
            i32::from(y) - i32::from(pos.y),
        );
        state.ui.map_pan.0 = state.ui.map_pan.0.saturating_add(dx);
        state.ui.map_pan.1 = state.ui.map_pan.1.saturating_add(dy);
        state.ui.map_drag = Some((pos.x, pos.y));
        true
    }
}

/// Keeps the selection on the map: where it was (back from the row Enter opened), else, when
/// it is not on the map (none yet, or gone from it), on the map's worst edge.
pub(crate) fn keep_pick(state: &mut State) {
    let Some(map) = state.data.map.as_ref() else {
        return;
    };
    if chosen(state.ui.map_pick.as_ref(), map).is_none() {
        state.ui.map_pick = default_pick(map);
    }
}

/// The part of the body the map is drawn in (the rest: the selection in words, the note).
fn map_area(body: Rect) -> Rect {
    Rect::new(
        body.x,
        body.y,
        body.width,
        body.height.saturating_sub(FOOT_ROWS),
    )
}

/// What the map opens on: its worst edge (the Edges table's first), else its first box.
fn default_pick(map: &ServiceMap) -> Option<MapPick> {
    map.worst_edge()
        .filter(|&e| map.layout.routes[e].is_some())
        .map(|e| pick_edge(map, e))
        .or_else(|| map.boxes.first().map(|b| MapPick::Box(b.name.clone())))
}

fn pick_edge(map: &ServiceMap, e: usize) -> MapPick {
    let edge = &map.edges[e];
    MapPick::Edge(
        map.boxes[edge.from].name.clone(),
        map.boxes[edge.to].name.clone(),
    )
}

/// The selection, as a box or an edge of `map` (`None` when it is not on the map).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Picked {
    Box(usize),
    Edge(usize),
}

/// The selection on `map`: the one chosen, or while none is (or it left the map), the map's
/// worst edge, else its first box.
fn picked(state: &State, map: &ServiceMap) -> Option<Picked> {
    chosen(state.ui.map_pick.as_ref(), map).or_else(|| chosen(default_pick(map).as_ref(), map))
}

fn chosen(pick: Option<&MapPick>, map: &ServiceMap) -> Option<Picked> {
    let index = |name: &Arc<str>| map.boxes.iter().position(|b| b.name == *name);
    match pick? {
        MapPick::Box(name) => index(name).map(Picked::Box),
        MapPick::Edge(from, to) => map.edge_between(index(from)?, index(to)?).map(Picked::Edge),
    }
}

/// A move of the selection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Step {
    Up,
    Down,
    Left,
    Right,
}

/// The arrows: from a box, Right to its first call and Left to its first caller's, Up and Down
/// to the box above or below in its layer; from an edge, Right to its callee and Left to its
/// caller, Up and Down to the next call of the same caller (or into the same callee).
fn select(state: &mut State, step: Step) -> bool {
    let Some(map) = state.data.map.as_ref() else {
        return false;
    };
    let spots = &map.layout.spots;
    let row = |b: usize| spots[b].y + spots[b].height / 2;
    let drawn = |e: usize| map.layout.routes[e].is_some();
    let next = match picked(state, map) {
        None => None,
        Some(Picked::Box(b)) => match step {
            Step::Up | Step::Down => {
                let layer = spots[b].layer;
                let others = (0..map.boxes.len()).filter(|&o| o != b && spots[o].layer == layer);
                let found = if step == Step::Up {
                    others
                        .filter(|&o| spots[o].y < spots[b].y)
                        .max_by_key(|&o| spots[o].y)
                } else {
                    others
                        .filter(|&o| spots[o].y > spots[b].y)
                        .min_by_key(|&o| spots[o].y)
                };
                found.map(Picked::Box)
            }
            Step::Right => (0..map.edges.len())
                .filter(|&e| drawn(e) && map.edges[e].from == b)
                .min_by_key(|&e| row(map.edges[e].to))
                .map(Picked::Edge),
            Step::Left => (0..map.edges.len())
                .filter(|&e| drawn(e) && map.edges[e].to == b)
                .min_by_key(|&e| row(map.edges[e].from))
                .map(Picked::Edge),
        },
        Some(Picked::Edge(e)) => {
            let edge = &map.edges[e];
            match step {
                Step::Right => Some(Picked::Box(edge.to)),
                Step::Left => Some(Picked::Box(edge.from)),
                Step::Up | Step::Down => {
                    let same_caller: Vec<usize> = (0..map.edges.len())
                        .filter(|&o| drawn(o) && map.edges[o].from == edge.from)
                        .collect();
                    let (mut siblings, end): (
                        Vec<usize>,
                        fn(&crate::present::map::MapEdge) -> usize,
                    ) = if same_caller.len() > 1 {
                        (same_caller, |e| e.to)
                    } else {
                        (
                            (0..map.edges.len())
                                .filter(|&o| drawn(o) && map.edges[o].to == edge.to)
                                .collect(),
                            |e| e.from,
                        )
                    };
                    siblings.sort_by_key(|&o| (row(end(&map.edges[o])), o));
                    let at = siblings.iter().position(|&o| o == e).unwrap_or(0);
                    let to = if step == Step::Up {
                        at.checked_sub(1)
                    } else {
                        Some(at + 1).filter(|&i| i < siblings.len())
                    };
                    to.map(|i| Picked::Edge(siblings[i]))
                }
            }
        }
    };
    let Some(next) = next else {
        return false;
    };
    state.ui.map_pick = Some(match next {
        Picked::Box(b) => MapPick::Box(map.boxes[b].name.clone()),
        Picked::Edge(e) => pick_edge(map, e),
    });
    // The view follows the selection again.
    state.ui.map_pan = (0, 0);
    true
}

/// Enter: the selected edge's row in Edges (with its advice), the box's in Services (an
/// untraced callee's: the Edges row of the first call into it).
fn open_row(state: &mut State, _key: KeyCode) -> bool {
    let Some(map) = state.data.map.as_ref() else {
        return false;
    };
    let row = match picked(state, map) {
        Some(Picked::Edge(e)) => Err(map.edges[e].row.clone()),
        Some(Picked::Box(b)) => match &map.boxes[b].row {
            Some(service) => Ok(service.clone()),
            None => match map.edges.iter().find(|e| e.to == b) {
                Some(e) => Err(e.row.clone()),
                None => return false,
            },
        },
        None => return false,
    };
    match row {
        Ok(service) => {
            let i = services::service_rows(state)
                .iter()
                .position(|(n, _)| *n == service)
                .unwrap_or(0);
            state.ui.view = View::Services;
            state.ui.service_row = i;
        }
        Err((caller, callee)) => {
            let i = edges::edge_rows(state)
                .iter()
                .position(|e| e.caller == caller && e.callee == callee)
                .unwrap_or(0);
            state.ui.view = View::Edges;
            state.ui.edge_row = i;
        }
    }
    true
}

/// `c`: the worst chain held through the selection (an edge's calls, or a box's service), in
/// its waterfall, on the row of the call it went through.
fn worst_chain(state: &mut State, _key: KeyCode) -> bool {
    let Some(map) = state.data.map.as_ref() else {
        return false;
    };
    let through = match picked(state, map) {
        Some(Picked::Edge(e)) => {
            let (caller, callee) = map.edges[e].row.clone();
            crate::screen::data::Through::Edge(caller, callee)
        }
        Some(Picked::Box(b)) => {
            let b = &map.boxes[b];
            let mut names = b.folded.clone();
            if names.is_empty() {
                names.push(b.name.clone());
            }
            crate::screen::data::Through::Services(names)
        }
        None => return false,
    };
    match state.data.worst_chain_through(&through) {
        Some(trace) => {
            state.open_chain(trace, &through);
            true
        }
        None => {
            state.ui.message = Some("no chain through it is held any more".into());
            true
        }
    }
}

/// What one frame of the map shows: the placed layout and the part of it in view.
struct Frame<'a> {
    placed: Placed<'a>,
    area: Rect,
    origin: (u16, u16),
    /// A map smaller than the view is drawn in its middle: the cells before it.
    margin: (u16, u16),
}

impl<'a> Frame<'a> {
    fn of(state: &State, map: &'a ServiceMap, area: Rect) -> Self {
        let placed = map.layout.place(map.label_room(area.width));
        let origin = origin(state, map, &placed, area, state.ui.map_pan);
        let margin = (
            area.width.saturating_sub(placed.width) / 2,
            area.height.saturating_sub(map.layout.height) / 2,
        );
        Frame {
            placed,
            area,
            origin,
            margin,
        }
    }

    /// The screen cell of map cell `(x, y)`, when in view.
    fn to_screen(&self, x: u16, y: u16) -> Option<(u16, u16)> {
        let (ox, oy) = self.origin;
        let (sx, sy) = (
            x.checked_sub(ox)? + self.margin.0,
            y.checked_sub(oy)? + self.margin.1,
        );
        (sx < self.area.width && sy < self.area.height)
            .then(|| (self.area.x + sx, self.area.y + sy))
    }

    /// The map cell under screen position `pos`, when it is on the map.
    fn to_map(&self, pos: Position) -> Option<(u16, u16)> {
        if !self.area.contains(pos) {
            return None;
        }
        Some((
            (pos.x - self.area.x).checked_sub(self.margin.0)? + self.origin.0,
            (pos.y - self.area.y).checked_sub(self.margin.1)? + self.origin.1,
        ))
    }
}

/// The selection's middle, in map cells.
fn selection_centre(state: &State, map: &ServiceMap, placed: &Placed<'_>) -> Option<(u16, u16)> {
    match picked(state, map)? {
        Picked::Box(b) => {
            let (x, y, w, h) = placed.node(b);
            Some((x + w / 2, y + h / 2))
        }
        Picked::Edge(e) => {
            let (x, y, room) = placed.label(e)?;
            Some((x + room / 2, y))
        }
    }
}

/// The top-left map cell in view: the selection in the middle when the map is larger than the
/// view (else the map's corner), moved by `pan`, within the map.
fn origin(
    state: &State,
    map: &ServiceMap,
    placed: &Placed<'_>,
    area: Rect,
    pan: (i32, i32),
) -> (u16, u16) {
    let centre = selection_centre(state, map, placed).unwrap_or((0, 0));
    let axis = |size: u16, view: u16, centre: u16, pan: i32| -> u16 {
        let most = i32::from(size.saturating_sub(view));
        let auto = (i32::from(centre) - i32::from(view) / 2).clamp(0, most);
        (auto + pan).clamp(0, most) as u16
    };
    (
        axis(placed.width, area.width, centre.0, pan.0),
        axis(map.layout.height, area.height, centre.1, pan.1),
    )
}

/// Keeps the pan within what the map can move by on a screen of size `area`.
pub(crate) fn clamp_pan(state: &mut State, area: Rect) {
    let Some(map) = state.data.map.as_ref() else {
        return;
    };
    let body = super::layout(state, area).body;
    let area = map_area(body);
    let placed = map.layout.place(map.label_room(area.width));
    let auto = origin(state, map, &placed, area, (0, 0));
    let moved = origin(state, map, &placed, area, state.ui.map_pan);
    state.ui.map_pan = (
        i32::from(moved.0) - i32::from(auto.0),
        i32::from(moved.1) - i32::from(auto.1),
    );
}

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
fn edge_cells(placed: &Placed<'_>, e: usize) -> Vec<(u16, u16)> {
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
            "{since}{folded} · ▓ works for nobody · ✖ ▲ ● worst finding on the edge · fwd a>b: forwarded a with b left · ~ timeout inferred · ┄ untraced · hjkl pan"
        ),
        format!("{since}{folded} · ▓ for nobody · ✖▲● worst finding · ~ inferred · ┄ untraced"),
        format!("{since}{folded} · ▓ for nobody · ✖▲● worst"),
        format!("{since_short}{folded_short} · ▓ for nobody · ✖▲● worst"),
    ];
    let room = body.width.saturating_sub(1) as usize;
    let note = notes
        .iter()
        .find(|n| unicode_width(n) <= room)
        .unwrap_or(&notes[3]);
    foot(buf, 0, note, theme.dim());
}

/// A selected box in words.
fn box_words(b: &MapBox) -> String {
    let [name, lambda, dead] = b.lines();
    let rest = if b.untraced {
        "untraced: what its callers waited on it is on their edges".to_string()
    } else if b.dead_ms > 0 {
        format!("{dead}: {} of work for nobody", ms_grouped(b.dead_ms))
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
/// the cross-hatch in its free cells when it works for nobody. A line that leaves or enters it
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

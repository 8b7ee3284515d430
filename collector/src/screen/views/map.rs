//! The Map: services as boxes in layers (callers on the left), the calls between them as lines
//! with arrowheads and labels, the worst finding's glyph on each edge and the cross-hatch on
//! every box that works for nobody; drawn from the [`ServiceMap`] the data side built from the
//! Edges and Services totals (`view_model::map`), which the page draws too.
//!
//! Its selection (`ui.map_pick`) is a box or an edge, by name, once the user picks one (until
//! then the map's worst edge, as it is now): the arrows move it from box to box along the edges; `h`/`j`/`k`/`l`, the wheel and a drag pan (`ui.map_pan`, from where the
//! selection puts the view). Enter opens the selected edge's Edges row or the box's Services
//! row; `o` opens the worst chain through it, in its waterfall (`c` too, where no demo runs:
//! there `c` cures).
//!
//! This file: the pane, its keys and its selection; `frame`: the part of the map in view;
//! `draw`: the boxes, lines and words.

use std::sync::Arc;

use crossterm::event::KeyCode;
use ratatui::buffer::Buffer;
use ratatui::layout::{Position, Rect};

use super::keys::{self, Key};
use super::table::MINUTE;
use super::theme::Theme;
use super::{Needs, Pane, ScreenLayout, edges, services};
use crate::screen::state::MapPick;
use crate::screen::{State, View};
use crate::view_model::map::ServiceMap;

mod draw;
mod frame;

pub use draw::render;
pub(crate) use frame::clamp_pan;

use draw::edge_cells;
use frame::Frame;

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
        codes: &[KeyCode::Char('o')],
        long: "o",
        short: "o",
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

    /// `c`, as `o`, where no demo runs: in the demo `c` cures, in every view.
    fn on_key(&self, state: &mut State, key: KeyCode) -> Option<bool> {
        if key == KeyCode::Char('c') && state.demo.is_none() {
            return Some(worst_chain(state, key));
        }
        keys::answer(self.keys(), state, key)
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
                        fn(&crate::view_model::map::MapEdge) -> usize,
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
    state.ui.map_pick = Some(as_pick(map, next));
    // The view follows the selection again.
    state.ui.map_pan = (0, 0);
    true
}

/// The selection by name, as the state keeps it.
fn as_pick(map: &ServiceMap, picked: Picked) -> MapPick {
    match picked {
        Picked::Box(b) => MapPick::Box(map.boxes[b].name.clone()),
        Picked::Edge(e) => pick_edge(map, e),
    }
}

/// Keeps the selection a key acted on, the default one too: back on the Map, the user finds
/// what they opened, though the worst edge (the default) may have changed meanwhile.
fn keep(state: &mut State, picked: Picked) {
    if let Some(map) = state.data.map.as_ref() {
        state.ui.map_pick = Some(as_pick(map, picked));
    }
}

/// Enter: the selected edge's row in Edges (with its advice), the box's in Services (an
/// untraced callee's: the Edges row of the first call into it).
fn open_row(state: &mut State, _key: KeyCode) -> bool {
    let Some(map) = state.data.map.as_ref() else {
        return false;
    };
    let Some(pick) = picked(state, map) else {
        return false;
    };
    let row = match pick {
        Picked::Edge(e) => Err(map.edges[e].row.clone()),
        Picked::Box(b) => match &map.boxes[b].row {
            Some(service) => Ok(service.clone()),
            None => match map.edges.iter().find(|e| e.to == b) {
                Some(e) => Err(e.row.clone()),
                None => return false,
            },
        },
    };
    keep(state, pick);
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

/// `o`: the worst chain held through the selection (an edge's calls, or a box's service), in
/// its waterfall, on the row of the call it went through.
fn worst_chain(state: &mut State, _key: KeyCode) -> bool {
    let Some(map) = state.data.map.as_ref() else {
        return false;
    };
    let Some(pick) = picked(state, map) else {
        return false;
    };
    let through = match pick {
        Picked::Edge(e) => {
            let (caller, callee) = map.edges[e].row.clone();
            crate::screen::data::Through::Edge(caller, callee)
        }
        Picked::Box(b) => {
            let b = &map.boxes[b];
            let mut names = b.folded.clone();
            if names.is_empty() {
                names.push(b.name.clone());
            }
            crate::screen::data::Through::Services(names)
        }
    };
    keep(state, pick);
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

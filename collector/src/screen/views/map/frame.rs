//! The part of the map in view: the selection in the middle, moved by the pan, within the map.

use ratatui::layout::{Position, Rect};

use super::{Picked, map_area, picked};
use crate::screen::State;
use crate::view_model::layout::Placed;
use crate::view_model::map::ServiceMap;

/// What one frame of the map shows: the placed layout and the part of it in view.
pub(super) struct Frame<'a> {
    pub(super) placed: Placed<'a>,
    pub(super) area: Rect,
    pub(super) origin: (u16, u16),
    /// A map smaller than the view is drawn in its middle: the cells before it.
    pub(super) margin: (u16, u16),
}

impl<'a> Frame<'a> {
    pub(super) fn of(state: &State, map: &'a ServiceMap, area: Rect) -> Self {
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
    pub(super) fn to_screen(&self, x: u16, y: u16) -> Option<(u16, u16)> {
        let (ox, oy) = self.origin;
        let (sx, sy) = (
            x.checked_sub(ox)? + self.margin.0,
            y.checked_sub(oy)? + self.margin.1,
        );
        (sx < self.area.width && sy < self.area.height)
            .then(|| (self.area.x + sx, self.area.y + sy))
    }

    /// The map cell under screen position `pos`, when it is on the map.
    pub(super) fn to_map(&self, pos: Position) -> Option<(u16, u16)> {
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
    let body = super::super::layout(state, area).body;
    let area = map_area(body);
    let placed = map.layout.place(map.label_room(area.width));
    let auto = origin(state, map, &placed, area, (0, 0));
    let moved = origin(state, map, &placed, area, state.ui.map_pan);
    state.ui.map_pan = (
        i32::from(moved.0) - i32::from(auto.0),
        i32::from(moved.1) - i32::from(auto.1),
    );
}

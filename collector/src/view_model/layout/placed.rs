//! Columns: a [`Layout`] placed for a given label room, and where each node, line, arrowhead
//! and label goes.

use super::Layout;

impl Layout {
    /// The columns for `label_room` cells of label in each gap.
    pub fn place(&self, label_room: u16) -> Placed<'_> {
        let mut layer_x = Vec::with_capacity(self.layer_widths.len());
        let mut x = 0u16;
        for (i, w) in self.layer_widths.iter().enumerate() {
            layer_x.push(x);
            x = x.saturating_add(*w);
            if let Some(t) = self.tracks.get(i) {
                x = x.saturating_add(gap_cells(*t).saturating_add(label_room));
            }
        }
        Placed {
            layout: self,
            layer_x,
            label_room,
            width: x,
        }
    }

    /// The width in cells of everything but the labels: what `place` adds `label_room` to in
    /// each gap.
    pub fn fixed_width(&self) -> u16 {
        let boxes: u16 = self.layer_widths.iter().sum();
        let gaps: u16 = self.tracks.iter().map(|&t| gap_cells(t)).sum();
        boxes.saturating_add(gaps)
    }
}

/// The cells of a gap with `tracks` tracks, its label room aside: a cell of line after the
/// layer's widest node, the tracks and a cell after them, and the arrowhead's cell.
fn gap_cells(tracks: u16) -> u16 {
    if tracks == 0 { 2 } else { tracks + 3 }
}

/// A [`Layout`] with its columns: where each node, track, label and arrowhead goes.
#[derive(Clone, Debug)]
pub struct Placed<'a> {
    /// The layout.
    pub layout: &'a Layout,
    layer_x: Vec<u16>,
    /// The label room of each gap.
    pub label_room: u16,
    /// Columns in all.
    pub width: u16,
}

/// Which way an arrowhead points.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pointing {
    /// Right, at the node on the link's right end.
    Right,
    /// Left, at the node on its left end (a reversed link).
    Left,
}

impl Placed<'_> {
    /// Node `i`'s box: left column, top row, width, height.
    pub fn node(&self, i: usize) -> (u16, u16, u16, u16) {
        let s = self.layout.spots[i];
        (self.layer_x[s.layer], s.y, self.layout.widths[i], s.height)
    }

    /// The first column of gap `gap` (right after its left layer's widest node).
    fn gap_x(&self, gap: usize) -> u16 {
        self.layer_x[gap] + self.layout.layer_widths[gap]
    }

    fn track_x(&self, gap: usize, track: u16) -> u16 {
        self.gap_x(gap) + 1 + track
    }

    /// Where a label of the hop into gap `gap`'s right layer starts.
    fn label_x(&self, gap: usize) -> u16 {
        let tracks = self.layout.tracks[gap];
        self.gap_x(gap) + gap_cells(tracks) - 1
    }

    /// Link `l`'s line as an orthogonal polyline, left to right: from its left node's border
    /// (or, reversed, the cell beside it, where the arrowhead goes) to the cell before its
    /// right node's border (the arrowhead's; reversed, the border itself). `None` for a link
    /// not drawn.
    pub fn line(&self, l: usize) -> Option<Vec<(u16, u16)>> {
        let route = self.layout.routes.get(l)?.as_ref()?;
        let first = route.hops.first()?;
        let last = route.hops.last()?;
        let (lx, _, lw, _) = self.node(route.left);
        let (rx, ..) = self.node(route.right);
        let start = if route.reversed { lx + lw } else { lx + lw - 1 };
        let end = if route.reversed { rx } else { rx - 1 };
        let mut points = vec![(start, first.from_row)];
        for hop in &route.hops {
            if let Some(turn) = hop.turn {
                let x = self.track_x(hop.gap, turn.track);
                points.push((x, hop.from_row));
                if let Some((row, second)) = turn.jog {
                    let x2 = self.track_x(hop.gap, second);
                    points.push((x, row));
                    points.push((x2, row));
                    points.push((x2, hop.to_row));
                } else {
                    points.push((x, hop.to_row));
                }
            }
        }
        points.push((end, last.to_row));
        points.dedup();
        Some(points)
    }

    /// Link `l`'s arrowhead: its cell and which way it points.
    pub fn arrow(&self, l: usize) -> Option<(u16, u16, Pointing)> {
        let route = self.layout.routes.get(l)?.as_ref()?;
        if route.reversed {
            let (lx, _, lw, _) = self.node(route.left);
            Some((lx + lw, route.hops.first()?.from_row, Pointing::Left))
        } else {
            let (rx, ..) = self.node(route.right);
            Some((rx - 1, route.hops.last()?.to_row, Pointing::Right))
        }
    }

    /// Where link `l`'s label goes: its first column, its row, and the room it has (on the
    /// last gap it crosses, right of every track there, left of the arrowhead's cell).
    pub fn label(&self, l: usize) -> Option<(u16, u16, u16)> {
        let route = self.layout.routes.get(l)?.as_ref()?;
        let last = route.hops.last()?;
        Some((self.label_x(last.gap), last.to_row, self.label_room))
    }
}

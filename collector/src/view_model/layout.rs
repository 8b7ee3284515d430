//! A layered drawing of a directed graph in terminal cells (Sugiyama's method, as Graphviz's
//! `dot` and dagre draw service graphs): cycles broken by turning round the links a depth-first
//! walk finds going back, layers by the longest path from the roots (roots on the left),
//! crossings reduced by barycentre sweeps (the order with the fewest kept), rows aligned along
//! the links, and each link routed orthogonally through the gaps between layers, on tracks
//! that never touch another link's corner.
//!
//! In: [`Node`]s (size in cells; `apart` ones go below the others of their layer) and
//! [`Link`]s. Out: a [`Layout`] (each node's layer and rows, each link's [`Route`]);
//! [`Layout::place`] turns layers into columns for a given label room, so a narrow screen and
//! a wide page draw the same layout, with shorter or longer labels. Pure and deterministic: the
//! same graph always gives the same layout. Why a module of our own: docs/architecture.md.
//!
//! A stage a file: `cycles`, `layers`, `order` (the crossings), `ports`, `rows`, `routing` (the
//! tracks); `placed` turns layers into columns.

mod cycles;
mod layers;
mod order;
mod placed;
mod ports;
mod routing;
mod rows;

pub use placed::{Placed, Pointing};
pub use routing::Turn;

use cycles::back_links;
use layers::longest_path_layers;
use order::{initial_order, reduce_crossings};
use ports::number_ports;
use routing::assign_tracks;
use rows::align_rows;

/// A node to lay out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Node {
    /// Its width in cells, borders included.
    pub width: u16,
    /// Its least height in cells (it grows to give each link its own row).
    pub min_height: u16,
    /// Drawn apart: after every other node of its layer.
    pub apart: bool,
}

/// A link from one node to another (a link to itself is not drawn).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Link {
    /// The node it leaves.
    pub from: usize,
    /// The node it points at.
    pub to: usize,
}

/// Where a node went.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Spot {
    /// Its layer, 0 the leftmost.
    pub layer: usize,
    /// Its top row.
    pub y: u16,
    /// Its height in rows.
    pub height: u16,
}

/// One gap a link crosses: from a row on the left to a row on the right, turning on a
/// vertical track when the rows differ.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Hop {
    /// The gap: between layer `gap` and layer `gap + 1`.
    pub gap: usize,
    /// The row it leaves the left layer at.
    pub from_row: u16,
    /// The row it reaches the right layer at.
    pub to_row: u16,
    /// How it turns, when the rows differ.
    pub turn: Option<Turn>,
}

/// A link's way through the layers, left to right.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Route {
    /// The node at its left end.
    pub left: usize,
    /// The node at its right end.
    pub right: usize,
    /// It points left (at `left`): a link that closed a cycle, turned round to lay it out.
    pub reversed: bool,
    /// The gaps it crosses, left to right (more than one: it passes through the layers
    /// between, on the row where one hop ends and the next begins).
    pub hops: Vec<Hop>,
}

/// A laid out graph. See the module documentation.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Layout {
    /// Each node's place, in the order given.
    pub spots: Vec<Spot>,
    /// Each link's route, in the order given; `None` for a link from a node to itself.
    pub routes: Vec<Option<Route>>,
    /// Each layer's width: its widest node.
    pub layer_widths: Vec<u16>,
    /// Each gap's tracks.
    pub tracks: Vec<u16>,
    /// Rows in all.
    pub height: u16,
    widths: Vec<u16>,
}

/// A thing in a layer: a node, or a point a long link passes through.
#[derive(Clone, Copy, Debug)]
struct Item {
    node: Option<usize>,
    layer: usize,
    apart: bool,
}

/// A piece of a link between two adjacent layers.
#[derive(Clone, Copy, Debug)]
struct Seg {
    from: usize,
    to: usize,
    link: usize,
    /// The attach point on the left item: its right port.
    from_port: usize,
    /// The attach point on the right item: its left port.
    to_port: usize,
}

impl Layout {
    /// Lays out `nodes` and `links`.
    pub fn of(nodes: &[Node], links: &[Link]) -> Layout {
        let n = nodes.len();
        let drawn: Vec<usize> = (0..links.len())
            .filter(|&l| links[l].from != links[l].to && links[l].from < n && links[l].to < n)
            .collect();
        let reversed = back_links(n, links, &drawn);
        // Oriented left to right.
        let oriented = |l: usize| {
            let Link { from, to } = links[l];
            if reversed[l] { (to, from) } else { (from, to) }
        };
        let layer = longest_path_layers(n, &drawn, &oriented);
        let mut items: Vec<Item> = (0..n)
            .map(|i| Item {
                node: Some(i),
                layer: layer[i],
                apart: nodes[i].apart,
            })
            .collect();
        // Each drawn link as the items it passes, left to right.
        let mut chains: Vec<Vec<usize>> = vec![Vec::new(); links.len()];
        for &l in &drawn {
            let (a, b) = oriented(l);
            let mut chain = vec![a];
            for lay in layer[a] + 1..layer[b] {
                items.push(Item {
                    node: None,
                    layer: lay,
                    apart: false,
                });
                chain.push(items.len() - 1);
            }
            chain.push(b);
            chains[l] = chain;
        }
        let layers_n = layer.iter().copied().max().map_or(0, |m| m + 1);
        let mut segs: Vec<Seg> = Vec::new();
        for &l in &drawn {
            for w in chains[l].windows(2) {
                segs.push(Seg {
                    from: w[0],
                    to: w[1],
                    link: l,
                    from_port: 0,
                    to_port: 0,
                });
            }
        }
        let mut order = initial_order(&items, &segs, layers_n);
        reduce_crossings(&mut order, &items, &segs);
        let mut pos = vec![0usize; items.len()];
        for layer in &order {
            for (p, &it) in layer.iter().enumerate() {
                pos[it] = p;
            }
        }
        // Ports: each item's right side has one port for the links it leaves forward (they
        // branch on a shared track) and one per reversed link it is the target of; its left
        // side one per piece arriving. Ordered by where the other end sits, so they do not cross.
        let (right_ports, left_ports) = number_ports(&items, &mut segs, &pos, &reversed);
        let heights: Vec<u16> = items
            .iter()
            .enumerate()
            .map(|(i, it)| match it.node {
                Some(node) => {
                    let ports = left_ports[i].max(right_ports[i]) as u16;
                    nodes[node].min_height.max(ports.saturating_add(2)).max(3)
                }
                None => 1,
            })
            .collect();
        let offset = |i: usize, port: usize, count: usize| -> u16 {
            if items[i].node.is_none() {
                return 0;
            }
            let inside = heights[i].saturating_sub(2) as usize;
            (1 + inside.saturating_sub(count) / 2 + port) as u16
        };
        let from_off: Vec<u16> = segs
            .iter()
            .map(|s| offset(s.from, s.from_port, right_ports[s.from]))
            .collect();
        let to_off: Vec<u16> = segs
            .iter()
            .map(|s| offset(s.to, s.to_port, left_ports[s.to]))
            .collect();
        let ys = align_rows(&order, &items, &segs, &heights, &from_off, &to_off);
        let y_of = |i: usize| ys[i] as u16;
        let mut tracks = vec![0u16; layers_n.saturating_sub(1)];
        let seg_track = assign_tracks(&segs, &items, &from_off, &to_off, &y_of, &mut tracks);
        let mut routes: Vec<Option<Route>> = vec![None; links.len()];
        for &l in &drawn {
            let (a, b) = oriented(l);
            let hops = segs
                .iter()
                .enumerate()
                .filter(|(_, s)| s.link == l)
                .map(|(k, s)| Hop {
                    gap: items[s.from].layer,
                    from_row: y_of(s.from) + from_off[k],
                    to_row: y_of(s.to) + to_off[k],
                    turn: seg_track[k],
                })
                .collect();
            routes[l] = Some(Route {
                left: a,
                right: b,
                reversed: reversed[l],
                hops,
            });
        }
        let mut layer_widths = vec![1u16; layers_n];
        for (i, node) in nodes.iter().enumerate() {
            layer_widths[layer[i]] = layer_widths[layer[i]].max(node.width);
        }
        let spots: Vec<Spot> = (0..n)
            .map(|i| Spot {
                layer: layer[i],
                y: y_of(i),
                height: heights[i],
            })
            .collect();
        let height = (0..items.len())
            .map(|i| y_of(i) + heights[i])
            .max()
            .unwrap_or(0);
        Layout {
            spots,
            routes,
            layer_widths,
            tracks,
            height,
            widths: nodes.iter().map(|n| n.width).collect(),
        }
    }
}

#[cfg(test)]
mod tests;

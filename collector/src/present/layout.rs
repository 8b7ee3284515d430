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

/// The crossing-reduction sweeps tried (down and up each), the best order kept.
const SWEEPS: usize = 8;
/// Rounds of row alignment (down then up), ending with one more down.
const ALIGN_ROUNDS: usize = 3;

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
        let (right_ports, left_ports) = ports(&items, &mut segs, &pos, &reversed);
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

/// Which links close a cycle: those a depth-first walk from the roots (then from any node not
/// reached) finds pointing back at a node on its path.
fn back_links(n: usize, links: &[Link], drawn: &[usize]) -> Vec<bool> {
    let mut out: Vec<Vec<usize>> = vec![Vec::new(); n];
    let mut has_caller = vec![false; n];
    for &l in drawn {
        out[links[l].from].push(l);
        has_caller[links[l].to] = true;
    }
    let mut reversed = vec![false; links.len()];
    // 0 unseen, 1 on the path, 2 done.
    let mut state = vec![0u8; n];
    let starts = (0..n)
        .filter(|&i| !has_caller[i])
        .chain((0..n).filter(|&i| has_caller[i]));
    for start in starts {
        if state[start] != 0 {
            continue;
        }
        let mut stack: Vec<(usize, usize)> = vec![(start, 0)];
        state[start] = 1;
        while let Some(&mut (node, ref mut next)) = stack.last_mut() {
            if let Some(&l) = out[node].get(*next) {
                *next += 1;
                let to = links[l].to;
                match state[to] {
                    0 => {
                        state[to] = 1;
                        stack.push((to, 0));
                    }
                    1 => reversed[l] = true,
                    _ => {}
                }
            } else {
                state[node] = 2;
                stack.pop();
            }
        }
    }
    reversed
}

/// Each node's layer: 0 for a node nothing points at, else one past the farthest of those
/// that point at it (the links oriented by `oriented`, a graph without cycles).
fn longest_path_layers(
    n: usize,
    drawn: &[usize],
    oriented: &impl Fn(usize) -> (usize, usize),
) -> Vec<usize> {
    let mut indegree = vec![0usize; n];
    let mut out: Vec<Vec<usize>> = vec![Vec::new(); n];
    for &l in drawn {
        let (a, b) = oriented(l);
        out[a].push(b);
        indegree[b] += 1;
    }
    let mut layer = vec![0usize; n];
    let mut ready: Vec<usize> = (0..n).filter(|&i| indegree[i] == 0).rev().collect();
    while let Some(a) = ready.pop() {
        for &b in &out[a] {
            layer[b] = layer[b].max(layer[a] + 1);
            indegree[b] -= 1;
            if indegree[b] == 0 {
                ready.push(b);
            }
        }
    }
    layer
}

/// The first order of each layer: as a walk from the roots, in the order given, meets them
/// (the points of a long link right after the node it leaves), the nodes drawn apart last.
fn initial_order(items: &[Item], segs: &[Seg], layers: usize) -> Vec<Vec<usize>> {
    let mut next: Vec<Vec<usize>> = vec![Vec::new(); items.len()];
    let mut has_prev = vec![false; items.len()];
    for s in segs {
        next[s.from].push(s.to);
        has_prev[s.to] = true;
    }
    let mut seen = vec![false; items.len()];
    let mut order: Vec<Vec<usize>> = vec![Vec::new(); layers];
    let starts: Vec<usize> = (0..items.len())
        .filter(|&i| items[i].node.is_some() && !has_prev[i])
        .chain(0..items.len())
        .collect();
    for start in starts {
        if seen[start] {
            continue;
        }
        let mut queue = std::collections::VecDeque::from([start]);
        seen[start] = true;
        while let Some(i) = queue.pop_front() {
            order[items[i].layer].push(i);
            for &j in &next[i] {
                if !seen[j] {
                    seen[j] = true;
                    queue.push_back(j);
                }
            }
        }
    }
    for layer in &mut order {
        layer.sort_by_key(|&i| items[i].apart);
    }
    order
}

/// Barycentre sweeps, down then up, [`SWEEPS`] times: each item of a layer sorted by the mean
/// position of its neighbours in the layer before (items without one keep theirs), the nodes
/// drawn apart after the others; the order with the fewest crossings is kept.
fn reduce_crossings(order: &mut Vec<Vec<usize>>, items: &[Item], segs: &[Seg]) {
    let mut prev: Vec<Vec<usize>> = vec![Vec::new(); items.len()];
    let mut next: Vec<Vec<usize>> = vec![Vec::new(); items.len()];
    for s in segs {
        next[s.from].push(s.to);
        prev[s.to].push(s.from);
    }
    let mut pos = vec![0usize; items.len()];
    let index = |order: &Vec<Vec<usize>>, pos: &mut Vec<usize>| {
        for layer in order {
            for (p, &i) in layer.iter().enumerate() {
                pos[i] = p;
            }
        }
    };
    index(order, &mut pos);
    let mut best = order.clone();
    let mut fewest = crossings(order, segs, &pos);
    for _ in 0..SWEEPS {
        if fewest == 0 {
            break;
        }
        for down in [true, false] {
            let layers: Vec<usize> = if down {
                (1..order.len()).collect()
            } else {
                (0..order.len().saturating_sub(1)).rev().collect()
            };
            for l in layers {
                let neighbours = if down { &prev } else { &next };
                let mut keyed: Vec<(bool, f64, usize)> = order[l]
                    .iter()
                    .map(|&i| {
                        let ns = &neighbours[i];
                        let key = if ns.is_empty() {
                            pos[i] as f64
                        } else {
                            ns.iter().map(|&j| pos[j] as f64).sum::<f64>() / ns.len() as f64
                        };
                        (items[i].apart, key, i)
                    })
                    .collect();
                keyed.sort_by(|a, b| a.0.cmp(&b.0).then(a.1.total_cmp(&b.1)));
                order[l] = keyed.into_iter().map(|k| k.2).collect();
                for (p, &i) in order[l].iter().enumerate() {
                    pos[i] = p;
                }
            }
            let now = crossings(order, segs, &pos);
            if now < fewest {
                fewest = now;
                best = order.clone();
            }
        }
    }
    *order = best;
}

/// How many pairs of pieces cross between adjacent layers.
fn crossings(order: &[Vec<usize>], segs: &[Seg], pos: &[usize]) -> u64 {
    let mut layer_of_item = vec![0usize; pos.len()];
    for (l, layer) in order.iter().enumerate() {
        for &i in layer {
            layer_of_item[i] = l;
        }
    }
    let mut groups: Vec<Vec<(usize, usize)>> = vec![Vec::new(); order.len()];
    for s in segs {
        groups[layer_of_item[s.from]].push((pos[s.from], pos[s.to]));
    }
    groups
        .iter_mut()
        .map(|g| {
            g.sort_unstable();
            let mut right: Vec<usize> = g.iter().map(|p| p.1).collect();
            inversions(&mut right)
        })
        .sum()
}

/// Pairs out of order in `v` (strictly greater before smaller), by merge sort; sorts `v`.
fn inversions(v: &mut [usize]) -> u64 {
    let n = v.len();
    if n < 2 {
        return 0;
    }
    let mid = n / 2;
    let mut count = inversions(&mut v[..mid]) + inversions(&mut v[mid..]);
    let mut merged = Vec::with_capacity(n);
    let (mut i, mut j) = (0, mid);
    while i < mid && j < n {
        if v[j] < v[i] {
            count += (mid - i) as u64;
            merged.push(v[j]);
            j += 1;
        } else {
            merged.push(v[i]);
            i += 1;
        }
    }
    merged.extend_from_slice(&v[i..mid]);
    merged.extend_from_slice(&v[j..n]);
    v.copy_from_slice(&merged);
    count
}

/// Numbers each piece's ports: returns each item's count of right ports and of left ports.
fn ports(
    items: &[Item],
    segs: &mut [Seg],
    pos: &[usize],
    reversed: &[bool],
) -> (Vec<usize>, Vec<usize>) {
    let mut right = vec![0usize; items.len()];
    let mut left = vec![0usize; items.len()];
    // Right side: a key per port, the forward links' shared one being usize::MAX.
    let mut right_keys: Vec<Vec<(f64, usize, usize)>> = vec![Vec::new(); items.len()];
    // The shared port: its targets' positions and its first link, which breaks ties as the
    // left sides' ports do (by link), so two pieces between the same items never cross.
    let mut shared: Vec<(Vec<usize>, usize)> = vec![(Vec::new(), usize::MAX); items.len()];
    for s in segs.iter() {
        let first = items[s.from].node.is_some();
        if first && reversed[s.link] {
            right_keys[s.from].push((pos[s.to] as f64, s.link, s.link));
        } else {
            shared[s.from].0.push(pos[s.to]);
            shared[s.from].1 = shared[s.from].1.min(s.link);
        }
    }
    for (i, (targets, link)) in shared.iter().enumerate() {
        if !targets.is_empty() {
            let mean = targets.iter().sum::<usize>() as f64 / targets.len() as f64;
            right_keys[i].push((mean, *link, usize::MAX));
        }
    }
    for keys in &mut right_keys {
        keys.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    }
    for s in segs.iter_mut() {
        let first = items[s.from].node.is_some();
        let key = if first && reversed[s.link] {
            s.link
        } else {
            usize::MAX
        };
        s.from_port = right_keys[s.from]
            .iter()
            .position(|k| k.2 == key)
            .unwrap_or(0);
    }
    // Left side: by where the piece leaves, its port there included.
    let mut left_keys: Vec<Vec<(usize, usize, usize)>> = vec![Vec::new(); items.len()];
    for s in segs.iter() {
        left_keys[s.to].push((pos[s.from], s.from_port, s.link));
    }
    for keys in &mut left_keys {
        keys.sort_unstable();
    }
    for s in segs.iter_mut() {
        s.to_port = left_keys[s.to]
            .iter()
            .position(|k| k.2 == s.link && k.0 == pos[s.from])
            .unwrap_or(0);
    }
    for i in 0..items.len() {
        right[i] = right_keys[i].len();
        left[i] = left_keys[i].len();
    }
    (right, left)
}

/// Each item's top row: stacked in its layer's order, then moved toward where the pieces
/// attached to it come from (down: from the left; up: from the right), as little as keeps every
/// item in order with a row between nodes (least squares under order, by pool-adjacent-
/// violators), [`ALIGN_ROUNDS`] times and a last pass down; shifted so the top row is 0.
fn align_rows(
    order: &[Vec<usize>],
    items: &[Item],
    segs: &[Seg],
    heights: &[u16],
    from_off: &[u16],
    to_off: &[u16],
) -> Vec<i64> {
    let mut ys = vec![0i64; items.len()];
    let sep = |a: usize, b: usize| -> i64 {
        i64::from(items[a].node.is_some() || items[b].node.is_some())
    };
    for layer in order {
        let mut y = 0;
        for (k, &i) in layer.iter().enumerate() {
            if k > 0 {
                y += sep(layer[k - 1], i);
            }
            ys[i] = y;
            y += i64::from(heights[i]);
        }
    }
    let mut from_left: Vec<Vec<usize>> = vec![Vec::new(); items.len()];
    let mut from_right: Vec<Vec<usize>> = vec![Vec::new(); items.len()];
    for (k, s) in segs.iter().enumerate() {
        from_left[s.to].push(k);
        from_right[s.from].push(k);
    }
    let passes = (0..ALIGN_ROUNDS)
        .flat_map(|_| [true, false])
        .chain(std::iter::once(true));
    for down in passes {
        let layers: Vec<usize> = if down {
            (1..order.len()).collect()
        } else {
            (0..order.len().saturating_sub(1)).rev().collect()
        };
        for l in layers {
            let layer = &order[l];
            let wanted: Vec<(f64, f64)> = layer
                .iter()
                .map(|&i| {
                    let mut want: Vec<i64> = if down {
                        from_left[i]
                            .iter()
                            .map(|&k| {
                                ys[segs[k].from] + i64::from(from_off[k]) - i64::from(to_off[k])
                            })
                            .collect()
                    } else {
                        from_right[i]
                            .iter()
                            .map(|&k| {
                                ys[segs[k].to] + i64::from(to_off[k]) - i64::from(from_off[k])
                            })
                            .collect()
                    };
                    if want.is_empty() {
                        return (ys[i] as f64, 0.25);
                    }
                    want.sort_unstable();
                    let mid = want.len() / 2;
                    let median = if want.len() % 2 == 1 {
                        want[mid] as f64
                    } else {
                        (want[mid - 1] + want[mid]) as f64 / 2.0
                    };
                    (median, want.len() as f64)
                })
                .collect();
            let mut offsets = Vec::with_capacity(layer.len());
            let mut off = 0i64;
            for (k, &i) in layer.iter().enumerate() {
                if k > 0 {
                    off += i64::from(heights[layer[k - 1]]) + sep(layer[k - 1], i);
                }
                offsets.push(off);
            }
            let targets: Vec<(f64, f64)> = wanted
                .iter()
                .zip(&offsets)
                .map(|((d, w), off)| (d - *off as f64, *w))
                .collect();
            let fitted = isotonic(&targets);
            for (k, &i) in layer.iter().enumerate() {
                ys[i] = fitted[k].round() as i64 + offsets[k];
            }
        }
    }
    let top = ys.iter().copied().min().unwrap_or(0);
    for y in &mut ys {
        *y -= top;
    }
    ys
}

/// The non-decreasing sequence nearest `values` (value, weight) in weighted least squares:
/// pool-adjacent-violators.
fn isotonic(values: &[(f64, f64)]) -> Vec<f64> {
    // Blocks of (mean, weight, length).
    let mut blocks: Vec<(f64, f64, usize)> = Vec::with_capacity(values.len());
    for &(v, w) in values {
        blocks.push((v, w, 1));
        while blocks.len() > 1 {
            let (m2, w2, n2) = blocks[blocks.len() - 1];
            let (m1, w1, n1) = blocks[blocks.len() - 2];
            if m1 <= m2 {
                break;
            }
            blocks.pop();
            let w = w1 + w2;
            if let Some(last) = blocks.last_mut() {
                *last = ((m1 * w1 + m2 * w2) / w, w, n1 + n2);
            }
        }
    }
    blocks
        .into_iter()
        .flat_map(|(m, _, n)| std::iter::repeat_n(m, n))
        .collect()
}

/// How a piece crosses its gap when its rows differ: down (or up) its track, and, when its
/// target row is another trunk's port row to the right of that track, a jog first: across on
/// the row beside the target to a track of its own past that trunk, then to the target.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Turn {
    /// The trunk's track (0 the leftmost).
    pub track: u16,
    /// The jog: its row and its second track.
    pub jog: Option<(u16, u16)>,
}

/// Each piece's [`Turn`] in its gap (`None`: straight across). The pieces leaving one port
/// share a track (a trunk with a branch per target); a track holds trunks whose rows do not
/// meet; a trunk whose port row is another's target row goes left of it where the order
/// allows, and the branch that still runs into a port row jogs round it, so no line runs along
/// another. Fills `tracks` with each gap's count.
fn assign_tracks(
    segs: &[Seg],
    items: &[Item],
    from_off: &[u16],
    to_off: &[u16],
    y_of: &impl Fn(usize) -> u16,
    tracks: &mut [u16],
) -> Vec<Option<Turn>> {
    let mut out: Vec<Option<Turn>> = vec![None; segs.len()];
    let row_from = |k: usize| y_of(segs[k].from) + from_off[k];
    let row_to = |k: usize| y_of(segs[k].to) + to_off[k];
    for (gap, count) in tracks.iter_mut().enumerate() {
        // Groups: (from item, port) -> pieces.
        let mut groups: Vec<((usize, usize), Vec<usize>)> = Vec::new();
        for (k, s) in segs.iter().enumerate() {
            if items[s.from].layer != gap {
                continue;
            }
            match groups.iter_mut().find(|g| g.0 == (s.from, s.from_port)) {
                Some(g) => g.1.push(k),
                None => groups.push(((s.from, s.from_port), vec![k])),
            }
        }
        let straight_rows: Vec<u16> = groups
            .iter()
            .filter(|(_, ks)| ks.len() == 1 && row_from(ks[0]) == row_to(ks[0]))
            .map(|(_, ks)| row_to(ks[0]))
            .collect();
        // The groups that turn: (port row, pieces, top row, bottom row).
        let bent: Vec<(u16, &Vec<usize>, u16, u16)> = groups
            .iter()
            .filter(|(_, ks)| ks.len() > 1 || row_from(ks[0]) != row_to(ks[0]))
            .map(|(_, ks)| {
                let source = row_from(ks[0]);
                let rows = ks.iter().map(|&k| row_to(k)).chain([source]);
                let lo = rows.clone().min().unwrap_or(source);
                let hi = rows.max().unwrap_or(source);
                (source, ks, lo, hi)
            })
            .collect();
        let m = bent.len();
        let targets = |g: usize| bent[g].1.iter().map(|&k| row_to(k));
        // before[a]: the groups whose port row is one of a's targets: best left of a.
        let before: Vec<Vec<usize>> = (0..m)
            .map(|a| {
                (0..m)
                    .filter(|&b| b != a && targets(a).any(|r| r == bent[b].0))
                    .collect()
            })
            .collect();
        let mut placed: Vec<Option<u16>> = vec![None; m];
        let mut on_track: Vec<Vec<(u16, u16)>> = Vec::new();
        let free = |on_track: &Vec<Vec<(u16, u16)>>, t: u16, lo: u16, hi: u16| {
            on_track
                .get(t as usize)
                .is_none_or(|spans| spans.iter().all(|&(a, b)| b < lo || hi < a))
        };
        let take = |on_track: &mut Vec<Vec<(u16, u16)>>, t: u16, lo: u16, hi: u16| {
            while on_track.len() <= t as usize {
                on_track.push(Vec::new());
            }
            on_track[t as usize].push((lo, hi));
        };
        for _ in 0..m {
            // The next group: every group it should follow placed, the topmost first; on a
            // cycle, the topmost left (its branch jogs below).
            let open = (0..m).filter(|&g| placed[g].is_none());
            let ready = open
                .clone()
                .filter(|&g| before[g].iter().all(|&b| placed[b].is_some()))
                .min_by_key(|&g| (bent[g].2, bent[g].3, g));
            let Some(g) = ready.or_else(|| open.min_by_key(|&g| (bent[g].2, bent[g].3, g))) else {
                break;
            };
            let least = before[g]
                .iter()
                .filter_map(|&b| placed[b])
                .map(|t| t + 1)
                .max()
                .unwrap_or(0);
            let (lo, hi) = (bent[g].2, bent[g].3);
            let mut t = least;
            while !free(&on_track, t, lo, hi) {
                t += 1;
            }
            take(&mut on_track, t, lo, hi);
            placed[g] = Some(t);
        }
        // Jogs: a branch whose target row is the port row of a trunk right of its own.
        let port_track = |row: u16| (0..m).find(|&g| bent[g].0 == row).and_then(|g| placed[g]);
        let target_rows: Vec<u16> = (0..m).flat_map(targets).collect();
        let bottom = bent.iter().map(|b| b.3).max().unwrap_or(0);
        for g in 0..m {
            let Some(t) = placed[g] else { continue };
            for &k in bent[g].1 {
                let r = row_to(k);
                let mut turn = Turn {
                    track: t,
                    jog: None,
                };
                if let Some(past) = port_track(r).filter(|&c| c > t) {
                    // A row beside the target, on the trunk's side first, that nothing runs
                    // along from this trunk rightwards.
                    let source = bent[g].0;
                    let sides: [i32; 2] = if source < r { [-1, 1] } else { [1, -1] };
                    // The trunk reaching past its rows to get there must find its track free.
                    let (lo, hi) = (bent[g].2, bent[g].3);
                    let beyond = |row: u16| {
                        if row < lo {
                            Some((row, lo - 1))
                        } else if row > hi {
                            Some((hi + 1, row))
                        } else {
                            None
                        }
                    };
                    let reach = i32::from(bottom) + 2;
                    let jog_row = (1..reach)
                        .flat_map(|d| sides.map(|s| i32::from(r) + s * d))
                        .filter_map(|row| u16::try_from(row).ok())
                        .find(|&row| {
                            !target_rows.contains(&row)
                                && !straight_rows.contains(&row)
                                && port_track(row).is_none_or(|c| c < t)
                                && beyond(row).is_none_or(|(a, b)| free(&on_track, t, a, b))
                        });
                    if let Some(row) = jog_row {
                        if let Some((a, b)) = beyond(row) {
                            take(&mut on_track, t, a, b);
                        }
                        let (lo, hi) = (row.min(r), row.max(r));
                        let mut second = past + 1;
                        while !free(&on_track, second, lo, hi) {
                            second += 1;
                        }
                        take(&mut on_track, second, lo, hi);
                        turn.jog = Some((row, second));
                    }
                }
                out[k] = Some(turn);
            }
        }
        *count = on_track.len() as u16;
    }
    out
}

#[cfg(test)]
mod tests;

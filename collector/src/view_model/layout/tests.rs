use super::*;

fn node(width: u16) -> Node {
    Node {
        width,
        min_height: 5,
        apart: false,
    }
}

fn links(pairs: &[(usize, usize)]) -> Vec<Link> {
    pairs.iter().map(|&(from, to)| Link { from, to }).collect()
}

/// No two nodes share a cell, and every node lies inside the layout.
#[track_caller]
fn assert_no_overlap(layout: &Layout, placed: &Placed<'_>) {
    let n = layout.spots.len();
    for a in 0..n {
        let (ax, ay, aw, ah) = placed.node(a);
        assert!(ay + ah <= layout.height, "node {a} below the layout");
        assert!(ax + aw <= placed.width, "node {a} right of the layout");
        for b in a + 1..n {
            let (bx, by, bw, bh) = placed.node(b);
            let apart = ax + aw <= bx || bx + bw <= ax || ay + ah <= by || by + bh <= ay;
            assert!(
                apart,
                "nodes {a} and {b} overlap: {:?} {:?}",
                placed.node(a),
                placed.node(b)
            );
        }
    }
}

/// Every link between two nodes has a line of horizontal and vertical runs that starts at one
/// node and ends beside the other, an arrowhead beside the node it points at, and a label room
/// on its line, clear of every node.
#[track_caller]
fn assert_drawn(layout: &Layout, placed: &Placed<'_>, pairs: &[(usize, usize)]) {
    for (l, &(from, to)) in pairs.iter().enumerate() {
        if from == to {
            assert!(placed.line(l).is_none());
            continue;
        }
        let line = placed.line(l).expect("a line");
        for w in line.windows(2) {
            assert!(
                w[0].0 == w[1].0 || w[0].1 == w[1].1,
                "not orthogonal: {line:?}"
            );
        }
        let (ax, ay, pointing) = placed.arrow(l).expect("an arrowhead");
        let (tx, ty, tw, th) = placed.node(to);
        match pointing {
            Pointing::Right => assert_eq!(ax + 1, tx, "link {l}: arrow beside its callee"),
            Pointing::Left => assert_eq!(ax, tx + tw, "link {l}: arrow beside its callee"),
        }
        assert!(
            ay > ty && ay < ty + th - 1,
            "link {l}: arrow on a side of its callee"
        );
        assert!(
            line.contains(&(ax, ay)),
            "link {l}: the arrow ends its line"
        );
        let (lx, ly, room) = placed.label(l).expect("a label");
        assert!(room > 0);
        for i in 0..layout.spots.len() {
            let (x, y, w, h) = placed.node(i);
            let clear = lx + room <= x || x + w <= lx || ly < y || ly >= y + h;
            assert!(clear, "link {l}'s label runs into node {i}");
        }
        // The label lies on the line's last horizontal run.
        let run = line
            .windows(2)
            .rev()
            .find(|w| w[0].1 == w[1].1 && w[0].1 == ly)
            .expect("a last run on the label's row");
        let (x0, x1) = (run[0].0.min(run[1].0), run[0].0.max(run[1].0));
        assert!(
            lx >= x0 && lx + room <= x1 + 1,
            "link {l}: label off its line"
        );
    }
}

/// A line's cells, each with the directions it runs in.
type Cells = Vec<((u16, u16), u8)>;

/// The cells of a polyline, each with the directions it runs in (1 up, 2 right, 4 down, 8 left).
fn cells(line: &[(u16, u16)]) -> Cells {
    let mut out: Cells = Vec::new();
    let mut mark = |at: (u16, u16), dir: u8| match out.iter_mut().find(|c| c.0 == at) {
        Some(c) => c.1 |= dir,
        None => out.push((at, dir)),
    };
    for w in line.windows(2) {
        let ((x0, y0), (x1, y1)) = (w[0], w[1]);
        if y0 == y1 {
            let (a, b) = (x0.min(x1), x0.max(x1));
            for x in a..=b {
                let dir = if x > a { 8 } else { 0 } | if x < b { 2 } else { 0 };
                mark((x, y0), dir);
            }
        } else {
            let (a, b) = (y0.min(y1), y0.max(y1));
            for y in a..=b {
                let dir = if y > a { 1 } else { 0 } | if y < b { 4 } else { 0 };
                mark((x0, y), dir);
            }
        }
    }
    out
}

/// The layout in characters, for a failing test's message.
fn picture(layout: &Layout, placed: &Placed<'_>) -> String {
    let (w, h) = (placed.width as usize + 1, layout.height as usize + 1);
    let mut grid = vec![vec![' '; w]; h];
    for i in 0..layout.spots.len() {
        let (x, y, bw, bh) = placed.node(i);
        for yy in y..y + bh {
            for xx in x..x + bw {
                grid[yy as usize][xx as usize] =
                    if yy == y || yy == y + bh - 1 || xx == x || xx == x + bw - 1 {
                        '#'
                    } else {
                        ' '
                    };
            }
        }
        let label = i.to_string();
        for (k, c) in label.chars().enumerate() {
            grid[(y + 1) as usize][(x + 1) as usize + k] = c;
        }
    }
    for l in 0..layout.routes.len() {
        let Some(line) = placed.line(l) else { continue };
        let c = char::from(b'a' + (l % 26) as u8);
        for ((x, y), _) in cells(&line) {
            let cell = &mut grid[y as usize][x as usize];
            *cell = if *cell == ' ' || *cell == c {
                c
            } else if *cell == '#' {
                '#'
            } else {
                '*'
            };
        }
    }
    grid.into_iter()
        .map(|r| r.into_iter().collect::<String>())
        .collect::<Vec<_>>()
        .join("\n")
}

/// Lines of links that do not share a trunk only ever cross (one across, the other up or
/// down), and no line runs through a node other than at its own ends.
#[track_caller]
fn assert_lines_apart(layout: &Layout, placed: &Placed<'_>, pairs: &[(usize, usize)]) {
    let drawn: Vec<(usize, Cells)> = (0..pairs.len())
        .filter_map(|l| Some((l, cells(&placed.line(l)?))))
        .collect();
    let trunk = |l: usize| {
        let r = layout.routes[l].as_ref().unwrap();
        (!r.reversed).then_some(r.left)
    };
    for (i, (a, ca)) in drawn.iter().enumerate() {
        for (b, cb) in &drawn[i + 1..] {
            if trunk(*a).is_some() && trunk(*a) == trunk(*b) {
                continue;
            }
            for (at, da) in ca {
                if let Some((_, db)) = cb.iter().find(|c| c.0 == *at) {
                    let across = |d: u8| d & 5 == 0;
                    let upright = |d: u8| d & 10 == 0;
                    assert!(
                        (across(*da) && upright(*db)) || (upright(*da) && across(*db)),
                        "links {a} {pairs:?} and {b} run together at {at:?}\n{}\n{:?}",
                        picture(layout, placed),
                        (&layout.routes[*a], &layout.routes[*b])
                    );
                }
            }
        }
        let route = layout.routes[*a].as_ref().unwrap();
        for node in 0..layout.spots.len() {
            let (x, y, w, h) = placed.node(node);
            for ((cx, cy), _) in ca {
                let inside = *cx >= x && *cx < x + w && *cy >= y && *cy < y + h;
                let own_border =
                    (node == route.left && *cx == x + w - 1) || (node == route.right && *cx == x);
                assert!(!inside || own_border, "link {a} runs through node {node}");
            }
        }
    }
}

#[track_caller]
fn lay_out(widths: &[u16], pairs: &[(usize, usize)]) -> Layout {
    lay_out_checking(widths, pairs, true)
}

/// Laid out at three label rooms, each checked: no overlap, every link drawn, and (`apart`)
/// no two lines running together.
#[track_caller]
fn lay_out_checking(widths: &[u16], pairs: &[(usize, usize)], apart: bool) -> Layout {
    let nodes: Vec<Node> = widths.iter().map(|&w| node(w)).collect();
    let layout = Layout::of(&nodes, &links(pairs));
    for room in [4, 12, 40] {
        let placed = layout.place(room);
        assert_no_overlap(&layout, &placed);
        assert_drawn(&layout, &placed, pairs);
        if apart {
            assert_lines_apart(&layout, &placed, pairs);
        }
    }
    layout
}

/// A small generator of numbers (xorshift), the same every run.
fn numbers(mut seed: u64) -> impl FnMut(u64) -> u64 {
    move |n| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % n.max(1)
    }
}

#[test]
fn a_chain_is_one_row_left_to_right() {
    let layout = lay_out(&[9, 7, 10, 11], &[(0, 1), (1, 2), (2, 3)]);
    let layers: Vec<usize> = layout.spots.iter().map(|s| s.layer).collect();
    assert_eq!(layers, vec![0, 1, 2, 3]);
    assert!(layout.spots.iter().all(|s| s.y == layout.spots[0].y));
    assert_eq!(layout.tracks, vec![0, 0, 0], "straight across");
    let placed = layout.place(10);
    assert_eq!(placed.width, 9 + 7 + 10 + 11 + 3 * (2 + 10));
    assert_eq!(placed.line(0).unwrap().len(), 2, "one straight run");
}

#[test]
fn a_diamond_puts_both_middles_in_one_layer() {
    let layout = lay_out(&[8; 4], &[(0, 1), (0, 2), (1, 3), (2, 3)]);
    let layers: Vec<usize> = layout.spots.iter().map(|s| s.layer).collect();
    assert_eq!(layers, vec![0, 1, 1, 2]);
    // The join is between the two middles, the root level with it.
    let mid = |i: usize| layout.spots[i].y + layout.spots[i].height / 2;
    assert!(mid(3) > mid(1) && mid(3) < mid(2), "{:?}", layout.spots);
}

#[test]
fn a_cycle_is_broken_and_drawn_pointing_back() {
    let layout = lay_out(&[8; 3], &[(0, 1), (1, 2), (2, 0)]);
    let layers: Vec<usize> = layout.spots.iter().map(|s| s.layer).collect();
    assert_eq!(layers, vec![0, 1, 2], "roots on the left, the cycle cut");
    let back = layout.routes[2].as_ref().unwrap();
    assert!(back.reversed, "{back:?}");
    assert_eq!((back.left, back.right), (0, 2));
    let placed = layout.place(8);
    assert_eq!(placed.arrow(2).unwrap().2, Pointing::Left);
    // Two nodes calling each other, and a service with no caller in a cycle.
    lay_out(&[8; 2], &[(0, 1), (1, 0)]);
    lay_out(&[8; 3], &[(0, 1), (1, 2), (2, 1)]);
}

#[test]
fn fan_out_to_30_stacks_the_callees_and_centres_the_caller() {
    let pairs: Vec<(usize, usize)> = (1..=30).map(|i| (0, i)).collect();
    let mut widths = vec![9u16];
    widths.extend((1..=30).map(|i| 6 + (i % 7) as u16));
    let layout = lay_out(&widths, &pairs);
    assert!(layout.spots[1..].iter().all(|s| s.layer == 1));
    assert_eq!(layout.tracks, vec![1], "one trunk for all 30");
    let top = layout.spots[1..].iter().map(|s| s.y).min().unwrap();
    let bottom = layout.spots[1..]
        .iter()
        .map(|s| s.y + s.height)
        .max()
        .unwrap();
    let root = layout.spots[0];
    let centre = root.y + root.height / 2;
    assert!(centre > top + (bottom - top) / 3 && centre < bottom - (bottom - top) / 3);
}

#[test]
fn a_long_link_passes_through_the_layers_between() {
    // 0 -> 1 -> 2 -> 3 and 0 -> 3: the short cut crosses two gaps and layers 1 and 2.
    let layout = lay_out(&[8; 4], &[(0, 1), (1, 2), (2, 3), (0, 3)]);
    let long = layout.routes[3].as_ref().unwrap();
    assert_eq!(long.hops.len(), 3);
    for w in long.hops.windows(2) {
        assert_eq!(w[0].to_row, w[1].from_row);
    }
}

#[test]
fn nodes_drawn_apart_go_below_the_others_of_their_layer() {
    let mut nodes = vec![node(8); 5];
    nodes[1].apart = true;
    nodes[3].apart = true;
    let layout = Layout::of(&nodes, &links(&[(0, 1), (0, 2), (0, 3), (0, 4)]));
    let y = |i: usize| layout.spots[i].y;
    for traced in [2, 4] {
        for apart in [1, 3] {
            assert!(y(apart) > y(traced), "{:?}", layout.spots);
        }
    }
}

#[test]
fn a_node_grows_to_give_each_link_into_it_a_row() {
    let pairs: Vec<(usize, usize)> = (1..=6).map(|i| (i, 0)).chain([(7, 1)]).collect();
    let layout = lay_out(&[8; 8], &pairs);
    assert!(layout.spots[0].height >= 8, "{:?}", layout.spots[0]);
    let rows: std::collections::BTreeSet<u16> = (0..6)
        .map(|l| {
            layout.routes[l]
                .as_ref()
                .unwrap()
                .hops
                .last()
                .unwrap()
                .to_row
        })
        .collect();
    assert_eq!(rows.len(), 6, "each link its own row");
}

/// Graphs of every shape, dense ones too: nothing overlaps, every link is drawn, and the same
/// graph always gives the same layout.
#[test]
fn any_graph_is_laid_out_without_overlap_and_every_link_drawn() {
    let mut next = numbers(0x2545_f491_4f6c_dd1d);
    for _ in 0..200 {
        let n = 1 + next(16) as usize;
        let m = next(3 * n as u64 + 1) as usize;
        let mut pairs: Vec<(usize, usize)> = Vec::new();
        for _ in 0..m {
            let p = (next(n as u64) as usize, next(n as u64) as usize);
            if !pairs.contains(&p) {
                pairs.push(p);
            }
        }
        let widths: Vec<u16> = (0..n).map(|_| 5 + next(12) as u16).collect();
        let layout = lay_out_checking(&widths, &pairs, false);
        let nodes: Vec<Node> = widths.iter().map(|&w| node(w)).collect();
        assert_eq!(layout, Layout::of(&nodes, &links(&pairs)));
    }
}

/// Graphs shaped like services calling each other (each calls a few later ones, now and then
/// one calls back): no two lines run together anywhere.
#[test]
fn service_graphs_keep_their_lines_apart() {
    let mut next = numbers(0x9e37_79b9_7f4a_7c15);
    for _ in 0..300 {
        let n = 2 + next(24) as usize;
        let mut pairs: Vec<(usize, usize)> = Vec::new();
        for from in 0..n - 1 {
            for _ in 0..next(4) {
                let to = from + 1 + next((n - from - 1).min(6) as u64) as usize;
                if !pairs.contains(&(from, to)) {
                    pairs.push((from, to));
                }
            }
        }
        if next(4) == 0 {
            let (a, b) = (next(n as u64) as usize, next(n as u64) as usize);
            if a > b && !pairs.contains(&(a, b)) {
                pairs.push((a, b));
            }
        }
        let widths: Vec<u16> = (0..n).map(|_| 7 + next(10) as u16).collect();
        lay_out(&widths, &pairs);
    }
}

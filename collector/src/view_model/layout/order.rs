//! The order within each layer: a walk from the roots, then barycentre sweeps that keep the
//! order with the fewest crossings.

use super::{Item, Seg};

/// The crossing-reduction sweeps tried (down and up each), the best order kept.
const SWEEPS: usize = 8;

/// The first order of each layer: as a walk from the roots, in the order given, meets them
/// (the points of a long link right after the node it leaves), the nodes drawn apart last.
pub(super) fn initial_order(items: &[Item], segs: &[Seg], layers: usize) -> Vec<Vec<usize>> {
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
pub(super) fn reduce_crossings(order: &mut Vec<Vec<usize>>, items: &[Item], segs: &[Seg]) {
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
pub(super) fn crossings(order: &[Vec<usize>], segs: &[Seg], pos: &[usize]) -> u64 {
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
pub(super) fn inversions(v: &mut [usize]) -> u64 {
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

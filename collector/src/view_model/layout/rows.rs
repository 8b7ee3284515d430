//! Rows: each item's top row, moved toward the links attached to it as far as the order allows.

use super::{Item, Seg};

/// Rounds of row alignment (down then up), ending with one more down.
const ALIGN_ROUNDS: usize = 3;

/// Each item's top row: stacked in its layer's order, then moved toward where the pieces
/// attached to it come from (down: from the left; up: from the right), as little as keeps every
/// item in order with a row between nodes (least squares under order, by pool-adjacent-
/// violators), [`ALIGN_ROUNDS`] times and a last pass down; shifted so the top row is 0.
pub(super) fn align_rows(
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
pub(super) fn isotonic(values: &[(f64, f64)]) -> Vec<f64> {
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

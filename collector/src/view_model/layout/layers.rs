//! Layers: each node's column, by the longest path from the roots.

/// Each node's layer: 0 for a node nothing points at, else one past the farthest of those
/// that point at it (the links oriented by `oriented`, a graph without cycles).
pub(super) fn longest_path_layers(
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

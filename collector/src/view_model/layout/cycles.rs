//! Cycles: the links that close one, turned round so the graph lays out left to right.

use super::Link;

/// Which links close a cycle: those a depth-first walk from the roots (then from any node not
/// reached) finds pointing back at a node on its path.
pub(super) fn back_links(n: usize, links: &[Link], drawn: &[usize]) -> Vec<bool> {
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

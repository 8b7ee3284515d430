//! Ports: where on its node's side each link attaches, ordered so links do not cross there.

use super::{Item, Seg};

/// Numbers each piece's ports: returns each item's count of right ports and of left ports.
pub(super) fn number_ports(
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

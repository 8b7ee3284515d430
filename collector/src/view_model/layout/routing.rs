//! Routing: each link's turn in each gap between layers, on tracks that never touch another
//! link's corner.

use super::{Item, Seg};

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
pub(super) fn assign_tracks(
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

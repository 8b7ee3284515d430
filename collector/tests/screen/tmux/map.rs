//! The Map on the real demo in a tmux pane, as a newcomer reaches it.

use super::{Session, no_tmux};

/// The column (in characters) where `needle` starts on `line`.
fn column(line: &str, needle: &str) -> Option<usize> {
    line.find(needle).map(|at| line[..at].chars().count())
}

/// The Map on the real demo, as a newcomer reaches it (Shift-Tab from the chain list), at 80x24
/// and 200x60, with colour and with `NO_COLOR`: the four services left to right, `✖` on
/// bff → orders with its reset (`fwd 3000>9xx`, or its short form `3000>9xx`; `8xx` when the
/// machine is loaded and the first hops take longer), inventory
/// cross-hatched (it works for nobody), orders filled with `▒` (it only waits for nobody); Enter opens that edge's Edges row, and `o` (back on the Map) the worst chain
/// through it, on the call that reset the budget.
#[test]
fn the_real_demos_map_shows_where_the_budget_broke() {
    if no_tmux() {
        return;
    }
    let bin = env!("CARGO_BIN_EXE_budget-top");
    let sessions: Vec<(String, Session)> = [(80, 24), (200, 60)]
        .into_iter()
        .flat_map(|(w, h)| [(w, h, false), (w, h, true)])
        .map(|(w, h, plain)| {
            let env = if plain { "NO_COLOR=1 " } else { "" };
            let cmd = format!("{env}{bin} demo --scenario fixed-timeout; sleep 60");
            let what = format!("{w}x{h}{}", if plain { " NO_COLOR" } else { "" });
            let label = format!("map-{w}-{}", u8::from(plain));
            (what, Session::start(&label, w, h, &cmd))
        })
        .collect();
    // 3000 forwarded with what was left of the gateway's 1000 ms: three digits after `>`.
    let reset = |line: &str| {
        line.find("3000>").is_some_and(|at| {
            let digits = &line[at + 5..];
            digits.len() >= 3 && digits.as_bytes()[..3].iter().all(u8::is_ascii_digit)
        })
    };
    for (what, session) in &sessions {
        session.wait_for("✖ budget_reset");
        session.keys("BTab");
        // Every claim on one capture, retried: a capture can catch a frame half drawn.
        let pane = session.expect(&format!("{what}: the map with the reset on it"), |pane| {
            ensure!(
                pane.lines()
                    .last()
                    .is_some_and(|l| l.contains("worst chain")),
                "not the Map's footer"
            );
            // The four services in order, on the row of their names.
            let names = pane
                .lines()
                .find(|l| l.contains("│gateway") && l.contains("│inventory"))
                .ok_or("the four boxes are not in a row")?;
            let at: Vec<usize> = ["│gateway", "│bff", "│orders", "│inventory"]
                .iter()
                .map(|n| column(names, n).ok_or(format!("no {n}")))
                .collect::<Result<_, _>>()?;
            ensure!(at.windows(2).all(|w| w[0] < w[1]), "out of order: {at:?}");
            // ✖ and the reset between bff and orders. (The ✖ nearest before the reset's
            // figures: on a loaded machine gateway → bff may carry a finding of its own.)
            let label = pane
                .lines()
                .find(|l| reset(l) && l.contains('▶'))
                .ok_or("no edge with the reset")?;
            let reset_at = column(label, "3000>").unwrap_or_default();
            let mark = label
                .chars()
                .take(reset_at)
                .collect::<Vec<_>>()
                .iter()
                .rposition(|&c| c == '✖')
                .ok_or("no ✖ before the reset")?;
            ensure!(
                mark > at[1] && mark < at[2],
                "✖ not between bff and orders: {label}"
            );
            // inventory works for nobody: its box is hatched.
            ensure!(
                pane.lines()
                    .any(|l| l.contains("│inventory▓") || l.contains("║inventory▓")),
                "inventory not hatched"
            );
            // orders only waits for it then: marked apart, with the waterfall's `▒`.
            ensure!(
                pane.lines()
                    .any(|l| l.contains("│orders▒") || l.contains("║orders▒")),
                "orders not marked as waiting for nobody"
            );
            // The selected edge in words, whole: its reset.
            ensure!(
                pane.lines()
                    .any(|l| l.contains("bff → orders") && l.contains("fwd 3000>") && reset(l)),
                "the selected edge is not said in words"
            );
            Ok(())
        });
        eprintln!("{what}, the map:\n{pane}");
        // Enter: its row in Edges.
        session.keys("Enter");
        session.wait_until(&format!("{what}: the edge's row in Edges"), |pane| {
            pane.contains("CALLER → CALLEE")
                && pane
                    .lines()
                    .any(|l| l.starts_with("▶ bff → orders") || l.starts_with("▶ bff → order"))
        });
        // Back to the Map (Edges, Services, Map), then o: the worst chain through the edge.
        session.keys("Tab");
        session.keys("Tab");
        session.wait_for("│gateway");
        session.keys("o");
        session.wait_until(
            &format!("{what}: the chain's waterfall on the call"),
            |pane| {
                pane.contains("HOP / CALL")
                    && pane
                        .lines()
                        .any(|l| l.starts_with('▶') && l.contains("GET orders") && reset(l))
            },
        );
        session.keys("q");
    }
}

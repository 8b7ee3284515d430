//! The waterfall: a chain's hops and calls on a time axis, its findings in words.

use budget_top::screen::View;
use budget_top::screen::fixtures::*;
use crossterm::event::KeyCode;

use crate::support::{key, select_chain, snap};

#[test]
fn waterfall_explains_the_first_finding_in_words() {
    let mut state = fixture_state(false);
    select_chain(&mut state, 1);
    key(&mut state, KeyCode::Enter);
    assert_eq!(state.ui.view, View::Waterfall);
    for (w, h) in [(80, 24), (200, 60)] {
        let text = snap("waterfall_checkout", &state, w, h);
        assert!(
            text.contains("forwarded 3000 ms with only 700 ms left"),
            "{text}"
        );
        assert!(text.contains("fwd 3000>700"), "{text}");
        assert!(
            text.contains('▓'),
            "work past the deadline is drawn: {text}"
        );
    }
    // n moves to the next finding: inventory's orphaned work.
    key(&mut state, KeyCode::Char('n'));
    let text = screen_text(&draw(&state, 80, 24));
    assert!(
        text.contains("inventory worked 280 ms after orders stopped waiting"),
        "{text}"
    );
}

#[test]
fn waterfall_of_every_fixture_chain_fits_80x24() {
    let mut state = fixture_state(false);
    for t in 2..=8 {
        select_chain(&mut state, t);
        state.ui.view = View::Waterfall;
        snap(&format!("waterfall_chain{t}"), &state, 80, 24);
    }
}

#[test]
fn big_terminal_shows_list_and_waterfall_together() {
    let mut state = fixture_state(false);
    select_chain(&mut state, 2);
    let text = screen_text(&draw(&state, 200, 60));
    assert!(text.contains("fwd ✕ none"), "{text}");
    assert!(
        text.contains("frontend had 790 ms left but forwarded no budget"),
        "{text}"
    );
}

/// A retried call's rows say which attempt each is; a hop's own span does not repeat the
/// service's name.
#[test]
fn retries_are_numbered_and_own_spans_not_named_twice() {
    let mut state = fixture_state(false);
    select_chain(&mut state, 5);
    key(&mut state, KeyCode::Enter);
    let text = screen_text(&draw(&state, 120, 40));
    assert!(text.contains("→ #1 PUT pricing"), "{text}");
    assert!(text.contains("→ #2 PUT pricing"), "{text}");
    assert!(
        text.contains("rcv: received"),
        "the key to the figures: {text}"
    );
}

//! The key tables: each key with what it does, how the footer's hint names it, and its answer.
//! [`SCREEN`] holds the screen's own keys, the same in every view (`State::on_key` reads it
//! first); each pane's table lists them, in its hint's order, beside its own keys, which its
//! `on_key` reads. The footer's hints are made from the pane's table, so the bar names the keys
//! the screen answers (gitui's `commands()` keeps its command bar the same way).

use crossterm::event::KeyCode;

use crate::screen::{Overlay, State, View};

/// What a pane does with one of its keys: whether the screen needs a redraw.
pub(crate) type Answer = fn(&mut State, KeyCode) -> bool;

/// One line of a pane's key table.
#[derive(Clone, Copy)]
pub(crate) struct Key {
    /// The keys.
    pub codes: &'static [KeyCode],
    /// How the longest hint names the keys (`↑↓/jk`, `Enter`, `space`).
    pub long: &'static str,
    /// How the shorter hints name them (`↑↓`, `⏎`, `␣`).
    pub short: &'static str,
    /// What they do, in a word or two.
    pub does: &'static str,
    /// In how many of the hints it shows, longest first (1: only in the longest; 0: answered
    /// but not hinted, as Esc clearing the search, which the search line itself names).
    pub shown: u8,
    /// Its answer.
    pub answer: Answer,
}

impl Key {
    /// The same key shown in the first `shown` hints.
    pub const fn shown_in(self, shown: u8) -> Key {
        Key { shown, ..self }
    }

    /// The same key, its hint saying it `does` this here ("row" for moving in the waterfall).
    pub const fn doing(self, does: &'static str) -> Key {
        Key { does, ..self }
    }
}

/// `q`: quit.
pub(crate) const QUIT: Key = Key {
    codes: &[KeyCode::Char('q')],
    long: "q",
    short: "q",
    does: "quit",
    shown: 0,
    answer: |state, _| {
        state.ui.quit = true;
        true
    },
};

/// `?`: the legend.
pub(crate) const LEGEND: Key = Key {
    codes: &[KeyCode::Char('?')],
    long: "?",
    short: "?",
    does: "legend",
    shown: 0,
    answer: |state, _| {
        state.ui.overlay = Overlay::Legend;
        state.ui.popup_scroll = 0;
        true
    },
};

/// Space: pause or resume.
pub(crate) const PAUSE: Key = Key {
    codes: &[KeyCode::Char(' ')],
    long: "space",
    short: "␣",
    does: "pause",
    shown: 0,
    answer: |state, _| {
        state.toggle_pause();
        true
    },
};

/// `/`: type a search (in the chain list).
pub(crate) const SEARCH: Key = Key {
    codes: &[KeyCode::Char('/')],
    long: "/",
    short: "/",
    does: "search",
    shown: 0,
    answer: |state, _| {
        state.ui.searching = true;
        state.ui.view = View::Chains;
        true
    },
};

/// `f`: the next filter of the chain list.
pub(crate) const FILTER: Key = Key {
    codes: &[KeyCode::Char('f')],
    long: "f",
    short: "f",
    does: "filter",
    shown: 0,
    answer: reorder,
};

/// `s`: the next order of the chain list.
pub(crate) const SORT: Key = Key {
    codes: &[KeyCode::Char('s')],
    long: "s",
    short: "s",
    does: "sort",
    shown: 0,
    answer: reorder,
};

/// Arrows and `j`/`k`: move the view's selection.
pub(crate) const MOVE: Key = Key {
    codes: &[
        KeyCode::Down,
        KeyCode::Char('j'),
        KeyCode::Up,
        KeyCode::Char('k'),
    ],
    long: "↑↓/jk",
    short: "↑↓",
    does: "move",
    shown: 0,
    answer: |state, key| {
        state.move_key(key);
        true
    },
};

/// Pages, top and bottom (not in the hints: the legend lists them).
pub(crate) const PAGE: Key = Key {
    codes: &[
        KeyCode::PageDown,
        KeyCode::PageUp,
        KeyCode::Home,
        KeyCode::Char('g'),
        KeyCode::End,
        KeyCode::Char('G'),
    ],
    long: "PgUp/PgDn",
    short: "PgUp/PgDn",
    does: "page",
    shown: 0,
    answer: |state, key| {
        state.move_by(match key {
            KeyCode::PageDown => 10,
            KeyCode::PageUp => -10,
            KeyCode::Home | KeyCode::Char('g') => isize::MIN / 2,
            _ => isize::MAX / 2,
        });
        true
    },
};

/// Tab and Shift-Tab: the next or previous view.
pub(crate) const TAB: Key = Key {
    codes: &[KeyCode::Tab, KeyCode::BackTab],
    long: "Tab",
    short: "Tab",
    does: "view",
    shown: 0,
    answer: |state, key| {
        state.cycle_view(key == KeyCode::Tab);
        true
    },
};

/// Esc in a view opened from the chain list (the waterfall, the tables): back to it. A view's
/// key, not the screen's: in the chain list Esc clears the search.
pub(crate) const BACK: Key = Key {
    codes: &[KeyCode::Esc],
    long: "Esc",
    short: "Esc",
    does: "back",
    shown: 0,
    answer: |state, _| {
        state.ui.view = View::Chains;
        true
    },
};

/// The screen's own keys, answered the same in every view before the view's own.
pub(crate) const SCREEN: [Key; 9] = [QUIT, LEGEND, PAUSE, SEARCH, FILTER, SORT, MOVE, PAGE, TAB];

/// `f` and `s`: the list in its new filter or order now, its top (or the lesson) selected, so a
/// Tab right after shows that chain and not the one selected before.
fn reorder(state: &mut State, key: KeyCode) -> bool {
    if key == KeyCode::Char('f') {
        state.ui.query.filter = state.ui.query.filter.next();
    } else {
        state.ui.query.sort = state.ui.query.sort.next();
    }
    state.ui.follow = true;
    state.ui.selected_id = None;
    if state.ui.view.needs().chain_preview {
        state.settle();
    }
    true
}

/// The pane's answer to `key` from its table: `None` when the table has none.
pub(crate) fn answer(keys: &[Key], state: &mut State, key: KeyCode) -> Option<bool> {
    let answer = keys.iter().find(|k| k.codes.contains(&key))?.answer;
    Some(answer(state, key))
}

/// The footer's hints made from a key table, longest first: the first names every key that
/// shows in it in full, the others in short.
pub(crate) fn hints(keys: &[Key]) -> Vec<String> {
    let forms = keys.iter().map(|k| k.shown).max().unwrap_or(0);
    (1..=forms)
        .map(|form| {
            keys.iter()
                .filter(|k| k.shown >= form)
                .map(|k| {
                    let name = if form == 1 { k.long } else { k.short };
                    format!("{name} {}", k.does)
                })
                .collect::<Vec<_>>()
                .join("  ")
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A pane's own key is never one the screen answers first (it would be hinted and never
    /// reach the pane); the screen's keys a pane lists are the screen's own entries.
    #[test]
    fn no_pane_key_is_shadowed_by_the_screens() {
        for view in View::ALL {
            for key in super::super::pane(view).keys() {
                let screen = SCREEN
                    .iter()
                    .find(|s| s.codes.iter().any(|c| key.codes.contains(c)));
                if let Some(s) = screen {
                    assert_eq!(s.codes, key.codes, "{view:?}: {}", key.long);
                    assert_eq!(s.long, key.long, "{view:?}: {}", key.long);
                }
            }
        }
    }
}

//! A pane's key table: each key with what it does, how the footer's hint names it, and the
//! pane's answer to it. The pane's `on_key` reads the table and the footer's hints are made from
//! it, so a key cannot be answered without being shown, nor shown without being answered (gitui's
//! `commands()` keeps its command bar the same way).

use crossterm::event::KeyCode;

use crate::screen::State;

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
    /// The pane's answer; `None` for the screen's own keys (quit, legend, pause, search, moving,
    /// Tab), answered the same in every view and listed here for the hints.
    pub answer: Option<Answer>,
}

impl Key {
    /// One of the screen's own keys, shown in the first `shown` hints.
    pub const fn screen(
        long: &'static str,
        short: &'static str,
        does: &'static str,
        shown: u8,
    ) -> Key {
        Key {
            codes: &[],
            long,
            short,
            does,
            shown,
            answer: None,
        }
    }
}

impl Key {
    /// The same key shown in the first `shown` hints.
    pub const fn shown_in(self, shown: u8) -> Key {
        Key { shown, ..self }
    }
}

/// The pane's answer to `key` from its table: `None` when the table has none.
pub(crate) fn answer(keys: &[Key], state: &mut State, key: KeyCode) -> Option<bool> {
    let answer = keys.iter().find(|k| k.codes.contains(&key))?.answer?;
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

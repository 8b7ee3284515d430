//! The live screen, drawn into ratatui's `TestBackend`: every view at 80x24 and 200x60 from a
//! fixed set of chains covering every finding kind, with the clock pinned, plus the keys; and
//! the real binary in a tmux pane. One test binary, helpers in `support`; the snapshots are in
//! `collector/tests/snapshots/`, named `screen__*` as when these tests were one file.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod chains;
mod demo;
mod frame;
mod map;
mod popups;
mod run;
mod support;
mod tables;
// The real binary in a tmux pane (needs it built with the demo).
#[cfg(feature = "demo")]
mod tmux;
mod waterfall;

//! The live screen: `budget-top`, `budget-top demo` and `budget-top replay` draw it.
//!
//! One loop ([`run`], in `event_loop`) owns the [`State`] (`state`): span batches arrive on a
//! bounded channel (from the receivers, a replay or the demo), keys and the mouse go
//! through `input`, and a frame tick redraws only when something changed. [`data`] holds what
//! the screen shows (the store, the chain list, per-service figures, rates); `views` draws it,
//! a pure function of the state into a ratatui `Buffer`, one file per view; [`term`] takes
//! over the terminal and always gives it back.

pub mod data;
mod event_loop;
#[cfg(feature = "fixtures")]
pub mod fixtures;
mod input;
mod state;
pub mod term;
mod views;

pub use data::{ChainView, Filter, ListQuery, ROOTLESS_GRACE_NS, ScreenData, SortBy, Through};
pub use event_loop::{Controls, FRAME, LiveConfig, run, run_live};
pub use state::{
    DemoControl, DemoStatus, EXPORT_FILE, MAX_HELD_SPANS, MapPick, Mode, Overlay, Refused, State,
    Ui, View, color_allowed,
};
pub use views::{MIN_SIZE, ScreenLayout, layout, render};

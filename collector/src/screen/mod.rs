//! The live screen: `budget-top`, `budget-top demo` and `budget-top replay` draw it.
//!
//! One loop ([`run`]) owns the [`State`]: span batches arrive on a bounded channel (from the
//! receivers, a replay or the demo), keys and mouse events from crossterm, and a frame tick
//! redraws only when something changed. [`data`] holds what the screen shows (the store, the
//! chain list, per-service figures, rates); [`views`] draws it, a pure function of the state
//! into a ratatui `Buffer`; [`term`] takes over the terminal and always gives it back.

pub mod data;
#[cfg(feature = "fixtures")]
pub mod fixtures;
pub mod state;
pub mod term;
pub mod views;

pub use data::{ChainView, ListQuery, ScreenData, SortBy};
pub use state::*;
pub use views::{layout, render};

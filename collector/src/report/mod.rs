//! The reports `check` writes besides JSON: [`text`] for a terminal or a CI log, [`html`] for the
//! people who were not there. Both read the analysed store and the library's
//! `deadline_budget::analysis::Report` and judge nothing; their words, glyphs and numbers come
//! from [`crate::present`], as the screen's do.

pub mod html;
pub mod text;

//! The view model: what every picture of a chain draws from, knowing neither ratatui nor HTML:
//! the words and glyphs ([`legend`]), the numbers as text ([`format`](mod@format)), the marks of
//! one waterfall row ([`row_marks`]), computed once from the analysis, an edge's figures
//! ([`edges`]), the map of services ([`map`], laid out by [`layout`]), and the link from a chain
//! to its trace elsewhere ([`trace_url`]). The screen (`screen::views`) and the HTML page
//! (`report::html`) draw from them, so the terminal and the page never say one thing two ways.

pub mod edges;
pub mod format;
pub mod layout;
pub mod legend;
pub mod map;
pub mod row_marks;
pub mod trace_url;

//! Helpers shared by the demo's integration tests.
pub mod sink;

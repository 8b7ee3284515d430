//! The demo's integration tests: one binary, a module per subject, helpers in `support`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod api;
mod cli;
mod flood;
mod scenarios;
mod support;

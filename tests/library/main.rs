//! The library as a service author sees it, in one test binary (each binary links the world):
//!
//! - `service`: budgets through the server layer, the call rule in the client, the
//!   deadline-aware queue, cancellation, and the exported spans, in process under paused time;
//! - `spans`: the wire and the spans, real servers on port 0, spans exported through
//!   tracing-opentelemetry;
//! - `grpc` (cargo feature `tonic`, which `cargo test --workspace` turns on through the demo):
//!   tonic both ways.
//!
//! Tests that record spans set their own thread's subscriber before their first span
//! (`support::record_on_this_thread`, which says why it keeps a second dispatcher), while
//! `service` runs with none.
// Test helpers outside #[test] functions unwrap too.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

#[cfg(feature = "tonic")]
mod grpc;
mod service;
mod spans;

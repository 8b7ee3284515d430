//! The library as a service author sees it, in one test binary (each binary links the world):
//!
//! - `service`: budgets through the server layer, the call rule in the client, the
//!   deadline-aware queue, cancellation, and the exported spans, in process under paused time;
//! - `spans`: the wire and the spans, real servers on port 0, spans exported through
//!   tracing-opentelemetry;
//! - `grpc` (cargo feature `tonic`, which `cargo test --workspace` turns on through the demo):
//!   tonic both ways.
//!
//! Tests that record spans set their own thread's subscriber (`set_default`) before their first
//! span, while `service` runs with none: tracing-core (0.1.36) registers a callsite before it
//! computes its interest and a new dispatcher recomputes every registered callsite's interest
//! under a lock, so a callsite first hit by a thread without a subscriber is still seen by one
//! set later.
// Test helpers outside #[test] functions unwrap too.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

#[cfg(feature = "tonic")]
mod grpc;
mod service;
mod spans;

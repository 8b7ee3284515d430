//! deadline-budget: propagate a deadline budget hop by hop through tokio/tower services.
//!
//! A **budget** is how many milliseconds the original caller is still willing to wait. Each hop
//! reads it from the request (the first [`carrier`] present, in the order of
//! [`carrier::Carriers`]), turns it into a [`Deadline`] on tokio's monotonic clock, and gives
//! each outgoing call `min(sla, remaining - margin)`, never more than its caller will wait. Along
//! the way it records the span attributes of the budget contract ([`semconv`]) through
//! `tracing`, so budget-top (whose pure [`analysis`] also lives here) can show where it went.
//!
//! - [`BudgetLayer`] (server): reads the budget or assigns an edge default, answers 504 when it
//!   is spent on arrival, records the SERVER span, cancels the handler when the caller goes away.
//! - [`BudgetClient`] (client): the call rule, `x-budget-ms` / `grpc-timeout` / `traceparent`
//!   written, calls not worth making refused, the CLIENT span recorded.
//! - [`DeadlineQueueLayer`]: bounded concurrency and queue; 503 when full, 504 for an item that
//!   expired while waiting.
//! - `BudgetChannelLayer` (feature `tonic`, module `grpc`): the client rule for tonic channels.
//!
//! The rest of this page is the guide, `docs/library.md`: its example runs with `cargo test`.
#![doc = include_str!("../docs/library.md")]

pub mod analysis;
#[cfg(feature = "service")]
pub mod budget;
pub mod carrier;
#[cfg(feature = "service")]
pub mod client;
pub mod duration;
#[cfg(feature = "tonic")]
pub mod grpc;
#[cfg(feature = "service")]
pub mod queue;
pub mod semconv;
#[cfg(feature = "service")]
pub mod server;
#[cfg(feature = "service")]
pub mod trace_context;

#[cfg(feature = "service")]
pub use budget::Deadline;
#[cfg(feature = "service")]
pub use client::{BudgetClient, CallError, CallOptions, Forward};
#[cfg(feature = "tonic")]
pub use grpc::{BudgetChannel, BudgetChannelLayer};
#[cfg(feature = "service")]
pub use queue::DeadlineQueueLayer;
#[cfg(feature = "service")]
pub use server::{BudgetLayer, HopBudget};

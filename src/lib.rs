//! deadline-budget: propagate a deadline budget hop by hop through tokio/tower services.
//!
//! A **budget** is how many milliseconds the original caller is still willing to wait. Each hop
//! reads it from the request (the first [`carrier`] present, in the order of
//! [`carrier::Carriers`]), turns it into a [`Deadline`] on
//! tokio's monotonic clock, and gives each outgoing call `min(sla, remaining - margin)`, never
//! more than its caller will wait. Along the way it records the span attributes of the budget
//! contract ([`semconv`]) through `tracing`, so `tracing-opentelemetry` exports them and
//! budget-top (whose pure [`analysis`] also lives here) can show where the budget went.
//!
//! The parts:
//! - [`BudgetLayer`] (server): reads the budget or assigns an edge default, puts the deadline in
//!   the request extensions and in [`Deadline::current`], answers 504 when it is spent on
//!   arrival, records the SERVER span, cancels the handler when the caller goes away, and
//!   continues the caller's W3C trace.
//! - [`BudgetClient`] (client): applies the call rule, refuses calls not worth making, writes
//!   `x-budget-ms` / `grpc-timeout` / `traceparent`, applies the timeout, records the CLIENT span.
//! - [`DeadlineQueueLayer`]: bounded concurrency and queue; 503 when full, 504 for an item that
//!   expired while waiting (it never runs), cancelled callers leave the queue.
//! - `BudgetChannelLayer` (cargo feature `tonic`, module `grpc`): the client rule for tonic
//!   channels, `grpc-timeout` and a refused or timed-out call as `Status::deadline_exceeded`.
//!
//! The server layers work on a tonic server too (`Server::builder().layer(BudgetLayer::new())`):
//! a gRPC caller is answered in gRPC's codes (`grpc-status` 4 and 8), and the handler sees
//! [`Deadline::current`].
//!
//! # Example
//!
//! An axum service with the server layer, a queue and one outgoing call. The request below
//! arrives with 30 ms left, less than the 50 ms worth calling with, so the outgoing call is
//! refused without touching the network.
//!
//! ```
//! use std::time::Duration;
//!
//! use axum::{Router, extract::State, routing::get};
//! use deadline_budget::{BudgetClient, BudgetLayer, CallOptions, Deadline, DeadlineQueueLayer};
//! use tower::ServiceExt as _;
//!
//! async fn checkout(State(client): State<BudgetClient>) -> String {
//!     // The deadline the server layer read from the request (or the edge default).
//!     let left = Deadline::current().map(|d| d.remaining_ms());
//!     let options = CallOptions::new()
//!         .sla(Duration::from_millis(400))
//!         .margin(Duration::from_millis(10));
//!     match client.send(client.get("http://127.0.0.1:9/charge"), &options).await {
//!         Ok(response) => format!("charge answered {}", response.status()),
//!         Err(error) => format!("{left:?} ms left: {error}"),
//!     }
//! }
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! let client = BudgetClient::new(reqwest::Client::new());
//! let app = Router::new()
//!     .route("/checkout", get(checkout))
//!     .with_state(client)
//!     // Inner first: the queue sees the deadline the budget layer set.
//!     .layer(DeadlineQueueLayer::new(8, 32))
//!     .layer(BudgetLayer::new().default_budget(Duration::from_millis(1500)));
//!
//! // In a real service: axum::serve(listener, app).await
//! let request = http::Request::get("/checkout")
//!     .header("x-budget-ms", "30")
//!     .body(axum::body::Body::empty())
//!     .unwrap();
//! let response = app.oneshot(request).await.unwrap();
//! let body = axum::body::to_bytes(response.into_body(), 1024).await.unwrap();
//! assert!(String::from_utf8_lossy(&body).contains("call refused"));
//! # }
//! ```
//!
//! Task-locals do not cross `tokio::spawn`: pass [`Deadline::current`] into spawned tasks and
//! give it to [`CallOptions::deadline`], or wrap the task in [`Deadline::scope`].

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

//! deadline-budget: propagate a deadline budget hop by hop through tokio/tower services.

pub mod analysis;
pub mod budget;
pub mod carrier;
pub mod client;
pub mod queue;
pub mod semconv;
pub mod server;
pub mod trace_context;

pub use budget::Deadline;
pub use client::{BudgetClient, CallError, CallOptions, Forward};
pub use queue::DeadlineQueueLayer;
pub use server::{BudgetLayer, HopBudget};

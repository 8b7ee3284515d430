//! deadline-budget: propagate a deadline budget hop by hop through tokio/tower services.

pub mod analysis;
pub mod carrier;
pub mod semconv;

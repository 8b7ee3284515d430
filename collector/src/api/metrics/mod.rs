//! `GET /metrics` (CONVENTIONS §7): the totals of section 6 and the receivers' counters as
//! Prometheus metrics, with the `prometheus-client` crate (the Prometheus project's Rust
//! client: registries of typed families, its text and OpenMetrics encoders).
//!
//! In: the store's totals, given to [`Metrics::try_publish_totals`] by the loop that owns the
//! store, and the receivers' counts, given to [`Metrics::publish_ingest`] by each scrape. Out:
//! [`Metrics::encode_parts`], called by the API's request task. Each family holds at most
//! `--max-series` label sets of its own; a set first seen past that is recorded under every
//! label `other`, and `budget_top_series_overflow_total{family}` says how many sets it holds.
//!
//! - `families`: the families, each declared once in its registry;
//! - `publish`: the receivers' counters and the totals raised into them;
//! - `exposition`: the text encoded (the totals' once per publish, off the request path);
//! - `counters`, `histogram`: a counter raised to a total, and the latency histogram read
//!   from each edge's sketch;
//! - `exemplars`: the `trace_id` exemplars of the OpenMetrics text;
//! - `labels`, `bound`: the label sets, and the `--max-series` bound with its `other`.

mod bound;
mod counters;
mod exemplars;
mod exposition;
mod families;
mod histogram;
mod labels;
mod publish;
#[cfg(test)]
mod test_chains;

use std::sync::Mutex;

/// The histogram's upper bounds, ms (`+Inf` follows): exact in the sketch up to 250 ms; the
/// store keeps an exemplar for each.
pub use crate::store::exemplars::LATENCY_BUCKETS_MS;
pub use exposition::{OPENMETRICS, keep_encoded, wants_openmetrics};
pub use families::Metrics;
pub use labels::OTHER;

/// The guard of `mutex`, taken even when a holder of it panicked.
fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    match mutex.lock() {
        Ok(guard) => guard,
        Err(poisoned) => poisoned.into_inner(),
    }
}

//! budget-top: an OTLP sink that shows deadline budgets flowing through a chain of services.
//!
//! Data flows one way: [`ingest`] (OTLP/gRPC + OTLP/HTTP) decodes export requests into
//! [`batch::Batch`]es (the one message between ingest and the store) on a bounded channel -> one loop owns a [`store::Store`] -> the library's
//! analysis -> the [`screen`] or the [`check`] report (text, JSON, or the [`report_html`] page).
//! [`record`] writes what arrives to a file. The binary (`main.rs`) only parses the command line
//! and dispatches here; the tests and benches use the same modules.

pub mod batch;
pub mod check;
pub mod cli;
#[cfg(feature = "demo")]
pub mod demo;
pub mod export;
pub mod ingest;
pub mod legend;
pub mod listen;
pub mod record;
pub mod recording;
pub mod report_html;
pub mod report_text;
pub mod screen;
pub mod services;
pub mod span_text;
pub mod store;
pub mod wire;

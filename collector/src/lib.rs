//! budget-top's collector core, as a library so the binary's screen, the tests and the benches
//! share one implementation.
//!
//! Data flows one way: [`ingest`] (OTLP/gRPC + OTLP/HTTP) decodes export requests into
//! [`ingest::Batch`]es on a bounded channel -> one loop owns a [`store::Store`] -> the library's
//! analysis -> the screen or the [`check`] report (text, JSON, or the [`report_html`] page).
//! [`record`] writes what arrives to a file.

pub mod check;
pub mod cli;
pub mod export;
pub mod ingest;
pub mod legend;
pub mod record;
pub mod report_html;
pub mod report_text;
pub mod services;
pub mod store;

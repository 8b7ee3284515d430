//! budget-top: an OTLP sink that shows deadline budgets flowing through a chain of services.
//!
//! Data flows one way: [`ingest`] (OTLP/gRPC + OTLP/HTTP) decodes export requests into
//! [`batch::Batch`]es (the one message between ingest and the store) on a bounded channel -> one
//! loop owns a [`store::Store`] -> the library's analysis -> the [`screen`] or the `check`
//! report (text, JSON, or the [`report::html`] page), both drawing from [`view_model`] (the
//! words, glyphs, numbers and waterfall marks they share). [`commands`] holds one file per
//! subcommand (`live`, `check`, `record`, `replay`, `demo`); [`otlp_lines`] is the file format
//! `record` writes and `check --input` and `replay` read, and [`chain_export`] writes one chain in
//! it. The binary (`main.rs`) only parses the command line and dispatches to [`commands`]; the
//! tests and benches use the same modules.

pub mod api;
pub mod batch;
pub mod chain_export;
pub mod cli;
pub mod commands;
pub mod forward;
pub mod ingest;
pub mod jaeger;
pub mod otlp_lines;
pub mod pump;
pub mod report;
pub mod screen;
pub mod service_figures;
pub mod span_text;
pub mod stderr;
pub mod store;
pub mod view_model;

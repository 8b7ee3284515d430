//! budget-top's integration tests: one binary, helpers in `support`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod check_file;
mod check_listen;
mod collector_file;
mod e2e_otlp;
mod export;
mod fuzz_regressions;
mod go_grpc;
mod grpc_python;
mod hostile_input;
mod html_report;
mod ingest_hostile;
mod instrumenting_guide;
mod java_http;
mod loadbalancing;
mod node_sdk;
mod node_stock;
mod otelcol_tier1;
mod python_chain;
mod python_sdk;
mod python_stock;
mod record;
mod record_format;
mod store;
mod support;
mod throughput;

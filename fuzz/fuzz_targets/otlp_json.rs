//! OTLP/JSON bytes (the `application/json` HTTP body, and one line of a recording read by
//! `budget-top check --input`) -> the collector.
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;

#[path = "common/otlp.rs"]
mod otlp;

fuzz_target!(|data: &[u8]| {
    // The HTTP receiver's decode.
    if let Ok(request) = serde_json::from_slice::<ExportTraceServiceRequest>(data) {
        otlp::ingest(request);
    }
    // The recording reader's decode (one line, trimmed).
    if let Ok(text) = std::str::from_utf8(data) {
        for (number, line) in text.lines().enumerate().take(4) {
            if let Ok(Some(request)) =
                budget_top::check::parse_line(Path::new("fuzz"), number + 1, line)
            {
                otlp::ingest(request);
            }
        }
    }
});

//! OTLP/JSON bytes (the `application/json` HTTP body, and one line of a recording read by
//! `budget-top check --input`) -> the collector.
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use prost::Message as _;

use budget_top_fuzz as otlp;

fuzz_target!(|data: &[u8]| {
    // The HTTP receiver's decode: invalid UTF-8 repaired, then read as the Collector reads it
    // (proto field names, enum names, integers as numbers or strings).
    let (body, repairs) = budget_top::ingest::decode::utf8::repair_json(data);
    assert_eq!(repairs.count == 0, std::str::from_utf8(data).is_ok());
    let ours = budget_top::ingest::decode::otlp_json::parse_request(&body);
    // Differential: whatever opentelemetry-proto's reader reads, ours reads the same.
    if let Ok(theirs) = serde_json::from_slice::<ExportTraceServiceRequest>(data) {
        let ours = ours
            .as_ref()
            .expect("what opentelemetry-proto reads, the receiver reads too");
        // Compared encoded: a NaN double is not equal to itself.
        assert_eq!(ours.encode_to_vec(), theirs.encode_to_vec());
    }
    if let Ok(request) = ours {
        otlp::ingest(request);
    }
    // The recording reader's decode (one line, trimmed).
    if let Ok(text) = std::str::from_utf8(data) {
        for (number, line) in text.lines().enumerate().take(4) {
            if let Ok(Some(request)) =
                budget_top::otlp_lines::parse_line(Path::new("fuzz"), number + 1, line)
            {
                otlp::ingest(request);
            }
        }
    }
});

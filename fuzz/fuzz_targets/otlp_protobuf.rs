//! OTLP/protobuf bytes (the gRPC and `application/x-protobuf` HTTP body) -> the collector.
#![no_main]

use libfuzzer_sys::fuzz_target;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use prost::Message as _;

#[path = "common/otlp.rs"]
mod otlp;

fuzz_target!(|data: &[u8]| {
    if let Ok(request) = ExportTraceServiceRequest::decode(data) {
        otlp::ingest(request);
    }
});

//! OTLP/protobuf bytes (the gRPC and `application/x-protobuf` HTTP body) -> the collector, by
//! both decode paths: prost + `decode_request`, and the in-place `decode_protobuf`, which must
//! agree with it whenever prost reads the bytes.
#![no_main]

use budget_top::ingest::decode::{Interner, RawAttributes, decode_protobuf, decode_request};
use libfuzzer_sys::fuzz_target;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use prost::Message as _;

fn wire(attributes: &[RawAttributes]) -> Vec<Vec<Vec<u8>>> {
    attributes
        .iter()
        .map(|a| a.decode().iter().map(|kv| kv.encode_to_vec()).collect())
        .collect()
}

#[path = "common/otlp.rs"]
mod otlp;

fuzz_target!(|data: &[u8]| {
    let fast = decode_protobuf(data, &mut Interner::default(), true);
    if let Ok(request) = ExportTraceServiceRequest::decode(data) {
        let fast = fast.expect("what prost reads, the in-place path reads too");
        let slow = decode_request(&mut request.clone(), &mut Interner::default(), true);
        assert_eq!(fast.spans, slow.spans);
        // Compared as bytes: a double attribute may be NaN, which is not equal to itself.
        assert_eq!(wire(&fast.attributes), wire(&slow.attributes));
        assert_eq!(fast.rejected, slow.rejected);
        assert_eq!(fast.first_error, slow.first_error);
        otlp::ingest(request);
    }
});

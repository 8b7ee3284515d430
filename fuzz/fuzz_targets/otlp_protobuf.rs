//! OTLP/protobuf bytes (the gRPC and `application/x-protobuf` HTTP body) -> the collector, by
//! both decode paths: prost + `decode_request`, and the in-place `decode_protobuf`, which must
//! agree with it whenever prost reads the bytes. When prost refuses invalid UTF-8, `record`'s
//! path (repair every string, then prost) and the in-place path must keep the same spans.
#![no_main]

use budget_top::batch::RawAttributes;
use budget_top::ingest::decode::{decode_protobuf, decode_request};
use budget_top::ingest::decode::interner::Interner;
use budget_top::ingest::decode::utf8;
use libfuzzer_sys::fuzz_target;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use prost::Message as _;

fn wire(attributes: &[RawAttributes]) -> Vec<(Vec<Vec<u8>>, u16, u16)> {
    attributes
        .iter()
        .map(|a| {
            let kvs = a.decode().iter().map(|kv| kv.encode_to_vec()).collect();
            (kvs, a.cut(), a.dropped())
        })
        .collect()
}

use budget_top_fuzz as otlp;

fuzz_target!(|data: &[u8]| {
    let fast = decode_protobuf(data, &mut Interner::default(), true);
    if let Ok(fast) = &fast {
        // What is kept for a span stays within its caps.
        for a in &fast.attributes {
            assert!(a.bytes_held() <= 16 * 1024 + 64);
        }
    }
    match ExportTraceServiceRequest::decode(data) {
        Ok(request) => {
            let fast = fast.expect("what prost reads, the in-place path reads too");
            let slow = decode_request(&mut request.clone(), &mut Interner::default(), true);
            assert_eq!(fast.spans, slow.spans);
            // Compared as bytes: a double attribute may be NaN, which is not equal to itself.
            assert_eq!(wire(&fast.attributes), wire(&slow.attributes));
            assert_eq!(fast.rejected, slow.rejected);
            assert_eq!(fast.first_error, slow.first_error);
            assert_eq!(fast.repaired.count, 0, "prost read it: every string is UTF-8");
            // Valid bytes need no repair.
            let same = utf8::repair(data, utf8::Message::Request).expect("prost read it");
            assert_eq!(same.count, 0);
            otlp::ingest(request);
        }
        Err(_) => {
            // Not UTF-8 somewhere: record repairs every string, then reads it with prost.
            let Some(repaired) = utf8::repair(data, utf8::Message::Request) else {
                return;
            };
            let Ok(mut request) = ExportTraceServiceRequest::decode(repaired.bytes.as_slice())
            else {
                return;
            };
            assert!(repaired.count > 0, "prost refused it for its strings");
            let fast = fast.expect("what record's path reads, the in-place path reads too");
            let slow = decode_request(&mut request, &mut Interner::default(), true);
            // The same spans (budget facts aside: an `error.type` that is not UTF-8 is read
            // repaired by one path and as absent by the other), the same kept attributes.
            let key = |s: &deadline_budget::analysis::Span| {
                (
                    s.trace_id,
                    s.span_id,
                    s.parent_span_id,
                    s.service.clone(),
                    s.name.clone(),
                    s.kind,
                    s.start_unix_nano,
                    s.end_unix_nano,
                    s.status,
                )
            };
            assert_eq!(
                fast.spans.iter().map(key).collect::<Vec<_>>(),
                slow.spans.iter().map(key).collect::<Vec<_>>()
            );
            assert_eq!(wire(&fast.attributes), wire(&slow.attributes));
            assert_eq!(fast.rejected, slow.rejected);
            otlp::ingest(request);
        }
    }
});

//! gzip request bodies (OTLP/HTTP `Content-Encoding: gzip`) through
//! `budget_top::ingest::receive::gzip::gunzip_capped`, the cap that stops a gzip bomb.
//!
//! The first byte picks the cap (0 to 64 KiB, or exactly the payload's length) and the mode:
//! the rest as a raw body (anything at all, bombs included), or the rest compressed here, as
//! one gzip member or two, so valid gzip is common. Checks: never more than the cap comes
//! out; whatever comes out is exactly what an uncapped decoder gives; valid gzip whose payload
//! fits the cap round-trips, and one that does not is refused as too large; no panic.
#![no_main]

use std::io::{Read as _, Write as _};

use budget_top::ingest::receive::gzip::{GunzipError, gunzip_capped};
use libfuzzer_sys::fuzz_target;

/// What a decoder with no cap reads (the input is at most `-max_len` bytes, so this is bounded too).
fn uncapped(body: &[u8]) -> Result<Vec<u8>, std::io::Error> {
    let mut out = Vec::new();
    flate2::read::MultiGzDecoder::new(body).read_to_end(&mut out)?;
    Ok(out)
}

fn gzip(payload: &[u8], level: u32) -> Vec<u8> {
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::new(level));
    encoder.write_all(payload).expect("writing to a Vec");
    encoder.finish().expect("writing to a Vec")
}

fuzz_target!(|data: &[u8]| {
    let Some((&head, rest)) = data.split_first() else {
        return;
    };
    let cap_choice = usize::from(head & 0x0f);
    let mode = head >> 4;
    let max = |len: usize| match cap_choice {
        0 => 0,
        1 => len,
        2 => len.saturating_sub(1),
        3 => len + 1,
        c => 1 << (c + 1), // 32 B .. 64 KiB
    };

    if mode < 8 {
        // Raw bytes: anything may happen except more than the cap, or a different answer.
        let max = max(rest.len());
        let got = gunzip_capped(rest, max);
        if let Ok(out) = &got {
            assert!(
                out.len() <= max,
                "{} bytes out with a cap of {max}",
                out.len()
            );
        }
        match (got, uncapped(rest)) {
            (Ok(out), reference) => {
                let reference = reference.expect("capped read it, uncapped must too");
                assert_eq!(&out[..], &reference[..]);
            }
            (Err(GunzipError::TooLarge { max: m }), reference) => {
                assert_eq!(m, max);
                // Too large means more than `max` bytes really came out of the stream before it
                // ended or broke.
                if let Ok(reference) = reference {
                    assert!(reference.len() > max);
                }
            }
            (Err(GunzipError::Corrupt(_)), Ok(reference)) => {
                panic!(
                    "refused as corrupt, but it is valid gzip of {} bytes",
                    reference.len()
                )
            }
            (Err(GunzipError::Corrupt(_)), Err(_)) => {}
        }
    } else {
        // Valid gzip of `rest`, as one member or split into two (MultiGzDecoder reads both).
        let level = u32::from(mode & 0x07) + 2;
        let split = if mode & 1 == 1 && !rest.is_empty() {
            usize::from(rest[0]) % rest.len()
        } else {
            rest.len()
        };
        let mut body = gzip(&rest[..split], level);
        if split < rest.len() {
            body.extend_from_slice(&gzip(&rest[split..], level));
        }
        let max = max(rest.len());
        match gunzip_capped(&body, max) {
            Ok(out) => {
                assert!(
                    rest.len() <= max,
                    "{} bytes let through a cap of {max}",
                    rest.len()
                );
                assert_eq!(&out[..], rest, "valid gzip under the cap round-trips");
            }
            Err(GunzipError::TooLarge { .. }) => {
                assert!(
                    rest.len() > max,
                    "{} bytes refused under a cap of {max}",
                    rest.len()
                );
            }
            Err(GunzipError::Corrupt(e)) => panic!("valid gzip refused as corrupt: {e}"),
        }
    }
});

//! How `/metrics` is sent to its scraper: what its `Accept` and `Accept-Encoding` headers take,
//! and the body gzip-compressed for one that asks (`Accept-Encoding: gzip`, as Prometheus does
//! by default) without compressing the totals' text on the request path.
//!
//! A body is three parts (the receivers' lines, the totals' text, the end). The totals' part is
//! compressed once per encoding, beside its text ([`Deflated::part`]); a scrape compresses only
//! its few fresh lines and joins the three into one gzip member: each part is a raw deflate
//! stream of its own, ended by a sync flush (byte-aligned, not final) but the last, so their
//! concatenation is one valid deflate stream (a part refers back only to its own bytes); the
//! trailer's CRC-32 is the parts' CRCs combined, and its size their sum (RFC 1952).

use std::io::Write as _;

use bytes::Bytes;
use flate2::Compression;
use flate2::write::DeflateEncoder;

/// A part of a body, raw-deflated: the compressed bytes, and the CRC-32 and length of what
/// they decompress to.
#[derive(Clone, Debug)]
pub struct Deflated {
    bytes: Bytes,
    crc: u32,
    len: u64,
}

impl Deflated {
    /// Compresses one part of a body; `last` ends the deflate stream (its final block), else
    /// it ends with a sync flush, so that another part can follow.
    pub fn part(data: &[u8], last: bool) -> Self {
        let mut encoder = DeflateEncoder::new(Vec::with_capacity(data.len() / 8 + 64), level());
        // Writing into a Vec cannot fail.
        let _ = encoder.write_all(data);
        let bytes = if last {
            encoder.finish().unwrap_or_default()
        } else {
            let _ = encoder.flush();
            // Taken before the encoder is dropped: dropping it writes a final block, into the
            // emptied vector.
            std::mem::take(encoder.get_mut())
        };
        let mut crc = crc32fast::Hasher::new();
        crc.update(data);
        Deflated {
            bytes: bytes.into(),
            crc: crc.finalize(),
            len: data.len() as u64,
        }
    }
}

/// The level: fast. A scraper reads the text once a second or so; the totals' part is
/// compressed once per publish on a blocking thread, and the ratio at level 1 is already
/// ~10 to 1 on the exposition's repeated names and labels.
fn level() -> Compression {
    Compression::fast()
}

/// One gzip member from its parts in order (the last made with `last`): the header, the
/// parts as they are, the trailer.
pub fn member(parts: &[Deflated]) -> Vec<Bytes> {
    // ID1 ID2, CM deflate, no flags, no time, no extra flags, OS unknown.
    const HEADER: [u8; 10] = [0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff];
    let mut crc = crc32fast::Hasher::new_with_initial_len(0, 0);
    let mut len = 0u64;
    let mut out = Vec::with_capacity(parts.len() + 2);
    out.push(Bytes::from_static(&HEADER));
    for part in parts {
        crc.combine(&crc32fast::Hasher::new_with_initial_len(part.crc, part.len));
        len += part.len;
        out.push(part.bytes.clone());
    }
    let mut trailer = Vec::with_capacity(8);
    trailer.extend_from_slice(&crc.finalize().to_le_bytes());
    // ISIZE: the length modulo 2^32.
    trailer.extend_from_slice(&(len as u32).to_le_bytes());
    out.push(trailer.into());
    out
}

/// Whether a header of `Accept`'s form (`Accept`, `Accept-Encoding`: a list of names with
/// parameters) takes a name that `matches`, without `q=0`.
pub fn accepts(header: Option<&str>, matches: impl Fn(&str) -> bool) -> bool {
    header.is_some_and(|header| {
        header.split(',').any(|part| {
            let mut params = part.split(';');
            let name = params.next().unwrap_or("").trim();
            let refused = params.any(|p| {
                p.trim()
                    .strip_prefix("q=")
                    .and_then(|q| q.trim().parse::<f64>().ok())
                    .is_some_and(|q| q <= 0.0)
            });
            matches(name) && !refused
        })
    })
}

/// Whether an `Accept-Encoding` header takes gzip (named, or `*`, without `q=0`).
pub fn accepts_gzip(accept_encoding: Option<&str>) -> bool {
    accepts(accept_encoding, |coding| {
        coding.eq_ignore_ascii_case("gzip") || coding == "*"
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read as _;

    fn gunzip(parts: &[Bytes]) -> Vec<u8> {
        let body: Vec<u8> = parts.iter().flat_map(|p| p.iter().copied()).collect();
        let mut out = Vec::new();
        // One member: GzDecoder reads exactly one and checks its CRC and size.
        flate2::read::GzDecoder::new(&body[..])
            .read_to_end(&mut out)
            .expect("a valid gzip member");
        out
    }

    #[test]
    fn parts_compressed_apart_join_into_one_member_that_decompresses_to_their_text() {
        let head = b"# HELP budget_top_spans_total Spans.\nbudget_top_spans_total{result=\"accepted\"} 12\n";
        let totals: Vec<u8> = (0..20_000)
            .flat_map(|i| {
                format!("budget_top_edge_calls_total{{caller=\"svc-{i}\",callee=\"db\"}} {i}\n")
                    .into_bytes()
            })
            .collect();
        let end = b"# EOF\n";
        let parts = [
            Deflated::part(head, false),
            Deflated::part(&totals, false),
            Deflated::part(end, true),
        ];
        let expected: Vec<u8> = [&head[..], &totals, end].concat();
        assert_eq!(gunzip(&member(&parts)), expected);
        // Compressed: the totals' part is a fraction of its text.
        assert!(
            parts[1].bytes.len() * 5 < totals.len(),
            "{}",
            parts[1].bytes.len()
        );
        // An empty part anywhere (the text format has no end) is still one valid member.
        let parts = [
            Deflated::part(head, false),
            Deflated::part(&totals, false),
            Deflated::part(b"", true),
        ];
        assert_eq!(gunzip(&member(&parts)), [&head[..], &totals].concat());
    }

    #[test]
    fn gzip_is_taken_when_named_or_starred_without_q_zero() {
        assert!(!accepts_gzip(None));
        assert!(!accepts_gzip(Some("identity")));
        assert!(!accepts_gzip(Some("br, deflate")));
        assert!(accepts_gzip(Some("gzip")));
        assert!(accepts_gzip(Some("GZIP")));
        assert!(accepts_gzip(Some("deflate, gzip;q=0.5")));
        assert!(accepts_gzip(Some("*")));
        assert!(!accepts_gzip(Some("gzip;q=0")));
        assert!(!accepts_gzip(Some("gzip; q=0.0, identity")));
    }
}

//! OTLP/HTTP request bodies' content encodings: [`decode_capped`] is the one table of them
//! (identity and gzip), so a new encoding is an arm there and its decompressor here. gzip is
//! decompressed under a cap so a gzip bomb is refused before it is allocated. Public so the
//! `gzip_body` fuzz target can reach it.

use std::io::Read as _;

use bytes::Bytes;

/// Why a gzip body was not decompressed.
#[derive(Debug, thiserror::Error)]
pub enum GunzipError {
    /// It decompresses to more than the cap.
    #[error("decompressed body is over the limit of {max} bytes")]
    TooLarge {
        /// The cap that was passed.
        max: usize,
    },
    /// It is not valid gzip (bad header, bad deflate data, bad checksum, truncated).
    #[error("invalid gzip body: {0}")]
    Corrupt(#[from] std::io::Error),
}

/// The content encodings [`decode_capped`] accepts, as the answer to any other names them.
pub const ACCEPTED: &str = "gzip or identity";

/// A body sent with `Content-Encoding: encoding` (lowercase, trimmed; empty when absent),
/// decoded into at most `max` bytes; `None` when the encoding is not one of [`ACCEPTED`].
pub fn decode_capped(
    encoding: &str,
    body: Bytes,
    max: usize,
) -> Option<Result<Bytes, GunzipError>> {
    match encoding {
        "" | "identity" => Some(Ok(body)),
        "gzip" => Some(gunzip_capped(&body, max)),
        _ => None,
    }
}

/// Decompresses a gzip body (one member or several) into at most `max` bytes. It reads at most
/// `max + 1` decompressed bytes, so a body that inflates past the cap costs `max + 1` bytes of
/// memory and is then refused as [`GunzipError::TooLarge`].
pub fn gunzip_capped(body: &[u8], max: usize) -> Result<Bytes, GunzipError> {
    let mut out = Vec::new();
    let decoder = flate2::read::MultiGzDecoder::new(body);
    decoder
        .take((max as u64).saturating_add(1))
        .read_to_end(&mut out)?;
    if out.len() > max {
        return Err(GunzipError::TooLarge { max });
    }
    Ok(Bytes::from(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_gzip_bomb_stops_at_the_cap() {
        let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        let zeros = vec![0u8; 1 << 20];
        for _ in 0..64 {
            std::io::Write::write_all(&mut encoder, &zeros).unwrap();
        }
        let bomb = encoder.finish().unwrap();
        assert!(bomb.len() < 1 << 20);
        assert!(matches!(
            gunzip_capped(&bomb, 4 << 20),
            Err(GunzipError::TooLarge { .. })
        ));
        assert!(matches!(
            gunzip_capped(b"not gzip", 100),
            Err(GunzipError::Corrupt(_))
        ));
    }
}

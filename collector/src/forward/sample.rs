//! Which clean chains `--forward-sample F` keeps: decided by the trace id alone, so every shard
//! behind trace-ID routing, every restart and any other implementation decides alike
//! (CONVENTIONS §7). The hash is the OpenTelemetry Collector's `probabilistic_sampler` in its
//! `hash_seed` mode: FNV-1a (32 bits) over the seed's four bytes, little-endian, then the 16
//! bytes of the trace id; the chain is kept when the hash's low 14 bits are below
//! `floor(F × 16384)`. budget-top's seed is 0.

use deadline_budget::analysis::TraceId;

/// The buckets the hash falls in (14 bits).
pub const BUCKETS: u32 = 1 << 14;

/// The seed hashed before the trace id.
pub const SEED: u32 = 0;

/// A share of clean chains to keep, as buckets of [`BUCKETS`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Share {
    buckets: u32,
}

impl Share {
    /// The share `fraction` (0 to 1) keeps, rounded down to a whole bucket; `None` when it is
    /// not a fraction, or keeps something below one bucket (then nothing would be kept).
    pub fn of(fraction: f64) -> Option<Share> {
        if !(0.0..=1.0).contains(&fraction) {
            return None;
        }
        let buckets = (fraction * f64::from(BUCKETS)).floor() as u32;
        (buckets > 0 || fraction == 0.0).then_some(Share { buckets })
    }

    /// The share as a fraction (what is kept, after rounding).
    pub fn fraction(self) -> f64 {
        f64::from(self.buckets) / f64::from(BUCKETS)
    }

    /// Whether a clean chain of `trace_id` is kept.
    pub fn keeps(self, trace_id: TraceId) -> bool {
        bucket(trace_id) < self.buckets
    }
}

/// The bucket of a trace id: the low 14 bits of FNV-1a over the seed, then the id.
pub fn bucket(trace_id: TraceId) -> u32 {
    const OFFSET: u32 = 0x811c_9dc5;
    const PRIME: u32 = 0x0100_0193;
    let mut hash = OFFSET;
    for byte in SEED.to_le_bytes().iter().chain(&trace_id.0) {
        hash ^= u32::from(*byte);
        hash = hash.wrapping_mul(PRIME);
    }
    hash & (BUCKETS - 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bucket_is_the_collectors_probabilistic_sampler_hash() {
        // processor/probabilisticsamplerprocessor's own test vector: 16 zero bytes, seed 0.
        assert_eq!(bucket(TraceId([0; 16])), 0x2455);
    }

    #[test]
    fn shares_round_down_to_a_bucket_and_refuse_what_keeps_nothing() {
        assert_eq!(Share::of(0.01).map(|s| s.buckets), Some(163));
        assert_eq!(Share::of(1.0).map(|s| s.buckets), Some(BUCKETS));
        assert_eq!(Share::of(0.0).map(|s| s.buckets), Some(0));
        assert_eq!(Share::of(0.00001), None);
        assert_eq!(Share::of(1.5), None);
        assert_eq!(Share::of(f64::NAN), None);
        let all = Share::of(1.0).unwrap();
        let none = Share::of(0.0).unwrap();
        for i in 0..1000u32 {
            let mut id = [9u8; 16];
            id[12..].copy_from_slice(&i.to_be_bytes());
            assert!(all.keeps(TraceId(id)) && !none.keeps(TraceId(id)));
        }
    }

    #[test]
    fn sequential_trace_ids_are_kept_near_the_share() {
        let share = Share::of(0.1).unwrap();
        let n = 100_000u32;
        let kept = (0..n)
            .filter(|i| {
                let mut id = [0xb7u8; 16];
                id[8..12].copy_from_slice(&i.to_be_bytes());
                share.keeps(TraceId(id))
            })
            .count() as f64;
        let expected = f64::from(n) * share.fraction();
        // Five standard deviations of a binomial count.
        let sd = (expected * (1.0 - share.fraction())).sqrt();
        assert!((kept - expected).abs() < 5.0 * sd, "{kept} of {n}");
    }
}

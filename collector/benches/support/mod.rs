//! What the benches that measure and print (not criterion's) share: their knobs from the
//! environment, `cargo bench`'s filter, and this process's resident memory.
#![allow(dead_code)] // each bench uses what it needs

/// The knob `name` from the environment, else `default`.
pub fn env<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Whether `cargo bench` asked for other benches: it passes `--bench`, and a filter argument
/// that is not this bench's `name` means "not me".
pub fn filtered_out(name: &str) -> bool {
    std::env::args()
        .skip(1)
        .any(|a| !a.starts_with('-') && a != name)
}

/// Resident memory of this process, bytes.
pub fn rss() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
        })
        .map_or(0, |kb| kb * 1024)
}

/// `bytes` in MiB.
pub fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

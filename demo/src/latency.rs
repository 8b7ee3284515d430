//! Per-service latency knobs, shared between the running services and whoever steers the demo
//! (the screen, the CLI): plain atomics, read by a service at the start of each piece of work.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// The local work time of each service, in ms, adjustable while the demo runs.
#[derive(Clone, Debug, Default)]
pub struct Latencies {
    by_service: Arc<BTreeMap<&'static str, AtomicU64>>,
}

impl Latencies {
    /// Knobs for the given services, with their initial work times in ms.
    pub fn new(initial: &[(&'static str, u64)]) -> Self {
        let by_service = initial
            .iter()
            .map(|&(name, ms)| (name, AtomicU64::new(ms)))
            .collect();
        Self {
            by_service: Arc::new(by_service),
        }
    }

    /// The current work time of `service`, or `None` for a service this demo does not run.
    pub fn get(&self, service: &str) -> Option<u64> {
        self.by_service
            .get(service)
            .map(|ms| ms.load(Ordering::Relaxed))
    }

    /// Set the work time of `service`; `false` when this demo does not run it.
    pub fn set(&self, service: &str, ms: u64) -> bool {
        match self.by_service.get(service) {
            Some(slot) => {
                slot.store(ms, Ordering::Relaxed);
                true
            }
            None => false,
        }
    }

    /// Every service with its current work time, in name order.
    pub fn snapshot(&self) -> Vec<(&'static str, u64)> {
        self.by_service
            .iter()
            .map(|(name, ms)| (*name, ms.load(Ordering::Relaxed)))
            .collect()
    }

    /// The work time of `service` as a duration (zero for an unknown service).
    pub(crate) fn work(&self, service: &str) -> Duration {
        Duration::from_millis(self.get(service).unwrap_or(0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_change_is_seen_by_every_clone() {
        let knobs = Latencies::new(&[("antifraud", 80), ("settlement", 150)]);
        let seen_by_service = knobs.clone();
        assert!(knobs.set("settlement", 900));
        assert_eq!(seen_by_service.get("settlement"), Some(900));
        assert_eq!(seen_by_service.work("antifraud"), Duration::from_millis(80));
    }

    #[test]
    fn an_unknown_service_is_refused_not_added() {
        let knobs = Latencies::new(&[("orders", 300)]);
        assert!(!knobs.set("inventory", 10));
        assert_eq!(knobs.get("inventory"), None);
        assert_eq!(knobs.snapshot(), vec![("orders", 300)]);
    }
}

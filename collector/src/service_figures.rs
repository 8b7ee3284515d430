//! Per-service figures read from the totals (`CONVENTIONS.md` section 6: every judged chain,
//! held or evicted): hops, time in service, dead work, queue waits from the totals' sketch, and
//! Little's law (λ, W, L = λW) over the time the judged traffic spans. The screen's services
//! view reads the store's totals since start or of the last minute; the HTML report the run's.
//!
//! Nothing is judged here, and no chain is read: a [`ServiceTotals`] is all there is.

use std::sync::Arc;

use deadline_budget::analysis::{ServiceTotals, Totals};

/// One service's figures, with the time its rates are over.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ServiceStats {
    /// Its totals: hops, time in service, dead work, queue waits.
    pub totals: ServiceTotals,
    /// The time λ is over, ns: from the earliest start to the latest end of the chains
    /// judged ([`Totals::traffic`]).
    pub window_ns: u64,
}

impl ServiceStats {
    /// λ (hops/s), W (mean ms in the service) and L = λW (requests in flight), by Little's law
    /// over the window.
    pub fn littles_law(&self) -> (f64, f64, f64) {
        let hops = self.totals.hops;
        let lambda = if self.window_ns == 0 {
            0.0
        } else {
            hops as f64 * 1e9 / self.window_ns as f64
        };
        let w = if hops == 0 {
            0.0
        } else {
            self.totals.work_ms as f64 / hops as f64
        };
        (lambda, w, lambda * w / 1000.0)
    }

    /// The share (0..=1) of this service's work done for callers who had given up.
    pub fn dead_share(&self) -> f64 {
        self.totals.dead_share()
    }
}

/// Every service of `totals`, the largest dead-work share first (then most hops, then by
/// name); λ over the time their traffic spans.
pub fn service_stats(totals: &Totals) -> Vec<(Arc<str>, ServiceStats)> {
    let window_ns = totals.traffic_ns();
    let mut rows: Vec<(Arc<str>, ServiceStats)> = totals
        .services()
        .map(|(name, t)| {
            (
                name.clone(),
                ServiceStats {
                    totals: t.clone(),
                    window_ns,
                },
            )
        })
        .collect();
    rows.sort_by(|a, b| {
        b.1.dead_share()
            .total_cmp(&a.1.dead_share())
            .then(b.1.totals.hops.cmp(&a.1.totals.hops))
            .then(a.0.cmp(&b.0))
    });
    rows
}

//! Per-service figures over the chains a [`Store`] holds: hops, time in service, dead work and
//! queue waits, and Little's law (λ, W, L = λW) over a window of time. The screen's services
//! view asks for the last few seconds; the HTML report for the whole run.
//!
//! Read from the analyses only (each row's `dead_ms`, each hop's span): nothing is judged here.

use std::ops::Range;
use std::sync::Arc;

use deadline_budget::analysis::Distribution;
use foldhash::{HashMap, HashMapExt as _};

use crate::store::Store;

/// One service over the chains held.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ServiceStats {
    /// Hops handled.
    pub hops: u64,
    /// Sum of hop durations, ms.
    pub work_ms: i64,
    /// Dead work: work done after everyone above had stopped waiting, ms (the analysis's
    /// per-hop figure, the same that makes up the chains' wasted ms).
    pub wasted_ms: i64,
    /// Queue waits of the hops that started in the rate window and queued.
    pub queue_wait: Distribution,
    /// Hops that started in the rate window.
    pub recent_hops: u64,
    /// Their summed duration, ms.
    pub recent_ms: i64,
    /// The rate window's length, ns.
    pub window_ns: u64,
}

impl ServiceStats {
    /// λ (hops/s), W (mean ms in the service) and L = λW (requests in flight), by Little's law
    /// over the rate window.
    pub fn littles_law(&self) -> (f64, f64, f64) {
        let lambda = if self.window_ns == 0 {
            0.0
        } else {
            self.recent_hops as f64 * 1e9 / self.window_ns as f64
        };
        let w = if self.recent_hops == 0 {
            0.0
        } else {
            self.recent_ms as f64 / self.recent_hops as f64
        };
        (lambda, w, lambda * w / 1000.0)
    }

    /// The share (0..=1) of this service's work done for callers who had given up.
    pub fn dead_share(&self) -> f64 {
        if self.work_ms <= 0 {
            0.0
        } else {
            (self.wasted_ms as f64 / self.work_ms as f64).clamp(0.0, 1.0)
        }
    }
}

/// Every service with hops in the analysed chains of `store`, the largest dead-work share
/// first (then most hops, then by name). Hops that started within `window` (Unix ns) make up
/// the rates.
pub fn service_stats(store: &Store, window: Range<u64>) -> Vec<(Arc<str>, ServiceStats)> {
    let window_ns = window.end.saturating_sub(window.start);
    let mut by: HashMap<Arc<str>, ServiceStats> = HashMap::new();
    for entry in store.chains() {
        let (Some(a), Some(chain)) = (
            store.held_analysis(entry.trace_id),
            store.chain(entry.trace_id),
        ) else {
            continue;
        };
        for row in &a.rows {
            let Some(span) = chain.span(row.span as usize).filter(|s| s.kind.is_hop()) else {
                continue;
            };
            let s = by
                .entry(span.service.clone())
                .or_insert_with(|| ServiceStats {
                    window_ns,
                    ..ServiceStats::default()
                });
            s.hops += 1;
            s.work_ms += span.duration_ms();
            s.wasted_ms += i64::from(row.dead_ms);
            // Over the same window as λ and W, so the figures side by side agree.
            if window.contains(&span.start_unix_nano) {
                s.recent_hops += 1;
                s.recent_ms += span.duration_ms();
                if let Some(q) = span.budget.queue_wait_ms {
                    s.queue_wait.add(q);
                }
            }
        }
    }
    let mut rows: Vec<_> = by.into_iter().collect();
    rows.sort_by(|a, b| {
        b.1.dead_share()
            .total_cmp(&a.1.dead_share())
            .then(b.1.hops.cmp(&a.1.hops))
            .then(a.0.cmp(&b.0))
    });
    rows
}

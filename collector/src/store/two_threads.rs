//! Many chains analysed at once (the end of a file, a report) on two threads.
//!
//! Enters: the store's chains waiting for analysis (`Store::dirty`), or the chains judged at
//! once (`Store::judge_all`). Leaves: each analysed, as `Store::analyse_dirty` one at a time
//! would leave it: a chain's analysis is a function of the chain alone, so it is made on either
//! thread; it is taken in on the store's thread in the order of before, where it meets the
//! totals.

use deadline_budget::analysis::{ChainAnalysis, TraceId};

use super::{Fate, Store};

/// Chains analysed on two threads at a time when many wait (`Store::analyse_dirty`,
/// `Store::judge_all`): enough to pay for a thread, few enough that their analyses held at once
/// (each with its edges before they are packed) stay a few MiB.
pub(super) const ANALYSED_AT_ONCE: usize = 4096;

impl Store {
    /// The analyses of the chains `ids` a span joined since their last one (`None` for the
    /// others), made on two threads: each a function of the chain alone. For a slice of at most
    /// [`ANALYSED_AT_ONCE`] chains, so that few analyses wait at once.
    pub(super) fn analyses_on_two_threads(&self, ids: &[TraceId]) -> Vec<Option<ChainAnalysis>> {
        let (chains, options) = (&self.chains, &self.options);
        let analyse = |ids: &[TraceId]| -> Vec<Option<ChainAnalysis>> {
            ids.iter()
                .map(|id| {
                    let entry = chains.get(id).filter(|e| e.dirty)?;
                    Some(entry.chain.analyse(options))
                })
                .collect()
        };
        let (first, second) = ids.split_at(ids.len() / 2);
        std::thread::scope(|scope| {
            let other = std::thread::Builder::new()
                .name("check-analyse".into())
                .spawn_scoped(scope, || analyse(second));
            let mut made = analyse(first);
            match other.map(|other| other.join()) {
                Ok(Ok(mut rest)) => made.append(&mut rest),
                // No thread: this one makes the rest (a panic there is one here).
                Err(_) => made.extend(analyse(second)),
                Ok(Err(panic)) => std::panic::resume_unwind(panic),
            }
            made
        })
    }

    /// [`Store::analyse_dirty`] of many chains at once (the end of a file, a report): each
    /// chain's analysis is made on two threads, a slice of [`ANALYSED_AT_ONCE`] chains at a
    /// time ([`Store::analyses_on_two_threads`]), then taken in on this one in the order of
    /// before, where it meets the totals.
    pub(super) fn analyse_dirty_on_two_threads(&mut self) -> usize {
        let dirty = std::mem::take(&mut self.dirty);
        let mut analysed = 0;
        for slice in dirty.chunks(ANALYSED_AT_ONCE) {
            let made = self.analyses_on_two_threads(slice);
            for (trace_id, made) in slice.iter().zip(made) {
                let Some(entry) = self.chains.get_mut(trace_id) else {
                    continue; // evicted since
                };
                // Once only, when a chain is in the list twice.
                if entry.dirty {
                    Self::take_analysis(
                        entry,
                        made,
                        &self.options,
                        &mut self.counters,
                        &mut self.verdicts,
                        Fate::Staying,
                    );
                    analysed += 1;
                }
            }
        }
        analysed
    }
}

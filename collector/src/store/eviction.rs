//! Eviction under `--max-spans`: the oldest chains (by first arrival) leave first, judged as
//! they go if they were not (nothing evicted leaves the totals), the worst of each finding kind
//! kept whole for the page, and the trace ids of those let go remembered for a while.

use deadline_budget::analysis::{TraceId, lost_contexts};

use super::samples::EdgeSamples;
use super::verdicts::Fate;
use super::{Entry, Store};

/// The most spans held for which a chain whose root is a call is judged for lost contexts
/// when it is evicted (a pass over every span held); one that settles first is always judged.
const LOST_CONTEXT_EVICTION_SPANS: u64 = 200_000;

/// Trace ids of evicted chains remembered, so that a span arriving for one is counted
/// (`spans_after_verdict`) rather than judged as a new chain. Older ones are forgotten.
const EVICTED_REMEMBERED: usize = 1 << 16;

impl Store {
    /// Evicts the oldest chains until `extra` more spans fit.
    pub(super) fn make_room(&mut self, extra: usize) {
        while self.counters.spans_held as usize + extra > self.max_spans {
            let Some(oldest) = self.order.pop_front() else {
                return;
            };
            self.evict(oldest);
        }
    }

    /// As [`Store::make_room`], but never evicts `keep` (the chain being added to).
    pub(super) fn make_room_except(&mut self, extra: usize, keep: TraceId) {
        while self.counters.spans_held as usize + extra > self.max_spans {
            let Some(i) = self.order.iter().position(|id| *id != keep) else {
                return;
            };
            if let Some(oldest) = self.order.remove(i) {
                self.evict(oldest);
            }
        }
    }

    pub(super) fn evict(&mut self, trace_id: TraceId) {
        let Some(mut entry) = self.chains.remove(&trace_id) else {
            return;
        };
        // Judged now if it was not: nothing leaves the totals with the chain.
        let lost = if entry.judged.is_none()
            && entry.chain.roots_in_a_call()
            && self.counters.spans_held <= LOST_CONTEXT_EVICTION_SPANS
        {
            let held = self.chains.values().map(|e| &e.chain);
            lost_contexts(held.chain([&entry.chain]), &self.options)
        } else {
            Vec::new()
        };
        let unjudged = entry.judged.is_none();
        let fresh = Self::judge_entry(
            &mut entry,
            None,
            &self.options,
            &mut self.counters,
            &mut self.verdicts,
            &lost,
            Fate::Leaving,
        );
        if unjudged {
            Self::hand_on(&mut entry, self.holding.as_deref_mut());
        }
        let released = self.keep_if_worst(trace_id, &mut entry);
        if entry.worst_of_kinds > 0 {
            // Kept whole for the page, out of the eviction order: held as any chain analysed.
            if let Some(edges) = fresh {
                entry.chain.shrink_to_fit();
                entry.samples = Some(EdgeSamples::pack(&edges, &entry.chain));
            }
            self.chains.insert(trace_id, entry);
        } else {
            self.let_go(trace_id, &mut entry);
        }
        for id in released {
            if let Some(mut e) = self.chains.remove(&id) {
                self.let_go(id, &mut e);
            }
        }
    }

    /// The chain leaves memory (judged already): counted as evicted, remembered so that a span
    /// arriving for it later is counted and not judged.
    pub(super) fn let_go(&mut self, trace_id: TraceId, entry: &mut Entry) {
        let n = entry.chain.len() as u64;
        if let Some(holding) = self.holding.as_mut() {
            holding.release(&mut entry.received);
        }
        self.counters.attribute_bytes -= entry.attribute_bytes as u64;
        self.counters.spans_held -= n;
        self.counters.chains_held -= 1;
        self.counters.chains_evicted += 1;
        self.counters.spans_evicted += n;
        if !self.evicted_set.contains(&trace_id) {
            // The oldest forgotten first: the queue never holds more than it remembers (one
            // more doubled its capacity).
            if self.evicted.len() >= EVICTED_REMEMBERED
                && let Some(old) = self.evicted.pop_front()
            {
                self.evicted_set.remove(&old);
            }
            self.evicted_set.insert(trace_id);
            self.evicted.push_back(trace_id);
        }
    }
}

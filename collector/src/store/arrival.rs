//! Spans joining chains: a batch's spans inserted into the chains held (a chain made for a
//! trace not held yet, room made first under `--max-spans`), with their raw attributes kept
//! within `--max-attribute-bytes` (the oldest chains' dropped first), and a chain a span joins
//! marked for analysis. A span for a chain judged and let go is counted, not judged.

use deadline_budget::analysis::{Chain, Inserted, Span, TraceId};

use super::attributes::ChainAttributes;
use super::received::HeldSpans;
use super::samples::EdgeSamples;
use super::verdicts::HopRows;
use super::{Entry, Store};
use crate::batch::{Batch, RawAttributes};

impl Store {
    /// Adds a batch from ingest (its spans and, if kept, their raw attributes).
    pub fn insert_batch(&mut self, mut batch: Batch) {
        self.insert_batch_from(&mut batch);
    }

    /// The same, leaving the batch's memory to the caller (its spans taken, their vector
    /// and the raw attributes left as they were, copied into the store): the screen frees it
    /// on the thread that decoded it (see `ScreenData::add_batch`).
    pub fn insert_batch_from(&mut self, batch: &mut Batch) {
        let mut attributes = batch.attributes.iter();
        let received = batch.received.take().filter(|_| self.holding.is_some());
        let Some(received) = received else {
            for span in batch.spans.drain(..) {
                let attrs = attributes.next();
                self.insert_span(span, attrs, None);
            }
            return;
        };
        let number = match self.holding.as_mut() {
            Some(holding) => holding.take(received),
            None => return,
        };
        for (i, span) in batch.spans.drain(..).enumerate() {
            let attrs = attributes.next();
            self.insert_span(span, attrs, Some((number, i)));
        }
        if let Some(holding) = self.holding.as_mut() {
            holding.inserted(number);
        }
    }

    /// Adds spans without raw attributes.
    pub fn insert_spans(&mut self, spans: impl IntoIterator<Item = Span>) {
        for span in spans {
            self.insert_span(span, None, None);
        }
    }

    // Inlined into the loops above: a `Span` is 304 bytes, and each call by value copies it.
    #[inline]
    pub(super) fn insert_span(
        &mut self,
        span: Span,
        attributes: Option<&RawAttributes>,
        received: Option<(u64, usize)>,
    ) {
        let trace_id = span.trace_id;
        let span_id = span.span_id;
        let max_spans = self.max_spans;
        // While one more span fits, a span of a chain held needs no eviction first: its entry
        // is looked up once (most spans: the map is large, and each lookup a cache miss).
        let room = self.counters.spans_held < max_spans as u64;
        let (entry, held) = if room && let Some(entry) = self.chains.get_mut(&trace_id) {
            let held = entry.chain.contains(span_id);
            if !held && entry.chain.len() >= max_spans {
                self.counters.spans_over_limit += 1;
                return;
            }
            (entry, held)
        } else {
            let known = self
                .chains
                .get(&trace_id)
                .map(|e| (e.chain.contains(span_id), e.chain.len() >= max_spans));
            match known {
                None if self.evicted_set.contains(&trace_id) => {
                    self.counters.spans_after_verdict += 1;
                    if let (Some(holding), Some((number, i))) = (self.holding.as_mut(), received) {
                        holding.late(trace_id, number, i);
                    }
                    return;
                }
                None => self.add_chain(trace_id),
                // A copy of a span already held replaces it: no room needed.
                Some((true, _)) => {}
                Some((false, true)) => {
                    self.counters.spans_over_limit += 1;
                    return;
                }
                Some((false, false)) => self.make_room_except(1, trace_id),
            }
            let Some(entry) = self.chains.get_mut(&trace_id) else {
                return;
            };
            (entry, known.is_some_and(|(held, _)| held))
        };
        if entry.samples.is_none() {
            // Judged at the end of a run, and a span joins after all: its samples made again
            // first, from the chain as it was judged, to be taken out when it is judged again.
            entry.samples = Some(EdgeSamples::pack(
                &entry.edge_samples(&self.options),
                &entry.chain,
            ));
        }
        if held && let Some(samples) = entry.samples.as_mut().filter(|s| !s.is_empty()) {
            // The copy may win and bring another service to the position the packed samples
            // name it by: name them in full until the chain is analysed again.
            *samples = samples.detach(&entry.chain);
        }
        if let Some(judged) = entry.judged.as_mut()
            && entry.analysis.is_some()
            && judged.hops.is_none()
        {
            // The span may replace a hop: keep what the chain was judged with.
            judged.hops = Some(entry.hop_rows.samples(&entry.chain).into());
        }
        match entry.chain.insert(span) {
            Inserted::New => {
                self.counters.spans_held += 1;
            }
            Inserted::Replaced => self.counters.spans_duplicate += 1,
            Inserted::Conflicting => {
                self.counters.spans_duplicate += 1;
                self.counters.spans_conflicting += 1;
            }
            Inserted::OtherTrace => return,
        }
        if let (Some(holding), Some((number, i))) = (self.holding.as_mut(), received) {
            if entry.judged.is_some() {
                holding.late(trace_id, number, i);
            } else {
                holding.joined(&mut entry.received, number);
            }
        }
        let mut ordered = false;
        if let Some(attrs) = attributes.filter(|a| !a.is_empty()) {
            let dictionary_before = self.dictionary.bytes();
            entry
                .attributes
                .insert(&mut self.dictionary, span_id, attrs);
            let held = entry.attributes.bytes_held();
            self.counters.attribute_bytes = self.counters.attribute_bytes + held as u64
                - entry.attribute_bytes as u64
                + (self.dictionary.bytes() - dictionary_before) as u64;
            entry.attribute_bytes = held;
            if entry.attribute_seq == 0 {
                self.attribute_seq += 1;
                entry.attribute_seq = self.attribute_seq;
                self.attribute_order
                    .push_back((trace_id, self.attribute_seq));
                ordered = true;
            }
        }
        entry.last_span_unix_nano = self.clock_unix_nano;
        if !entry.dirty {
            entry.dirty = true;
            self.dirty.push(trace_id);
            // The same for the chains waiting to be analysed (`check` analyses none before it
            // judges them).
            if self.dirty.len() > self.chains.len() * 2 + 1024 {
                let chains = &self.chains;
                self.dirty
                    .retain(|id| chains.get(id).is_some_and(|e| e.dirty));
            }
        }
        self.trim_attributes();
        if ordered {
            let chains = &self.chains;
            // Chains leave mostly oldest first: their places at the front go as they do, so the
            // queue stays about as long as the chains held (with only the sweep below, its
            // capacity grew to twice that).
            while self
                .attribute_order
                .front()
                .is_some_and(|(id, seq)| chains.get(id).is_none_or(|e| e.attribute_seq != *seq))
            {
                self.attribute_order.pop_front();
            }
        }
        // Chains evicted out of order leave their place behind: sweep now and then, so the
        // queue stays within a few times the chains held.
        if self.attribute_order.len() > self.chains.len() * 2 + 1024 {
            let chains = &self.chains;
            self.attribute_order
                .retain(|(id, seq)| chains.get(id).is_some_and(|e| e.attribute_seq == *seq));
        }
    }

    /// Drops the raw attributes of the chains that got theirs first until what is held fits
    /// `max_attribute_bytes`. The spans stay; the detail view says their attributes were
    /// dropped.
    pub(super) fn trim_attributes(&mut self) {
        while self.counters.attribute_bytes as usize > self.max_attribute_bytes {
            let Some((oldest, seq)) = self.attribute_order.pop_front() else {
                return;
            };
            let Some(entry) = self
                .chains
                .get_mut(&oldest)
                .filter(|e| e.attribute_seq == seq)
            else {
                continue; // evicted since (perhaps a new chain of that trace id took its place)
            };
            entry.attribute_seq = 0;
            if !std::mem::take(&mut entry.attributes).is_empty() {
                self.counters.attribute_bytes -= entry.attribute_bytes as u64;
                self.counters.attribute_chains_dropped += 1;
                entry.attribute_bytes = 0;
                entry.attributes_dropped_below = entry.chain.len() as u32;
            }
        }
    }

    /// Makes room for one span, then an empty chain for `trace_id`, newest in arrival order.
    pub(super) fn add_chain(&mut self, trace_id: TraceId) {
        self.make_room(1);
        self.order.push_back(trace_id);
        self.chains.insert(
            trace_id,
            Box::new(Entry {
                chain: Chain::new(trace_id),
                attributes: ChainAttributes::default(),
                attribute_bytes: 0,
                attributes_dropped_below: 0,
                attribute_seq: 0,
                analysis: None,
                hop_rows: HopRows::default(),
                samples: Some(EdgeSamples::default()),
                dirty: false,
                arrived_unix_nano: self.clock_unix_nano,
                last_span_unix_nano: self.clock_unix_nano,
                judged: None,
                lost: Vec::new(),
                worst_of_kinds: 0,
                received: HeldSpans::default(),
            }),
        );
        self.unjudged.push_back(trace_id);
        // Chains judged or evicted leave mostly oldest first: their places at the front go as
        // they do (as for `attribute_order`).
        let chains = &self.chains;
        while self
            .unjudged
            .front()
            .is_some_and(|id| chains.get(id).is_none_or(|e| e.judged.is_some()))
        {
            self.unjudged.pop_front();
        }
        self.counters.chains_held += 1;
        // Chains judged or evicted since leave their place behind: sweep now and then, so the
        // queue stays within a few times the chains held (`check --input` never waits for a
        // chain to settle).
        if self.unjudged.len() > self.chains.len() * 2 + 1024 {
            let chains = &self.chains;
            self.unjudged
                .retain(|id| chains.get(id).is_some_and(|e| e.judged.is_none()));
        }
    }
}

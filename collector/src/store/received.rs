//! The spans as received of the chains not judged yet, for `serve --forward` (CONVENTIONS §7):
//! held until each chain's first verdict, when the chains the forwarding stage keeps are handed
//! on with their spans ([`Store::take_handoffs`]); a span that joins a chain after its verdict is
//! handed on alone.
//!
//! Enters: a batch's [`Received`] (the request's bytes, each span's place in them, its resource
//! and scope). Held as it came, not copied: the batch stays while a chain with spans in it waits
//! for its verdict (each chain notes the batches it has spans in, [`HeldSpans`]), and goes when
//! the last of them is judged. Only a kept chain's spans are copied out, at its verdict.
//! Bounded in bytes (`--forward-buffer`'s share for chains waiting to be judged): a batch that
//! does not fit is not held, and its spans are counted (their chains go without them).

use std::sync::Arc;

use std::collections::VecDeque;

use deadline_budget::analysis::{KindSet, Severity, TraceId};
use prost::encoding::{decode_varint, encode_varint};

use crate::batch::{Received, Scope};

/// One chain's spans as received. See the module documentation.
#[derive(Debug, Default)]
pub struct ReceivedChain {
    /// Per span: its scope's number in `scopes` (varint), its length (varint), its bytes.
    records: Vec<u8>,
    scopes: Vec<Arc<Scope>>,
    spans: u32,
    /// Spans of the chain that were not held: no room under the bound.
    missing: u32,
}

/// What a scope costs a chain beside the table's one copy: its place in `scopes`.
const SCOPE_REFERENCE_BYTES: usize = std::mem::size_of::<Arc<Scope>>();

impl ReceivedChain {
    /// One span alone (a span that joined a chain after its verdict).
    pub fn of_one(span: &[u8], scope: &Arc<Scope>) -> Self {
        let mut out = ReceivedChain::default();
        out.push(span, scope);
        out
    }

    /// Adds one span under `scope`; returns how many bytes more it holds.
    pub fn push(&mut self, span: &[u8], scope: &Arc<Scope>) -> usize {
        let before = self.bytes();
        let index = match self.scopes.iter().position(|s| Arc::ptr_eq(s, scope)) {
            Some(i) => i,
            None => {
                self.scopes.push(scope.clone());
                self.scopes.len() - 1
            }
        };
        encode_varint(index as u64, &mut self.records);
        encode_varint(span.len() as u64, &mut self.records);
        self.records.extend_from_slice(span);
        self.spans += 1;
        self.bytes() - before
    }

    /// Bytes held (the records' capacity, the scopes' references).
    pub fn bytes(&self) -> usize {
        self.records.capacity() + self.scopes.capacity() * SCOPE_REFERENCE_BYTES
    }

    /// Spans held.
    pub fn len(&self) -> u32 {
        self.spans
    }

    /// Whether no span is held.
    pub fn is_empty(&self) -> bool {
        self.spans == 0
    }

    /// Spans of the chain that were not held (no room under the bound).
    pub fn missing(&self) -> u32 {
        self.missing
    }

    /// Each span held, in arrival order (a span sent twice is there twice), with its scope.
    pub fn spans(&self) -> impl Iterator<Item = (&[u8], &Arc<Scope>)> + '_ {
        let mut rest: &[u8] = &self.records;
        std::iter::from_fn(move || {
            if rest.is_empty() {
                return None;
            }
            let scope = usize::try_from(decode_varint(&mut rest).ok()?).ok()?;
            let len = usize::try_from(decode_varint(&mut rest).ok()?).ok()?;
            let (span, next) = rest.split_at_checked(len)?;
            rest = next;
            Some((span, self.scopes.get(scope)?))
        })
    }

    /// Gives back the capacity not used.
    pub fn shrink(&mut self) {
        self.records.shrink_to_fit();
        self.scopes.shrink_to_fit();
    }
}

/// What the store hands on for forwarding ([`Store::take_handoffs`]).
#[allow(clippy::large_enum_variant)] // a chain or a span, each moved once
#[derive(Debug)]
pub enum Handoff {
    /// A chain judged for the first time (at settle, at eviction, or at the end of the run).
    Chain(JudgedChain),
    /// A span that joined a chain after its verdict (held still, or let go).
    Late {
        /// Its trace.
        trace_id: TraceId,
        /// The span as received.
        spans: ReceivedChain,
    },
}

/// A chain at its verdict, with its spans as received.
#[derive(Debug)]
pub struct JudgedChain {
    /// The trace.
    pub trace_id: TraceId,
    /// Its worst finding's severity, if any.
    pub worst: Option<Severity>,
    /// The kinds of its findings.
    pub kinds: KindSet,
    /// Its wasted ms.
    pub wasted_ms: i64,
    /// Its spans as received (and how many were not held).
    pub spans: ReceivedChain,
}

/// The trace id a span's bytes name (field 1: first, as every SDK writes it, nearly always).
fn trace_of(span: &[u8]) -> Option<[u8; 16]> {
    if let [0x0a, 16, id @ ..] = span
        && let Some(id) = id.first_chunk::<16>()
    {
        return Some(*id);
    }
    crate::ingest::decode::protobuf_wire::fields(span).find_map(|field| match field {
        Ok((1, crate::ingest::decode::protobuf_wire::Field::Len(id))) => id.try_into().ok(),
        _ => None,
    })
}

/// Which chains the forwarding stage keeps, asked at each chain's first verdict: its trace id
/// and its worst finding's severity.
pub type Keep = Box<dyn Fn(TraceId, Option<Severity>) -> bool + Send>;

/// One batch's spans as received, while a chain with spans in it waits for its verdict.
struct HeldBatch {
    received: Box<Received>,
    /// Chains not judged yet with spans in it.
    pending: u32,
    /// Whether it fit the bound (else it is kept only while the batch is inserted).
    held: bool,
    bytes: usize,
}

/// Where a chain not judged yet has spans as received: the batches (by number), and how many
/// of its spans were not held. Inline in the chain's entry: no allocation for a chain whose
/// spans came in one batch.
#[derive(Debug, Default)]
pub(super) struct HeldSpans {
    /// The latest batch, 0 for none.
    last: u64,
    earlier: Vec<u64>,
    missing: u32,
}

/// What the store holds of the spans as received, when it keeps them
/// ([`Store::keep_received`]). See the module documentation.
pub(super) struct Holding {
    max_bytes: usize,
    keep: Keep,
    /// The batches from number `first` on (`None`: let go).
    batches: VecDeque<Option<HeldBatch>>,
    first: u64,
    bytes: usize,
    not_held: u64,
    /// What waits to be taken ([`Store::take_handoffs`]).
    pub(super) handoffs: Vec<Handoff>,
}

impl std::fmt::Debug for Holding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Holding")
            .field("max_bytes", &self.max_bytes)
            .field("batches", &self.batches.len())
            .field("bytes", &self.bytes)
            .finish()
    }
}

impl Holding {
    pub(super) fn new(max_bytes: usize, keep: Keep) -> Self {
        Holding {
            max_bytes,
            keep,
            batches: VecDeque::new(),
            first: 1,
            bytes: 0,
            not_held: 0,
            handoffs: Vec::new(),
        }
    }

    /// Bytes held.
    pub(super) fn bytes(&self) -> u64 {
        self.bytes as u64
    }

    /// Spans not held (no room under the bound).
    pub(super) fn not_held(&self) -> u64 {
        self.not_held
    }

    /// Takes a batch's spans as received; returns its number. It is held if it fits the bound;
    /// either way it is there until [`Holding::inserted`].
    pub(super) fn take(&mut self, received: Box<Received>) -> u64 {
        let bytes = received.bytes.len()
            + received.spans.capacity() * std::mem::size_of::<crate::batch::ReceivedSpan>()
            + received.scopes.iter().map(|s| s.bytes()).sum::<usize>();
        let held = self.bytes + bytes <= self.max_bytes;
        if held {
            self.bytes += bytes;
        }
        self.batches.push_back(Some(HeldBatch {
            received,
            pending: 0,
            held,
            bytes,
        }));
        self.first + self.batches.len() as u64 - 1
    }

    fn batch(&mut self, number: u64) -> Option<&mut HeldBatch> {
        let i = usize::try_from(number.checked_sub(self.first)?).ok()?;
        self.batches.get_mut(i)?.as_mut()
    }

    /// Span `index` of batch `number` joined a chain not judged yet.
    pub(super) fn joined(&mut self, spans: &mut HeldSpans, number: u64) {
        let Some(batch) = self.batch(number).filter(|b| b.held) else {
            spans.missing += 1;
            self.not_held += 1;
            return;
        };
        if spans.last != number {
            batch.pending += 1;
            if spans.last != 0 {
                spans.earlier.push(spans.last);
            }
            spans.last = number;
        }
    }

    /// Span `index` of batch `number` joined a chain after its verdict: handed on alone.
    pub(super) fn late(&mut self, trace_id: TraceId, number: u64, index: usize) {
        let Some((span, scope)) = self.batch(number).and_then(|b| b.received.span(index)) else {
            return;
        };
        let spans = ReceivedChain::of_one(span, scope);
        self.handoffs.push(Handoff::Late { trace_id, spans });
    }

    /// Batch `number` is inserted: let go now unless it is held for a chain.
    pub(super) fn inserted(&mut self, number: u64) {
        if self
            .batch(number)
            .is_some_and(|b| !b.held || b.pending == 0)
        {
            self.release_batch(number);
        }
    }

    fn release_batch(&mut self, number: u64) {
        let Some(i) = number
            .checked_sub(self.first)
            .and_then(|i| usize::try_from(i).ok())
        else {
            return;
        };
        if let Some(batch) = self.batches.get_mut(i).and_then(Option::take)
            && batch.held
        {
            self.bytes -= batch.bytes;
        }
        while self.batches.front().is_some_and(Option::is_none) {
            self.batches.pop_front();
            self.first += 1;
        }
    }

    /// A chain at its first verdict: handed on with its spans as received when the forwarding
    /// stage keeps it; the batches it held let go once no other chain waits on them.
    pub(super) fn judged(
        &mut self,
        trace_id: TraceId,
        spans: &mut HeldSpans,
        worst: Option<Severity>,
        verdict: impl FnOnce() -> (KindSet, i64),
    ) {
        let mut kept = (self.keep)(trace_id, worst).then(ReceivedChain::default);
        let held = std::mem::take(spans);
        for number in held.earlier.iter().copied().chain([held.last]) {
            let Some(batch) = self.batch(number) else {
                continue;
            };
            if let Some(out) = kept.as_mut() {
                for i in 0..batch.received.spans.len() {
                    if let Some((span, scope)) = batch.received.span(i)
                        && trace_of(span) == Some(trace_id.0)
                    {
                        out.push(span, scope);
                    }
                }
            }
            batch.pending -= 1;
            if batch.pending == 0 {
                self.release_batch(number);
            }
        }
        if let Some(mut out) = kept {
            out.missing = held.missing;
            out.shrink();
            let (kinds, wasted_ms) = verdict();
            self.handoffs.push(Handoff::Chain(JudgedChain {
                trace_id,
                worst,
                kinds,
                wasted_ms,
                spans: out,
            }));
        }
    }

    /// A chain let go without its verdict handed on: the batches it held let go as above.
    pub(super) fn release(&mut self, spans: &mut HeldSpans) {
        let held = std::mem::take(spans);
        for number in held.earlier.iter().copied().chain([held.last]) {
            if let Some(batch) = self.batch(number) {
                batch.pending -= 1;
                if batch.pending == 0 {
                    self.release_batch(number);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scope(name: &str) -> Arc<Scope> {
        Arc::new(Scope {
            resource: name.as_bytes().into(),
            scope: b"scope".as_slice().into(),
        })
    }

    #[test]
    fn a_chain_gives_back_every_span_with_its_scope_in_order() {
        let (a, b) = (scope("a"), scope("b"));
        let mut chain = ReceivedChain::default();
        let long = vec![7u8; 300];
        assert!(chain.push(b"one", &a) > 0);
        chain.push(&long, &b);
        chain.push(b"three", &a);
        chain.missing = 1;
        let spans: Vec<(&[u8], &Arc<Scope>)> = chain.spans().collect();
        assert_eq!(spans.len(), 3);
        assert_eq!(
            (spans[0].0, &*spans[0].1.resource),
            (&b"one"[..], &b"a"[..])
        );
        assert_eq!((spans[1].0, &*spans[1].1.resource), (&long[..], &b"b"[..]));
        assert_eq!(
            (spans[2].0, &*spans[2].1.resource),
            (&b"three"[..], &b"a"[..])
        );
        assert_eq!((chain.len(), chain.missing()), (3, 1));
    }
}

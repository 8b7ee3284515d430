//! The raw attributes the screen keeps for its detail popup, held compactly: one byte arena per
//! chain, and a store-wide dictionary of the attributes that repeat.
//!
//! Attributes enter as [`RawAttributes`] (each `KeyValue`'s protobuf bytes, as the receivers
//! checked and capped them) and leave decoded, when a person opens a span. Most attributes
//! repeat from span to span (`http.request.method = GET`, `server.address`, a status code, a
//! budget source): such a `KeyValue` is kept once in the [`Dictionary`] and a span holds its
//! number (one or two bytes); one seen only once (an id, a timestamp) is held inline, as its
//! bytes. A chain's spans are records in one vector beside the chain (no map, no allocation
//! per span): the store holds a span's attributes in ~25 bytes where a map of boxed bytes took
//! ~380.
//!
//! The dictionary is bounded ([`MAX_ENTRIES`] attributes of at most [`MAX_ENTRY_BYTES`] each)
//! and takes an attribute only the second time it is seen within the last [`MAX_SEEN_ONCE`]
//! new ones, so values that never repeat do not fill it; once full, new attributes are held
//! inline, as before it existed. What it decodes to never changes: an entry, once given a
//! number, stays for the store's life.

use foldhash::{HashMap, HashMapExt as _, HashSet, HashSetExt as _};
use opentelemetry_proto::tonic::common::v1::KeyValue;
use prost::Message as _;
use prost::encoding::{decode_varint, encode_varint};
use std::hash::BuildHasher as _;

use deadline_budget::analysis::{SpanId, TraceId};

use crate::batch::{self, RawAttributes};

/// Attributes the dictionary holds at most.
pub const MAX_ENTRIES: usize = 1 << 16;

/// The longest attribute (its protobuf encoding) the dictionary takes; longer ones are held
/// inline (they seldom repeat, and a number saves little beside them).
pub const MAX_ENTRY_BYTES: usize = 256;

/// Attributes seen once that the dictionary remembers (by hash) to take them when seen again;
/// past it, the memory starts afresh.
pub const MAX_SEEN_ONCE: usize = 1 << 16;

/// What one dictionary entry costs beyond its bytes: its slot in the hash map (about two slots
/// of 16 bytes an entry), the boxed slice's pointer and length, the allocation's header.
const ENTRY_COST: usize = 64;

/// The attributes that repeat, numbered. See the module documentation.
#[derive(Debug)]
pub struct Dictionary {
    /// Entry number by the hash of its bytes (a hash shared by two attributes numbers the
    /// first; the second is then held inline).
    by_hash: HashMap<u64, u32>,
    entries: Vec<Box<[u8]>>,
    seen_once: HashSet<u64>,
    hasher: foldhash::fast::RandomState,
    bytes: usize,
    /// The most bytes it takes (a share of the store's attribute budget).
    limit: usize,
}

impl Default for Dictionary {
    fn default() -> Self {
        Dictionary {
            by_hash: HashMap::new(),
            entries: Vec::new(),
            seen_once: HashSet::new(),
            hasher: foldhash::fast::RandomState::default(),
            bytes: 0,
            limit: usize::MAX,
        }
    }
}

impl Dictionary {
    /// A dictionary that takes at most `limit` bytes (entries with their cost).
    pub fn with_limit(limit: usize) -> Self {
        Dictionary {
            limit,
            ..Dictionary::default()
        }
    }

    /// Bytes the dictionary holds (entries with their cost; the memory of hashes seen once,
    /// bounded, is not counted).
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Attributes numbered.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Appends one attribute (`kv`: a `KeyValue`'s bytes) to `out` as a token: its number
    /// (`id << 1`) when the dictionary has or now takes it, else `len << 1 | 1` and the bytes.
    fn encode(&mut self, kv: &[u8], out: &mut Vec<u8>) {
        if kv.len() <= MAX_ENTRY_BYTES {
            let hash = self.hasher.hash_one(kv);
            match self.by_hash.get(&hash) {
                Some(&id) if *self.entries[id as usize] == *kv => {
                    encode_varint(u64::from(id) << 1, out);
                    return;
                }
                Some(_) => {}
                None if self.entries.len() < MAX_ENTRIES
                    && self.bytes + kv.len() + ENTRY_COST <= self.limit =>
                {
                    if self.seen_once.remove(&hash) {
                        let id = self.entries.len() as u32;
                        self.entries.push(kv.into());
                        self.by_hash.insert(hash, id);
                        self.bytes += kv.len() + ENTRY_COST;
                        encode_varint(u64::from(id) << 1, out);
                        return;
                    }
                    if self.seen_once.len() >= MAX_SEEN_ONCE {
                        self.seen_once.clear();
                    }
                    self.seen_once.insert(hash);
                }
                None => {}
            }
        }
        encode_varint((kv.len() as u64) << 1 | 1, out);
        out.extend_from_slice(kv);
    }

    /// The attribute a token read from `tokens` stands for, advancing past it; `None` at the
    /// end or on bytes that are not a token (never the case for what [`encode`] wrote).
    fn decode<'a>(&'a self, tokens: &mut &'a [u8]) -> Option<&'a [u8]> {
        if tokens.is_empty() {
            return None;
        }
        let token = decode_varint(tokens).ok()?;
        if token & 1 == 0 {
            return self
                .entries
                .get(usize::try_from(token >> 1).ok()?)
                .map(|e| &**e);
        }
        let len = usize::try_from(token >> 1).ok()?;
        let (kv, rest) = tokens.split_at_checked(len)?;
        *tokens = rest;
        Some(kv)
    }
}

/// One chain's raw attributes: a record per span, in arrival order (a later record for the same
/// span replaces an earlier one), each the span id, how many values were cut and attributes not
/// kept, the tokens' length, and the tokens.
#[derive(Debug, Default)]
pub struct ChainAttributes {
    records: Vec<u8>,
}

/// One span's attributes, decoded.
#[derive(Debug, Default, PartialEq)]
pub struct SpanAttributes {
    /// The attributes kept.
    pub attributes: Vec<KeyValue>,
    /// How many kept values were cut.
    pub cut: u16,
    /// How many attributes were not kept.
    pub dropped: u16,
}

/// A span's record as read from the arena.
struct Record<'a> {
    span_id: SpanId,
    cut: u16,
    dropped: u16,
    tokens: &'a [u8],
}

impl Record<'_> {
    fn decode(&self, dictionary: &Dictionary) -> SpanAttributes {
        let mut attributes = Vec::new();
        let mut tokens = self.tokens;
        while let Some(kv) = dictionary.decode(&mut tokens) {
            match KeyValue::decode(kv) {
                Ok(kv) => attributes.push(kv),
                Err(_) => break,
            }
        }
        SpanAttributes {
            attributes,
            cut: self.cut,
            dropped: self.dropped,
        }
    }
}

impl ChainAttributes {
    /// Adds the attributes of one span (a later record replaces what it had).
    pub fn insert(
        &mut self,
        dictionary: &mut Dictionary,
        span_id: SpanId,
        attributes: &RawAttributes,
    ) {
        if self.records.is_empty() {
            // Room for a typical chain (8 spans of ~10 repeated attributes) at once.
            self.records.reserve(8 * 24);
        }
        let mut tokens = Vec::with_capacity(64);
        for kv in attributes.key_values() {
            dictionary.encode(kv, &mut tokens);
        }
        self.records.extend_from_slice(&span_id.0);
        encode_varint(u64::from(attributes.cut()), &mut self.records);
        encode_varint(u64::from(attributes.dropped()), &mut self.records);
        encode_varint(tokens.len() as u64, &mut self.records);
        self.records.extend_from_slice(&tokens);
    }

    /// Bytes the arena holds (its capacity).
    pub fn bytes_held(&self) -> usize {
        self.records.capacity()
    }

    /// Gives back what is not used when that is more than a quarter.
    pub fn shrink(&mut self) {
        let (len, capacity) = (self.records.len(), self.records.capacity());
        if capacity - len > capacity / 4 {
            self.records.shrink_to_fit();
        }
    }

    /// Whether no span has a record.
    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }

    fn records(&self) -> impl Iterator<Item = Record<'_>> + '_ {
        let mut rest: &[u8] = &self.records;
        std::iter::from_fn(move || {
            let (id, after) = rest.split_first_chunk::<8>()?;
            let mut after = after;
            let cut = decode_varint(&mut after).ok()?;
            let dropped = decode_varint(&mut after).ok()?;
            let len = usize::try_from(decode_varint(&mut after).ok()?).ok()?;
            let (tokens, next) = after.split_at_checked(len)?;
            rest = next;
            Some(Record {
                span_id: SpanId(*id),
                cut: u16::try_from(cut).unwrap_or(u16::MAX),
                dropped: u16::try_from(dropped).unwrap_or(u16::MAX),
                tokens,
            })
        })
    }

    /// The attributes of one span, decoded (the latest record of it). A walk over the chain's
    /// records: for every span of a chain at once, [`ChainAttributes::all`].
    pub fn get(&self, dictionary: &Dictionary, span_id: SpanId) -> Option<SpanAttributes> {
        let record = self.records().filter(|r| r.span_id == span_id).last()?;
        Some(record.decode(dictionary))
    }

    /// The attributes of every span that has some, decoded, in one walk.
    pub fn all(&self, dictionary: &Dictionary) -> HashMap<SpanId, SpanAttributes> {
        let mut out = HashMap::new();
        for record in self.records() {
            out.insert(record.span_id, record.decode(dictionary));
        }
        out
    }
}

/// What the screen's detail view reads of a chain's attributes.
impl super::Store {
    /// The raw attributes of one span, when ingest kept them (decoded now).
    pub fn attributes(&self, trace_id: TraceId, span_id: SpanId) -> Option<Vec<KeyValue>> {
        self.chains
            .get(&trace_id)?
            .attributes
            .get(&self.dictionary, span_id)
            .map(|a| a.attributes)
    }

    /// The raw attributes of every span of one chain that has them, decoded in one pass (for
    /// writing a whole chain out: [`Store::attributes`] walks the chain's records for each span).
    pub fn chain_attributes(&self, trace_id: TraceId) -> HashMap<SpanId, Vec<KeyValue>> {
        self.chains
            .get(&trace_id)
            .map_or_else(HashMap::new, |entry| {
                entry
                    .attributes
                    .all(&self.dictionary)
                    .into_iter()
                    .map(|(id, a)| (id, a.attributes))
                    .collect()
            })
    }

    /// What the detail view should say about a span's raw attributes beyond showing them:
    /// values cut, attributes not kept, or all of them dropped for the store's budget.
    pub fn attribute_note(&self, trace_id: TraceId, span_id: SpanId) -> Option<String> {
        let entry = self.chains.get(&trace_id)?;
        if let Some(attrs) = entry.attributes.get(&self.dictionary, span_id) {
            let mut parts = Vec::new();
            if attrs.cut > 0 {
                parts.push(format!(
                    "{} value(s) cut to {} KiB",
                    attrs.cut,
                    batch::MAX_VALUE_BYTES / 1024
                ));
            }
            if attrs.dropped > 0 {
                parts.push(format!(
                    "{} attribute(s) not kept (a span keeps {} KiB of attributes)",
                    attrs.dropped,
                    batch::MAX_SPAN_ATTRIBUTE_BYTES / 1024
                ));
            }
            return (!parts.is_empty()).then(|| parts.join("; "));
        }
        let position = entry.chain.spans().position(|s| s.span_id == span_id)?;
        (position < entry.attributes_dropped_below as usize).then(|| {
            "attributes dropped to stay under --max-attribute-bytes (oldest chains first)".into()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use opentelemetry_proto::tonic::common::v1::{AnyValue, any_value::Value};

    fn text(key: &str, value: &str) -> KeyValue {
        KeyValue {
            key: key.into(),
            value: Some(AnyValue {
                value: Some(Value::StringValue(value.into())),
            }),
            ..Default::default()
        }
    }

    #[test]
    fn every_span_gets_back_its_own_attributes_repeated_or_not() {
        let mut dictionary = Dictionary::default();
        let mut chain = ChainAttributes::default();
        let spans: Vec<Vec<KeyValue>> = (0..50u8)
            .map(|i| {
                vec![
                    text("http.request.method", "GET"),
                    text("request.id", &format!("req-{i}")),
                    text("long", &"x".repeat(300 + usize::from(i))),
                    text("server.address", "127.0.0.1"),
                ]
            })
            .collect();
        for (i, attrs) in spans.iter().enumerate() {
            chain.insert(
                &mut dictionary,
                SpanId([i as u8; 8]),
                &RawAttributes::from_key_values(attrs),
            );
        }
        for (i, attrs) in spans.iter().enumerate() {
            let got = chain.get(&dictionary, SpanId([i as u8; 8]));
            assert_eq!(got.map(|a| a.attributes).as_ref(), Some(attrs), "span {i}");
        }
        assert_eq!(chain.get(&dictionary, SpanId([99; 8])), None);
        let all = chain.all(&dictionary);
        assert_eq!(all.len(), spans.len());
        for (i, attrs) in spans.iter().enumerate() {
            assert_eq!(
                all.get(&SpanId([i as u8; 8])).map(|a| &a.attributes),
                Some(attrs)
            );
        }
        // The repeated ones are numbered; the id and the long value are not.
        assert_eq!(dictionary.len(), 2);
        // Spans whose attributes all repeat cost their id, three lengths and a byte each.
        let mut repeated = ChainAttributes::default();
        let attrs = RawAttributes::from_key_values(&[
            text("http.request.method", "GET"),
            text("server.address", "127.0.0.1"),
        ]);
        for i in 0..50u8 {
            repeated.insert(&mut dictionary, SpanId([i; 8]), &attrs);
        }
        assert_eq!(repeated.records.len(), 50 * (8 + 3 + 2));
    }

    #[test]
    fn a_later_record_replaces_a_span_and_keeps_what_was_cut_and_not_kept() {
        let mut dictionary = Dictionary::default();
        let mut chain = ChainAttributes::default();
        let first = RawAttributes::from_key_values(&[text("a", "1")]);
        let big: Vec<KeyValue> = (0..300)
            .map(|i| text(&format!("k{i}"), &"v".repeat(100)))
            .collect();
        let second = RawAttributes::from_key_values(&big);
        assert!(second.dropped() > 0);
        chain.insert(&mut dictionary, SpanId([1; 8]), &first);
        chain.insert(&mut dictionary, SpanId([1; 8]), &second);
        let got = chain.get(&dictionary, SpanId([1; 8])).unwrap_or_default();
        assert_eq!(got.attributes, second.decode());
        assert_eq!((got.cut, got.dropped), (second.cut(), second.dropped()));
    }

    #[test]
    fn the_dictionary_stays_bounded_under_values_that_never_repeat_or_always_do() {
        let mut dictionary = Dictionary::default();
        let mut out = Vec::new();
        for i in 0..(3 * MAX_ENTRIES as u32) {
            let kv = text("id", &i.to_string()).encode_to_vec();
            dictionary.encode(&kv, &mut out);
            out.clear();
        }
        assert_eq!(dictionary.len(), 0, "values seen once are held inline");
        for i in 0..(3 * MAX_ENTRIES as u32) {
            let kv = text("id", &i.to_string()).encode_to_vec();
            dictionary.encode(&kv, &mut out);
            dictionary.encode(&kv, &mut out);
            out.clear();
        }
        assert_eq!(dictionary.len(), MAX_ENTRIES);
        // Past the cap, an attribute is still kept (inline) and decodes to itself.
        let kv = text("late", "value").encode_to_vec();
        dictionary.encode(&kv, &mut out);
        dictionary.encode(&kv, &mut out);
        let mut tokens: &[u8] = &out;
        assert_eq!(dictionary.decode(&mut tokens), Some(&kv[..]));
        assert_eq!(dictionary.decode(&mut tokens), Some(&kv[..]));
        assert_eq!(dictionary.decode(&mut tokens), None);
    }
}

//! The one message between ingest and the store: a [`Batch`] is one export request's valid
//! spans, with each span's [`RawAttributes`] (kept within caps, for the detail view), for
//! `record` the request itself, and for `serve --forward` each span as received ([`Received`]).
//!
//! Enters: built by the receivers (`ingest`), by `check --input` and by `replay`. Leaves: into
//! the store, which holds the raw attributes within its own byte budget
//! ([`DEFAULT_MAX_ATTRIBUTE_BYTES`]). Neither side imports the other: both import this.

use deadline_budget::analysis::Span;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value::Value};
use prost::Message as _;

use crate::ingest::decode::protobuf_wire;

mod received;
pub use received::{Received, ReceivedSpan, Scope};
pub(crate) use received::{ReceivedBuilder, fields_but};

/// The default for `--max-attribute-bytes`: raw attributes held for the detail view, all
/// chains together (the screen's only memory that grows with what spans carry, not with how
/// many there are).
pub const DEFAULT_MAX_ATTRIBUTE_BYTES: usize = 256 * 1024 * 1024;
/// Most raw attributes kept per span for the detail view.
pub const MAX_KEPT_ATTRIBUTES: usize = 256;
/// A kept attribute value longer than this (a string's or bytes' length; an array's or a
/// list's encoded size) is cut, with a marker, as the SDKs' attribute value length limit does:
/// the detail view has no use for a 4 MB blob, and it would cost 4 MB per span.
pub const MAX_VALUE_BYTES: usize = 4 * 1024;
/// The most attribute bytes (encoded) kept for one span; attributes past it are not kept and
/// counted, the ones that still fit after them are.
pub const MAX_SPAN_ATTRIBUTE_BYTES: usize = 16 * 1024;

/// One export request, decoded.
#[derive(Debug)]
pub struct Batch {
    /// The valid spans of the request.
    pub spans: Vec<Span>,
    /// Raw attributes, same index as `spans`; empty unless `keep_attributes`.
    pub attributes: Vec<RawAttributes>,
    /// The request as received; `None` unless `keep_raw`.
    pub raw: Option<ExportTraceServiceRequest>,
    /// Each valid span as received, for `serve --forward`; `None` unless `keep_received`.
    pub received: Option<Box<Received>>,
}

/// One span's attributes as received, kept for the detail view: their protobuf encoding (each
/// `KeyValue` as a length-delimited field 1, as in a `KeyValueList`), decoded only when a person
/// opens the span. Holding bytes instead of decoded `KeyValue`s (a `String` per key and value)
/// takes about a third of the memory. Equal when they decode to the same attributes and say the
/// same about what was cut or not kept.
///
/// What is kept is bounded: at most [`MAX_KEPT_ATTRIBUTES`] attributes and
/// [`MAX_SPAN_ATTRIBUTE_BYTES`] a span, each value at most [`MAX_VALUE_BYTES`] (cut with a
/// visible marker); [`RawAttributes::cut`] and [`RawAttributes::dropped`] say how many values
/// were cut and how many attributes were not kept.
#[derive(Clone, Default)]
pub struct RawAttributes {
    bytes: Box<[u8]>,
    cut: u16,
    dropped: u16,
}

impl RawAttributes {
    /// Keeps decoded attributes (within the caps).
    pub fn from_key_values(attributes: &[KeyValue]) -> Self {
        let mut keeper = RawAttributesBuilder::default();
        for kv in attributes {
            keeper.offer(kv, None);
        }
        keeper.finish()
    }

    /// The same attributes with none kept (all counted as not kept): what a span keeps when
    /// the screen's attribute budget has no room for it.
    pub fn without_values(&self) -> Self {
        let held = protobuf_wire::fields(&self.bytes).count();
        RawAttributes {
            bytes: Box::default(),
            cut: 0,
            dropped: self
                .dropped
                .saturating_add(u16::try_from(held).unwrap_or(u16::MAX)),
        }
    }

    /// Whether there is nothing to show: no attribute kept and none left out.
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty() && self.dropped == 0
    }

    /// Bytes held for the kept attributes.
    pub fn bytes_held(&self) -> usize {
        self.bytes.len()
    }

    /// How many kept values were cut to [`MAX_VALUE_BYTES`].
    pub fn cut(&self) -> u16 {
        self.cut
    }

    /// How many attributes were not kept (past the count or byte cap of a span, or the
    /// screen's budget).
    pub fn dropped(&self) -> u16 {
        self.dropped
    }

    /// Each kept attribute's protobuf encoding (a `KeyValue` message), in order.
    pub fn key_values(&self) -> impl Iterator<Item = &[u8]> + '_ {
        protobuf_wire::fields(&self.bytes).map_while(|field| match field {
            Ok((1, protobuf_wire::Field::Len(kv))) => Some(kv),
            _ => None,
        })
    }

    /// The attributes, decoded. Bytes that do not decode (never the case for what the
    /// receivers kept: they were checked) give the attributes before them.
    pub fn decode(&self) -> Vec<KeyValue> {
        let mut out = Vec::new();
        for field in protobuf_wire::fields(&self.bytes) {
            let Ok((1, protobuf_wire::Field::Len(kv))) = field else {
                break;
            };
            match KeyValue::decode(kv) {
                Ok(kv) => out.push(kv),
                Err(_) => break,
            }
        }
        out
    }
}

impl PartialEq for RawAttributes {
    fn eq(&self, other: &Self) -> bool {
        (self.cut, self.dropped) == (other.cut, other.dropped)
            && (self.bytes == other.bytes || self.decode() == other.decode())
    }
}

impl std::fmt::Debug for RawAttributes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RawAttributes")
            .field("attributes", &self.decode())
            .field("cut", &self.cut)
            .field("dropped", &self.dropped)
            .finish()
    }
}

/// Builds one span's [`RawAttributes`] within the caps. Sizes are measured on the decoded
/// attribute (not on how the wire happened to encode it), so both decode paths keep the same.
#[derive(Debug, Default)]
pub(crate) struct RawAttributesBuilder {
    out: Vec<u8>,
    /// Encoded size of what is kept, as prost would encode it.
    used: usize,
    kept: usize,
    cut: u16,
    dropped: u16,
}

impl RawAttributesBuilder {
    /// Offers one attribute; `raw` is its encoding on the wire when that is what to keep (it
    /// decodes to `kv`), `None` to encode `kv`.
    pub(crate) fn offer(&mut self, kv: &KeyValue, raw: Option<&[u8]>) {
        if self.kept >= MAX_KEPT_ATTRIBUTES {
            self.dropped = self.dropped.saturating_add(1);
            return;
        }
        let cut = cut_value(kv);
        let kv = cut.as_ref().unwrap_or(kv);
        let size = kv.encoded_len();
        if self.used + size > MAX_SPAN_ATTRIBUTE_BYTES {
            self.dropped = self.dropped.saturating_add(1);
            return;
        }
        self.used += size;
        self.kept += 1;
        prost::encoding::encode_key(1, prost::encoding::WireType::LengthDelimited, &mut self.out);
        match (raw, &cut) {
            (Some(raw), None) => {
                prost::encoding::encode_varint(raw.len() as u64, &mut self.out);
                self.out.extend_from_slice(raw);
            }
            _ => {
                prost::encoding::encode_varint(size as u64, &mut self.out);
                kv.encode_raw(&mut self.out);
            }
        }
        if cut.is_some() {
            self.cut = self.cut.saturating_add(1);
        }
    }

    /// Counts one attribute not kept.
    pub(crate) fn drop_one(&mut self) {
        self.dropped = self.dropped.saturating_add(1);
    }

    pub(crate) fn finish(self) -> RawAttributes {
        RawAttributes {
            bytes: self.out.into_boxed_slice(),
            cut: self.cut,
            dropped: self.dropped,
        }
    }
}

/// The attribute with its value cut to [`MAX_VALUE_BYTES`], or `None` when it fits. A string
/// keeps its head and says how much was cut; bytes, an array or a list too large become a
/// string that says what was there.
fn cut_value(kv: &KeyValue) -> Option<KeyValue> {
    let value = kv.value.as_ref()?.value.as_ref()?;
    let replacement = match value {
        Value::StringValue(s) if s.len() > MAX_VALUE_BYTES => {
            let head = truncate(s, MAX_VALUE_BYTES);
            format!("{head}… [{} more bytes cut]", s.len() - head.len())
        }
        Value::BytesValue(b) if b.len() > MAX_VALUE_BYTES => {
            format!("[{} bytes: not kept]", b.len())
        }
        Value::ArrayValue(a) if a.encoded_len() > MAX_VALUE_BYTES => format!(
            "[array of {} values, {} bytes: not kept]",
            a.values.len(),
            a.encoded_len()
        ),
        Value::KvlistValue(l) if l.encoded_len() > MAX_VALUE_BYTES => format!(
            "[list of {} attributes, {} bytes: not kept]",
            l.values.len(),
            l.encoded_len()
        ),
        _ => return None,
    };
    Some(KeyValue {
        key: kv.key.clone(),
        value: Some(AnyValue {
            value: Some(Value::StringValue(replacement)),
        }),
        ..Default::default()
    })
}

/// `s` cut to at most `max` bytes, at a char boundary.
pub(crate) fn truncate(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

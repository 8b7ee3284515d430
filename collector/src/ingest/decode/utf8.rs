//! Invalid UTF-8 in OTLP requests, repaired the way [`Utf8Repairs`] describes: each invalid
//! sequence becomes U+FFFD and the span is kept.
//!
//! prost refuses a whole request for one string that is not UTF-8, and `serde_json` a whole
//! body for one bad byte. Where budget-top needs the request itself (`record` writes it back as
//! JSON) or decodes an attribute for the detail view, the bytes are repaired first: every
//! string field of the OTLP trace messages is checked and rewritten when it is not UTF-8, and
//! the messages around it are re-framed. Enters: protobuf bytes and the message they encode, or
//! a JSON body. Leaves: repaired bytes and how many strings were repaired.

use std::borrow::Cow;

use super::protobuf_wire::{Field, fields};

/// Strings of a request that were not valid UTF-8. The rule, the same for every command and
/// both protocols: the string is kept with U+FFFD (the replacement character) in place of each
/// invalid sequence, the span is kept, and the answer's `partial_success` says so (with
/// `rejected_spans` 0 when nothing else was wrong). The OTLP specification leaves the choice to
/// the receiver; rejecting a whole batch for one bad attribute lost the good spans with it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Utf8Repairs {
    /// How many strings (or, for a JSON body, places in the body) were repaired.
    pub count: u64,
    /// Which was the first, e.g. `span "GET /x": attribute "http.url"`.
    pub first: Option<String>,
}

impl Utf8Repairs {
    /// Counts one repaired string; `what` says where (called only for the first one).
    pub fn add(&mut self, what: impl FnOnce() -> String) {
        self.count += 1;
        if self.first.is_none() {
            self.first = Some(what());
        }
    }

    /// Adds the repairs counted elsewhere (e.g. before the request was decoded).
    pub fn merge(&mut self, other: Utf8Repairs) {
        self.count += other.count;
        if self.first.is_none() {
            self.first = other.first;
        }
    }

    /// The sentence for `partial_success`, when there was something to repair.
    pub fn message(&self) -> Option<String> {
        (self.count > 0).then(|| {
            format!(
                "{} string(s) not valid UTF-8, kept with U+FFFD in place of the invalid bytes (first: {})",
                self.count,
                self.first.as_deref().unwrap_or("?")
            )
        })
    }
}

/// Whether `bytes` are valid UTF-8. Nearly every string on the wire is ASCII, which
/// `is_ascii` confirms a word at a time; `from_utf8`, on the short strings of attributes, goes a
/// byte at a time (docs/performance.md, "The decoder's hot paths").
#[inline]
pub fn is_valid(bytes: &[u8]) -> bool {
    bytes.is_ascii() || std::str::from_utf8(bytes).is_ok()
}

/// The OTLP messages that hold strings, or hold messages that do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Message {
    /// `ExportTraceServiceRequest`.
    Request,
    ResourceSpans,
    Resource,
    EntityRef,
    ScopeSpans,
    Scope,
    Span,
    Event,
    Link,
    Status,
    /// `KeyValue` (an attribute).
    KeyValue,
    AnyValue,
    ArrayValue,
    KeyValueList,
}

enum Kind {
    Text,
    Message(Message),
    Other,
}

/// What field `number` of `message` holds (opentelemetry-proto 1.x).
fn kind(message: Message, number: u32) -> Kind {
    use Message as M;
    match (message, number) {
        (M::Request, 1) => Kind::Message(M::ResourceSpans),
        (M::ResourceSpans, 1) => Kind::Message(M::Resource),
        (M::ResourceSpans, 2) => Kind::Message(M::ScopeSpans),
        (M::Resource, 1) => Kind::Message(M::KeyValue),
        (M::Resource, 3) => Kind::Message(M::EntityRef),
        (M::ScopeSpans, 1) => Kind::Message(M::Scope),
        (M::ScopeSpans, 2) => Kind::Message(M::Span),
        (M::Scope, 3) => Kind::Message(M::KeyValue),
        (M::Span, 9) | (M::Event, 3) | (M::Link, 4) => Kind::Message(M::KeyValue),
        (M::Span, 11) => Kind::Message(M::Event),
        (M::Span, 13) => Kind::Message(M::Link),
        (M::Span, 15) => Kind::Message(M::Status),
        (M::KeyValue, 2) | (M::ArrayValue, 1) => Kind::Message(M::AnyValue),
        (M::AnyValue, 5) => Kind::Message(M::ArrayValue),
        (M::AnyValue, 6) => Kind::Message(M::KeyValueList),
        (M::KeyValueList, 1) => Kind::Message(M::KeyValue),
        (M::ResourceSpans | M::ScopeSpans, 3)
        | (M::EntityRef, 1..=4)
        | (M::Scope, 1 | 2)
        | (M::Span, 3 | 5)
        | (M::Event | M::Status, 2)
        | (M::Link, 3)
        | (M::KeyValue | M::AnyValue, 1) => Kind::Text,
        _ => Kind::Other,
    }
}

/// Repaired protobuf bytes.
#[derive(Debug)]
pub struct Repaired {
    /// The message, every string in it valid UTF-8.
    pub bytes: Vec<u8>,
    /// How many strings were repaired.
    pub count: u64,
}

/// How deep messages may nest (prost's own limit).
const MAX_DEPTH: u32 = 100;

/// `bytes` (an encoded `message`) with every string field made valid UTF-8; `None` when the
/// framing is broken or nests deeper than prost allows (nothing to repair: the decoder will say
/// what is wrong).
pub fn repair(bytes: &[u8], message: Message) -> Option<Repaired> {
    let mut out = Vec::with_capacity(bytes.len() + 16);
    let mut count = 0;
    walk(bytes, message, &mut out, &mut count, 0)?;
    Some(Repaired { bytes: out, count })
}

fn walk(
    buf: &[u8],
    message: Message,
    out: &mut Vec<u8>,
    count: &mut u64,
    depth: u32,
) -> Option<()> {
    if depth > MAX_DEPTH {
        return None;
    }
    let mut fields = fields(buf);
    loop {
        let before = fields.rest();
        let Some(field) = fields.next() else {
            return Some(());
        };
        let (number, field) = field.ok()?;
        let raw = &before[..before.len() - fields.rest().len()];
        let Field::Len(payload) = field else {
            out.extend_from_slice(raw);
            continue;
        };
        match kind(message, number) {
            Kind::Text => match String::from_utf8_lossy(payload) {
                Cow::Borrowed(_) => out.extend_from_slice(raw),
                Cow::Owned(text) => {
                    *count += 1;
                    put(out, number, text.as_bytes());
                }
            },
            Kind::Message(inner) => {
                let mut nested = Vec::with_capacity(payload.len());
                let before = *count;
                walk(payload, inner, &mut nested, count, depth + 1)?;
                if *count == before {
                    out.extend_from_slice(raw);
                } else {
                    put(out, number, &nested);
                }
            }
            Kind::Other => out.extend_from_slice(raw),
        }
    }
}

fn put(out: &mut Vec<u8>, number: u32, payload: &[u8]) {
    prost::encoding::encode_key(number, prost::encoding::WireType::LengthDelimited, out);
    prost::encoding::encode_varint(payload.len() as u64, out);
    out.extend_from_slice(payload);
}

/// A JSON body with each invalid UTF-8 sequence replaced by U+FFFD (JSON must be UTF-8, and
/// `serde_json` refuses the whole body otherwise), and what was repaired.
pub fn repair_json(body: &[u8]) -> (Cow<'_, [u8]>, Utf8Repairs) {
    let mut repairs = Utf8Repairs::default();
    let Err(first) = std::str::from_utf8(body) else {
        return (Cow::Borrowed(body), repairs);
    };
    let at = first.valid_up_to();
    let text = String::from_utf8_lossy(body);
    // One repair per run of replacement characters that was not in the body already.
    let before = body
        .windows(3)
        .filter(|w| *w == "\u{fffd}".as_bytes())
        .count();
    let after = text.matches('\u{fffd}').count();
    for _ in 0..after.saturating_sub(before).max(1) {
        repairs.add(|| format!("the JSON body at byte {at}"));
    }
    (Cow::Owned(text.into_owned().into_bytes()), repairs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
    use prost::Message as _;

    fn len_field(tag: u32, bytes: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        put(&mut out, tag, bytes);
        out
    }

    #[test]
    fn every_string_field_is_repaired_and_the_request_then_decodes() {
        let bad = b"a\xffb";
        let any = len_field(1, bad);
        let kv = [len_field(1, b"k\xfe"), len_field(2, &any)].concat();
        let event = len_field(2, bad);
        let span = [
            len_field(1, &[1; 16]),
            len_field(2, &[2; 8]),
            len_field(5, bad),
            len_field(9, &kv),
            len_field(11, &event),
        ]
        .concat();
        let resource = len_field(1, &kv);
        let body = len_field(
            1,
            &[len_field(1, &resource), len_field(2, &len_field(2, &span))].concat(),
        );
        assert!(ExportTraceServiceRequest::decode(body.as_slice()).is_err());
        let repaired = repair(&body, Message::Request).unwrap();
        // The span name, the event name, and the key and value of two attributes.
        assert_eq!(repaired.count, 6);
        let request = ExportTraceServiceRequest::decode(repaired.bytes.as_slice()).unwrap();
        let span = &request.resource_spans[0].scope_spans[0].spans[0];
        assert_eq!(span.name, "a\u{fffd}b");
        assert_eq!(span.attributes[0].key, "k\u{fffd}");
        assert_eq!(span.events[0].name, "a\u{fffd}b");
        assert_eq!(span.trace_id, vec![1; 16], "bytes fields are left alone");
        // Valid input comes back as it was.
        let good = request.encode_to_vec();
        let again = repair(&good, Message::Request).unwrap();
        assert_eq!((again.bytes, again.count), (good, 0));
        // Broken framing is not repaired.
        assert!(repair(&[0x0a, 0x05, 1], Message::Request).is_none());
    }

    #[test]
    fn a_json_body_is_repaired_and_counted() {
        let (body, repairs) = repair_json(b"{\"a\":\"x\xff\xfey\"}");
        assert_eq!(
            std::str::from_utf8(&body).unwrap(),
            "{\"a\":\"x\u{fffd}\u{fffd}y\"}"
        );
        assert_eq!(repairs.count, 2);
        assert_eq!(repairs.first.as_deref(), Some("the JSON body at byte 7"));
        let (body, repairs) = repair_json(b"{}");
        assert!(matches!(body, Cow::Borrowed(_)) && repairs.count == 0);
    }
}

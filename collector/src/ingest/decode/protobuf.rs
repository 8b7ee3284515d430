//! An export request's spans read straight from its protobuf bytes, in place: the receivers'
//! hot path (no allocation per attribute, no copy of a string the analysis does not keep).
//!
//! Enters: one `ResourceSpans`' or span's bytes, from `decode::decode_protobuf`. Leaves: the
//! span's fields and facts, built into `DecodedRequest` as the prost path builds them, and each span's
//! attributes (their bytes on the wire) kept within the caps of [`RawAttributes`].

use std::sync::Arc;

use deadline_budget::carrier::Carriers;
use deadline_budget::semconv;
use opentelemetry_proto::tonic::common::v1::KeyValue;
use prost::Message as _;

use super::decoded_request::{DecodedRequest, SpanParts};
use super::facts::{Fact, FactsReader, ValueRef};
use super::interner::Interner;
use super::protobuf_wire::{self, ProtobufError};
use crate::batch::{MAX_KEPT_ATTRIBUTES, RawAttributes, RawAttributesBuilder, truncate};

/// One span's attributes (their bytes on the wire) kept within the caps. Each is checked now,
/// as prost would, so the detail view never meets bad bytes; one with invalid UTF-8 is kept
/// repaired (it was counted when the span was read).
pub(super) fn keep(kept: &[&[u8]], scratch: &mut KeyValue) -> Result<RawAttributes, ProtobufError> {
    let mut keeper = RawAttributesBuilder::default();
    for (i, bytes) in kept.iter().enumerate() {
        if i >= MAX_KEPT_ATTRIBUTES {
            keeper.drop_one();
            continue;
        }
        scratch.clear();
        if scratch.merge(*bytes).is_ok() {
            keeper.offer(&*scratch, Some(bytes));
            continue;
        }
        let repaired = super::utf8::repair(bytes, super::utf8::Message::KeyValue)
            .ok_or(ProtobufError("an attribute is malformed"))?;
        scratch.clear();
        scratch
            .merge(repaired.bytes.as_slice())
            .map_err(|_| ProtobufError("an attribute is malformed"))?;
        keeper.offer(&*scratch, Some(&repaired.bytes));
    }
    Ok(keeper.finish())
}

/// The first `service.name` attribute of a `ResourceSpans`' resource, when it is a string
/// (as prost merges repeated `resource` fields: their attributes in order), as bytes: it is
/// checked for UTF-8 by the caller.
pub(super) fn service_name(resource_spans: &[u8]) -> Result<Option<&[u8]>, ProtobufError> {
    use protobuf_wire::{Field, fields};
    for field in fields(resource_spans) {
        let (1, Field::Len(resource)) = field? else {
            continue;
        };
        for field in fields(resource) {
            let (1, Field::Len(kv)) = field? else {
                continue;
            };
            let (key, value) = key_value(kv)?;
            if key == b"service.name" {
                return Ok(match value {
                    ValueRef::Str(s) => Some(s),
                    _ => None,
                });
            }
        }
    }
    Ok(None)
}

/// Decodes one span's bytes into `out` (the span, or its rejection); whether it was kept.
pub(super) fn decode_span_bytes<'a>(
    span: &'a [u8],
    service: &Arc<str>,
    interner: &mut Interner,
    carriers: &'a Carriers,
    mut kept: Option<&mut Vec<&'a [u8]>>,
    out: &mut DecodedRequest,
) -> Result<bool, ProtobufError> {
    use protobuf_wire::{Field, fields};
    let mut parts = SpanParts::default();
    let mut facts = FactsReader::new(carriers);
    let mut lossy_name: Option<String> = None;
    // Attributes whose key or string value is not UTF-8, named once the span's name is known.
    let mut bad_attributes: Vec<&'a [u8]> = Vec::new();
    for field in fields(span) {
        match field? {
            (1, Field::Len(b)) => parts.trace_id = b,
            (2, Field::Len(b)) => parts.span_id = b,
            (4, Field::Len(b)) => parts.parent_span_id = b,
            (5, Field::Len(b)) => match std::str::from_utf8(b) {
                Ok(name) => {
                    parts.name = name;
                    lossy_name = None;
                }
                Err(_) => lossy_name = Some(String::from_utf8_lossy(b).into_owned()),
            },
            (6, Field::Varint(v)) => parts.kind = v as i32,
            (7, Field::Fixed64(v)) => parts.start_unix_nano = v,
            (8, Field::Fixed64(v)) => parts.end_unix_nano = v,
            (9, Field::Len(kv)) => {
                let (key, value) = key_and_value_bytes(kv)?;
                let fact = Fact::of(key, carriers);
                // One walk of the value gives what the facts read (for their keys only) and
                // whether its string is UTF-8.
                let value_is_utf8 = match value {
                    ValueBytes::None => {
                        if let Some(fact) = fact {
                            facts.set(fact, ValueRef::Other);
                        }
                        true
                    }
                    ValueBytes::One(any) => {
                        let (read, is_utf8) = read_any_value(any, fact.is_some());
                        if let Some(fact) = fact {
                            facts.set(fact, read?);
                        }
                        is_utf8
                    }
                    ValueBytes::Many => {
                        if let Some(fact) = fact {
                            facts.set(fact, key_value(kv)?.1);
                        }
                        strings_are_utf8(kv)
                    }
                };
                if !(value_is_utf8 && super::utf8::is_valid(key)) {
                    bad_attributes.push(key);
                }
                if let Some(kept) = kept.as_deref_mut() {
                    kept.push(kv);
                }
            }
            (11, Field::Len(event)) if !facts.exception_event => {
                // The name (field 2): an `exception` event says the call failed; its
                // attributes (field 3) what of (its type and message).
                let mut exception = false;
                for field in fields(event) {
                    if let (2, Field::Len(name)) = field? {
                        exception = name == semconv::EXCEPTION_EVENT.as_bytes();
                    }
                }
                if exception {
                    facts.exception_event = true;
                    for field in fields(event) {
                        if let (3, Field::Len(kv)) = field?
                            && let Ok((key, ValueBytes::One(any))) = key_and_value_bytes(kv)
                            && let (Ok(value), true) = read_any_value(any, true)
                        {
                            facts.exception_attribute(key, value);
                        }
                    }
                }
            }
            (15, Field::Len(status)) => {
                let mut code = parts.status_code.unwrap_or(0);
                for field in fields(status) {
                    match field? {
                        (2, Field::Len(message)) => {
                            if let Ok(text) = std::str::from_utf8(message) {
                                facts.failure_words(text);
                            }
                        }
                        (3, Field::Varint(v)) => code = v as i32,
                        (3, _) => return Err(ProtobufError("status code of the wrong type")),
                        _ => {}
                    }
                }
                parts.status_code = Some(code);
            }
            (1 | 2 | 4 | 5 | 6 | 7 | 8 | 9 | 15, _) => {
                return Err(ProtobufError("a span field of the wrong wire type"));
            }
            _ => {}
        }
    }
    if let Some(name) = &lossy_name {
        parts.name = name;
        out.repaired
            .add(|| format!("span name {:?}", truncate(name, 64)));
    }
    for key in bad_attributes {
        out.repaired.add(|| {
            format!(
                "span {:?}: attribute {:?}",
                truncate(parts.name, 64),
                truncate(&String::from_utf8_lossy(key), 64)
            )
        });
    }
    // Pushed from here, not returned: a `Span` is 300 bytes, and each move of it through a
    // `Result` was a memcpy (five a span).
    Ok(out.push(parts.build(facts, service, interner)))
}

/// One `AnyValue` read in one walk: what the facts see (as [`any_value`] reads it; only when
/// `want`, else `Other`), and whether the `string_value` it ends up with (the last oneof field
/// wins) is valid UTF-8. The UTF-8 check only peeks (its own fields, not an array's elements):
/// what does not parse counts as valid here, and is left to the reader that needs it.
/// Inline: called for every attribute, and the fast paths are short.
#[inline(always)]
fn read_any_value(any: &[u8], want: bool) -> (Result<ValueRef<'_>, ProtobufError>, bool) {
    // The shapes nearly every value has (one field: a short string, or an int), read without
    // the general walk below, which gives the same for them.
    if let Some((s, [])) =
        protobuf_wire::short_len_field(any, protobuf_wire::tag(1, protobuf_wire::LEN))
    {
        let value = if want {
            ValueRef::Str(s)
        } else {
            ValueRef::Other
        };
        return (Ok(value), super::utf8::is_valid(s));
    }
    if let Some((&key, int)) = any.split_first()
        && key == protobuf_wire::tag(3, protobuf_wire::VARINT)
        && let Some(v) = protobuf_wire::whole_varint(int)
    {
        let value = if want {
            ValueRef::Int(v as i64)
        } else {
            ValueRef::Other
        };
        return (Ok(value), true);
    }
    walk_any_value(any, want)
}

/// [`read_any_value`] for any shape, field by field.
fn walk_any_value(any: &[u8], want: bool) -> (Result<ValueRef<'_>, ProtobufError>, bool) {
    use protobuf_wire::{Field, fields};
    let mut value = Ok(ValueRef::Other);
    let mut last_str = None;
    for field in fields(any) {
        let (number, field) = match field {
            Ok(field) => field,
            // The first error is the one the facts reader reports.
            Err(e) => return (value.and(Err(e)), true),
        };
        match (number, field) {
            (1, Field::Len(s)) => last_str = Some(s),
            (2..=8, _) => last_str = None,
            _ => {}
        }
        if want && let Ok(v) = value {
            value = merge_any_field(v, number, field);
        }
    }
    (value, last_str.is_none_or(super::utf8::is_valid))
}

/// Whether the string of every `value` field of a `KeyValue` (repeated, which is rare) is
/// valid UTF-8, as [`read_any_value`] checks one.
fn strings_are_utf8(kv: &[u8]) -> bool {
    use protobuf_wire::{Field, fields};
    fields(kv).all(|field| match field {
        Ok((2, Field::Len(any))) => read_any_value(any, false).1,
        _ => true,
    })
}

/// Where a `KeyValue`'s value sits, without reading it yet.
#[derive(Clone, Copy, Debug)]
enum ValueBytes<'a> {
    None,
    One(&'a [u8]),
    /// Repeated `value` fields (prost merges them): read with [`key_value`].
    Many,
}

/// A `KeyValue`'s key (the last one, as prost reads it) and where its value is, in one pass.
fn key_and_value_bytes(kv: &[u8]) -> Result<(&[u8], ValueBytes<'_>), ProtobufError> {
    // The shape every encoder writes (the key, then one value, both shorter than 128 bytes),
    // read without the general walk below, which gives the same for it.
    if let Some((key, rest)) =
        protobuf_wire::short_len_field(kv, protobuf_wire::tag(1, protobuf_wire::LEN))
        && let Some((any, [])) =
            protobuf_wire::short_len_field(rest, protobuf_wire::tag(2, protobuf_wire::LEN))
    {
        return Ok((key, ValueBytes::One(any)));
    }
    walk_key_and_value_bytes(kv)
}

/// [`key_and_value_bytes`] for any shape, field by field.
fn walk_key_and_value_bytes(kv: &[u8]) -> Result<(&[u8], ValueBytes<'_>), ProtobufError> {
    use protobuf_wire::{Field, fields};
    let mut key: &[u8] = &[];
    let mut value = ValueBytes::None;
    for field in fields(kv) {
        match field? {
            (1, Field::Len(b)) => key = b,
            (2, Field::Len(b)) => {
                value = match value {
                    ValueBytes::None => ValueBytes::One(b),
                    _ => ValueBytes::Many,
                }
            }
            (1 | 2, _) => return Err(ProtobufError("a key-value of the wrong wire type")),
            _ => {}
        }
    }
    Ok((key, value))
}

/// A `KeyValue`'s key and value (repeated `value` fields merge, as prost merges them).
fn key_value(kv: &[u8]) -> Result<(&[u8], ValueRef<'_>), ProtobufError> {
    use protobuf_wire::{Field, fields};
    let mut key: &[u8] = &[];
    let mut value = ValueRef::Other;
    for field in fields(kv) {
        match field? {
            (1, Field::Len(b)) => key = b,
            (2, Field::Len(any)) => value = any_value(any, value)?,
            (1 | 2, _) => return Err(ProtobufError("a key-value of the wrong wire type")),
            _ => {}
        }
    }
    Ok((key, value))
}

/// An `AnyValue` merged into `value` (the last oneof field wins; arrays append).
fn any_value<'a>(any: &'a [u8], mut value: ValueRef<'a>) -> Result<ValueRef<'a>, ProtobufError> {
    for field in protobuf_wire::fields(any) {
        let (number, field) = field?;
        value = merge_any_field(value, number, field)?;
    }
    Ok(value)
}

/// One field of an `AnyValue` merged into `value`.
#[inline]
fn merge_any_field<'a>(
    value: ValueRef<'a>,
    number: u32,
    field: protobuf_wire::Field<'a>,
) -> Result<ValueRef<'a>, ProtobufError> {
    use protobuf_wire::{Field, fields};
    Ok(match (number, field) {
        (1, Field::Len(s)) => ValueRef::Str(s),
        (2, Field::Varint(_)) | (6 | 7, Field::Len(_)) => ValueRef::Other,
        (3, Field::Varint(v)) => ValueRef::Int(v as i64),
        (4, Field::Fixed64(v)) => ValueRef::Double(f64::from_bits(v)),
        (5, Field::Len(array)) => {
            let (mut has_first, mut first_str) = match value {
                ValueRef::Array {
                    has_first,
                    first_str,
                } => (has_first, first_str),
                _ => (false, None),
            };
            for field in fields(array) {
                match field? {
                    (1, Field::Len(element)) if !has_first => {
                        has_first = true;
                        first_str = match any_value(element, ValueRef::Other)? {
                            ValueRef::Str(s) => Some(s),
                            _ => None,
                        };
                    }
                    (1, Field::Len(_)) => {}
                    (1, _) => return Err(ProtobufError("an array of the wrong wire type")),
                    _ => {}
                }
            }
            ValueRef::Array {
                has_first,
                first_str,
            }
        }
        (1..=7, _) => return Err(ProtobufError("a value of the wrong wire type")),
        _ => value,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Bytes shaped like a field of `tag` (mostly), for the fast paths below.
    fn field_like(tag: u8) -> impl Strategy<Value = Vec<u8>> {
        prop_oneof![
            3 => (proptest::collection::vec(any::<u8>(), 0..12), 0usize..3).prop_map(move |(body, extra)| {
                let len = body.len().saturating_sub(extra);
                [vec![tag, len as u8], body].concat()
            }),
            1 => proptest::collection::vec(any::<u8>(), 0..12).prop_map(move |body| [vec![tag], body].concat()),
            1 => proptest::collection::vec(any::<u8>(), 0..12),
        ]
    }

    proptest! {
        #[test]
        fn the_fast_paths_read_what_the_general_walk_reads(
            string in field_like(protobuf_wire::tag(1, protobuf_wire::LEN)),
            int in field_like(protobuf_wire::tag(3, protobuf_wire::VARINT)),
            key in field_like(protobuf_wire::tag(1, protobuf_wire::LEN)),
            value in field_like(protobuf_wire::tag(2, protobuf_wire::LEN)),
            want in any::<bool>(),
        ) {
            for any in [&string, &int] {
                prop_assert_eq!(
                    format!("{:?}", read_any_value(any, want)),
                    format!("{:?}", walk_any_value(any, want))
                );
            }
            let kv = [key, value].concat();
            prop_assert_eq!(
                format!("{:?}", key_and_value_bytes(&kv)),
                format!("{:?}", walk_key_and_value_bytes(&kv))
            );
        }
    }
}

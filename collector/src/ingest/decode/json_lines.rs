//! OTLP/JSON read straight into spans, in place: `check --input`'s fast lane.
//!
//! Enters: one line of a recording (text, trimmed). Leaves: the same [`DecodedRequest`] as
//! [`otlp_json::parse_request_str`](super::otlp_json::parse_request_str) followed by
//! [`decode::decode_request`](super::decode_request) give, without building the request:
//! no `String` per key and value, ids decoded on the stack, names interned, only the contract's
//! attributes looked at. Every form the general reader takes is taken here too (camelCase and
//! snake_case names, enums as numbers or names, 64-bit integers as strings or numbers, `null`
//! for absent, unknown fields skipped), in any order of the fields.
//!
//! Or `None`: the line holds something this reader leaves to the general one, which then reads
//! it (the same spans, or the error that names the field). That is anything that is not valid
//! JSON or not a request, a field given twice, a name, key or id with a `\` escape (an escape
//! in a value the analysis does not read is checked and skipped), a number written with an
//! exponent or a fraction where an integer is wanted, an integer past 18 digits, a string with
//! a lone surrogate escape, nesting past [`MAX_DEPTH`]. So whatever this reader accepts, the
//! general reader accepts too, and reads alike (`tests`: the same `DecodedRequest` for both).

use std::sync::Arc;

use deadline_budget::carrier::Carriers;
use deadline_budget::semconv;

use super::decoded_request::{DecodedRequest, SpanParts};
use super::facts::{Fact, FactsReader, ValueRef};
use super::interner::Interner;
use super::otlp_json::{SPAN_KINDS, STATUS_CODES};

mod scan;
use scan::{Id, Scan, Seen, Text, skip_plain};

/// Deeper nesting is left to the general reader (serde_json's own limit is 128).
const MAX_DEPTH: u32 = 100;

/// The spans of one OTLP/JSON `ExportTraceServiceRequest` (`json`: no leading byte-order mark),
/// decoded as the general path decodes them; `None` when the line is for the general reader.
pub fn decode_line(json: &str, interner: &mut Interner) -> Option<DecodedRequest> {
    let carriers = interner.carriers().clone();
    let mut scan = Scan {
        text: json,
        bytes: json.as_bytes(),
        at: 0,
        depth: 0,
    };
    // ~940 bytes a span in what `record` writes: one allocation instead of a doubling series.
    let mut out = DecodedRequest {
        spans: Vec::with_capacity(json.len() / 768),
        ..DecodedRequest::default()
    };
    let mut seen = Seen::default();
    let mut line = Line {
        interner,
        carriers: &carriers,
        out: &mut out,
    };
    scan.object(|scan, key| match key {
        "resourceSpans" | "resource_spans" => {
            seen.once(0)?;
            scan.nullable_array(|scan| resource_spans(scan, &mut line))
        }
        _ => scan.skip_value(),
    })?;
    scan.end()?;
    Some(out)
}

/// A line being read: names are interned, budgets read with the carriers, spans decoded into
/// `out`.
struct Line<'a> {
    interner: &'a mut Interner,
    carriers: &'a Carriers,
    out: &'a mut DecodedRequest,
}

/// One `ResourceSpans`. Its service is known once its resource is read; spans read before it
/// (a writer that puts `scopeSpans` first) get theirs after.
fn resource_spans(scan: &mut Scan<'_>, line: &mut Line<'_>) -> Option<()> {
    let mut seen = Seen::default();
    let mut service: Option<Arc<str>> = None;
    let mut before_resource = None;
    scan.object(|scan, key| match key {
        "resource" => {
            seen.once(0)?;
            let name = if scan.null() { None } else { resource(scan)? };
            service = Some(line.interner.intern(name.unwrap_or("unknown_service")));
            Some(())
        }
        "scopeSpans" | "scope_spans" => {
            seen.once(1)?;
            let now = match &service {
                Some(service) => service.clone(),
                None => {
                    before_resource = Some(line.out.spans.len());
                    line.interner.intern("unknown_service")
                }
            };
            scan.nullable_array(|scan| scope_spans(scan, &now, line))
        }
        "schemaUrl" | "schema_url" => {
            seen.once(2)?;
            scan.nullable_string()
        }
        _ => scan.skip_value(),
    })?;
    if let (Some(first), Some(service)) = (before_resource, service) {
        for span in &mut line.out.spans[first..] {
            span.service = service.clone();
        }
    }
    Some(())
}

/// A `Resource`: the string value of its first `service.name` attribute, if that is a string.
fn resource<'a>(scan: &mut Scan<'a>) -> Option<Option<&'a str>> {
    let mut seen = Seen::default();
    let mut service = None;
    let mut found = false;
    scan.object(|scan, key| match key {
        "attributes" => {
            seen.once(0)?;
            scan.nullable_array(|scan| {
                let (key, value) = key_value(scan)?;
                if !found && key == "service.name" {
                    found = true;
                    service = match value {
                        Value::Read(ValueRef::Str(s)) => Some(std::str::from_utf8(s).ok()?),
                        Value::Read(_) => None,
                        Value::Escaped(_) => return None,
                    };
                }
                Some(())
            })
        }
        "droppedAttributesCount" | "dropped_attributes_count" => {
            seen.once(1)?;
            scan.uint(u32::MAX.into()).map(drop)
        }
        "entityRefs" | "entity_refs" => {
            seen.once(2)?;
            scan.nullable_array(entity_ref)
        }
        _ => scan.skip_value(),
    })?;
    Some(service)
}

fn entity_ref(scan: &mut Scan<'_>) -> Option<()> {
    let mut seen = Seen::default();
    scan.object(|scan, key| match key {
        "schemaUrl" | "schema_url" => {
            seen.once(0)?;
            scan.nullable_string()
        }
        "type" => {
            seen.once(1)?;
            scan.nullable_string()
        }
        "idKeys" | "id_keys" => {
            seen.once(2)?;
            scan.nullable_array(|scan| scan.text().map(drop))
        }
        "descriptionKeys" | "description_keys" => {
            seen.once(3)?;
            scan.nullable_array(|scan| scan.text().map(drop))
        }
        _ => scan.skip_value(),
    })
}

fn scope_spans(scan: &mut Scan<'_>, service: &Arc<str>, line: &mut Line<'_>) -> Option<()> {
    let mut seen = Seen::default();
    scan.object(|scan, key| match key {
        "scope" => {
            seen.once(0)?;
            if scan.null() { Some(()) } else { scope(scan) }
        }
        "spans" => {
            seen.once(1)?;
            scan.nullable_array(|scan| span(scan, service, line))
        }
        "schemaUrl" | "schema_url" => {
            seen.once(2)?;
            scan.nullable_string()
        }
        _ => scan.skip_value(),
    })
}

fn scope(scan: &mut Scan<'_>) -> Option<()> {
    let mut seen = Seen::default();
    scan.object(|scan, key| match key {
        "name" => {
            seen.once(0)?;
            scan.nullable_string()
        }
        "version" => {
            seen.once(1)?;
            scan.nullable_string()
        }
        "attributes" => {
            seen.once(2)?;
            scan.nullable_array(|scan| key_value(scan).map(drop))
        }
        "droppedAttributesCount" | "dropped_attributes_count" => {
            seen.once(3)?;
            scan.uint(u32::MAX.into()).map(drop)
        }
        _ => scan.skip_value(),
    })
}

/// One span, built into `line.out` as `decode::decode_request` builds it (or its rejection
/// counted).
fn span(scan: &mut Scan<'_>, service: &Arc<str>, line: &mut Line<'_>) -> Option<()> {
    let carriers = line.carriers;
    let mut seen = Seen::default();
    let (mut trace_id, mut span_id, mut parent_span_id) = (Id::EMPTY, Id::EMPTY, Id::EMPTY);
    let mut name = "";
    let (mut kind, mut start, mut end) = (0, 0, 0);
    let mut status_code = None;
    let mut facts = FactsReader::new(carriers);
    scan.object(|scan, key| match key {
        "traceId" | "trace_id" => {
            seen.once(0)?;
            trace_id = scan.hex_id()?;
            Some(())
        }
        "spanId" | "span_id" => {
            seen.once(1)?;
            span_id = scan.hex_id()?;
            Some(())
        }
        "parentSpanId" | "parent_span_id" => {
            seen.once(2)?;
            parent_span_id = scan.hex_id()?;
            Some(())
        }
        "traceState" | "trace_state" => {
            seen.once(3)?;
            scan.nullable_string()
        }
        "flags" => {
            seen.once(4)?;
            scan.uint(u32::MAX.into()).map(drop)
        }
        "name" => {
            seen.once(5)?;
            name = scan.nullable_str()?.unwrap_or("");
            Some(())
        }
        "kind" => {
            seen.once(6)?;
            kind = scan.enumeration(&SPAN_KINDS)?;
            Some(())
        }
        "startTimeUnixNano" | "start_time_unix_nano" => {
            seen.once(7)?;
            start = scan.uint(u64::MAX)?;
            Some(())
        }
        "endTimeUnixNano" | "end_time_unix_nano" => {
            seen.once(8)?;
            end = scan.uint(u64::MAX)?;
            Some(())
        }
        "attributes" => {
            seen.once(9)?;
            scan.nullable_array(|scan| {
                let (key, value) = key_value(scan)?;
                if let Some(fact) = Fact::of(key.as_bytes(), carriers) {
                    match value {
                        Value::Read(value) => facts.set(fact, value),
                        // A value the facts read, with an escape: the general reader's.
                        Value::Escaped(_) => return None,
                    }
                }
                Some(())
            })
        }
        "droppedAttributesCount" | "dropped_attributes_count" => {
            seen.once(10)?;
            scan.uint(u32::MAX.into()).map(drop)
        }
        "events" => {
            seen.once(11)?;
            scan.nullable_array(|scan| event(scan, &mut facts))
        }
        "droppedEventsCount" | "dropped_events_count" => {
            seen.once(12)?;
            scan.uint(u32::MAX.into()).map(drop)
        }
        "links" => {
            seen.once(13)?;
            scan.nullable_array(link)
        }
        "droppedLinksCount" | "dropped_links_count" => {
            seen.once(14)?;
            scan.uint(u32::MAX.into()).map(drop)
        }
        "status" => {
            seen.once(15)?;
            status_code = if scan.null() {
                None
            } else {
                Some(status(scan, &mut facts)?)
            };
            Some(())
        }
        _ => scan.skip_value(),
    })?;
    let parts = SpanParts {
        trace_id: trace_id.bytes(),
        span_id: span_id.bytes(),
        parent_span_id: parent_span_id.bytes(),
        name,
        kind,
        start_unix_nano: start,
        end_unix_nano: end,
        status_code,
    };
    line.out.push(parts.build(facts, service, line.interner));
    Some(())
}

/// A span's event; whether it is an `exception` (the call failed).
/// One event: an `exception` event says the span failed, and its type and message what of.
fn event<'a: 'r, 'r>(scan: &mut Scan<'a>, facts: &mut FactsReader<'r>) -> Option<()> {
    let mut seen = Seen::default();
    let mut name = "";
    // exception.type and exception.message, kept until the name is known.
    let mut said: [Option<(&'a str, &'a str)>; 2] = [None; 2];
    scan.object(|scan, key| match key {
        "timeUnixNano" | "time_unix_nano" => {
            seen.once(0)?;
            scan.uint(u64::MAX).map(drop)
        }
        "name" => {
            seen.once(1)?;
            name = scan.nullable_str()?.unwrap_or("");
            Some(())
        }
        "attributes" => {
            seen.once(2)?;
            scan.nullable_array(|scan| {
                let (key, value) = key_value(scan)?;
                let slot = [semconv::EXCEPTION_TYPE, semconv::EXCEPTION_MESSAGE]
                    .iter()
                    .position(|k| *k == key);
                // A message with an escape is looked for words as written (no escape changes
                // them); a type is kept (as `error.type`), so one with an escape is the
                // general reader's.
                match (slot, value) {
                    (Some(slot), Value::Read(value)) => {
                        said[slot] = value.str().map(|text| (key, text));
                    }
                    (Some(0), Value::Escaped(_)) => return None,
                    (Some(slot), Value::Escaped(text)) => said[slot] = Some((key, text)),
                    _ => {}
                }
                Some(())
            })
        }
        "droppedAttributesCount" | "dropped_attributes_count" => {
            seen.once(3)?;
            scan.uint(u32::MAX.into()).map(drop)
        }
        _ => scan.skip_value(),
    })?;
    if name == semconv::EXCEPTION_EVENT && !facts.exception_event {
        facts.exception_event = true;
        for (key, text) in said.into_iter().flatten() {
            facts.exception_attribute(key.as_bytes(), ValueRef::Str(text.as_bytes()));
        }
    }
    Some(())
}

fn link(scan: &mut Scan<'_>) -> Option<()> {
    let mut seen = Seen::default();
    scan.object(|scan, key| match key {
        "traceId" | "trace_id" => {
            seen.once(0)?;
            scan.hex_id().map(drop)
        }
        "spanId" | "span_id" => {
            seen.once(1)?;
            scan.hex_id().map(drop)
        }
        "traceState" | "trace_state" => {
            seen.once(2)?;
            scan.nullable_string()
        }
        "attributes" => {
            seen.once(3)?;
            scan.nullable_array(|scan| key_value(scan).map(drop))
        }
        "droppedAttributesCount" | "dropped_attributes_count" => {
            seen.once(4)?;
            scan.uint(u32::MAX.into()).map(drop)
        }
        "flags" => {
            seen.once(5)?;
            scan.uint(u32::MAX.into()).map(drop)
        }
        _ => scan.skip_value(),
    })
}

/// A `Status`: its code (0 when not given).
fn status(scan: &mut Scan<'_>, facts: &mut FactsReader<'_>) -> Option<i32> {
    let mut seen = Seen::default();
    let mut code = 0;
    scan.object(|scan, key| match key {
        "message" => {
            seen.once(0)?;
            // Its words as written: an escape changes none of the words looked for.
            if let Some(text) = scan.nullable_raw_str()? {
                facts.failure_words(text);
            }
            Some(())
        }
        "code" => {
            seen.once(1)?;
            code = scan.enumeration(&STATUS_CODES)?;
            Some(())
        }
        _ => scan.skip_value(),
    })?;
    Some(code)
}

/// An attribute value as the facts read it, or one whose string has an escape (not decoded
/// here: only a problem when the facts would read it; its text as written is kept, for the
/// words of a failure).
#[derive(Clone, Copy)]
enum Value<'a> {
    Read(ValueRef<'a>),
    Escaped(&'a str),
}

/// A `KeyValue`: its key and its value.
fn key_value<'a>(scan: &mut Scan<'a>) -> Option<(&'a str, Value<'a>)> {
    scan.ws();
    if let Some(usual) = usual_key_value(scan) {
        return Some(usual);
    }
    let mut seen = Seen::default();
    let mut key = "";
    let mut value = Value::Read(ValueRef::Other);
    scan.object(|scan, field| match field {
        "key" => {
            seen.once(0)?;
            key = scan.nullable_str()?.unwrap_or("");
            Some(())
        }
        "value" => {
            seen.once(1)?;
            if !scan.null() {
                value = any_value(scan)?;
            }
            Some(())
        }
        "keyStrindex" | "key_strindex" => {
            seen.once(2)?;
            scan.int(i32::MIN.into(), i32::MAX.into()).map(drop)
        }
        _ => scan.skip_value(),
    })?;
    Some((key, value))
}

/// The shape nearly every attribute has as `record` and the Collector write it,
/// `{"key":"K","value":{"stringValue":"V"}}` or `{"key":"K","value":{"intValue":"N"}}` (no
/// spaces, no escapes, at most 18 digits), read in one go: what the general walk in
/// [`key_value`] reads for it. Anything else: `None`, and nothing taken.
#[inline]
fn usual_key_value<'a>(scan: &mut Scan<'a>) -> Option<(&'a str, Value<'a>)> {
    let bytes = scan.bytes;
    let at = scan.at + after(bytes.get(scan.at..)?, br#"{"key":""#)?;
    let end = skip_plain(bytes, at);
    let key = scan.text.get(at..end)?;
    let at = end + after(bytes.get(end..)?, br#"","value":{""#)?;
    let rest = bytes.get(at..)?;
    let (value, end) = if let Some(n) = after(rest, br#"stringValue":""#) {
        let at = at + n;
        let end = skip_plain(bytes, at);
        (ValueRef::Str(bytes.get(at..end)?), end)
    } else {
        let at = at + after(rest, br#"intValue":""#)?;
        let end = skip_plain(bytes, at);
        let digits = bytes.get(at..end)?;
        let (negative, magnitude) = match digits.split_first() {
            Some((b'-', magnitude)) => (true, magnitude),
            _ => (false, digits),
        };
        if magnitude.is_empty() || magnitude.len() > 18 {
            return None;
        }
        let mut n = 0i64;
        for &b in magnitude {
            if !b.is_ascii_digit() {
                return None;
            }
            n = n * 10 + i64::from(b - b'0');
        }
        (ValueRef::Int(if negative { -n } else { n }), end)
    };
    // The string ends at its `"` (not at an escape or a control character), then both objects.
    scan.at = end + after(bytes.get(end..)?, br#""}}"#)?;
    Some((key, Value::Read(value)))
}

/// How long `prefix` is when `bytes` starts with it.
#[inline]
fn after(bytes: &[u8], prefix: &[u8]) -> Option<usize> {
    bytes.starts_with(prefix).then_some(prefix.len())
}

/// An `AnyValue`: the last value field that is not `null` wins; unknown fields are skipped
/// (as `otlp_json::AnyValue` reads it).
fn any_value<'a>(scan: &mut Scan<'a>) -> Option<Value<'a>> {
    let mut value = Value::Read(ValueRef::Other);
    scan.object(|scan, key| {
        let known = matches!(
            key,
            "stringValue"
                | "string_value"
                | "boolValue"
                | "bool_value"
                | "intValue"
                | "int_value"
                | "doubleValue"
                | "double_value"
                | "arrayValue"
                | "array_value"
                | "kvlistValue"
                | "kvlist_value"
                | "bytesValue"
                | "bytes_value"
        );
        if !known {
            return scan.skip_value();
        }
        if scan.null() {
            return Some(());
        }
        value = match key {
            "stringValue" | "string_value" => {
                scan.ws();
                let open = scan.at;
                match scan.text()? {
                    Text::Plain(s) => Value::Read(ValueRef::Str(s.as_bytes())),
                    Text::Escaped => Value::Escaped(scan.text.get(open + 1..scan.at - 1)?),
                }
            }
            "boolValue" | "bool_value" => {
                scan.boolean()?;
                Value::Read(ValueRef::Other)
            }
            "intValue" | "int_value" => {
                let n = scan.int(i64::MIN.into(), i64::MAX.into())?;
                Value::Read(ValueRef::Int(i64::try_from(n).ok()?))
            }
            "doubleValue" | "double_value" => Value::Read(ValueRef::Double(scan.double()?)),
            "arrayValue" | "array_value" => array_value(scan)?,
            "kvlistValue" | "kvlist_value" => {
                let mut seen = Seen::default();
                scan.object(|scan, key| match key {
                    "values" => {
                        seen.once(0)?;
                        scan.nullable_array(|scan| key_value(scan).map(drop))
                    }
                    _ => scan.skip_value(),
                })?;
                Value::Read(ValueRef::Other)
            }
            _ => {
                let Text::Plain(s) = scan.text()? else {
                    return None;
                };
                super::otlp_json::base64(s)?;
                Value::Read(ValueRef::Other)
            }
        };
        Some(())
    })?;
    Some(value)
}

/// An `ArrayValue`: whether it has a first element, and that element when it is a string.
fn array_value<'a>(scan: &mut Scan<'a>) -> Option<Value<'a>> {
    let mut seen = Seen::default();
    let mut first = None;
    scan.object(|scan, key| match key {
        "values" => {
            seen.once(0)?;
            scan.nullable_array(|scan| {
                let value = any_value(scan)?;
                first.get_or_insert(value);
                Some(())
            })
        }
        _ => scan.skip_value(),
    })?;
    Some(match first {
        None => Value::Read(ValueRef::Array {
            has_first: false,
            first_str: None,
        }),
        Some(Value::Escaped(text)) => Value::Escaped(text),
        Some(Value::Read(first)) => Value::Read(ValueRef::Array {
            has_first: true,
            first_str: match first {
                ValueRef::Str(s) => Some(s),
                _ => None,
            },
        }),
    })
}

#[cfg(test)]
mod tests;

//! OTLP/JSON, read as the OpenTelemetry Collector reads it (CONVENTIONS §5).
//!
//! Enters: the bytes of one `ExportTraceServiceRequest` in JSON (an OTLP/HTTP body, or one line
//! of a recording read by `check --input` and `replay`). Leaves: the prost request, or an error
//! that names the field (`resourceSpans[0].scopeSpans[0].spans[2].traceId: ...`).
//!
//! The OTLP/JSON mapping writes lowerCamelCase names, enums as integers and 64-bit integers as
//! strings, but receivers also accept the proto's own field names (`resource_spans`,
//! `start_time_unix_nano`), enum values by name (`SPAN_KIND_SERVER`, `STATUS_CODE_ERROR`) and
//! 64-bit integers as numbers: the Collector does, and so do the exporters' own files.
//! opentelemetry-proto's serde derive knows only the first form, and answered the second with a
//! request of zero spans (so `check --input` passed a gate on nothing). Ids are hex (OTLP's
//! departure from protobuf's JSON mapping, which would say base64); anything else is an error.
//! Unknown fields are skipped, as the Collector skips them.

use std::fmt;

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1 as common;
use opentelemetry_proto::tonic::resource::v1 as resource;
use opentelemetry_proto::tonic::trace::v1 as trace;
use serde::Deserialize;
use serde::de::{self, Deserializer, Visitor};

/// Reads one OTLP/JSON `ExportTraceServiceRequest`. The error names the field that is wrong
/// (as it is spelled in the input) and where.
pub fn parse_request(json: &[u8]) -> Result<ExportTraceServiceRequest, JsonError> {
    // Tracking the path costs on every value; only a request that fails needs it, so it is
    // read again with the tracking then.
    let mut deserializer = serde_json::Deserializer::from_slice(json);
    if let Ok(request) = Request::deserialize(&mut deserializer)
        && deserializer.end().is_ok()
    {
        return Ok(request.into());
    }
    parse_tracking_path(json)
}

/// [`parse_request`] of text already known to be UTF-8 (a line of a recording): its strings are
/// not checked again.
pub fn parse_request_str(json: &str) -> Result<ExportTraceServiceRequest, JsonError> {
    let mut deserializer = serde_json::Deserializer::from_str(json);
    if let Ok(request) = Request::deserialize(&mut deserializer)
        && deserializer.end().is_ok()
    {
        return Ok(request.into());
    }
    parse_tracking_path(json.as_bytes())
}

/// The slow read that names the field in its error.
fn parse_tracking_path(json: &[u8]) -> Result<ExportTraceServiceRequest, JsonError> {
    let mut deserializer = serde_json::Deserializer::from_slice(json);
    let request: Request = serde_path_to_error::deserialize(&mut deserializer).map_err(|e| {
        let path = e.path().to_string();
        // serde_path_to_error writes `?` for a step it cannot name (a map's key): say the
        // field up to there, or none.
        let path = path.trim_end_matches('?').trim_end_matches('.');
        let field = (!path.is_empty()).then(|| path.to_owned());
        JsonError::new(field, &e.into_inner())
    })?;
    deserializer.end().map_err(|e| JsonError::new(None, &e))?;
    Ok(request.into())
}

/// Why bytes are not an OTLP/JSON request: the field (as spelled in the input) when the error
/// is inside one, what is wrong, and where.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JsonError {
    /// The field, e.g. `resourceSpans[0].scopeSpans[0].spans[2].traceId`.
    pub field: Option<String>,
    /// What is wrong, without a position.
    pub message: String,
    /// The byte of the input where it was found, from 0 (`None` when not known). The input of
    /// a recording is one line, so this is a column of that line.
    pub offset: Option<usize>,
}

impl JsonError {
    fn new(field: Option<String>, error: &serde_json::Error) -> Self {
        let text = error.to_string();
        let at = format!(" at line {} column {}", error.line(), error.column());
        let message = text.strip_suffix(&at).unwrap_or(&text).to_owned();
        // serde_json counts lines from 1 and bytes of the line from 1; the input's bytes
        // before that line are not known here, so only a first line gives an offset.
        let offset = (error.line() == 1).then(|| error.column().saturating_sub(1));
        JsonError {
            field,
            message,
            offset,
        }
    }
}

impl fmt::Display for JsonError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.field {
            Some(field) => write!(f, "{field}: {}", self.message),
            None => f.write_str(&self.message),
        }
    }
}

// The mirror of the request, field by field: camelCase names with the proto's own names as
// aliases, and every scalar read by a helper that takes both forms. `null` reads as the default.

#[derive(Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct Request {
    #[serde(alias = "resource_spans", deserialize_with = "nullable")]
    resource_spans: Vec<ResourceSpans>,
}

#[derive(Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct ResourceSpans {
    #[serde(deserialize_with = "nullable")]
    resource: Option<Resource>,
    #[serde(alias = "scope_spans", deserialize_with = "nullable")]
    scope_spans: Vec<ScopeSpans>,
    #[serde(alias = "schema_url", deserialize_with = "nullable")]
    schema_url: String,
}

#[derive(Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct Resource {
    #[serde(deserialize_with = "nullable")]
    attributes: Vec<KeyValue>,
    #[serde(alias = "dropped_attributes_count", deserialize_with = "uint32")]
    dropped_attributes_count: u32,
    #[serde(alias = "entity_refs", deserialize_with = "nullable")]
    entity_refs: Vec<EntityRef>,
}

#[derive(Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct EntityRef {
    #[serde(alias = "schema_url", deserialize_with = "nullable")]
    schema_url: String,
    #[serde(deserialize_with = "nullable")]
    r#type: String,
    #[serde(alias = "id_keys", deserialize_with = "nullable")]
    id_keys: Vec<String>,
    #[serde(alias = "description_keys", deserialize_with = "nullable")]
    description_keys: Vec<String>,
}

#[derive(Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct ScopeSpans {
    #[serde(deserialize_with = "nullable")]
    scope: Option<Scope>,
    #[serde(deserialize_with = "nullable")]
    spans: Vec<Span>,
    #[serde(alias = "schema_url", deserialize_with = "nullable")]
    schema_url: String,
}

#[derive(Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct Scope {
    #[serde(deserialize_with = "nullable")]
    name: String,
    #[serde(deserialize_with = "nullable")]
    version: String,
    #[serde(deserialize_with = "nullable")]
    attributes: Vec<KeyValue>,
    #[serde(alias = "dropped_attributes_count", deserialize_with = "uint32")]
    dropped_attributes_count: u32,
}

#[derive(Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct Span {
    #[serde(alias = "trace_id", deserialize_with = "hex_id")]
    trace_id: Vec<u8>,
    #[serde(alias = "span_id", deserialize_with = "hex_id")]
    span_id: Vec<u8>,
    #[serde(alias = "trace_state", deserialize_with = "nullable")]
    trace_state: String,
    #[serde(alias = "parent_span_id", deserialize_with = "hex_id")]
    parent_span_id: Vec<u8>,
    #[serde(deserialize_with = "uint32")]
    flags: u32,
    #[serde(deserialize_with = "nullable")]
    name: String,
    #[serde(deserialize_with = "span_kind")]
    kind: i32,
    #[serde(alias = "start_time_unix_nano", deserialize_with = "uint64")]
    start_time_unix_nano: u64,
    #[serde(alias = "end_time_unix_nano", deserialize_with = "uint64")]
    end_time_unix_nano: u64,
    #[serde(deserialize_with = "nullable")]
    attributes: Vec<KeyValue>,
    #[serde(alias = "dropped_attributes_count", deserialize_with = "uint32")]
    dropped_attributes_count: u32,
    #[serde(deserialize_with = "nullable")]
    events: Vec<Event>,
    #[serde(alias = "dropped_events_count", deserialize_with = "uint32")]
    dropped_events_count: u32,
    #[serde(deserialize_with = "nullable")]
    links: Vec<Link>,
    #[serde(alias = "dropped_links_count", deserialize_with = "uint32")]
    dropped_links_count: u32,
    #[serde(deserialize_with = "nullable")]
    status: Option<Status>,
}

#[derive(Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct Event {
    #[serde(alias = "time_unix_nano", deserialize_with = "uint64")]
    time_unix_nano: u64,
    #[serde(deserialize_with = "nullable")]
    name: String,
    #[serde(deserialize_with = "nullable")]
    attributes: Vec<KeyValue>,
    #[serde(alias = "dropped_attributes_count", deserialize_with = "uint32")]
    dropped_attributes_count: u32,
}

#[derive(Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct Link {
    #[serde(alias = "trace_id", deserialize_with = "hex_id")]
    trace_id: Vec<u8>,
    #[serde(alias = "span_id", deserialize_with = "hex_id")]
    span_id: Vec<u8>,
    #[serde(alias = "trace_state", deserialize_with = "nullable")]
    trace_state: String,
    #[serde(deserialize_with = "nullable")]
    attributes: Vec<KeyValue>,
    #[serde(alias = "dropped_attributes_count", deserialize_with = "uint32")]
    dropped_attributes_count: u32,
    #[serde(deserialize_with = "uint32")]
    flags: u32,
}

#[derive(Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct Status {
    #[serde(deserialize_with = "nullable")]
    message: String,
    #[serde(deserialize_with = "status_code")]
    code: i32,
}

#[derive(Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct KeyValue {
    #[serde(deserialize_with = "nullable")]
    key: String,
    #[serde(deserialize_with = "nullable")]
    value: Option<AnyValue>,
    #[serde(alias = "key_strindex", deserialize_with = "int32")]
    key_strindex: i32,
}

/// `AnyValue`'s oneof, read as a map: the last value field present wins (as in
/// opentelemetry-proto's reader and the Collector's), `null` sets none, other keys are skipped.
#[derive(Default)]
struct AnyValue(Option<common::any_value::Value>);

impl<'de> Deserialize<'de> for AnyValue {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Any;
        impl<'de> Visitor<'de> for Any {
            type Value = AnyValue;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an AnyValue object (stringValue, intValue, ...)")
            }
            fn visit_map<M: de::MapAccess<'de>>(self, mut map: M) -> Result<AnyValue, M::Error> {
                use common::any_value::Value;
                let mut value = None;
                while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
                    let next = match &*key {
                        "stringValue" | "string_value" => {
                            map.next_value::<Option<String>>()?.map(Value::StringValue)
                        }
                        "boolValue" | "bool_value" => {
                            map.next_value::<Option<bool>>()?.map(Value::BoolValue)
                        }
                        "intValue" | "int_value" => map
                            .next_value::<Option<Int64>>()?
                            .map(|i| Value::IntValue(i.0)),
                        "doubleValue" | "double_value" => map
                            .next_value::<Option<Double>>()?
                            .map(|d| Value::DoubleValue(d.0)),
                        "arrayValue" | "array_value" => {
                            map.next_value::<Option<ArrayValue>>()?.map(|a| {
                                Value::ArrayValue(common::ArrayValue {
                                    values: a.values.into_iter().map(any_value).collect(),
                                })
                            })
                        }
                        "kvlistValue" | "kvlist_value" => {
                            map.next_value::<Option<KeyValueList>>()?.map(|l| {
                                Value::KvlistValue(common::KeyValueList {
                                    values: key_values(l.values),
                                })
                            })
                        }
                        "bytesValue" | "bytes_value" => map
                            .next_value::<Option<Base64>>()?
                            .map(|b| Value::BytesValue(b.0)),
                        _ => {
                            map.next_value::<de::IgnoredAny>()?;
                            continue;
                        }
                    };
                    if next.is_some() {
                        value = next;
                    }
                }
                Ok(AnyValue(value))
            }
        }
        d.deserialize_map(Any)
    }
}

/// `intValue`: a 64-bit integer, as a number or a string.
struct Int64(i64);

impl<'de> Deserialize<'de> for Int64 {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        some_int64(d)?
            .map(Int64)
            .ok_or_else(|| de::Error::custom("expected a 64-bit integer"))
    }
}

/// `doubleValue`: a number, a numeric string, or `"NaN"`, `"Infinity"`, `"-Infinity"`.
struct Double(f64);

impl<'de> Deserialize<'de> for Double {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        some_double(d)?
            .map(Double)
            .ok_or_else(|| de::Error::custom("expected a double"))
    }
}

/// `bytesValue`: base64.
struct Base64(Vec<u8>);

impl<'de> Deserialize<'de> for Base64 {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        some_base64(d)?
            .map(Base64)
            .ok_or_else(|| de::Error::custom("expected base64 bytes"))
    }
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct ArrayValue {
    #[serde(deserialize_with = "nullable")]
    values: Vec<AnyValue>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct KeyValueList {
    #[serde(deserialize_with = "nullable")]
    values: Vec<KeyValue>,
}

fn nullable<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de> + Default,
{
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

/// A value that is too long to quote whole in an error.
fn quoted(s: &str) -> String {
    let mut end = s.len().min(40);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    if end < s.len() {
        format!("{:?}…", &s[..end])
    } else {
        format!("{s:?}")
    }
}

/// An unsigned or signed integer, as a JSON number or a decimal string.
struct Integer {
    what: &'static str,
    min: i128,
    max: i128,
}

impl Visitor<'_> for Integer {
    type Value = Option<i128>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "{} as a number or a decimal string", self.what)
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
        self.check(i128::from(v))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
        self.check(i128::from(v))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Self::Value, E> {
        // Protobuf's JSON mapping accepts an integral number written with an exponent or ".0".
        if v.fract() == 0.0 && v.abs() < 1.8e19 {
            self.check(v as i128)
        } else {
            Err(E::custom(format!("expected {}, got {v}", self.what)))
        }
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        match v.trim().parse::<i128>() {
            Ok(n) => self.check(n),
            Err(_) => Err(E::custom(format!(
                "expected {} as a number or a decimal string, got {}",
                self.what,
                quoted(v)
            ))),
        }
    }

    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }
}

impl Integer {
    fn check<E: de::Error>(&self, n: i128) -> Result<Option<i128>, E> {
        if (self.min..=self.max).contains(&n) {
            Ok(Some(n))
        } else {
            Err(E::custom(format!("{n} is out of range for {}", self.what)))
        }
    }
}

fn integer<'de, D: Deserializer<'de>>(
    d: D,
    what: &'static str,
    min: i128,
    max: i128,
) -> Result<Option<i128>, D::Error> {
    d.deserialize_any(Integer { what, min, max })
}

fn uint64<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    let n = integer(d, "an unsigned 64-bit integer", 0, i128::from(u64::MAX))?;
    Ok(n.map_or(0, |n| n as u64))
}

fn int32<'de, D: Deserializer<'de>>(d: D) -> Result<i32, D::Error> {
    let n = integer(
        d,
        "a 32-bit integer",
        i128::from(i32::MIN),
        i128::from(i32::MAX),
    )?;
    Ok(n.map_or(0, |n| n as i32))
}

fn uint32<'de, D: Deserializer<'de>>(d: D) -> Result<u32, D::Error> {
    let n = integer(d, "an unsigned 32-bit integer", 0, i128::from(u32::MAX))?;
    Ok(n.map_or(0, |n| n as u32))
}

fn some_int64<'de, D: Deserializer<'de>>(d: D) -> Result<Option<i64>, D::Error> {
    let n = integer(
        d,
        "a 64-bit integer",
        i128::from(i64::MIN),
        i128::from(i64::MAX),
    )?;
    Ok(n.map(|n| n as i64))
}

/// A double as a number, a numeric string, or `"NaN"`, `"Infinity"`, `"-Infinity"`.
fn some_double<'de, D: Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
    struct Double;
    impl Visitor<'_> for Double {
        type Value = Option<f64>;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a double as a number or a string")
        }
        fn visit_f64<E: de::Error>(self, v: f64) -> Result<Self::Value, E> {
            Ok(Some(v))
        }
        fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
            Ok(Some(v as f64))
        }
        fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
            Ok(Some(v as f64))
        }
        fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
            match v {
                "NaN" => Ok(Some(f64::NAN)),
                "Infinity" => Ok(Some(f64::INFINITY)),
                "-Infinity" => Ok(Some(f64::NEG_INFINITY)),
                _ => v
                    .trim()
                    .parse()
                    .map(Some)
                    .map_err(|_| E::custom(format!("expected a double, got {}", quoted(v)))),
            }
        }
        fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
    }
    d.deserialize_any(Double)
}

/// An enum value: its number, or its name from `names` (index = number).
fn enumeration<'de, D: Deserializer<'de>>(
    d: D,
    what: &'static str,
    names: &'static [&'static str],
) -> Result<i32, D::Error> {
    struct Enum {
        what: &'static str,
        names: &'static [&'static str],
    }
    impl Visitor<'_> for Enum {
        type Value = i32;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            write!(
                f,
                "{} as a number or a name ({})",
                self.what,
                self.names.join(", ")
            )
        }
        fn visit_u64<E: de::Error>(self, v: u64) -> Result<i32, E> {
            i32::try_from(v).map_err(|_| E::custom(format!("{v} is not a {}", self.what)))
        }
        fn visit_i64<E: de::Error>(self, v: i64) -> Result<i32, E> {
            i32::try_from(v).map_err(|_| E::custom(format!("{v} is not a {}", self.what)))
        }
        fn visit_str<E: de::Error>(self, v: &str) -> Result<i32, E> {
            match self.names.iter().position(|n| *n == v) {
                Some(i) => Ok(i as i32),
                None => Err(E::custom(format!(
                    "unknown {} {}: expected a number or one of {}",
                    self.what,
                    quoted(v),
                    self.names.join(", ")
                ))),
            }
        }
        fn visit_unit<E: de::Error>(self) -> Result<i32, E> {
            Ok(0)
        }
    }
    d.deserialize_any(Enum { what, names })
}

/// `Span.SpanKind`'s names, by number: OTLP/JSON gives a kind as either.
pub(super) const SPAN_KINDS: [&str; 6] = [
    "SPAN_KIND_UNSPECIFIED",
    "SPAN_KIND_INTERNAL",
    "SPAN_KIND_SERVER",
    "SPAN_KIND_CLIENT",
    "SPAN_KIND_PRODUCER",
    "SPAN_KIND_CONSUMER",
];

/// `Status.StatusCode`'s names, by number.
pub(super) const STATUS_CODES: [&str; 3] =
    ["STATUS_CODE_UNSET", "STATUS_CODE_OK", "STATUS_CODE_ERROR"];

fn span_kind<'de, D: Deserializer<'de>>(d: D) -> Result<i32, D::Error> {
    enumeration(d, "span kind", &SPAN_KINDS)
}

fn status_code<'de, D: Deserializer<'de>>(d: D) -> Result<i32, D::Error> {
    enumeration(d, "status code", &STATUS_CODES)
}

/// A trace or span id: hex (either case), `""` or `null` for none.
fn hex_id<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
    let Some(s) = Option::<std::borrow::Cow<'de, str>>::deserialize(d)? else {
        return Ok(Vec::new());
    };
    let digit = |c: u8| match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    };
    let bytes = s.as_bytes();
    let invalid = || {
        de::Error::custom(format!(
            "expected an id in hex (32 digits for a trace, 16 for a span), got {}",
            quoted(&s)
        ))
    };
    if bytes.len() % 2 != 0 {
        return Err(invalid());
    }
    bytes
        .chunks_exact(2)
        .map(|pair| Some(digit(pair[0])? << 4 | digit(pair[1])?))
        .collect::<Option<Vec<u8>>>()
        .ok_or_else(invalid)
}

/// A bytes value: base64, standard or URL-safe alphabet, padded or not.
fn some_base64<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Vec<u8>>, D::Error> {
    let Some(s) = Option::<std::borrow::Cow<'de, str>>::deserialize(d)? else {
        return Ok(None);
    };
    base64(&s)
        .map(Some)
        .ok_or_else(|| de::Error::custom(format!("expected base64 bytes, got {}", quoted(&s))))
}

pub(super) fn base64(s: &str) -> Option<Vec<u8>> {
    let sextet = |c: u8| match c {
        b'A'..=b'Z' => Some(c - b'A'),
        b'a'..=b'z' => Some(c - b'a' + 26),
        b'0'..=b'9' => Some(c - b'0' + 52),
        b'+' | b'-' => Some(62),
        b'/' | b'_' => Some(63),
        _ => None,
    };
    let body = s.trim_end_matches('=');
    if s.len() - body.len() > 2 || body.len() % 4 == 1 {
        return None;
    }
    let mut out = Vec::with_capacity(body.len() * 3 / 4);
    for chunk in body.as_bytes().chunks(4) {
        let mut n = 0u32;
        for (i, c) in chunk.iter().enumerate() {
            n |= u32::from(sextet(*c)?) << (18 - 6 * i);
        }
        let bytes = n.to_be_bytes();
        out.extend_from_slice(&bytes[1..chunk.len()]);
    }
    Some(out)
}

impl From<Request> for ExportTraceServiceRequest {
    fn from(r: Request) -> Self {
        ExportTraceServiceRequest {
            resource_spans: r.resource_spans.into_iter().map(Into::into).collect(),
        }
    }
}

impl From<ResourceSpans> for trace::ResourceSpans {
    fn from(r: ResourceSpans) -> Self {
        trace::ResourceSpans {
            resource: r.resource.map(|r| resource::Resource {
                attributes: key_values(r.attributes),
                dropped_attributes_count: r.dropped_attributes_count,
                entity_refs: r
                    .entity_refs
                    .into_iter()
                    .map(|e| common::EntityRef {
                        schema_url: e.schema_url,
                        r#type: e.r#type,
                        id_keys: e.id_keys,
                        description_keys: e.description_keys,
                    })
                    .collect(),
            }),
            scope_spans: r.scope_spans.into_iter().map(Into::into).collect(),
            schema_url: r.schema_url,
        }
    }
}

impl From<ScopeSpans> for trace::ScopeSpans {
    fn from(s: ScopeSpans) -> Self {
        trace::ScopeSpans {
            scope: s.scope.map(|s| common::InstrumentationScope {
                name: s.name,
                version: s.version,
                attributes: key_values(s.attributes),
                dropped_attributes_count: s.dropped_attributes_count,
            }),
            spans: s.spans.into_iter().map(Into::into).collect(),
            schema_url: s.schema_url,
        }
    }
}

impl From<Span> for trace::Span {
    fn from(s: Span) -> Self {
        trace::Span {
            trace_id: s.trace_id,
            span_id: s.span_id,
            trace_state: s.trace_state,
            parent_span_id: s.parent_span_id,
            flags: s.flags,
            name: s.name,
            kind: s.kind,
            start_time_unix_nano: s.start_time_unix_nano,
            end_time_unix_nano: s.end_time_unix_nano,
            attributes: key_values(s.attributes),
            dropped_attributes_count: s.dropped_attributes_count,
            events: s
                .events
                .into_iter()
                .map(|e| trace::span::Event {
                    time_unix_nano: e.time_unix_nano,
                    name: e.name,
                    attributes: key_values(e.attributes),
                    dropped_attributes_count: e.dropped_attributes_count,
                })
                .collect(),
            dropped_events_count: s.dropped_events_count,
            links: s
                .links
                .into_iter()
                .map(|l| trace::span::Link {
                    trace_id: l.trace_id,
                    span_id: l.span_id,
                    trace_state: l.trace_state,
                    attributes: key_values(l.attributes),
                    dropped_attributes_count: l.dropped_attributes_count,
                    flags: l.flags,
                })
                .collect(),
            dropped_links_count: s.dropped_links_count,
            status: s.status.map(|s| trace::Status {
                message: s.message,
                code: s.code,
            }),
        }
    }
}

fn key_values(kvs: Vec<KeyValue>) -> Vec<common::KeyValue> {
    kvs.into_iter()
        .map(|kv| common::KeyValue {
            key: kv.key,
            value: kv.value.map(any_value),
            key_strindex: kv.key_strindex,
        })
        .collect()
}

fn any_value(v: AnyValue) -> common::AnyValue {
    common::AnyValue { value: v.0 }
}

#[cfg(any(test, feature = "fixtures"))]
pub mod proto_form;

#[cfg(test)]
pub(super) mod tests;

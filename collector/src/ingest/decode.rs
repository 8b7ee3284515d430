//! OTLP spans -> [`analysis::Span`]: the compact record the store and the analysis read.
//!
//! Enters: an `ExportTraceServiceRequest`, either already decoded by prost (a file line, or
//! when the whole request is kept for `record`) or as its protobuf bytes straight off the wire
//! ([`decode_protobuf`]: the receivers' hot path, which reads the bytes in place and allocates
//! nothing per attribute). Leaves: spans with their budget facts decoded, the raw attributes
//! when the screen wants them, and a count of spans rejected with the reason for the first one
//! (for `partial_success`). Both paths share [`SpanParts`] and the facts reader, so they give
//! the same spans for the same request.

use foldhash::HashSet;
use std::sync::Arc;

use deadline_budget::analysis::{
    BudgetFacts, BudgetSource, Outcome, Span, SpanId, SpanKind, SpanStatus, TraceId,
};
use deadline_budget::carrier::{Carriers, Received};
use deadline_budget::semconv;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value::Value};
use opentelemetry_proto::tonic::trace::v1 as otlp;
use prost::Message as _;

/// Longest span or service name kept (bytes); longer names are cut at a char boundary.
const MAX_NAME_BYTES: usize = 512;
/// Most raw attributes kept per span for the detail view.
const MAX_KEPT_ATTRIBUTES: usize = 256;
/// A kept attribute value longer than this (a string's or bytes' length; an array's or a
/// list's encoded size) is cut, with a marker, as the SDKs' attribute value length limit does:
/// the detail view has no use for a 4 MB blob, and it would cost 4 MB per span.
pub const MAX_VALUE_BYTES: usize = 4 * 1024;
/// The most attribute bytes (encoded) kept for one span; attributes past it are not kept and
/// counted, the ones that still fit after them are.
pub const MAX_SPAN_ATTRIBUTE_BYTES: usize = 16 * 1024;
/// The interner forgets everything past this many distinct strings, so hostile input
/// (a new name per span) cannot grow it without bound.
const MAX_INTERNED: usize = 65_536;

/// What a receiver keeps from one request to the next: service and span names interned (so a
/// million stored spans share a handful of strings), and the carriers to read from captured
/// headers (`--budget-header`).
#[derive(Debug, Default)]
pub struct Interner {
    strings: HashSet<Arc<str>>,
    carriers: Arc<Carriers>,
}

impl Interner {
    /// An interner whose decoder reads these carriers (a team's own first, then the built-in).
    pub fn with_carriers(carriers: Arc<Carriers>) -> Self {
        Interner {
            strings: HashSet::default(),
            carriers,
        }
    }

    /// The carriers read from captured headers.
    pub fn carriers(&self) -> &Arc<Carriers> {
        &self.carriers
    }

    /// The shared copy of `s` (cut to a sane length).
    pub fn intern(&mut self, s: &str) -> Arc<str> {
        let s = truncate(s, MAX_NAME_BYTES);
        if let Some(found) = self.strings.get(s) {
            return found.clone();
        }
        if self.strings.len() >= MAX_INTERNED {
            self.strings.clear();
        }
        let arc: Arc<str> = Arc::from(s);
        self.strings.insert(arc.clone());
        arc
    }
}

fn truncate(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
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
        let mut keeper = Keeper::default();
        for kv in attributes {
            keeper.offer(kv, None);
        }
        keeper.finish()
    }

    /// The same attributes with none kept (all counted as not kept): what a span keeps when
    /// the screen's attribute budget has no room for it.
    pub fn without_values(&self) -> Self {
        let held = wire::fields(&self.bytes).count();
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
        wire::fields(&self.bytes).map_while(|field| match field {
            Ok((1, wire::Field::Len(kv))) => Some(kv),
            _ => None,
        })
    }

    /// The attributes, decoded. Bytes that do not decode (never the case for what the
    /// receivers kept: they were checked) give the attributes before them.
    pub fn decode(&self) -> Vec<KeyValue> {
        let mut out = Vec::new();
        for field in wire::fields(&self.bytes) {
            let Ok((1, wire::Field::Len(kv))) = field else {
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
struct Keeper {
    out: Vec<u8>,
    /// Encoded size of what is kept, as prost would encode it.
    used: usize,
    kept: usize,
    cut: u16,
    dropped: u16,
}

impl Keeper {
    /// Offers one attribute; `raw` is its encoding on the wire when that is what to keep (it
    /// decodes to `kv`), `None` to encode `kv`.
    fn offer(&mut self, kv: &KeyValue, raw: Option<&[u8]>) {
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
    fn drop_one(&mut self) {
        self.dropped = self.dropped.saturating_add(1);
    }

    fn finish(self) -> RawAttributes {
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

/// What one request decoded to.
#[derive(Debug, Default)]
pub struct Decoded {
    /// The valid spans, in request order.
    pub spans: Vec<Span>,
    /// The raw attributes of each span (same index as `spans`), when asked for.
    pub attributes: Vec<RawAttributes>,
    /// Spans rejected (ids of the wrong length).
    pub rejected: u64,
    /// Why the first rejected span was rejected.
    pub first_error: Option<String>,
    /// Strings that were not valid UTF-8, kept with U+FFFD in place of each bad sequence (the
    /// span is kept): see [`Utf8Repairs`].
    pub repaired: Utf8Repairs,
}

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

impl Decoded {
    /// Spans in the request, valid or not.
    pub fn total(&self) -> u64 {
        self.spans.len() as u64 + self.rejected
    }

    /// What `partial_success.error_message` says: why spans were rejected, and which strings
    /// were repaired; empty when there is nothing to say.
    pub fn message(&self) -> String {
        let parts: Vec<String> = self
            .first_error
            .iter()
            .cloned()
            .chain(self.repaired.message())
            .collect();
        parts.join("; ")
    }

    fn push(&mut self, span: Result<Span, String>) -> bool {
        match span {
            Ok(span) => {
                self.spans.push(span);
                true
            }
            Err(reason) => {
                self.rejected += 1;
                if self.first_error.is_none() {
                    self.first_error = Some(reason);
                }
                false
            }
        }
    }
}

/// Decodes every span of `request`. With `keep_attributes`, each valid span's attributes are
/// kept in [`Decoded::attributes`].
pub fn decode_request(
    request: &mut ExportTraceServiceRequest,
    interner: &mut Interner,
    keep_attributes: bool,
) -> Decoded {
    let mut out = Decoded::default();
    let carriers = interner.carriers.clone();
    for resource_spans in &mut request.resource_spans {
        let service = resource_spans
            .resource
            .as_ref()
            .and_then(|r| find_str(&r.attributes, "service.name"))
            .unwrap_or("unknown_service");
        let service = interner.intern(service);
        for scope_spans in &mut resource_spans.scope_spans {
            for span in &mut scope_spans.spans {
                if out.push(decode_span(span, &service, interner, &carriers)) && keep_attributes {
                    out.attributes
                        .push(RawAttributes::from_key_values(&span.attributes));
                }
            }
        }
    }
    out
}

/// Counts the spans in a request (for refusal accounting).
pub fn count_spans(request: &ExportTraceServiceRequest) -> u64 {
    request
        .resource_spans
        .iter()
        .flat_map(|r| &r.scope_spans)
        .map(|s| s.spans.len() as u64)
        .sum()
}

fn decode_span(
    span: &otlp::Span,
    service: &Arc<str>,
    interner: &mut Interner,
    carriers: &Carriers,
) -> Result<Span, String> {
    let mut facts = FactsReader::new(carriers);
    for kv in &span.attributes {
        facts.attribute(kv.key.as_bytes(), value_ref(kv.value.as_ref()));
    }
    facts.exception_event = span
        .events
        .iter()
        .any(|e| e.name == semconv::EXCEPTION_EVENT);
    SpanParts {
        trace_id: &span.trace_id,
        span_id: &span.span_id,
        parent_span_id: &span.parent_span_id,
        name: &span.name,
        kind: span.kind,
        start_unix_nano: span.start_time_unix_nano,
        end_unix_nano: span.end_time_unix_nano,
        status_code: span.status.as_ref().map(|s| s.code),
    }
    .build(facts, service, interner)
}

/// The fields of one OTLP span the analysis reads, borrowed from either decoding path.
#[derive(Debug, Default)]
struct SpanParts<'a> {
    trace_id: &'a [u8],
    span_id: &'a [u8],
    parent_span_id: &'a [u8],
    name: &'a str,
    kind: i32,
    start_unix_nano: u64,
    end_unix_nano: u64,
    status_code: Option<i32>,
}

impl SpanParts<'_> {
    fn build(
        self,
        facts: FactsReader<'_>,
        service: &Arc<str>,
        interner: &mut Interner,
    ) -> Result<Span, String> {
        let name = self.name;
        let trace_id: [u8; 16] = self.trace_id.try_into().map_err(|_| {
            format!(
                "span {:?}: trace_id must be 16 bytes, got {}",
                truncate(name, 64),
                self.trace_id.len()
            )
        })?;
        if trace_id == [0; 16] {
            return Err(format!(
                "span {:?}: trace_id is all zero",
                truncate(name, 64)
            ));
        }
        let span_id: [u8; 8] = self.span_id.try_into().map_err(|_| {
            format!(
                "span {:?}: span_id must be 8 bytes, got {}",
                truncate(name, 64),
                self.span_id.len()
            )
        })?;
        // Invalid by the OTLP specification; a child naming it as its parent would be taken
        // for a root (an all-zero parent means "none") and its edge would vanish.
        if span_id == [0; 8] {
            return Err(format!(
                "span {:?}: span_id is all zero",
                truncate(name, 64)
            ));
        }
        let parent_span_id = match <[u8; 8]>::try_from(self.parent_span_id) {
            // An all-zero parent is how some exporters say "no parent".
            Ok(id) => (id != [0; 8]).then_some(SpanId(id)),
            Err(_) if self.parent_span_id.is_empty() => None,
            Err(_) => {
                return Err(format!(
                    "span {:?}: parent_span_id must be 0 or 8 bytes, got {}",
                    truncate(name, 64),
                    self.parent_span_id.len()
                ));
            }
        };
        let kind = match self.kind {
            2 => SpanKind::Server,
            3 => SpanKind::Client,
            4 => SpanKind::Producer,
            5 => SpanKind::Consumer,
            _ => SpanKind::Internal,
        };
        let status = match self.status_code {
            Some(1) => SpanStatus::Ok,
            Some(2) => SpanStatus::Error,
            _ => SpanStatus::Unset,
        };
        Ok(Span {
            trace_id: TraceId(trace_id),
            span_id: SpanId(span_id),
            parent_span_id,
            service: service.clone(),
            name: interner.intern(name),
            kind,
            start_unix_nano: self.start_unix_nano,
            end_unix_nano: self.end_unix_nano,
            status,
            budget: facts.finish(kind, self.start_unix_nano),
        })
    }
}

/// Reads the contract's attributes of a span of `kind`; falls back to captured headers (the
/// carriers of `carriers`, in order) when `budget.*` says nothing: on a hop they are the budget
/// received, on a call the budget forwarded.
pub fn budget_facts(
    attributes: &[KeyValue],
    kind: SpanKind,
    start_unix_nano: u64,
    carriers: &Carriers,
) -> BudgetFacts {
    let mut facts = FactsReader::new(carriers);
    for kv in attributes {
        facts.attribute(kv.key.as_bytes(), value_ref(kv.value.as_ref()));
    }
    facts.finish(kind, start_unix_nano)
}

/// An attribute value as the facts reader sees it, borrowed from a decoded `AnyValue` or
/// straight from the protobuf bytes (strings are checked for UTF-8 only when read).
#[derive(Clone, Copy, Debug, Default)]
enum ValueRef<'a> {
    /// No value, or one the facts never read (bool, bytes, key-value list).
    #[default]
    Other,
    Str(&'a [u8]),
    Int(i64),
    Double(f64),
    /// An array: whether it has a first element, and that element if it is a string.
    Array {
        has_first: bool,
        first_str: Option<&'a [u8]>,
    },
}

impl<'a> ValueRef<'a> {
    fn str(self) -> Option<&'a str> {
        match self {
            ValueRef::Str(s) => std::str::from_utf8(s).ok(),
            _ => None,
        }
    }

    /// Integers as the contract writes them; also doubles and numeric strings, which other
    /// SDKs produce for the same attribute.
    fn int(self) -> Option<i64> {
        match self {
            ValueRef::Int(i) => Some(i),
            ValueRef::Double(d) if d.is_finite() && d.abs() < 9.0e15 => Some(d as i64),
            ValueRef::Str(_) => self.str()?.trim().parse().ok(),
            _ => None,
        }
    }

    /// A gRPC status code: its number, or its name (`DEADLINE_EXCEEDED`), as the newest RPC
    /// conventions write it.
    fn grpc_code(self) -> Option<i64> {
        const NAMES: [&str; 17] = [
            "OK",
            "CANCELLED",
            "UNKNOWN",
            "INVALID_ARGUMENT",
            "DEADLINE_EXCEEDED",
            "NOT_FOUND",
            "ALREADY_EXISTS",
            "PERMISSION_DENIED",
            "RESOURCE_EXHAUSTED",
            "FAILED_PRECONDITION",
            "ABORTED",
            "OUT_OF_RANGE",
            "UNIMPLEMENTED",
            "INTERNAL",
            "UNAVAILABLE",
            "DATA_LOSS",
            "UNAUTHENTICATED",
        ];
        self.int().or_else(|| {
            let name = self.str()?.trim();
            NAMES
                .iter()
                .position(|n| n.eq_ignore_ascii_case(name))
                .map(|i| i as i64)
        })
    }

    /// A string, or an integer written as its digits (`error.type` is either, by SDK).
    fn text(self) -> Option<Arc<str>> {
        match self {
            ValueRef::Str(_) => self.str().map(Arc::from),
            ValueRef::Int(i) => Some(Arc::from(i.to_string())),
            _ => None,
        }
    }

    /// A captured header: a string, or (as the HTTP semantic conventions say) an array of
    /// strings of which the first is used.
    fn header(self) -> Option<&'a str> {
        match self {
            ValueRef::Str(_) => self.str(),
            ValueRef::Array { first_str, .. } => ValueRef::Str(first_str?).str(),
            _ => None,
        }
    }
}

fn value_ref(value: Option<&AnyValue>) -> ValueRef<'_> {
    match value.and_then(|v| v.value.as_ref()) {
        Some(Value::StringValue(s)) => ValueRef::Str(s.as_bytes()),
        Some(Value::IntValue(i)) => ValueRef::Int(*i),
        Some(Value::DoubleValue(d)) => ValueRef::Double(*d),
        Some(Value::ArrayValue(array)) => ValueRef::Array {
            has_first: !array.values.is_empty(),
            first_str: match array.values.first().and_then(|v| v.value.as_ref()) {
                Some(Value::StringValue(s)) => Some(s.as_bytes()),
                _ => None,
            },
        },
        _ => ValueRef::Other,
    }
}

/// Which budget fact an attribute key feeds, if any.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Slot {
    ReceivedMs,
    Source,
    DefaultMs,
    QueueWaitMs,
    RemainingAtStartMs,
    Outcome,
    RemainingMs,
    ForwardedMs,
    TimeoutMs,
    SlaMs,
    Attempt,
    HttpStatus,
    HttpStatusOld,
    RpcStatus,
    ErrorType,
    /// A captured request header or metadata entry of the carrier at this position.
    Carrier(usize),
}

/// The keys [`Slot::of`] matches, as bytes: a key is matched before (and without) a UTF-8 check,
/// which cost more than the match itself (issue 20: `from_utf8` on every key was most of
/// `Slot::of`). A key equal to one of these is valid UTF-8, since they are `str`s.
mod key {
    use deadline_budget::semconv;

    pub const RECEIVED_MS: &[u8] = semconv::RECEIVED_MS.as_bytes();
    pub const SOURCE: &[u8] = semconv::SOURCE.as_bytes();
    pub const DEFAULT_MS: &[u8] = semconv::DEFAULT_MS.as_bytes();
    pub const QUEUE_WAIT_MS: &[u8] = semconv::QUEUE_WAIT_MS.as_bytes();
    pub const REMAINING_AT_START_MS: &[u8] = semconv::REMAINING_AT_START_MS.as_bytes();
    pub const OUTCOME: &[u8] = semconv::OUTCOME.as_bytes();
    pub const REMAINING_MS: &[u8] = semconv::REMAINING_MS.as_bytes();
    pub const FORWARDED_MS: &[u8] = semconv::FORWARDED_MS.as_bytes();
    pub const TIMEOUT_MS: &[u8] = semconv::TIMEOUT_MS.as_bytes();
    pub const SLA_MS: &[u8] = semconv::SLA_MS.as_bytes();
    pub const ATTEMPT: &[u8] = semconv::ATTEMPT.as_bytes();
    pub const HTTP_RESPONSE_STATUS_CODE: &[u8] = semconv::HTTP_RESPONSE_STATUS_CODE.as_bytes();
    pub const HTTP_STATUS_CODE: &[u8] = semconv::HTTP_STATUS_CODE.as_bytes();
    pub const RPC_GRPC_STATUS_CODE: &[u8] = semconv::RPC_GRPC_STATUS_CODE.as_bytes();
    pub const RPC_STATUS_CODE: &[u8] = semconv::RPC_STATUS_CODE.as_bytes();
    pub const RPC_RESPONSE_STATUS_CODE: &[u8] = semconv::RPC_RESPONSE_STATUS_CODE.as_bytes();
    pub const ERROR_TYPE: &[u8] = semconv::ERROR_TYPE.as_bytes();
    pub const CARRIER_PREFIXES: [&[u8]; 3] = [
        semconv::HTTP_REQUEST_HEADER_PREFIX.as_bytes(),
        semconv::RPC_REQUEST_METADATA_PREFIX.as_bytes(),
        semconv::RPC_GRPC_REQUEST_METADATA_PREFIX.as_bytes(),
    ];
}

impl Slot {
    /// Inline, so most keys (not ours: a look at the first byte skips them) cost no call.
    #[inline(always)]
    fn of(key_bytes: &[u8], carriers: &Carriers) -> Option<Slot> {
        if !matches!(key_bytes.first(), Some(b'b' | b'h' | b'r' | b'e')) {
            return None;
        }
        Slot::matching(key_bytes, carriers)
    }

    fn matching(key_bytes: &[u8], carriers: &Carriers) -> Option<Slot> {
        use key::*;
        Some(match key_bytes {
            RECEIVED_MS => Slot::ReceivedMs,
            SOURCE => Slot::Source,
            DEFAULT_MS => Slot::DefaultMs,
            QUEUE_WAIT_MS => Slot::QueueWaitMs,
            REMAINING_AT_START_MS => Slot::RemainingAtStartMs,
            OUTCOME => Slot::Outcome,
            REMAINING_MS => Slot::RemainingMs,
            FORWARDED_MS => Slot::ForwardedMs,
            TIMEOUT_MS => Slot::TimeoutMs,
            SLA_MS => Slot::SlaMs,
            ATTEMPT => Slot::Attempt,
            HTTP_RESPONSE_STATUS_CODE => Slot::HttpStatus,
            HTTP_STATUS_CODE => Slot::HttpStatusOld,
            RPC_GRPC_STATUS_CODE | RPC_STATUS_CODE | RPC_RESPONSE_STATUS_CODE => Slot::RpcStatus,
            ERROR_TYPE => Slot::ErrorType,
            _ => {
                let name = CARRIER_PREFIXES
                    .iter()
                    .find_map(|prefix| key_bytes.strip_prefix(*prefix))?;
                // The prefixes are ASCII: the name is UTF-8 exactly when the whole key is.
                let name = std::str::from_utf8(name).ok()?;
                Slot::Carrier(carriers.position(name)?)
            }
        })
    }
}

/// The budget facts of one span, attribute by attribute, in the span's order.
#[derive(Debug)]
struct FactsReader<'a> {
    facts: BudgetFacts,
    carriers: &'a Carriers,
    /// The first captured value of each carrier, by the carrier's position.
    captured: Vec<(usize, &'a str)>,
    http_status_old: Option<i64>,
    exception_event: bool,
}

impl<'a> FactsReader<'a> {
    fn new(carriers: &'a Carriers) -> Self {
        FactsReader {
            facts: BudgetFacts::default(),
            carriers,
            captured: Vec::new(),
            http_status_old: None,
            exception_event: false,
        }
    }

    fn attribute(&mut self, key: &[u8], value: ValueRef<'a>) {
        if let Some(slot) = Slot::of(key, self.carriers) {
            self.set(slot, value);
        }
    }

    fn set(&mut self, slot: Slot, value: ValueRef<'a>) {
        let facts = &mut self.facts;
        match slot {
            Slot::ReceivedMs => facts.received_ms = value.int(),
            Slot::Source => {
                facts.source = value
                    .str()
                    .and_then(|v| BudgetSource::parse_with(v, self.carriers));
            }
            Slot::DefaultMs => facts.default_ms = value.int(),
            Slot::QueueWaitMs => facts.queue_wait_ms = value.int(),
            Slot::RemainingAtStartMs => facts.remaining_at_start_ms = value.int(),
            Slot::Outcome => facts.outcome = value.str().and_then(Outcome::parse),
            Slot::RemainingMs => facts.remaining_ms = value.int(),
            Slot::ForwardedMs => facts.forwarded_ms = value.int(),
            Slot::TimeoutMs => facts.timeout_ms = value.int(),
            Slot::SlaMs => facts.sla_ms = value.int(),
            Slot::Attempt => facts.attempt = value.int(),
            Slot::HttpStatus => facts.http_status = value.int(),
            Slot::HttpStatusOld => self.http_status_old = value.int(),
            Slot::RpcStatus => facts.rpc_status = facts.rpc_status.or(value.grpc_code()),
            Slot::ErrorType => facts.error_type = value.text(),
            Slot::Carrier(i) => {
                if let Some(v) = value.header()
                    && !self.captured.iter().any(|(at, _)| *at == i)
                {
                    self.captured.push((i, v));
                }
            }
        }
    }

    fn finish(mut self, kind: SpanKind, start_unix_nano: u64) -> BudgetFacts {
        let facts = &mut self.facts;
        facts.http_status = facts.http_status.or(self.http_status_old);
        facts.exception_event = self.exception_event;
        let hop_knows = facts.source.is_some() || facts.received_ms.is_some();
        let start_ms = i64::try_from(start_unix_nano / 1_000_000).unwrap_or(i64::MAX);
        if kind.is_hop() && hop_knows && facts.deadline_unix_ms.is_none() {
            // A captured absolute deadline beside the contract's attributes: kept to compare
            // with the relative view (clock skew).
            facts.deadline_unix_ms = self.captured.iter().find_map(|&(i, v)| {
                let carrier = self.carriers.get(i)?;
                if !carrier.form().is_absolute() {
                    return None;
                }
                carrier.decode(v, start_ms).ok()?.1
            });
        }
        let wanted = if kind.is_hop() {
            !hop_knows
        } else {
            kind.is_call() && facts.forwarded_ms.is_none()
        };
        if !wanted || self.captured.is_empty() {
            return self.facts;
        }
        let captured = &self.captured;
        let received = self.carriers.read(
            |i, _| {
                captured
                    .iter()
                    .find(|(at, _)| *at == i)
                    .map(|(_, v)| Ok(*v))
            },
            start_ms,
        );
        let facts = &mut self.facts;
        match received {
            Received::Budget {
                budget,
                source,
                deadline_unix_ms,
            } => {
                // An absolute deadline keeps its sign: one already past is a budget below zero.
                let ms = match deadline_unix_ms {
                    Some(d) => d.saturating_sub(start_ms),
                    None => i64::try_from(budget.as_millis()).unwrap_or(i64::MAX),
                };
                if kind.is_hop() {
                    facts.received_ms = Some(ms);
                    facts.source = Some(source);
                    facts.deadline_unix_ms = facts.deadline_unix_ms.or(deadline_unix_ms);
                } else {
                    facts.forwarded_ms = Some(ms);
                }
            }
            Received::Invalid { .. } if kind.is_hop() => {
                facts.source = Some(BudgetSource::Invalid);
            }
            _ => {}
        }
        self.facts
    }
}

fn find_str<'a>(attributes: &'a [KeyValue], key: &str) -> Option<&'a str> {
    attributes
        .iter()
        .find(|kv| kv.key == key)
        .and_then(|kv| value_ref(kv.value.as_ref()).str())
}

/// Why a protobuf request body could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid protobuf ExportTraceServiceRequest: {0}")]
pub struct ProtobufError(&'static str);

/// Decodes an `ExportTraceServiceRequest` straight from its protobuf bytes: the same spans,
/// facts and rejections as prost followed by [`decode_request`], without building the request
/// (no allocation per attribute, no copy of a string the analysis does not keep). With
/// `keep_attributes`, only each valid span's attributes are decoded into `KeyValue`s.
///
/// Strings are read as [`Utf8Repairs`] says: the service name, the span name and every
/// attribute's key and (top-level) string value are checked, and a string that is not UTF-8 is
/// kept with U+FFFD in place of its bad bytes, and counted. Fields the analysis skips (event
/// names, links, status messages) are not checked (prost would reject invalid UTF-8 there);
/// malformed framing is an error.
pub fn decode_protobuf(
    body: &[u8],
    interner: &mut Interner,
    keep_attributes: bool,
) -> Result<Decoded, ProtobufError> {
    use wire::{Field, fields};
    // ~300 bytes a span on the wire is typical: one allocation instead of a doubling series.
    let mut out = Decoded {
        spans: Vec::with_capacity(body.len() / 256),
        ..Decoded::default()
    };
    let mut kept: Vec<&[u8]> = Vec::new();
    let mut scratch = KeyValue::default();
    let carriers = interner.carriers.clone();
    for field in fields(body) {
        let (1, Field::Len(resource_spans)) = field? else {
            continue;
        };
        let service = match service_name(resource_spans)? {
            Some(name) => {
                let name = String::from_utf8_lossy(name);
                if let std::borrow::Cow::Owned(_) = name {
                    out.repaired.add(|| {
                        format!(
                            "resource attribute \"service.name\" {:?}",
                            truncate(&name, 64)
                        )
                    });
                }
                interner.intern(&name)
            }
            None => interner.intern("unknown_service"),
        };
        for field in fields(resource_spans) {
            let (2, Field::Len(scope_spans)) = field? else {
                continue;
            };
            for field in fields(scope_spans) {
                let (2, Field::Len(span)) = field? else {
                    continue;
                };
                kept.clear();
                let pushed = decode_span_bytes(
                    span,
                    &service,
                    interner,
                    &carriers,
                    keep_attributes.then_some(&mut kept),
                    &mut out,
                )?;
                if pushed && keep_attributes {
                    out.attributes.push(keep(&kept, &mut scratch)?);
                }
            }
        }
    }
    Ok(out)
}

/// One span's attributes (their bytes on the wire) kept within the caps. Each is checked now,
/// as prost would, so the detail view never meets bad bytes; one with invalid UTF-8 is kept
/// repaired (it was counted when the span was read).
fn keep(kept: &[&[u8]], scratch: &mut KeyValue) -> Result<RawAttributes, ProtobufError> {
    let mut keeper = Keeper::default();
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
fn service_name(resource_spans: &[u8]) -> Result<Option<&[u8]>, ProtobufError> {
    use wire::{Field, fields};
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
fn decode_span_bytes<'a>(
    span: &'a [u8],
    service: &Arc<str>,
    interner: &mut Interner,
    carriers: &'a Carriers,
    mut kept: Option<&mut Vec<&'a [u8]>>,
    out: &mut Decoded,
) -> Result<bool, ProtobufError> {
    use wire::{Field, fields};
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
                let slot = Slot::of(key, carriers);
                // One walk of the value gives what the facts read (for their keys only) and
                // whether its string is UTF-8.
                let value_is_utf8 = match value {
                    ValueBytes::None => {
                        if let Some(slot) = slot {
                            facts.set(slot, ValueRef::Other);
                        }
                        true
                    }
                    ValueBytes::One(any) => {
                        let (read, is_utf8) = read_any_value(any, slot.is_some());
                        if let Some(slot) = slot {
                            facts.set(slot, read?);
                        }
                        is_utf8
                    }
                    ValueBytes::Many => {
                        if let Some(slot) = slot {
                            facts.set(slot, key_value(kv)?.1);
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
                // Only the name (field 2) is read: an `exception` event says the call failed.
                for field in fields(event) {
                    if let (2, Field::Len(name)) = field? {
                        facts.exception_event = name == semconv::EXCEPTION_EVENT.as_bytes();
                    }
                }
            }
            (15, Field::Len(status)) => {
                let mut code = parts.status_code.unwrap_or(0);
                for field in fields(status) {
                    match field? {
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
    if let Some((s, [])) = wire::short_len_field(any, wire::tag(1, wire::LEN)) {
        let value = if want {
            ValueRef::Str(s)
        } else {
            ValueRef::Other
        };
        return (Ok(value), super::utf8::is_valid(s));
    }
    if let Some((&key, int)) = any.split_first()
        && key == wire::tag(3, wire::VARINT)
        && let Some(v) = wire::whole_varint(int)
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
    use wire::{Field, fields};
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
    use wire::{Field, fields};
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
    if let Some((key, rest)) = wire::short_len_field(kv, wire::tag(1, wire::LEN))
        && let Some((any, [])) = wire::short_len_field(rest, wire::tag(2, wire::LEN))
    {
        return Ok((key, ValueBytes::One(any)));
    }
    walk_key_and_value_bytes(kv)
}

/// [`key_and_value_bytes`] for any shape, field by field.
fn walk_key_and_value_bytes(kv: &[u8]) -> Result<(&[u8], ValueBytes<'_>), ProtobufError> {
    use wire::{Field, fields};
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
    use wire::{Field, fields};
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
    for field in wire::fields(any) {
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
    field: wire::Field<'a>,
) -> Result<ValueRef<'a>, ProtobufError> {
    use wire::{Field, fields};
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

/// Just enough of the protobuf wire format to walk a message's fields in place.
pub(super) mod wire {
    use super::ProtobufError;

    /// One field's payload.
    #[derive(Clone, Copy, Debug, PartialEq)]
    pub enum Field<'a> {
        Varint(u64),
        Fixed64(u64),
        Len(&'a [u8]),
        Fixed32,
        /// A group (protobuf's deprecated encoding, wire types 3 and 4): OTLP has none, so
        /// it is an unknown field, skipped whole as prost skips it.
        Group,
    }

    /// Wire type of a varint field.
    pub const VARINT: u8 = 0;
    /// Wire type of a length-delimited field.
    pub const LEN: u8 = 2;

    /// The one-byte key of field `number` (below 16) of wire type `wire_type`.
    pub const fn tag(number: u8, wire_type: u8) -> u8 {
        number << 3 | wire_type
    }

    /// A length-delimited field with this one-byte `tag` and a one-byte length (below 128) at
    /// the start of `buf`: its payload and the bytes after it. Nearly every string OTLP sends
    /// has this shape, which is read here without the general [`fields`] walk.
    #[inline(always)]
    pub fn short_len_field(buf: &[u8], tag: u8) -> Option<(&[u8], &[u8])> {
        let [key, len, rest @ ..] = buf else {
            return None;
        };
        let len = usize::from(*len);
        (*key == tag && len < 0x80 && len <= rest.len()).then(|| rest.split_at(len))
    }

    /// The varint that `bytes` hold, all of them and nothing else (at most 9 bytes, so no
    /// overflow to think about), as [`fields`] would read it; `None` for anything else.
    #[inline(always)]
    pub fn whole_varint(bytes: &[u8]) -> Option<u64> {
        let (last, init) = bytes.split_last()?;
        if bytes.len() > 9 || *last >= 0x80 || init.iter().any(|b| *b < 0x80) {
            return None;
        }
        Some(bytes.iter().enumerate().fold(0, |value, (i, byte)| {
            value | u64::from(byte & 0x7f) << (7 * i)
        }))
    }

    /// How deep groups may nest, as prost allows.
    const MAX_GROUP_DEPTH: usize = 100;

    /// Skip the fields of a group whose start tag (field `number`) was just read, up to and
    /// including its matching end tag; nested groups must close in order.
    fn skip_group(buf: &mut &[u8], number: u64) -> Result<(), ProtobufError> {
        let mut open = vec![number];
        while let Some(&innermost) = open.last() {
            if buf.is_empty() {
                return Err(ProtobufError("truncated group"));
            }
            let key = varint(buf)?;
            let inner = key >> 3;
            if inner == 0 {
                return Err(ProtobufError("invalid field number"));
            }
            match key & 7 {
                0 => {
                    varint(buf)?;
                }
                1 => {
                    take(buf, 8)?;
                }
                2 => {
                    let len = usize::try_from(varint(buf)?)
                        .map_err(|_| ProtobufError("length too large"))?;
                    take(buf, len)?;
                }
                3 if open.len() >= MAX_GROUP_DEPTH => {
                    return Err(ProtobufError("recursion limit reached"));
                }
                3 => open.push(inner),
                4 if inner == innermost => {
                    open.pop();
                }
                4 => return Err(ProtobufError("unexpected end group tag")),
                5 => {
                    take(buf, 4)?;
                }
                _ => return Err(ProtobufError("unsupported wire type")),
            }
        }
        Ok(())
    }

    /// The fields of a message, in order: `(field number, payload)`.
    pub fn fields(buf: &[u8]) -> Fields<'_> {
        Fields { buf, failed: false }
    }

    #[derive(Debug)]
    pub struct Fields<'a> {
        buf: &'a [u8],
        failed: bool,
    }

    /// A varint: one byte (tags, most lengths and small numbers) inline, longer ones out of
    /// line; every field of a request goes through here (issue 20: the call was 10 % of the
    /// receiver's instructions while the compiler kept it out of line).
    #[inline(always)]
    fn varint(buf: &mut &[u8]) -> Result<u64, ProtobufError> {
        if let Some((&byte, rest)) = buf.split_first()
            && byte < 0x80
        {
            *buf = rest;
            return Ok(u64::from(byte));
        }
        long_varint(buf)
    }

    #[inline(never)]
    fn long_varint(buf: &mut &[u8]) -> Result<u64, ProtobufError> {
        let mut value = 0u64;
        for i in 0..10 {
            let Some((&byte, rest)) = buf.split_first() else {
                return Err(ProtobufError("truncated varint"));
            };
            *buf = rest;
            value |= u64::from(byte & 0x7f) << (7 * i);
            if byte < 0x80 {
                return Ok(value);
            }
        }
        Err(ProtobufError("varint longer than 10 bytes"))
    }

    #[inline]
    fn take<'a>(buf: &mut &'a [u8], n: usize) -> Result<&'a [u8], ProtobufError> {
        if buf.len() < n {
            return Err(ProtobufError("truncated field"));
        }
        let (head, rest) = buf.split_at(n);
        *buf = rest;
        Ok(head)
    }

    impl<'a> Fields<'a> {
        /// What is left to read: the bytes after the fields read so far.
        pub fn rest(&self) -> &'a [u8] {
            self.buf
        }

        #[inline(always)]
        fn field(&mut self) -> Result<(u32, Field<'a>), ProtobufError> {
            let key = varint(&mut self.buf)?;
            let number = u32::try_from(key >> 3)
                .ok()
                .filter(|n| *n != 0)
                .ok_or(ProtobufError("invalid field number"))?;
            let field = match key & 7 {
                0 => Field::Varint(varint(&mut self.buf)?),
                1 => {
                    let bytes = take(&mut self.buf, 8)?;
                    let mut le = [0u8; 8];
                    le.copy_from_slice(bytes);
                    Field::Fixed64(u64::from_le_bytes(le))
                }
                2 => {
                    let len = usize::try_from(varint(&mut self.buf)?)
                        .map_err(|_| ProtobufError("length too large"))?;
                    Field::Len(take(&mut self.buf, len)?)
                }
                5 => {
                    take(&mut self.buf, 4)?;
                    Field::Fixed32
                }
                3 => {
                    skip_group(&mut self.buf, key >> 3)?;
                    Field::Group
                }
                4 => return Err(ProtobufError("unexpected end group tag")),
                _ => return Err(ProtobufError("unsupported wire type")),
            };
            Ok((number, field))
        }
    }

    impl<'a> Iterator for Fields<'a> {
        type Item = Result<(u32, Field<'a>), ProtobufError>;

        #[inline]
        fn next(&mut self) -> Option<Self::Item> {
            if self.buf.is_empty() || self.failed {
                return None;
            }
            let field = self.field();
            self.failed = field.is_err();
            Some(field)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The facts of a SERVER span with these attributes, read with the built-in carriers.
    fn hop_facts(attributes: &[KeyValue], start_unix_nano: u64) -> BudgetFacts {
        budget_facts(
            attributes,
            SpanKind::Server,
            start_unix_nano,
            Carriers::builtin(),
        )
    }

    fn kv(key: &str, value: Value) -> KeyValue {
        KeyValue {
            key: key.into(),
            value: Some(AnyValue { value: Some(value) }),
            ..Default::default()
        }
    }

    #[test]
    fn budget_attributes_win_over_captured_headers() {
        let facts = hop_facts(
            &[
                kv(semconv::RECEIVED_MS, Value::IntValue(800)),
                kv(semconv::SOURCE, Value::StringValue("x-budget-ms".into())),
                kv(
                    semconv::HTTP_HEADER_BUDGET_MS,
                    Value::StringValue("5".into()),
                ),
            ],
            0,
        );
        assert_eq!(facts.received_ms, Some(800));
        assert_eq!(facts.source, Some(BudgetSource::XBudgetMs));
    }

    #[test]
    fn captured_headers_give_a_budget_without_budget_attributes() {
        let facts = hop_facts(
            &[kv(
                semconv::HTTP_HEADER_BUDGET_MS,
                Value::StringValue("750".into()),
            )],
            0,
        );
        assert_eq!(
            (facts.received_ms, facts.source),
            (Some(750), Some(BudgetSource::XBudgetMs))
        );

        let array = Value::ArrayValue(opentelemetry_proto::tonic::common::v1::ArrayValue {
            values: vec![AnyValue {
                value: Some(Value::StringValue("250m".into())),
            }],
        });
        let facts = hop_facts(&[kv(semconv::RPC_METADATA_GRPC_TIMEOUT, array)], 0);
        assert_eq!(
            (facts.received_ms, facts.source),
            (Some(250), Some(BudgetSource::GrpcTimeout))
        );

        let facts = hop_facts(
            &[kv(
                semconv::HTTP_HEADER_GRPC_TIMEOUT,
                Value::StringValue("2S".into()),
            )],
            0,
        );
        assert_eq!(facts.received_ms, Some(2000));

        let start_ns = 1_764_430_000_000 * 1_000_000;
        let facts = hop_facts(
            &[kv(
                semconv::HTTP_HEADER_REQUEST_DEADLINE,
                Value::StringValue("1764430000.25".into()),
            )],
            start_ns,
        );
        assert_eq!(facts.received_ms, Some(250));
        assert_eq!(facts.deadline_unix_ms, Some(1_764_430_000_250));
        assert_eq!(facts.source, Some(BudgetSource::XRequestDeadline));
    }

    fn own(pairs: &[(&str, deadline_budget::carrier::Form)]) -> Carriers {
        Carriers::with_own(
            pairs
                .iter()
                .map(|(n, f)| deadline_budget::carrier::Carrier::own(n, *f).unwrap()),
        )
    }

    fn string(key: &str, v: &str) -> KeyValue {
        kv(key, Value::StringValue(v.into()))
    }

    #[test]
    fn a_team_carrier_is_read_from_captured_headers_before_the_built_in_ones() {
        use deadline_budget::carrier::Form;
        let carriers = own(&[("X-Prazo-Restante-Ms", Form::Ms)]);
        // As Node's instrumentation writes it (`-` kept), as Python's does (`_`), as an array.
        for key in [
            "http.request.header.x-prazo-restante-ms",
            "http.request.header.x_prazo_restante_ms",
            "rpc.request.metadata.x-prazo-restante-ms",
            "rpc.grpc.request.metadata.x-prazo-restante-ms",
        ] {
            let facts = budget_facts(
                &[
                    string(key, "480"),
                    string(semconv::HTTP_HEADER_BUDGET_MS, "9000"),
                ],
                SpanKind::Server,
                0,
                &carriers,
            );
            assert_eq!(facts.received_ms, Some(480), "{key}");
            assert_eq!(facts.source, Some(BudgetSource::Header(Form::Ms)), "{key}");
        }
        let array = Value::ArrayValue(opentelemetry_proto::tonic::common::v1::ArrayValue {
            values: vec![AnyValue {
                value: Some(Value::StringValue("1.5".into())),
            }],
        });
        let facts = budget_facts(
            &[kv("http.request.header.x-timeout-s", array)],
            SpanKind::Server,
            0,
            &own(&[("x-timeout-s", Form::Seconds)]),
        );
        assert_eq!(facts.received_ms, Some(1500));
        // Unknown to the built-in table: not read at all.
        let facts = hop_facts(
            &[string("http.request.header.x-prazo-restante-ms", "480")],
            0,
        );
        assert_eq!((facts.received_ms, facts.source), (None, None));
        // An absolute deadline of a team's own, in seconds, on the hop's clock.
        let start = 1_764_430_000_000u64 * 1_000_000;
        let facts = budget_facts(
            &[string("http.request.header.x-deadline", "1764430000.75")],
            SpanKind::Server,
            start,
            &own(&[("x-deadline", Form::DeadlineSeconds)]),
        );
        assert_eq!(facts.received_ms, Some(750));
        assert_eq!(facts.deadline_unix_ms, Some(1_764_430_000_750));
        assert!(facts.source.is_some_and(BudgetSource::is_absolute));
        // `budget.source = "header:<name>"` written by a service knows its carrier's form.
        let facts = budget_facts(
            &[
                string(semconv::SOURCE, "header:x-deadline"),
                kv(semconv::RECEIVED_MS, Value::IntValue(70)),
            ],
            SpanKind::Server,
            0,
            &own(&[("x-deadline", Form::DeadlineMs)]),
        );
        assert_eq!(facts.source, Some(BudgetSource::Header(Form::DeadlineMs)));
    }

    #[test]
    fn a_captured_carrier_on_a_client_span_is_the_budget_forwarded() {
        let facts = budget_facts(
            &[string(semconv::HTTP_HEADER_BUDGET_MS, "930")],
            SpanKind::Client,
            0,
            Carriers::builtin(),
        );
        assert_eq!(
            (facts.forwarded_ms, facts.received_ms, facts.source),
            (Some(930), None, None)
        );
        // Every built-in carrier is read, connect-timeout-ms and Envoy's too.
        for (key, value, ms) in [
            ("http.request.header.connect-timeout-ms", "1200", 1200),
            (
                "http.request.header.x-envoy-expected-rq-timeout-ms",
                "800",
                800,
            ),
            ("rpc.request.metadata.grpc-timeout", "2S", 2000),
        ] {
            let facts = budget_facts(
                &[string(key, value)],
                SpanKind::Client,
                0,
                Carriers::builtin(),
            );
            assert_eq!(facts.forwarded_ms, Some(ms), "{key}");
            let facts = hop_facts(&[string(key, value)], 0);
            assert_eq!(facts.received_ms, Some(ms), "{key}");
        }
        // The contract's own attribute wins.
        let facts = budget_facts(
            &[
                kv(semconv::FORWARDED_MS, Value::IntValue(40)),
                string(semconv::HTTP_HEADER_BUDGET_MS, "930"),
            ],
            SpanKind::Client,
            0,
            Carriers::builtin(),
        );
        assert_eq!(facts.forwarded_ms, Some(40));
    }

    #[test]
    fn statuses_and_errors_are_read_as_the_stock_sdks_write_them() {
        // Python's SDK still writes the older key; the newer one wins when both are there.
        let facts = hop_facts(&[kv("http.status_code", Value::IntValue(503))], 0);
        assert_eq!(facts.http_status, Some(503));
        let facts = hop_facts(
            &[
                kv("http.status_code", Value::IntValue(503)),
                kv(semconv::HTTP_RESPONSE_STATUS_CODE, Value::IntValue(504)),
            ],
            0,
        );
        assert_eq!(facts.http_status, Some(504));
        // The newest RPC conventions name the gRPC code.
        let facts = hop_facts(
            &[string("rpc.response.status_code", "DEADLINE_EXCEEDED")],
            0,
        );
        assert_eq!(facts.rpc_status, Some(4));
        let facts = hop_facts(&[kv("rpc.grpc.status_code", Value::IntValue(8))], 0);
        assert_eq!(facts.rpc_status, Some(8));
        // undici writes its timeout as an integer.
        let facts = hop_facts(&[kv(semconv::ERROR_TYPE, Value::IntValue(23))], 0);
        assert_eq!(facts.error_type.as_deref(), Some("23"));
        let facts = hop_facts(&[string(semconv::ERROR_TYPE, "ReadTimeout")], 0);
        assert_eq!(facts.error_type.as_deref(), Some("ReadTimeout"));
    }

    #[test]
    fn an_exception_event_is_read_on_both_decoding_paths() {
        let span = otlp::Span {
            trace_id: vec![1; 16],
            span_id: vec![2; 8],
            name: "GET worker".into(),
            kind: 3,
            start_time_unix_nano: 1,
            end_time_unix_nano: 2,
            events: vec![
                otlp::span::Event {
                    name: "retry".into(),
                    ..Default::default()
                },
                otlp::span::Event {
                    name: "exception".into(),
                    ..Default::default()
                },
            ],
            ..Default::default()
        };
        use super::hostile_tests::one_span;
        let mut request = one_span(span.clone(), "edge");
        let body = request.encode_to_vec();
        let slow = decode_request(&mut request, &mut Interner::default(), false);
        let fast = decode_protobuf(&body, &mut Interner::default(), false).unwrap();
        assert!(slow.spans[0].budget.exception_event);
        assert_eq!(fast.spans, slow.spans);
        let mut quiet = span;
        quiet.events.truncate(1);
        let decoded = decode_protobuf(
            &one_span(quiet, "edge").encode_to_vec(),
            &mut Interner::default(),
            false,
        )
        .unwrap();
        assert!(!decoded.spans[0].budget.exception_event);
    }

    #[test]
    fn invalid_captured_headers_are_flagged_not_trusted() {
        for bad in ["-5", "12abc", "99999999999999", ""] {
            let facts = hop_facts(
                &[kv(
                    semconv::HTTP_HEADER_BUDGET_MS,
                    Value::StringValue(bad.into()),
                )],
                0,
            );
            assert_eq!(facts.received_ms, None, "{bad}");
            assert_eq!(facts.source, Some(BudgetSource::Invalid), "{bad}");
        }
        for bad in ["123456789S", "10x", "S", "1.5S"] {
            let facts = hop_facts(
                &[kv(
                    semconv::RPC_METADATA_GRPC_TIMEOUT,
                    Value::StringValue(bad.into()),
                )],
                0,
            );
            assert_eq!(facts.source, Some(BudgetSource::Invalid), "{bad}");
        }
        // A deadline more than 24 h away is absurd.
        let facts = hop_facts(
            &[kv(
                semconv::HTTP_HEADER_REQUEST_DEADLINE,
                Value::StringValue("9999999999999".into()),
            )],
            1_000_000,
        );
        assert_eq!(facts.source, Some(BudgetSource::Invalid));
    }

    #[test]
    fn spans_with_wrong_id_lengths_are_rejected_and_counted() {
        let good = otlp::Span {
            trace_id: vec![1; 16],
            span_id: vec![2; 8],
            name: "ok".into(),
            kind: 2,
            ..Default::default()
        };
        let bad_trace = otlp::Span {
            trace_id: vec![1; 15],
            ..good.clone()
        };
        let bad_parent = otlp::Span {
            parent_span_id: vec![3; 4],
            ..good.clone()
        };
        let mut request = ExportTraceServiceRequest {
            resource_spans: vec![otlp::ResourceSpans {
                scope_spans: vec![otlp::ScopeSpans {
                    spans: vec![good, bad_trace, bad_parent],
                    ..Default::default()
                }],
                ..Default::default()
            }],
        };
        let decoded = decode_request(&mut request, &mut Interner::default(), false);
        assert_eq!(decoded.spans.len(), 1);
        assert_eq!(decoded.rejected, 2);
        assert!(
            decoded
                .first_error
                .unwrap()
                .contains("trace_id must be 16 bytes, got 15")
        );
        assert_eq!(&*decoded.spans[0].service, "unknown_service");
        assert_eq!(decoded.spans[0].kind, SpanKind::Server);
    }
}

#[cfg(test)]
mod hostile_tests {
    use super::*;

    pub(super) fn one_span(span: otlp::Span, service: &str) -> ExportTraceServiceRequest {
        ExportTraceServiceRequest {
            resource_spans: vec![otlp::ResourceSpans {
                resource: Some(opentelemetry_proto::tonic::resource::v1::Resource {
                    attributes: vec![KeyValue {
                        key: "service.name".into(),
                        value: Some(AnyValue {
                            value: Some(Value::StringValue(service.into())),
                        }),
                        ..Default::default()
                    }],
                    ..Default::default()
                }),
                scope_spans: vec![otlp::ScopeSpans {
                    spans: vec![span],
                    ..Default::default()
                }],
                ..Default::default()
            }],
        }
    }

    #[test]
    fn absurd_content_is_bounded_not_trusted() {
        let attrs: Vec<KeyValue> = (0..100_000)
            .map(|i| KeyValue {
                key: format!("k{i}"),
                ..Default::default()
            })
            .collect();
        let span = otlp::Span {
            trace_id: vec![1; 16],
            span_id: vec![2; 8],
            parent_span_id: vec![2; 8], // its own parent: kept, the analysis cuts the loop
            name: "é".repeat(10_000),
            start_time_unix_nano: u64::MAX, // the year 2554
            end_time_unix_nano: 0,          // ends before it starts
            attributes: attrs,
            ..Default::default()
        };
        let mut request = one_span(span, &"s".repeat(100_000));
        let decoded = decode_request(&mut request, &mut Interner::default(), true);
        let span = &decoded.spans[0];
        assert!(span.name.len() <= MAX_NAME_BYTES && span.name.chars().all(|c| c == 'é'));
        assert!(span.service.len() <= MAX_NAME_BYTES);
        assert_eq!(span.duration_ms(), 0);
        assert_eq!(decoded.attributes[0].decode().len(), MAX_KEPT_ATTRIBUTES);
    }

    fn string(key: &str, value: &str) -> KeyValue {
        KeyValue {
            key: key.into(),
            value: Some(AnyValue {
                value: Some(Value::StringValue(value.into())),
            }),
            ..Default::default()
        }
    }

    fn good_span(attributes: Vec<KeyValue>) -> otlp::Span {
        otlp::Span {
            trace_id: vec![1; 16],
            span_id: vec![2; 8],
            name: "GET /x".into(),
            kind: 2,
            attributes,
            ..Default::default()
        }
    }

    #[test]
    fn an_all_zero_span_id_is_rejected_like_other_invalid_ids() {
        let span = otlp::Span {
            span_id: vec![0; 8],
            ..good_span(vec![])
        };
        let body = one_span(span, "svc").encode_to_vec();
        let decoded = decode_protobuf(&body, &mut Interner::default(), false).unwrap();
        assert_eq!((decoded.spans.len(), decoded.rejected), (0, 1));
        assert!(
            decoded.first_error.unwrap().contains("span_id is all zero"),
            "the message names the field"
        );
    }

    #[test]
    fn kept_attributes_are_bounded_per_value_and_per_span_and_say_so() {
        let mut attributes = vec![
            string("budget.source", "default"),
            string("blob", &"é".repeat(2_000_000)), // 4 MB
        ];
        // 30 values of 1 KiB: the span's 16 KiB budget keeps the first ones, then one fits no
        // more; the small attribute after them still does.
        attributes.extend((0..30).map(|i| string(&format!("k{i}"), &"x".repeat(1024))));
        attributes.push(string("last", "small"));
        let request = one_span(good_span(attributes), "svc");
        let body = request.encode_to_vec();
        let fast = decode_protobuf(&body, &mut Interner::default(), true).unwrap();
        let slow = decode_request(&mut request.clone(), &mut Interner::default(), true);
        assert_eq!(fast.attributes, slow.attributes, "both paths keep the same");
        let kept = &fast.attributes[0];
        let values = kept.decode();
        let blob = values.iter().find(|kv| kv.key == "blob").unwrap();
        let Some(Value::StringValue(blob)) = blob.value.as_ref().and_then(|v| v.value.as_ref())
        else {
            panic!("the blob is kept as a string");
        };
        assert!(blob.len() < MAX_VALUE_BYTES + 64, "{}", blob.len());
        assert!(
            blob.ends_with("… [3995904 more bytes cut]"),
            "{}",
            &blob[blob.len() - 40..]
        );
        assert_eq!(kept.cut(), 1);
        assert!(kept.bytes_held() <= MAX_SPAN_ATTRIBUTE_BYTES + 64);
        assert!(kept.dropped() > 0);
        assert_eq!(values.len() + usize::from(kept.dropped()), 33);
        assert!(values.iter().any(|kv| kv.key == "last"));
        // The facts were read from every attribute, kept or not.
        assert_eq!(fast.spans[0].budget.source, Some(BudgetSource::Default));
    }

    /// The bytes of `request` with `from` (which must occur once) replaced by `to`, same length.
    fn patched(request: &ExportTraceServiceRequest, from: &[u8], to: &[u8]) -> Vec<u8> {
        let mut body = request.encode_to_vec();
        let at = body.windows(from.len()).position(|w| w == from).unwrap();
        body[at..at + to.len()].copy_from_slice(to);
        body
    }

    #[test]
    fn invalid_utf8_is_kept_with_replacement_characters_and_counted_on_every_path() {
        let request = one_span(good_span(vec![string("http.url", "/p?q=ok")]), "orders");
        let cases: [(&[u8], &[u8], &str); 3] = [
            (b"orders", b"ord\xffrs", "service.name"),
            (b"GET /x", b"GET \xff", "span name"),
            (b"/p?q=ok", b"/p?q=\xfe", "attribute \"http.url\""),
        ];
        for (from, to, what) in cases {
            let body = patched(&request, from, to);
            assert!(ExportTraceServiceRequest::decode(body.as_slice()).is_err());
            for keep in [false, true] {
                let fast = decode_protobuf(&body, &mut Interner::default(), keep)
                    .unwrap_or_else(|e| panic!("{what}, keep {keep}: {e}"));
                assert_eq!((fast.spans.len(), fast.rejected), (1, 0), "{what}");
                assert_eq!(fast.repaired.count, 1, "{what}");
                let message = fast.message();
                assert!(
                    message.contains("U+FFFD") && message.contains(what),
                    "{message}"
                );
                // record's path: repair, then prost, then the same spans.
                let repaired =
                    super::super::utf8::repair(&body, super::super::utf8::Message::Request)
                        .unwrap();
                assert_eq!(repaired.count, 1);
                let mut request =
                    ExportTraceServiceRequest::decode(repaired.bytes.as_slice()).unwrap();
                let slow = decode_request(&mut request, &mut Interner::default(), keep);
                assert_eq!(fast.spans, slow.spans, "{what}");
                assert_eq!(fast.attributes, slow.attributes, "{what}");
            }
        }
        let fast = decode_protobuf(
            &patched(&request, b"GET /x", b"GET \xff"),
            &mut Interner::default(),
            false,
        )
        .unwrap();
        assert_eq!(&*fast.spans[0].name, "GET \u{fffd}x");
    }

    #[test]
    fn the_interner_stays_bounded_under_ten_thousand_services_per_name() {
        let mut interner = Interner::default();
        for i in 0..(MAX_INTERNED + 10) {
            let _ = interner.intern(&format!("service-{i}"));
        }
        assert!(interner.strings.len() <= MAX_INTERNED);
        let a = interner.intern("orders");
        let b = interner.intern("orders");
        assert!(Arc::ptr_eq(&a, &b));
    }
}

#[cfg(test)]
mod properties {
    use super::*;
    use proptest::prelude::*;

    fn any_value() -> impl Strategy<Value = Value> {
        prop_oneof![
            any::<String>().prop_map(Value::StringValue),
            any::<i64>().prop_map(Value::IntValue),
            any::<f64>().prop_map(Value::DoubleValue),
            any::<bool>().prop_map(Value::BoolValue),
            proptest::collection::vec(any::<String>(), 0..3).prop_map(|v| {
                Value::ArrayValue(opentelemetry_proto::tonic::common::v1::ArrayValue {
                    values: v
                        .into_iter()
                        .map(|s| AnyValue {
                            value: Some(Value::StringValue(s)),
                        })
                        .collect(),
                })
            }),
        ]
    }

    fn key() -> impl Strategy<Value = String> {
        prop_oneof![
            Just(semconv::RECEIVED_MS.to_string()),
            Just(semconv::SOURCE.to_string()),
            Just(semconv::FORWARDED_MS.to_string()),
            Just(semconv::OUTCOME.to_string()),
            Just(semconv::HTTP_HEADER_BUDGET_MS.to_string()),
            Just(semconv::RPC_METADATA_GRPC_TIMEOUT.to_string()),
            Just(semconv::HTTP_HEADER_REQUEST_DEADLINE.to_string()),
            any::<String>(),
        ]
    }

    fn span() -> impl Strategy<Value = otlp::Span> {
        // Mostly well-formed ids, so the attribute paths are exercised too.
        let id = |len: usize| {
            prop_oneof![
                8 => proptest::collection::vec(any::<u8>(), len..=len),
                1 => proptest::collection::vec(any::<u8>(), 0..20),
            ]
        };
        let parent = prop_oneof![
            2 => Just(Vec::new()),
            6 => proptest::collection::vec(any::<u8>(), 8..=8),
            1 => proptest::collection::vec(any::<u8>(), 0..12),
        ];
        (
            id(16),
            id(8),
            parent,
            any::<String>(),
            any::<i32>(),
            any::<u64>(),
            any::<u64>(),
            proptest::collection::vec((key(), any_value()), 0..6),
        )
            .prop_map(
                |(trace_id, span_id, parent_span_id, name, kind, start, end, attrs)| otlp::Span {
                    trace_id,
                    span_id,
                    parent_span_id,
                    name,
                    kind,
                    start_time_unix_nano: start,
                    end_time_unix_nano: end,
                    attributes: attrs
                        .into_iter()
                        .map(|(key, v)| KeyValue {
                            key,
                            value: Some(AnyValue { value: Some(v) }),
                            ..Default::default()
                        })
                        .collect(),
                    ..Default::default()
                },
            )
    }

    /// A length-delimited field, by hand (prost never writes a field twice; other encoders may).
    fn len_field(tag: u32, bytes: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        prost::encoding::encode_key(tag, prost::encoding::WireType::LengthDelimited, &mut out);
        prost::encoding::encode_varint(bytes.len() as u64, &mut out);
        out.extend_from_slice(bytes);
        out
    }

    #[test]
    fn repeated_value_fields_merge_as_prost_merges_them() {
        let kv = |key: &str, value: Value| {
            KeyValue {
                key: key.into(),
                value: Some(AnyValue { value: Some(value) }),
                ..Default::default()
            }
            .encode_to_vec()
        };
        let header = |v: &str| {
            Value::ArrayValue(opentelemetry_proto::tonic::common::v1::ArrayValue {
                values: vec![AnyValue {
                    value: Some(Value::StringValue(v.into())),
                }],
            })
        };
        // Concatenated encodings are one message with each field twice.
        let attributes = [
            [
                kv(semconv::RECEIVED_MS, Value::StringValue("x".into())),
                kv(semconv::RECEIVED_MS, Value::IntValue(800)),
            ]
            .concat(),
            [
                kv(semconv::HTTP_HEADER_GRPC_TIMEOUT, header("2S")),
                kv(semconv::HTTP_HEADER_GRPC_TIMEOUT, header("9S")),
            ]
            .concat(),
            [
                kv(semconv::FORWARDED_MS, Value::IntValue(5)),
                kv(semconv::FORWARDED_MS, Value::BoolValue(true)),
            ]
            .concat(),
        ];
        let mut span = otlp::Span {
            trace_id: vec![1; 16],
            span_id: vec![2; 8],
            name: "GET /".into(),
            kind: 2,
            ..Default::default()
        }
        .encode_to_vec();
        for a in &attributes {
            span.extend(len_field(9, a));
        }
        let body = len_field(1, &len_field(2, &len_field(2, &span)));
        let fast = decode_protobuf(&body, &mut Interner::default(), true).unwrap();
        let mut request = ExportTraceServiceRequest::decode(body.as_slice()).unwrap();
        let slow = decode_request(&mut request, &mut Interner::default(), true);
        assert_eq!(fast.spans, slow.spans);
        assert_eq!(fast.attributes, slow.attributes);
        assert_eq!(fast.spans[0].budget.received_ms, Some(800));
        assert_eq!(fast.spans[0].budget.forwarded_ms, None);
    }

    #[test]
    fn every_key_of_the_contract_is_matched_as_bytes() {
        let carriers = Carriers::builtin();
        let slots = [
            (semconv::RECEIVED_MS, Slot::ReceivedMs),
            (semconv::SOURCE, Slot::Source),
            (semconv::DEFAULT_MS, Slot::DefaultMs),
            (semconv::QUEUE_WAIT_MS, Slot::QueueWaitMs),
            (semconv::REMAINING_AT_START_MS, Slot::RemainingAtStartMs),
            (semconv::OUTCOME, Slot::Outcome),
            (semconv::REMAINING_MS, Slot::RemainingMs),
            (semconv::FORWARDED_MS, Slot::ForwardedMs),
            (semconv::TIMEOUT_MS, Slot::TimeoutMs),
            (semconv::SLA_MS, Slot::SlaMs),
            (semconv::ATTEMPT, Slot::Attempt),
            (semconv::HTTP_RESPONSE_STATUS_CODE, Slot::HttpStatus),
            (semconv::HTTP_STATUS_CODE, Slot::HttpStatusOld),
            (semconv::RPC_GRPC_STATUS_CODE, Slot::RpcStatus),
            (semconv::RPC_STATUS_CODE, Slot::RpcStatus),
            (semconv::RPC_RESPONSE_STATUS_CODE, Slot::RpcStatus),
            (semconv::ERROR_TYPE, Slot::ErrorType),
        ];
        for (key, slot) in slots {
            assert_eq!(Slot::of(key.as_bytes(), carriers), Some(slot), "{key}");
        }
        for key in [
            semconv::HTTP_HEADER_BUDGET_MS,
            semconv::HTTP_HEADER_GRPC_TIMEOUT,
            semconv::RPC_METADATA_GRPC_TIMEOUT,
            "rpc.grpc.request.metadata.grpc-timeout",
        ] {
            assert!(
                matches!(Slot::of(key.as_bytes(), carriers), Some(Slot::Carrier(_))),
                "{key}"
            );
        }
        for key in [
            &b"budget.received_m"[..],
            b"http.request.header.\xff",
            b"url.path",
            b"",
        ] {
            assert_eq!(Slot::of(key, carriers), None, "{key:?}");
        }
        assert_eq!(
            Slot::of(b"http.request.header.x-budget-ms\xff", carriers),
            None
        );
    }

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
            string in field_like(wire::tag(1, wire::LEN)),
            int in field_like(wire::tag(3, wire::VARINT)),
            key in field_like(wire::tag(1, wire::LEN)),
            value in field_like(wire::tag(2, wire::LEN)),
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

        #[test]
        fn any_request_decodes_without_panicking_and_every_span_is_counted(
            spans in proptest::collection::vec(span(), 0..12)
        ) {
            let total = spans.len();
            let valid = spans
                .iter()
                .filter(|s| {
                    s.trace_id.len() == 16
                        && s.trace_id.iter().any(|b| *b != 0)
                        && s.span_id.len() == 8
                        && s.span_id.iter().any(|b| *b != 0)
                        && matches!(s.parent_span_id.len(), 0 | 8)
                })
                .count();
            let mut request = ExportTraceServiceRequest {
                resource_spans: vec![otlp::ResourceSpans {
                    scope_spans: vec![otlp::ScopeSpans { spans, ..Default::default() }],
                    ..Default::default()
                }],
            };
            let decoded = decode_request(&mut request, &mut Interner::default(), true);
            prop_assert_eq!(decoded.spans.len(), valid);
            prop_assert_eq!(decoded.spans.len() as u64 + decoded.rejected, total as u64);
            prop_assert_eq!(decoded.attributes.len(), valid);
            for s in &decoded.spans {
                prop_assert!(s.name.len() <= MAX_NAME_BYTES);
                prop_assert!(s.parent_span_id != Some(SpanId([0; 8])));
            }
        }

        #[test]
        fn reading_the_bytes_in_place_gives_what_prost_then_decode_request_give(
            spans in proptest::collection::vec(
                (span(), proptest::option::of(0i32..4)), 0..12),
            service in proptest::option::of("[a-z]{1,8}"),
            split in 0usize..12,
            keep in any::<bool>(),
        ) {
            let spans: Vec<otlp::Span> = spans
                .into_iter()
                .map(|(mut s, code)| {
                    s.status = code.map(|code| otlp::Status { code, ..Default::default() });
                    s
                })
                .collect();
            let resource = service.map(|name| opentelemetry_proto::tonic::resource::v1::Resource {
                attributes: vec![KeyValue {
                    key: "service.name".into(),
                    value: Some(AnyValue { value: Some(Value::StringValue(name)) }),
                    ..Default::default()
                }],
                ..Default::default()
            });
            // Two scopes, so spans of one resource come from more than one list.
            let split = split.min(spans.len());
            let (a, b) = spans.split_at(split);
            let request = ExportTraceServiceRequest {
                resource_spans: vec![otlp::ResourceSpans {
                    resource,
                    scope_spans: vec![
                        otlp::ScopeSpans { spans: a.to_vec(), ..Default::default() },
                        otlp::ScopeSpans { spans: b.to_vec(), ..Default::default() },
                    ],
                    ..Default::default()
                }],
            };
            let bytes = request.encode_to_vec();
            let mut interner = Interner::default();
            let fast = decode_protobuf(&bytes, &mut interner, keep).unwrap();
            let mut decoded = ExportTraceServiceRequest::decode(bytes.as_slice()).unwrap();
            let slow = decode_request(&mut decoded, &mut interner, keep);
            prop_assert_eq!(&fast.spans, &slow.spans);
            prop_assert_eq!(&fast.attributes, &slow.attributes);
            if keep {
                // What is kept decodes to exactly the valid spans' attributes, in order.
                let expected: Vec<Vec<KeyValue>> = request
                    .resource_spans
                    .iter()
                    .flat_map(|r| &r.scope_spans)
                    .flat_map(|s| &s.spans)
                    .filter(|s| decode_span(s, &Arc::from("x"), &mut Interner::default(), Carriers::builtin()).is_ok())
                    .map(|s| s.attributes.iter().take(MAX_KEPT_ATTRIBUTES).cloned().collect())
                    .collect();
                let kept: Vec<Vec<KeyValue>> =
                    fast.attributes.iter().map(RawAttributes::decode).collect();
                prop_assert_eq!(kept, expected);
            }
            prop_assert_eq!(fast.rejected, slow.rejected);
            prop_assert_eq!(&fast.first_error, &slow.first_error);
            prop_assert_eq!(fast.total(), count_spans(&request));
        }

        #[test]
        fn arbitrary_bytes_never_panic_the_in_place_path(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
            let fast = decode_protobuf(&bytes, &mut Interner::default(), true);
            // Whatever prost reads in full, the in-place path reads too, with the same spans.
            if let Ok(mut request) = ExportTraceServiceRequest::decode(bytes.as_slice()) {
                let slow = decode_request(&mut request, &mut Interner::default(), true);
                let fast = fast.unwrap();
                prop_assert_eq!(fast.spans, slow.spans);
                prop_assert_eq!(fast.rejected, slow.rejected);
            }
        }

        #[test]
        fn arbitrary_bytes_never_panic_the_protobuf_path(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
            if let Ok(mut request) = ExportTraceServiceRequest::decode(bytes.as_slice()) {
                let decoded = decode_request(&mut request, &mut Interner::default(), false);
                prop_assert_eq!(decoded.spans.len() as u64 + decoded.rejected, count_spans(&request));
            }
        }
    }
}

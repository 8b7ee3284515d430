//! The contract's reading of one span: its attributes (`budget.*`, statuses, errors) and, when
//! `budget.*` says nothing, its captured headers (the carriers) -> [`BudgetFacts`] (CONVENTIONS
//! §2, §5).
//!
//! Enters: each attribute's key and value, borrowed from a decoded `KeyValue` or straight from
//! the protobuf bytes (`ValueRef`), in the span's order. Leaves: the span's budget facts. Both
//! decoding paths read through `FactsReader`, so they give the same facts.

use std::sync::Arc;

use deadline_budget::analysis::{BudgetFacts, BudgetSource, Cause, Outcome, SpanKind, cause_named};
use deadline_budget::carrier::{Carriers, Received};
use deadline_budget::semconv;
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value::Value};

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
    facts.finish(kind, start_unix_nano, &mut |name| Arc::from(name))
}

/// An attribute value as the facts reader sees it, borrowed from a decoded `AnyValue` or
/// straight from the protobuf bytes (strings are checked for UTF-8 only when read).
// `repr(C)`: the tag a word of its own and every payload at offset 8. Laid out by Rust, the
// array's `has_first` sat in the tag's word, and each move of a value was copied as two
// overlapping 4-byte halves, a load the store buffer could not forward (a stall on every
// budget attribute read).
#[derive(Clone, Copy, Debug, Default)]
#[repr(C)]
pub(super) enum ValueRef<'a> {
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
    pub(super) fn str(self) -> Option<&'a str> {
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

pub(super) fn value_ref(value: Option<&AnyValue>) -> ValueRef<'_> {
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
pub(super) enum Fact {
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
    /// A key that names a call's callee, at this position in `CALLEE_NAME_KEYS` (the first
    /// present wins).
    CalleeName(usize),
    /// A URL whose host names a call's callee, at this position in `CALLEE_NAME_KEYS`.
    CalleeUrl(usize),
    /// A captured request header or metadata entry of the carrier at this position.
    Carrier(usize),
}

/// The keys [`Fact::of`] matches, as bytes: a key is matched before (and without) a UTF-8 check,
/// which cost more than the match itself (docs/performance.md, "The decoder's hot paths"). A
/// key equal to one of these is valid UTF-8, since they are `str`s.
mod key {
    use super::semconv;

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
    pub const PEER_SERVICE: &[u8] = semconv::CALLEE_NAME_KEYS[0].as_bytes();
    pub const SERVER_ADDRESS: &[u8] = semconv::CALLEE_NAME_KEYS[1].as_bytes();
    pub const NET_PEER_NAME: &[u8] = semconv::CALLEE_NAME_KEYS[2].as_bytes();
    pub const URL_FULL: &[u8] = semconv::CALLEE_NAME_KEYS[3].as_bytes();
    pub const HTTP_URL: &[u8] = semconv::CALLEE_NAME_KEYS[4].as_bytes();
    pub const DB_SYSTEM_NAME: &[u8] = semconv::CALLEE_NAME_KEYS[5].as_bytes();
    pub const DB_SYSTEM: &[u8] = semconv::CALLEE_NAME_KEYS[6].as_bytes();
    pub const CARRIER_PREFIXES: [&[u8]; 3] = [
        semconv::HTTP_REQUEST_HEADER_PREFIX.as_bytes(),
        semconv::RPC_REQUEST_METADATA_PREFIX.as_bytes(),
        semconv::RPC_GRPC_REQUEST_METADATA_PREFIX.as_bytes(),
    ];
}

impl Fact {
    /// Inline, so most keys (not ours: a look at the first byte skips them) cost no call.
    #[inline(always)]
    pub(super) fn of(key_bytes: &[u8], carriers: &Carriers) -> Option<Fact> {
        if !matches!(
            key_bytes.first(),
            Some(b'b' | b'h' | b'r' | b'e' | b'p' | b's' | b'n' | b'd' | b'u')
        ) {
            return None;
        }
        Fact::matching(key_bytes, carriers)
    }

    fn matching(key_bytes: &[u8], carriers: &Carriers) -> Option<Fact> {
        use key::*;
        Some(match key_bytes {
            RECEIVED_MS => Fact::ReceivedMs,
            SOURCE => Fact::Source,
            DEFAULT_MS => Fact::DefaultMs,
            QUEUE_WAIT_MS => Fact::QueueWaitMs,
            REMAINING_AT_START_MS => Fact::RemainingAtStartMs,
            OUTCOME => Fact::Outcome,
            REMAINING_MS => Fact::RemainingMs,
            FORWARDED_MS => Fact::ForwardedMs,
            TIMEOUT_MS => Fact::TimeoutMs,
            SLA_MS => Fact::SlaMs,
            ATTEMPT => Fact::Attempt,
            HTTP_RESPONSE_STATUS_CODE => Fact::HttpStatus,
            HTTP_STATUS_CODE => Fact::HttpStatusOld,
            RPC_GRPC_STATUS_CODE | RPC_STATUS_CODE | RPC_RESPONSE_STATUS_CODE => Fact::RpcStatus,
            ERROR_TYPE => Fact::ErrorType,
            PEER_SERVICE => Fact::CalleeName(0),
            SERVER_ADDRESS => Fact::CalleeName(1),
            NET_PEER_NAME => Fact::CalleeName(2),
            URL_FULL => Fact::CalleeUrl(3),
            HTTP_URL => Fact::CalleeUrl(4),
            DB_SYSTEM_NAME => Fact::CalleeName(5),
            DB_SYSTEM => Fact::CalleeName(6),
            _ => {
                let name = CARRIER_PREFIXES
                    .iter()
                    .find_map(|prefix| key_bytes.strip_prefix(*prefix))?;
                // The prefixes are ASCII: the name is UTF-8 exactly when the whole key is.
                let name = std::str::from_utf8(name).ok()?;
                Fact::Carrier(carriers.position(name)?)
            }
        })
    }
}

/// The budget facts of one span, attribute by attribute, in the span's order.
#[derive(Debug)]
pub(super) struct FactsReader<'a> {
    facts: BudgetFacts,
    carriers: &'a Carriers,
    /// The first captured value of each carrier, by the carrier's position.
    captured: Vec<(usize, &'a str)>,
    http_status_old: Option<i64>,
    /// Whether the span has an `exception` event (set by the decoder, which reads events).
    pub(super) exception_event: bool,
    /// The callee names the span gives, by their place in `CALLEE_NAME_KEYS`.
    callee_names: [Option<&'a str>; semconv::CALLEE_NAME_KEYS.len()],
    /// Its first exception event's type.
    exception_type: Option<&'a str>,
    /// What the failure's words named: a missing answer, another cause.
    no_answer: bool,
    other_cause: bool,
}

impl<'a> FactsReader<'a> {
    pub(super) fn new(carriers: &'a Carriers) -> Self {
        FactsReader {
            facts: BudgetFacts::default(),
            carriers,
            captured: Vec::new(),
            http_status_old: None,
            exception_event: false,
            callee_names: [None; semconv::CALLEE_NAME_KEYS.len()],
            exception_type: None,
            no_answer: false,
            other_cause: false,
        }
    }

    /// An attribute of the span's first `exception` event (its type, its message): read for
    /// what they say of the failure's cause.
    pub(super) fn exception_attribute(&mut self, key: &[u8], value: ValueRef<'a>) {
        let Some(text) = value.str() else {
            return;
        };
        if key == semconv::EXCEPTION_TYPE.as_bytes() {
            self.exception_type.get_or_insert(text);
        } else if key != semconv::EXCEPTION_MESSAGE.as_bytes() {
            return;
        }
        self.failure_words(text);
    }

    /// The span's status message: read for what it says of the failure's cause.
    pub(super) fn failure_words(&mut self, text: &str) {
        match cause_named(text) {
            Some(Cause::NoAnswer) => self.no_answer = true,
            Some(Cause::Other) => self.other_cause = true,
            None => {}
        }
    }

    pub(super) fn attribute(&mut self, key: &[u8], value: ValueRef<'a>) {
        if let Some(fact) = Fact::of(key, self.carriers) {
            self.set(fact, value);
        }
    }

    pub(super) fn set(&mut self, fact: Fact, value: ValueRef<'a>) {
        let facts = &mut self.facts;
        match fact {
            Fact::ReceivedMs => facts.received_ms = value.int(),
            Fact::Source => {
                facts.source = value
                    .str()
                    .and_then(|v| BudgetSource::parse_with(v, self.carriers));
            }
            Fact::DefaultMs => facts.default_ms = value.int(),
            Fact::QueueWaitMs => facts.queue_wait_ms = value.int(),
            Fact::RemainingAtStartMs => facts.remaining_at_start_ms = value.int(),
            Fact::Outcome => facts.outcome = value.str().and_then(Outcome::parse),
            Fact::RemainingMs => facts.remaining_ms = value.int(),
            Fact::ForwardedMs => facts.forwarded_ms = value.int(),
            Fact::TimeoutMs => facts.timeout_ms = value.int(),
            Fact::SlaMs => facts.sla_ms = value.int(),
            Fact::Attempt => facts.attempt = value.int(),
            Fact::HttpStatus => facts.http_status = value.int(),
            Fact::HttpStatusOld => self.http_status_old = value.int(),
            Fact::RpcStatus => facts.rpc_status = facts.rpc_status.or(value.grpc_code()),
            Fact::ErrorType => facts.error_type = value.text(),
            Fact::CalleeName(i) => self.callee_names[i] = value.str().filter(|v| !v.is_empty()),
            Fact::CalleeUrl(i) => self.callee_names[i] = value.str().and_then(url_host),
            Fact::Carrier(i) => {
                if let Some(v) = value.header()
                    && !self.captured.iter().any(|(at, _)| *at == i)
                {
                    self.captured.push((i, v));
                }
            }
        }
    }

    /// The span's facts; `intern` keeps the one copy of a callee's name.
    pub(super) fn finish(
        mut self,
        kind: SpanKind,
        start_unix_nano: u64,
        intern: &mut dyn FnMut(&str) -> Arc<str>,
    ) -> BudgetFacts {
        let facts = &mut self.facts;
        facts.http_status = facts.http_status.or(self.http_status_old);
        facts.exception_event = self.exception_event;
        if let Some(e) = &facts.error_type {
            match cause_named(e) {
                Some(Cause::NoAnswer) => self.no_answer = true,
                Some(Cause::Other) => self.other_cause = true,
                None => {}
            }
        }
        if facts.error_type.is_none() {
            facts.error_type = self.exception_type.map(Arc::from);
        }
        facts.other_cause = self.other_cause && !self.no_answer;
        if kind == SpanKind::Client {
            facts.callee_name = self.callee_names.iter().flatten().next().map(|n| intern(n));
        }
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

/// The host of an absolute URL (`http://billing:8080/charge` → `billing`), as `server.address`
/// names it: no scheme, user, port, path or query. `None` when there is no host to read.
fn url_host(url: &str) -> Option<&str> {
    let (_, rest) = url.split_once("://")?;
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let host = if let Some(bracketed) = host_port.strip_prefix('[') {
        bracketed.split_once(']').map(|(ip6, _)| ip6)?
    } else {
        host_port.split(':').next().unwrap_or("")
    };
    (!host.is_empty()).then_some(host)
}

#[cfg(test)]
mod tests {
    use super::*;
    use deadline_budget::semconv;

    #[test]
    fn a_urls_host_names_its_callee_as_server_address_would() {
        for (url, host) in [
            ("http://billing:8080/charge?x=1", Some("billing")),
            ("https://api.example.com", Some("api.example.com")),
            ("http://user:secret@pay.internal/v1", Some("pay.internal")),
            ("http://[::1]:9000/x", Some("::1")),
            ("http://127.0.0.1:24400/?ms=1500", Some("127.0.0.1")),
            ("http:///path", None),
            ("/relative/path", None),
            ("http://[::1/x", None),
            ("", None),
        ] {
            assert_eq!(url_host(url), host, "{url}");
        }
        let carriers = Carriers::builtin();
        assert_eq!(Fact::of(b"url.full", carriers), Some(Fact::CalleeUrl(3)));
        assert_eq!(Fact::of(b"http.url", carriers), Some(Fact::CalleeUrl(4)));
    }

    #[test]
    fn every_key_of_the_contract_is_matched_as_bytes() {
        let carriers = Carriers::builtin();
        let slots = [
            (semconv::RECEIVED_MS, Fact::ReceivedMs),
            (semconv::SOURCE, Fact::Source),
            (semconv::DEFAULT_MS, Fact::DefaultMs),
            (semconv::QUEUE_WAIT_MS, Fact::QueueWaitMs),
            (semconv::REMAINING_AT_START_MS, Fact::RemainingAtStartMs),
            (semconv::OUTCOME, Fact::Outcome),
            (semconv::REMAINING_MS, Fact::RemainingMs),
            (semconv::FORWARDED_MS, Fact::ForwardedMs),
            (semconv::TIMEOUT_MS, Fact::TimeoutMs),
            (semconv::SLA_MS, Fact::SlaMs),
            (semconv::ATTEMPT, Fact::Attempt),
            (semconv::HTTP_RESPONSE_STATUS_CODE, Fact::HttpStatus),
            (semconv::HTTP_STATUS_CODE, Fact::HttpStatusOld),
            (semconv::RPC_GRPC_STATUS_CODE, Fact::RpcStatus),
            (semconv::RPC_STATUS_CODE, Fact::RpcStatus),
            (semconv::RPC_RESPONSE_STATUS_CODE, Fact::RpcStatus),
            (semconv::ERROR_TYPE, Fact::ErrorType),
        ];
        for (key, fact) in slots {
            assert_eq!(Fact::of(key.as_bytes(), carriers), Some(fact), "{key}");
        }
        for key in [
            semconv::HTTP_HEADER_BUDGET_MS,
            semconv::HTTP_HEADER_GRPC_TIMEOUT,
            semconv::RPC_METADATA_GRPC_TIMEOUT,
            "rpc.grpc.request.metadata.grpc-timeout",
        ] {
            assert!(
                matches!(Fact::of(key.as_bytes(), carriers), Some(Fact::Carrier(_))),
                "{key}"
            );
        }
        for key in [
            &b"budget.received_m"[..],
            b"http.request.header.\xff",
            b"url.path",
            b"",
        ] {
            assert_eq!(Fact::of(key, carriers), None, "{key:?}");
        }
        assert_eq!(
            Fact::of(b"http.request.header.x-budget-ms\xff", carriers),
            None
        );
    }
}

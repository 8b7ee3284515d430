//! A kept chain made ready to send, and many of them as one export request, written straight
//! from the spans as received (no decoding into messages and back).
//!
//! [`prepare`]: the chain's spans, each once (a span sent twice keeps its last copy), and on its
//! root span budget-top's verdict as two attributes more, `budget_top.findings` (the kinds found,
//! comma-separated in the contract's order; empty for a sampled clean chain) and
//! `budget_top.wasted_ms`: a protobuf message read twice merges its repeated fields, so they are
//! appended to the span's bytes. The root is the span without a parent, or, when it has not
//! arrived, the earliest span whose parent is not in the chain.
//!
//! [`encode`]: an `ExportTraceServiceRequest` of many chains, one `ResourceSpans` per resource
//! and one `ScopeSpans` per scope under it, every string made valid UTF-8 (a backend refuses a
//! whole request for one bad byte, and the receivers only checked the strings they read).

use std::borrow::Cow;
use std::sync::Arc;

use deadline_budget::analysis::{FindingKind, KindSet};
use foldhash::{HashMap, HashMapExt as _, HashSet};
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value::Value};
use prost::Message as _;
use prost::encoding::{WireType, encode_key, encode_varint, encoded_len_varint};

use crate::batch::Scope;
use crate::ingest::decode::protobuf_wire::{self, Field};
use crate::ingest::decode::utf8;
use crate::store::ReceivedChain;

/// The attribute naming the kinds of the chain's findings.
pub const FINDINGS: &str = "budget_top.findings";
/// The attribute giving the chain's wasted ms.
pub const WASTED_MS: &str = "budget_top.wasted_ms";

/// What budget-top found in a chain, for its root span.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Verdict {
    /// The kinds of its findings.
    pub kinds: KindSet,
    /// Its wasted ms.
    pub wasted_ms: i64,
}

/// What one span's bytes say of its place in the chain.
#[derive(Clone, Copy, Debug, Default)]
struct Place {
    span_id: [u8; 8],
    parent: Option<[u8; 8]>,
    start: u64,
}

fn place(span: &[u8]) -> Place {
    let mut out = Place::default();
    for field in protobuf_wire::fields(span) {
        match field {
            Ok((2, Field::Len(id))) => {
                if let Ok(id) = <[u8; 8]>::try_from(id) {
                    out.span_id = id;
                }
            }
            Ok((4, Field::Len(id))) => {
                out.parent = <[u8; 8]>::try_from(id).ok().filter(|id| *id != [0; 8]);
            }
            Ok((7, Field::Fixed64(start))) => out.start = start,
            Ok(_) => {}
            Err(_) => break,
        }
    }
    out
}

/// The chain ready to send: each span once, the verdict on its root (when given).
pub fn prepare(chain: &ReceivedChain, verdict: Option<Verdict>) -> ReceivedChain {
    let spans: Vec<(&[u8], &Arc<Scope>, Place)> = chain
        .spans()
        .map(|(s, scope)| (s, scope, place(s)))
        .collect();
    // The last copy of each span id.
    let mut last: HashMap<[u8; 8], usize> = HashMap::with_capacity(spans.len());
    for (i, (_, _, p)) in spans.iter().enumerate() {
        last.insert(p.span_id, i);
    }
    let kept: Vec<usize> = (0..spans.len())
        .filter(|i| last.get(&spans[*i].2.span_id) == Some(i))
        .collect();
    let root = verdict.and_then(|_| {
        let ids: HashSet<[u8; 8]> = kept.iter().map(|i| spans[*i].2.span_id).collect();
        let earliest = |filter: &dyn Fn(&Place) -> bool| {
            kept.iter()
                .copied()
                .filter(|i| filter(&spans[*i].2))
                .min_by_key(|i| spans[*i].2.start)
        };
        earliest(&|p| p.parent.is_none())
            .or_else(|| earliest(&|p| p.parent.is_some_and(|parent| !ids.contains(&parent))))
            .or_else(|| earliest(&|_| true))
    });
    let mut out = ReceivedChain::default();
    for i in kept {
        let (bytes, scope, _) = spans[i];
        match (root, verdict) {
            (Some(root), Some(verdict)) if root == i => {
                out.push(&with_verdict(bytes, verdict), scope);
            }
            _ => {
                out.push(bytes, scope);
            }
        }
    }
    out.shrink();
    out
}

/// The span's bytes with the verdict's two attributes after them.
fn with_verdict(span: &[u8], verdict: Verdict) -> Vec<u8> {
    let kinds: Vec<&str> = FindingKind::ALL
        .iter()
        .filter(|k| verdict.kinds.contains(**k))
        .map(|k| k.as_str())
        .collect();
    let attributes = [
        KeyValue {
            key: FINDINGS.into(),
            value: Some(AnyValue {
                value: Some(Value::StringValue(kinds.join(","))),
            }),
            ..KeyValue::default()
        },
        KeyValue {
            key: WASTED_MS.into(),
            value: Some(AnyValue {
                value: Some(Value::IntValue(verdict.wasted_ms)),
            }),
            ..KeyValue::default()
        },
    ];
    let mut out = span.to_vec();
    for kv in attributes {
        encode_key(9, WireType::LengthDelimited, &mut out);
        encode_varint(kv.encoded_len() as u64, &mut out);
        kv.encode_raw(&mut out);
    }
    out
}

/// The message `bytes` of `kind` with every string valid UTF-8 (as it is, nearly always).
fn valid(bytes: &[u8], kind: utf8::Message) -> Cow<'_, [u8]> {
    match utf8::repair(bytes, kind) {
        Some(repaired) if repaired.count > 0 => repaired.bytes.into(),
        _ => bytes.into(),
    }
}

/// The spans of one scope of one resource, in an export request being written.
struct ScopeGroup<'a> {
    scope: &'a [u8],
    spans: Vec<Cow<'a, [u8]>>,
}

/// One resource's scopes, in an export request being written.
struct ResourceGroup<'a> {
    resource: &'a [u8],
    scopes: Vec<ScopeGroup<'a>>,
}

/// One export request holding every span of `chains`: its protobuf bytes.
pub fn encode<'a>(chains: impl IntoIterator<Item = &'a ReceivedChain>) -> Vec<u8> {
    // Resources in the order first seen, each with its scopes in the order first seen.
    let mut resources: Vec<ResourceGroup<'_>> = Vec::new();
    let mut index: HashMap<&Scope, (usize, usize)> = HashMap::new();
    for chain in chains {
        for (span, scope) in chain.spans() {
            let (r, s) = *index.entry(&**scope).or_insert_with(|| {
                let r = match resources
                    .iter()
                    .position(|g| g.resource == &*scope.resource)
                {
                    Some(r) => r,
                    None => {
                        resources.push(ResourceGroup {
                            resource: &scope.resource,
                            scopes: Vec::new(),
                        });
                        resources.len() - 1
                    }
                };
                resources[r].scopes.push(ScopeGroup {
                    scope: &scope.scope,
                    spans: Vec::new(),
                });
                (r, resources[r].scopes.len() - 1)
            });
            resources[r].scopes[s]
                .spans
                .push(valid(span, utf8::Message::Span));
        }
    }
    let field_len = |len: usize| 1 + encoded_len_varint(len as u64) + len;
    let mut out = Vec::new();
    for group in &resources {
        let resource = valid(group.resource, utf8::Message::ResourceSpans);
        let scopes: Vec<(Cow<'_, [u8]>, usize)> = group
            .scopes
            .iter()
            .map(|g| {
                let scope = valid(g.scope, utf8::Message::ScopeSpans);
                let len = scope.len() + g.spans.iter().map(|s| field_len(s.len())).sum::<usize>();
                (scope, len)
            })
            .collect();
        let resource_len =
            resource.len() + scopes.iter().map(|(_, l)| field_len(*l)).sum::<usize>();
        encode_key(1, WireType::LengthDelimited, &mut out);
        encode_varint(resource_len as u64, &mut out);
        out.extend_from_slice(&resource);
        for ((scope, len), g) in scopes.iter().zip(&group.scopes) {
            encode_key(2, WireType::LengthDelimited, &mut out);
            encode_varint(*len as u64, &mut out);
            out.extend_from_slice(scope);
            for span in &g.spans {
                encode_key(2, WireType::LengthDelimited, &mut out);
                encode_varint(span.len() as u64, &mut out);
                out.extend_from_slice(span);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::fields_but;
    use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
    use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans, Span};

    fn string(key: &str, value: &str) -> KeyValue {
        KeyValue {
            key: key.into(),
            value: Some(AnyValue {
                value: Some(Value::StringValue(value.into())),
            }),
            ..KeyValue::default()
        }
    }

    fn span(id: u8, parent: Option<u8>, start: u64, name: &str) -> Span {
        Span {
            trace_id: vec![1; 16],
            span_id: vec![id; 8],
            parent_span_id: parent.map(|p| vec![p; 8]).unwrap_or_default(),
            name: name.into(),
            start_time_unix_nano: start,
            end_time_unix_nano: start + 10,
            attributes: vec![string("k", name)],
            ..Span::default()
        }
    }

    fn scope_of(service: &str) -> Arc<Scope> {
        let resource = ResourceSpans {
            resource: Some(opentelemetry_proto::tonic::resource::v1::Resource {
                attributes: vec![string("service.name", service)],
                ..Default::default()
            }),
            schema_url: "https://opentelemetry.io/schemas/1.26.0".into(),
            ..ResourceSpans::default()
        };
        let scope = ScopeSpans {
            scope: Some(
                opentelemetry_proto::tonic::common::v1::InstrumentationScope {
                    name: "lib".into(),
                    version: "1.2".into(),
                    ..Default::default()
                },
            ),
            ..ScopeSpans::default()
        };
        Arc::new(Scope {
            resource: fields_but(&resource.encode_to_vec(), 2).unwrap().into(),
            scope: fields_but(&scope.encode_to_vec(), 2).unwrap().into(),
        })
    }

    #[test]
    fn a_prepared_chain_is_sent_whole_once_with_the_verdict_on_its_root() {
        let (front, back) = (scope_of("frontend"), scope_of("orders"));
        let mut chain = ReceivedChain::default();
        chain.push(&span(2, Some(1), 20, "child").encode_to_vec(), &back);
        chain.push(&span(1, None, 10, "root").encode_to_vec(), &front);
        chain.push(&span(3, Some(2), 30, "old copy").encode_to_vec(), &back);
        chain.push(&span(3, Some(2), 30, "grandchild").encode_to_vec(), &back);
        let mut kinds = KindSet::default();
        kinds.insert(FindingKind::OrphanedWork);
        kinds.insert(FindingKind::BudgetReset);
        let prepared = prepare(
            &chain,
            Some(Verdict {
                kinds,
                wasted_ms: 625,
            }),
        );
        assert_eq!(prepared.len(), 3);
        let request = ExportTraceServiceRequest::decode(encode([&prepared]).as_slice()).unwrap();
        assert_eq!(request.resource_spans.len(), 2);
        let mut names = Vec::new();
        for resource in &request.resource_spans {
            assert_eq!(
                resource.schema_url,
                "https://opentelemetry.io/schemas/1.26.0"
            );
            assert_eq!(resource.scope_spans.len(), 1);
            let scope = &resource.scope_spans[0];
            assert_eq!(scope.scope.as_ref().unwrap().version, "1.2");
            for s in &scope.spans {
                names.push(s.name.clone());
                let extra: Vec<&KeyValue> = s
                    .attributes
                    .iter()
                    .filter(|a| a.key.starts_with("budget_top."))
                    .collect();
                if s.name == "root" {
                    assert_eq!(extra.len(), 2, "{s:?}");
                    assert_eq!(
                        extra[0].value.as_ref().unwrap().value,
                        Some(Value::StringValue("budget_reset,orphaned_work".into()))
                    );
                    assert_eq!(
                        extra[1].value.as_ref().unwrap().value,
                        Some(Value::IntValue(625))
                    );
                } else {
                    assert!(extra.is_empty());
                }
                assert_eq!(s.attributes[0], string("k", &s.name));
            }
        }
        names.sort();
        assert_eq!(names, ["child", "grandchild", "root"]);
    }

    #[test]
    fn without_its_root_the_earliest_span_whose_parent_is_missing_carries_the_verdict() {
        let scope = scope_of("orders");
        let mut chain = ReceivedChain::default();
        chain.push(&span(3, Some(2), 30, "late").encode_to_vec(), &scope);
        chain.push(&span(2, Some(1), 20, "top").encode_to_vec(), &scope);
        let prepared = prepare(&chain, Some(Verdict::default()));
        let request = ExportTraceServiceRequest::decode(encode([&prepared]).as_slice()).unwrap();
        for s in &request.resource_spans[0].scope_spans[0].spans {
            let marked = s.attributes.iter().any(|a| a.key == FINDINGS);
            assert_eq!(marked, s.name == "top", "{}", s.name);
        }
    }

    #[test]
    fn bad_utf8_is_repaired_and_not_sent() {
        let scope = scope_of("orders");
        let mut bad = span(1, None, 10, "status").encode_to_vec();
        // A status message (field 15, its field 2) of one byte that is no UTF-8.
        bad.extend_from_slice(&[15 << 3 | 2, 3, 2 << 3 | 2, 1, 0xff]);
        let mut chain = ReceivedChain::default();
        chain.push(&bad, &scope);
        let body = encode([&prepare(&chain, None)]);
        let request = ExportTraceServiceRequest::decode(body.as_slice()).unwrap();
        let span = &request.resource_spans[0].scope_spans[0].spans[0];
        assert_eq!(span.status.as_ref().unwrap().message, "\u{fffd}");
    }
}

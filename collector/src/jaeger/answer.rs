//! One answer of Jaeger's query API v3 read into traces: `{"result": {"resourceSpans": ...}}`
//! (several such objects one after another when a large search is streamed), or
//! `{"error": {"httpCode": ..., "message": ...}}`. Each trace leaves as one OTLP/JSON line (an
//! `ExportTraceServiceRequest`, the recording format) cut from the answer's own text: its
//! resources, scopes and spans as Jaeger wrote them, regrouped by trace id, never parsed into
//! values and written again.

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::value::RawValue;

/// A trace read from an answer.
#[derive(Debug)]
pub struct Trace {
    /// The trace id as Jaeger wrote it, lowercased.
    pub id: String,
    /// The earliest start among its spans kept, Unix ns (`u64::MAX` when none is).
    pub start_unix_nano: u64,
    /// Its spans kept.
    pub spans: u64,
    /// Its spans that started before the window and were left out.
    pub spans_before: u64,
    /// The line: `{"resourceSpans":[...]}` with those spans.
    pub line: Vec<u8>,
}

/// What an answer held that was not traces.
#[derive(Debug, PartialEq, Eq)]
pub enum Refusal {
    /// Not OTLP JSON: why.
    NotOtlp(String),
    /// An `error` object: its message.
    Error(String),
}

#[derive(Deserialize)]
struct Envelope<'a> {
    #[serde(borrow, default)]
    result: Option<TracesData<'a>>,
    #[serde(default)]
    error: Option<ErrorDetails>,
}

#[derive(Deserialize)]
struct ErrorDetails {
    #[serde(default)]
    message: String,
}

#[derive(Deserialize)]
struct TracesData<'a> {
    #[serde(borrow, default, rename = "resourceSpans", alias = "resource_spans")]
    resource_spans: Vec<ResourceSpans<'a>>,
}

#[derive(Deserialize)]
struct ResourceSpans<'a> {
    #[serde(borrow, default)]
    resource: Option<&'a RawValue>,
    #[serde(borrow, default, rename = "scopeSpans", alias = "scope_spans")]
    scope_spans: Vec<ScopeSpans<'a>>,
    #[serde(borrow, default, rename = "schemaUrl", alias = "schema_url")]
    schema_url: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct ScopeSpans<'a> {
    #[serde(borrow, default)]
    scope: Option<&'a RawValue>,
    #[serde(borrow, default)]
    spans: Vec<&'a RawValue>,
    #[serde(borrow, default, rename = "schemaUrl", alias = "schema_url")]
    schema_url: Option<&'a RawValue>,
}

/// What a span is read for here: which trace it is in, and when it started.
#[derive(Deserialize)]
struct SpanKey<'a> {
    #[serde(borrow, rename = "traceId", alias = "trace_id")]
    trace_id: Cow<'a, str>,
    #[serde(
        borrow,
        default,
        rename = "startTimeUnixNano",
        alias = "start_time_unix_nano"
    )]
    start: Option<Nanos<'a>>,
}

/// A 64-bit integer as OTLP/JSON writes it: a string or a number.
#[derive(Deserialize)]
#[serde(untagged)]
enum Nanos<'a> {
    Number(u64),
    #[serde(borrow)]
    Text(Cow<'a, str>),
}

impl Nanos<'_> {
    fn value(&self) -> Option<u64> {
        match self {
            Nanos::Number(n) => Some(*n),
            Nanos::Text(t) => t.parse().ok(),
        }
    }
}

/// One span of the answer, placed: its resource and scope (indices) and its text.
struct Placed<'a> {
    resource: usize,
    scope: usize,
    span: &'a RawValue,
}

/// The traces of `body`, in the order their first span comes; spans that started before
/// `window_start` (Unix ns) are left out and counted.
pub fn traces(body: &[u8], window_start: Option<u64>) -> Result<Vec<Trace>, Refusal> {
    let mut out = Vec::new();
    let stream = serde_json::Deserializer::from_slice(body).into_iter::<Envelope<'_>>();
    let mut any = false;
    for envelope in stream {
        let envelope = envelope.map_err(|e| Refusal::NotOtlp(e.to_string()))?;
        any = true;
        if let Some(error) = envelope.error {
            return Err(Refusal::Error(error.message));
        }
        let Some(result) = envelope.result else {
            return Err(Refusal::NotOtlp(
                "an object with neither `result` nor `error`".into(),
            ));
        };
        read_result(&result, window_start, &mut out)?;
    }
    if !any {
        return Err(Refusal::NotOtlp("an empty body".into()));
    }
    Ok(out)
}

fn read_result(
    result: &TracesData<'_>,
    window_start: Option<u64>,
    out: &mut Vec<Trace>,
) -> Result<(), Refusal> {
    // Trace ids in order of first appearance, each with its spans placed.
    let mut order: Vec<(String, Vec<Placed<'_>>, u64, u64)> = Vec::new();
    // By trace id: its place in `order`.
    let mut index: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    for (r, resource) in result.resource_spans.iter().enumerate() {
        for (s, scope) in resource.scope_spans.iter().enumerate() {
            for span in &scope.spans {
                let key: SpanKey<'_> = serde_json::from_str(span.get()).map_err(|e| {
                    Refusal::NotOtlp(format!("a span without a readable traceId: {e}"))
                })?;
                let id = key.trace_id.to_ascii_lowercase();
                if id.len() != 32 || !id.bytes().all(|b| b.is_ascii_hexdigit()) {
                    return Err(Refusal::NotOtlp(format!(
                        "a traceId that is not 32 hex digits: {:?}",
                        key.trace_id
                    )));
                }
                let start = key.start.as_ref().and_then(Nanos::value).unwrap_or(0);
                let slot = match index.get(&id) {
                    Some(&i) => i,
                    None => {
                        index.insert(id.clone(), order.len());
                        order.push((id, Vec::new(), u64::MAX, 0));
                        order.len() - 1
                    }
                };
                let entry = &mut order[slot];
                if window_start.is_some_and(|from| start < from) {
                    entry.3 += 1;
                    continue;
                }
                entry.2 = entry.2.min(start);
                entry.1.push(Placed {
                    resource: r,
                    scope: s,
                    span,
                });
            }
        }
    }
    for (id, placed, start, before) in order {
        out.push(Trace {
            line: line(result, &placed),
            spans: placed.len() as u64,
            start_unix_nano: start,
            spans_before: before,
            id,
        });
    }
    Ok(())
}

/// `{"resourceSpans":[...]}` of `placed` (in the answer's order), each resource and scope
/// written once with the spans under it.
fn line(result: &TracesData<'_>, placed: &[Placed<'_>]) -> Vec<u8> {
    let mut out =
        Vec::with_capacity(placed.iter().map(|p| p.span.get().len() + 1).sum::<usize>() + 256);
    out.extend_from_slice(b"{\"resourceSpans\":[");
    let mut at: Option<(usize, usize)> = None;
    for p in placed {
        let resource = &result.resource_spans[p.resource];
        let scope = &resource.scope_spans[p.scope];
        match at {
            Some((r, s)) if r == p.resource && s == p.scope => out.push(b','),
            Some((r, _)) if r == p.resource => {
                close_scope(&mut out, &resource.scope_spans[at.map_or(0, |a| a.1)]);
                out.push(b',');
                open_scope(&mut out, scope);
            }
            Some((r, s)) => {
                let previous = &result.resource_spans[r];
                close_scope(&mut out, &previous.scope_spans[s]);
                close_resource(&mut out, previous);
                out.push(b',');
                open_resource(&mut out, resource);
                open_scope(&mut out, scope);
            }
            None => {
                open_resource(&mut out, resource);
                open_scope(&mut out, scope);
            }
        }
        out.extend_from_slice(p.span.get().as_bytes());
        at = Some((p.resource, p.scope));
    }
    if let Some((r, s)) = at {
        let resource = &result.resource_spans[r];
        close_scope(&mut out, &resource.scope_spans[s]);
        close_resource(&mut out, resource);
    }
    out.extend_from_slice(b"]}");
    out
}

fn open_resource(out: &mut Vec<u8>, resource: &ResourceSpans<'_>) {
    open(out, "resource", resource.resource, "scopeSpans");
}

fn close_resource(out: &mut Vec<u8>, resource: &ResourceSpans<'_>) {
    close(out, resource.schema_url);
}

fn open_scope(out: &mut Vec<u8>, scope: &ScopeSpans<'_>) {
    open(out, "scope", scope.scope, "spans");
}

fn close_scope(out: &mut Vec<u8>, scope: &ScopeSpans<'_>) {
    close(out, scope.schema_url);
}

/// `{"<field>":<raw>,"<list>":[` (the field left out when the answer had none).
fn open(out: &mut Vec<u8>, field: &str, raw: Option<&RawValue>, list: &str) {
    out.push(b'{');
    if let Some(raw) = raw {
        out.extend_from_slice(format!("\"{field}\":").as_bytes());
        out.extend_from_slice(raw.get().as_bytes());
        out.push(b',');
    }
    out.extend_from_slice(format!("\"{list}\":[").as_bytes());
}

/// `],"schemaUrl":<raw>}` (without the schema when the answer had none).
fn close(out: &mut Vec<u8>, schema_url: Option<&RawValue>) {
    out.push(b']');
    if let Some(raw) = schema_url {
        out.extend_from_slice(b",\"schemaUrl\":");
        out.extend_from_slice(raw.get().as_bytes());
    }
    out.push(b'}');
}

#[cfg(test)]
mod tests {
    use super::*;

    fn span(trace: char, id: u8, start: u64) -> String {
        format!(
            r#"{{"traceId":"{}","spanId":"{:016x}","name":"op","startTimeUnixNano":"{start}","endTimeUnixNano":"{}"}}"#,
            trace.to_string().repeat(32),
            id,
            start + 10
        )
    }

    #[test]
    fn an_answer_is_split_into_one_line_a_trace_keeping_resources_and_scopes() {
        let body = format!(
            r#"{{"result":{{"resourceSpans":[
              {{"resource":{{"attributes":[{{"key":"service.name","value":{{"stringValue":"a"}}}}]}},"scopeSpans":[
                {{"scope":{{"name":"s1"}},"spans":[{},{}]}},
                {{"scope":{{"name":"s2"}},"spans":[{}]}}]}},
              {{"resource":{{"attributes":[]}},"scopeSpans":[{{"spans":[{}]}}],"schemaUrl":"u"}}]}}}}
            {{"result":{{"resourceSpans":[{{"scopeSpans":[{{"spans":[{}]}}]}}]}}}}"#,
            span('a', 1, 100),
            span('b', 2, 50),
            span('a', 3, 90),
            span('a', 4, 120),
            span('c', 5, 10),
        );
        let traces = traces(body.as_bytes(), None).unwrap();
        let ids: Vec<(&str, u64, u64)> = traces
            .iter()
            .map(|t| (&t.id[..1], t.spans, t.start_unix_nano))
            .collect();
        assert_eq!(ids, [("a", 3, 90), ("b", 1, 50), ("c", 1, 10)]);
        let a: serde_json::Value = serde_json::from_slice(&traces[0].line).unwrap();
        let resources = a["resourceSpans"].as_array().unwrap();
        assert_eq!(resources.len(), 2);
        assert_eq!(resources[0]["scopeSpans"].as_array().unwrap().len(), 2);
        assert_eq!(resources[0]["scopeSpans"][0]["scope"]["name"], "s1");
        assert_eq!(
            resources[0]["scopeSpans"][1]["spans"][0]["spanId"],
            format!("{:016x}", 3)
        );
        assert_eq!(resources[1]["schemaUrl"], "u");
        // Every line is what the recording reader reads.
        for t in &traces {
            let text = std::str::from_utf8(&t.line).unwrap();
            assert!(
                crate::otlp_lines::parse_line(std::path::Path::new("x"), 1, text)
                    .unwrap()
                    .is_some()
            );
        }
    }

    #[test]
    fn spans_before_the_window_are_left_out_and_counted() {
        let body = format!(
            r#"{{"result":{{"resourceSpans":[{{"scopeSpans":[{{"spans":[{},{},{}]}}]}}]}}}}"#,
            span('a', 1, 100),
            span('a', 2, 200),
            span('b', 3, 300),
        );
        let traces = traces(body.as_bytes(), Some(150)).unwrap();
        assert_eq!(traces.len(), 2);
        assert_eq!((traces[0].spans, traces[0].spans_before), (1, 1));
        assert_eq!(traces[0].start_unix_nano, 200);
        assert_eq!((traces[1].spans, traces[1].spans_before), (1, 0));
    }

    #[test]
    fn an_error_object_and_what_is_not_otlp_are_refused() {
        assert_eq!(
            traces(
                br#"{"error":{"httpCode":404,"message":"No traces found"}}"#,
                None
            )
            .unwrap_err(),
            Refusal::Error("No traces found".into())
        );
        for bad in [
            &b"<html>login</html>"[..],
            b"",
            b"{\"services\":[]}",
            br#"{"result":{"resourceSpans":[{"scopeSpans":[{"spans":[{"spanId":"01"}]}]}]}}"#,
            br#"{"result":{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"AAECAw=="}]}]}]}}"#,
        ] {
            assert!(
                matches!(traces(bad, None), Err(Refusal::NotOtlp(_))),
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
    }
}

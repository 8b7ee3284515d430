//! The proto-name form of OTLP/JSON (the proto's own field names, enums by name, 64-bit
//! integers as numbers), which the Collector and these readers take beside the canonical one:
//! what the tests write a request in to check that both forms read alike (feature `fixtures`,
//! tests only).

use super::{SPAN_KINDS, STATUS_CODES};

/// The proto-name form of a request's JSON (snake_case names, enums by name, 64-bit integers
/// as numbers), which receivers take too.
pub fn proto_form(value: &serde_json::Value) -> serde_json::Value {
    use serde_json::Value as J;
    let snake = |key: &str| {
        let mut out = String::new();
        for c in key.chars() {
            if c.is_ascii_uppercase() {
                out.push('_');
                out.push(c.to_ascii_lowercase());
            } else {
                out.push(c);
            }
        }
        out
    };
    match value {
        J::Object(map) => J::Object(
            map.iter()
                .map(|(k, v)| {
                    let v = match (k.as_str(), v) {
                        ("kind", J::Number(n)) if n.as_u64().is_some_and(|n| n < 6) => {
                            J::String(SPAN_KINDS[n.as_u64().unwrap_or(0) as usize].into())
                        }
                        ("code", J::Number(n)) if n.as_u64().is_some_and(|n| n < 3) => {
                            J::String(STATUS_CODES[n.as_u64().unwrap_or(0) as usize].into())
                        }
                        ("intValue" | "startTimeUnixNano" | "endTimeUnixNano", J::String(s)) => {
                            s.parse::<i128>().map_or(v.clone(), |n| {
                                serde_json::from_str(&n.to_string()).unwrap_or(v.clone())
                            })
                        }
                        _ => proto_form(v),
                    };
                    (snake(k), v)
                })
                .collect(),
        ),
        J::Array(items) => J::Array(items.iter().map(proto_form).collect()),
        other => other.clone(),
    }
}

//! `--trace-url TEMPLATE`: a link from a chain to its trace in the tool a team already uses
//! (Jaeger, Tempo, Grafana). Every report, the page, the screen and the API write it from here.
//!
//! A link is the template's own text with each `{trace_id}` replaced by the trace id in hex:
//! nothing a span sent ever goes into it. A template without `{trace_id}`, or holding a control
//! character (which could move a terminal's cursor or end an OSC 8 sequence early), is refused
//! when the command line is read.

use std::fmt;
use std::sync::Arc;

use deadline_budget::analysis::TraceId;

/// What a template must hold: replaced by the trace id.
pub const PLACEHOLDER: &str = "{trace_id}";

/// A checked `--trace-url` template.
#[derive(Clone, PartialEq, Eq)]
pub struct TraceUrl {
    template: Arc<str>,
}

impl fmt::Debug for TraceUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "TraceUrl({:?})", self.template)
    }
}

impl TraceUrl {
    /// Reads a template (`--trace-url`'s value parser).
    pub fn parse(template: &str) -> Result<Self, String> {
        if let Some(c) = template.chars().find(|c| c.is_control()) {
            return Err(format!(
                "the template holds a control character ({:?}): a link is plain text, e.g. http://jaeger:16686/trace/{PLACEHOLDER}",
                c
            ));
        }
        if !template.contains(PLACEHOLDER) {
            return Err(format!(
                "the template has no {PLACEHOLDER} to put the trace id in, e.g. http://jaeger:16686/trace/{PLACEHOLDER}"
            ));
        }
        Ok(TraceUrl {
            template: template.into(),
        })
    }

    /// The Jaeger UI's own link to a trace, under `base` (the `--jaeger` URL).
    pub fn jaeger(base: &str) -> Self {
        let base: String = base.chars().filter(|c| !c.is_control()).collect();
        TraceUrl {
            template: format!("{}/trace/{PLACEHOLDER}", base.trim_end_matches('/')).into(),
        }
    }

    /// The template as given.
    pub fn template(&self) -> &str {
        &self.template
    }

    /// The link to `trace`.
    pub fn link(&self, trace: TraceId) -> String {
        self.template.replace(PLACEHOLDER, &trace.to_string())
    }
}

/// The link as an OSC 8 hyperlink's URI: what is not printable ASCII (a space, a letter outside
/// ASCII) percent-encoded, as the sequence wants; a template of plain ASCII is left as it is.
pub fn osc8_uri(link: &str) -> String {
    let mut out = String::with_capacity(link.len());
    for byte in link.bytes() {
        if (0x21..=0x7e).contains(&byte) {
            out.push(byte as char);
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_link_is_the_template_with_the_trace_id_in_hex() {
        let url = TraceUrl::parse("http://jaeger:16686/trace/{trace_id}?x={trace_id}").unwrap();
        let trace = TraceId([0xab; 16]);
        let hex = "ab".repeat(16);
        assert_eq!(
            url.link(trace),
            format!("http://jaeger:16686/trace/{hex}?x={hex}")
        );
        // Other braces (a Grafana Explore URL's JSON) stay as they are.
        let grafana =
            TraceUrl::parse(r#"https://g/explore?left={"queries":[{"query":"{trace_id}"}]}"#)
                .unwrap();
        assert!(
            grafana
                .link(trace)
                .contains(&format!(r#"{{"query":"{hex}"}}"#))
        );
        assert_eq!(
            TraceUrl::jaeger("http://127.0.0.1:16686/").link(trace),
            format!("http://127.0.0.1:16686/trace/{hex}")
        );
    }

    #[test]
    fn a_template_without_the_placeholder_or_with_control_characters_is_refused() {
        assert!(TraceUrl::parse("http://jaeger/trace/").is_err());
        assert!(TraceUrl::parse("").is_err());
        for bad in [
            "\x1b]8;;x\x1b\\{trace_id}",
            "http://a/{trace_id}\n",
            "a\u{9b}{trace_id}",
            "a\x07{trace_id}",
        ] {
            let error = TraceUrl::parse(bad).unwrap_err();
            assert!(error.contains("control character"), "{bad:?}: {error}");
        }
    }

    #[test]
    fn an_osc8_uri_is_printable_ascii() {
        assert_eq!(osc8_uri("http://a/b?c=d"), "http://a/b?c=d");
        assert_eq!(osc8_uri("http://a/é b"), "http://a/%C3%A9%20b");
    }
}

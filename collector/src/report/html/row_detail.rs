//! A waterfall row's detail on the page, shown when the row is opened: the span, its budget
//! facts as the analysis read them, its attributes as received (within
//! [`ATTRIBUTE_BYTES_PER_SPAN`]), and its findings explained.

use std::fmt::Write as _;

use deadline_budget::analysis::{ChainAnalysis, Finding, Row, Span, SpanKind};
use opentelemetry_proto::tonic::common::v1::KeyValue;

use super::{ATTRIBUTE_BYTES_PER_SPAN, Esc, FINDINGS_PER_ROW, Page, SpanText};
use crate::view_model::format::{ValueLimits, any_value, counted, ms_grouped, severity_glyph};
use crate::view_model::legend;

impl Page<'_> {
    /// A row's detail, shown when it is opened: the span, its budget facts, its attributes as
    /// received, and its findings explained.
    pub(super) fn detail(
        &mut self,
        a: &ChainAnalysis,
        row: &Row,
        span: &Span,
        on_row: &[&Finding],
        start: i64,
    ) {
        let kv = |out: &mut String, k: &str, v: &str| {
            let _ = writeln!(out, "<tr><th>{}</th><td>{}</td></tr>", Esc(k), Esc(v));
        };
        self.out
            .push_str("<div class=\"detail\"><table class=\"kv\"><tbody>\n");
        kv(&mut self.out, "kind", kind_word(span.kind));
        kv(&mut self.out, "span id", &span.span_id.to_string());
        kv(
            &mut self.out,
            "parent span id",
            &span
                .parent_span_id
                .map(|p| p.to_string())
                .unwrap_or_else(|| "-".into()),
        );
        kv(
            &mut self.out,
            "start (from chain start)",
            &format!("+{}", ms_grouped(start)),
        );
        kv(&mut self.out, "duration", &ms_grouped(span.duration_ms()));
        kv(&mut self.out, "status", &format!("{:?}", span.status));
        if row.dead_ms > 0 {
            kv(
                &mut self.out,
                "dead work",
                &format!(
                    "{}: done after everyone above had stopped waiting",
                    ms_grouped(i64::from(row.dead_ms))
                ),
            );
        }
        self.out.push_str(
            "<tr class=\"sub\"><th colspan=\"2\">budget facts, as the analysis read them</th></tr>\n",
        );
        for (k, v) in legend::facts(span) {
            let _ = writeln!(
                self.out,
                "<tr><th>{}</th><td>{}</td></tr>",
                Esc(k),
                SpanText(&v)
            );
        }
        if let Some(attributes) = self.store.attributes(a.trace_id, span.span_id) {
            self.out.push_str(
                "<tr class=\"sub\"><th colspan=\"2\">attributes, as received</th></tr>\n",
            );
            attribute_rows(&mut self.out, &attributes);
        }
        // Values cut, attributes not kept, or all dropped for the store's byte budget.
        if let Some(note) = self.store.attribute_note(a.trace_id, span.span_id) {
            let _ = writeln!(
                self.out,
                "<tr><td colspan=\"2\" class=\"cut\">{}</td></tr>",
                Esc(&note)
            );
        }
        if !on_row.is_empty() {
            self.out
                .push_str("<tr class=\"sub\"><th colspan=\"2\">findings</th></tr>\n");
        }
        for f in on_row.iter().take(FINDINGS_PER_ROW) {
            let _ = writeln!(
                self.out,
                r#"<tr class="sev-{sev}"><th>{glyph} {kind}</th><td>{message}<br><small>{meaning}</small></td></tr>"#,
                sev = f.severity,
                glyph = severity_glyph(f.severity),
                kind = f.kind,
                message = SpanText(&f.message),
                meaning = Esc(f.kind.meaning()),
            );
        }
        self.out.push_str("</tbody></table></div>");
    }
}

fn kind_word(kind: SpanKind) -> &'static str {
    match kind {
        SpanKind::Internal => "internal",
        SpanKind::Server => "server (a hop)",
        SpanKind::Client => "client (a call)",
        SpanKind::Producer => "producer (a call)",
        SpanKind::Consumer => "consumer (a hop)",
    }
}

/// A span's attributes as rows of the detail table, within [`ATTRIBUTE_BYTES_PER_SPAN`].
fn attribute_rows(out: &mut String, attributes: &[KeyValue]) {
    let start = out.len();
    for (i, kv) in attributes.iter().enumerate() {
        if out.len() - start >= ATTRIBUTE_BYTES_PER_SPAN {
            let _ = writeln!(
                out,
                "<tr><td colspan=\"2\" class=\"cut\">{} more not shown ({} KiB of attributes a span)</td></tr>",
                counted((attributes.len() - i) as u64, "attribute"),
                ATTRIBUTE_BYTES_PER_SPAN / 1024
            );
            return;
        }
        let mut value = String::new();
        any_value(&mut value, kv.value.as_ref(), ValueLimits::PAGE);
        let _ = writeln!(
            out,
            "<tr><th>{}</th><td>{}</td></tr>",
            SpanText(&kv.key),
            SpanText(&value)
        );
    }
}

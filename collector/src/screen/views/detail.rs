//! The detail of one span (Enter on a waterfall row): where it sits in the chain, its budget
//! facts as the analysis read them, its attributes as received, and its findings explained.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span as TextSpan};

use super::boxed;
use super::popup::{fitted, hanging, scrolled};
use super::theme::Theme;
use crate::present::format::{ValueLimits, any_value, ms, severity_glyph};
use crate::present::legend::facts;
use crate::screen::State;
use crate::span_text::for_screen;

/// The detail popup's widest box.
pub(super) const DETAIL_WIDTH: u16 = 90;

/// Draw the detail of the selected waterfall row, scrolled down `scroll` rows.
pub fn render(state: &State, theme: Theme, area: Rect, scroll: u16, buf: &mut Buffer) {
    let Some((title, lines)) = lines(state, theme, area.width) else {
        return;
    };
    let rect = fitted(area, DETAIL_WIDTH, &lines);
    let inner = boxed(buf, rect, &title, theme);
    scrolled(buf, rect, inner, lines, scroll, theme);
}

/// The detail popup's title and text, for the selected waterfall row.
pub(super) fn lines(
    state: &State,
    theme: Theme,
    width: u16,
) -> Option<(String, Vec<Line<'static>>)> {
    let chain = state.selected_chain()?;
    let (_, span) = chain.row(state.ui.span_row)?;
    let span = &span;
    let title = format!(
        "{} {}  (Esc closes)",
        for_screen(&span.service),
        for_screen(&span.name)
    );
    let mut lines = Vec::new();
    let kv = |k: &str, v: String| {
        Line::from(vec![
            TextSpan::styled(format!("{k:<32}"), theme.dim()),
            TextSpan::raw(v),
        ])
    };
    lines.push(kv("kind", format!("{:?}", span.kind)));
    lines.push(kv("trace id", span.trace_id.to_string()));
    lines.push(kv("span id", span.span_id.to_string()));
    lines.push(kv(
        "parent span id",
        span.parent_span_id
            .map(|p| p.to_string())
            .unwrap_or_else(|| "-".into()),
    ));
    lines.push(kv(
        "start (from chain start)",
        format!("+{}", ms(chain.summary.offset_ms(span))),
    ));
    lines.push(kv("duration", ms(span.duration_ms())));
    lines.push(kv("status", format!("{:?}", span.status)));
    lines.push(Line::styled(
        "budget facts, as the analysis read them",
        theme.title(),
    ));
    for (k, v) in facts(span) {
        lines.push(kv(k, for_screen(&v).into_owned()));
    }
    if let Some(attrs) = state.data.store.attributes(chain.trace_id, span.span_id) {
        lines.push(Line::styled("attributes, as received", theme.title()));
        for a in attrs {
            lines.push(kv(
                &for_screen(&a.key),
                for_screen(&{
                    let mut value = String::new();
                    any_value(&mut value, a.value.as_ref(), ValueLimits::NONE);
                    value
                })
                .into_owned(),
            ));
        }
    }
    // Values cut, attributes not kept, or all dropped for --max-attribute-bytes.
    if let Some(note) = state
        .data
        .store
        .attribute_note(chain.trace_id, span.span_id)
    {
        lines.push(Line::styled(format!("({note})"), theme.dim()));
    }
    let findings: Vec<_> = chain.findings_on(span.span_id).collect();
    if !findings.is_empty() {
        lines.push(Line::styled("findings", theme.title()));
    }
    for f in findings {
        lines.push(Line::from(vec![
            TextSpan::styled(
                format!("{} {} ", severity_glyph(f.severity), f.kind.as_str()),
                theme.severity(f.severity),
            ),
            TextSpan::raw(for_screen(&f.message).into_owned()),
        ]));
        lines.extend(hanging(
            TextSpan::raw("  "),
            f.kind.meaning(),
            theme.dim(),
            DETAIL_WIDTH.min(width).saturating_sub(2),
        ));
    }
    Some((title, lines))
}

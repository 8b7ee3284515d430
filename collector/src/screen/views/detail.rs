//! The detail of one span (Enter on a waterfall row): where it sits in the chain, its budget
//! facts as the analysis read them, its attributes as received, and its findings explained.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span as TextSpan};

use super::popup::{fitted, hanging, scrolled};
use super::theme::Theme;
use super::{boxed, hyperlink, unicode_width};
use crate::screen::State;
use crate::span_text::for_screen;
use crate::view_model::format::{ValueLimits, any_value, ms, severity_glyph};
use crate::view_model::legend::facts;

/// The detail popup's widest box.
pub(super) const DETAIL_WIDTH: u16 = 90;

/// Draw the detail of the selected waterfall row, scrolled down `scroll` rows; the link to
/// the chain's trace a hyperlink where the terminal takes one.
pub fn render(state: &State, theme: Theme, area: Rect, scroll: u16, buf: &mut Buffer) {
    let Some((title, lines)) = lines(state, theme, area.width) else {
        return;
    };
    let rect = fitted(area, DETAIL_WIDTH, &lines);
    let inner = boxed(buf, rect, &title, theme);
    let first = scrolled(buf, rect, inner, lines, scroll, theme);
    if let (true, Some(chain), Some(links)) =
        (state.hyperlinks, state.selected_chain(), &state.links)
    {
        let link = links.link(chain.trace_id);
        let id = chain.trace_id.to_string();
        // The link's rows are the text's first, under its heading (`link_lines`).
        for (i, piece) in link_pieces(&link, inner.width).iter().enumerate() {
            let Some(row) = (1 + i as u16)
                .checked_sub(first)
                .filter(|r| *r < inner.height)
            else {
                continue;
            };
            hyperlink(
                buf,
                (inner.x, inner.y + row),
                unicode_width(piece) as u16,
                &link,
                &id,
            );
        }
    }
}

/// The link cut into pieces of at most `width` columns, one a row: drawn so, it never wraps
/// at a place the popup's word wrapping would choose.
fn link_pieces(link: &str, width: u16) -> Vec<String> {
    let width = usize::from(width.max(1));
    let mut pieces = vec![String::new()];
    for c in link.chars() {
        let last = pieces.last_mut().map_or(0, |p| unicode_width(p));
        if last + unicode_width(c.encode_utf8(&mut [0; 4])) > width {
            pieces.push(String::new());
        }
        if let Some(piece) = pieces.last_mut() {
            piece.push(c);
        }
    }
    pieces
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
    if let Some(links) = &state.links {
        // First, so its rows are known to `render`, which makes them a hyperlink.
        lines.push(Line::styled(
            "link to the trace (--trace-url)",
            theme.title(),
        ));
        let link = links.link(chain.trace_id);
        for piece in link_pieces(&link, DETAIL_WIDTH.min(width).saturating_sub(2)) {
            lines.push(Line::raw(piece));
        }
    }
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

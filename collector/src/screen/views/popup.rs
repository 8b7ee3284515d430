//! The overlays: the legend (`?`), which explains every highlight in plain words, and the detail
//! of one span with all its budget facts and findings.

use crate::legend::{MARKS, MarkRole, ROW_FIGURES, facts};
use deadline_budget::analysis::FindingKind;
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span as TextSpan};
use ratatui::widgets::{Paragraph, Widget, Wrap};

use super::text::ms;
use super::theme::{Theme, severity_glyph};
use super::{boxed, waterfall};
use crate::screen::{Overlay, State};
use crate::span_text::for_screen;

pub use crate::legend::meaning;

fn centered(area: Rect, width: u16, height: u16) -> Rect {
    let w = width.min(area.width);
    let h = height.min(area.height);
    Rect::new(
        area.x + (area.width - w) / 2,
        area.y + (area.height - h) / 2,
        w,
        h,
    )
}

/// A popup box as wide as `width` and as tall as its `lines` need (within the screen, one row
/// of the screen left above and below when it can be), centred.
fn fitted(area: Rect, width: u16, lines: &[Line<'_>]) -> Rect {
    let w = width.min(area.width);
    let rows = wrapped(lines.to_vec(), w.saturating_sub(2)).area.height;
    let room = if area.height > 12 {
        area.height - 2
    } else {
        area.height
    };
    centered(area, w, rows.saturating_add(2).min(room))
}

/// The inside of a box drawn by [`boxed`].
fn inside(rect: Rect) -> Rect {
    use ratatui::widgets::{Block, Borders};
    Block::default().borders(Borders::ALL).inner(rect)
}

/// Draw the legend, scrolled down `scroll` rows.
pub fn render_legend(theme: Theme, area: Rect, scroll: u16, buf: &mut Buffer) {
    let lines = legend_lines(theme, LEGEND_WIDTH.min(area.width).saturating_sub(2));
    let rect = fitted(area, LEGEND_WIDTH, &lines);
    let inner = boxed(buf, rect, "legend  (Esc closes)", theme);
    scrolled(buf, rect, inner, lines, scroll, theme);
}

/// The detail popup's widest box.
const DETAIL_WIDTH: u16 = 90;

/// The legend's widest box.
const LEGEND_WIDTH: u16 = 100;

/// `head` then `text` word-wrapped to `width`, its continuation lines indented under the text's
/// start (a hanging indent), so a wrapped explanation does not run back under its label.
fn hanging(
    head: TextSpan<'static>,
    text: &str,
    style: ratatui::style::Style,
    width: u16,
) -> Vec<Line<'static>> {
    let indent = head.width();
    let room = (width as usize).saturating_sub(indent);
    if room < 20 {
        return vec![Line::from(vec![
            head,
            TextSpan::styled(text.to_owned(), style),
        ])];
    }
    super::text::wrap(text, room, usize::MAX)
        .into_iter()
        .enumerate()
        .map(|(i, part)| {
            let lead = if i == 0 {
                head.clone()
            } else {
                TextSpan::raw(" ".repeat(indent))
            };
            Line::from(vec![lead, TextSpan::styled(part, style)])
        })
        .collect()
}

/// The legend's text, for a box `width` cells wide inside.
fn legend_lines(theme: Theme, width: u16) -> Vec<Line<'static>> {
    let glyph = |g: &'static str, style, text: &'static str| {
        Line::from(vec![
            TextSpan::styled(format!(" {g:<3}"), style),
            TextSpan::raw(text),
        ])
    };
    let mut lines = vec![Line::styled(
        "The waterfall: one row per hop (a service handling the request) and call",
        theme.title(),
    )];
    for mark in MARKS {
        let style = match mark.role {
            MarkRole::Budget => theme.budget(),
            MarkRole::Queue => theme.queue(),
            MarkRole::Work => theme.work(),
            MarkRole::Late => theme.late(),
            MarkRole::Call => theme.call(),
            MarkRole::Dim => theme.dim(),
        };
        // Without colour a reset's excess is told by where it lies, not by red.
        let text = match mark.glyph {
            "┄" if !theme.color => "the budget the call forwarded (past │: more than remained)",
            _ => mark.text,
        };
        lines.push(glyph(mark.glyph, style, text));
    }
    lines.push(glyph(
        "─",
        theme.dim(),
        "a span of the hop's own (its work, a database query)",
    ));
    lines.push(Line::styled("Findings", theme.title()));
    for kind in FindingKind::ALL {
        let sev = kind.severity();
        let head = TextSpan::styled(
            format!(" {} {:<18}", severity_glyph(sev), kind.as_str()),
            theme.severity(sev),
        );
        lines.extend(hanging(head, meaning(kind), theme.text(), width));
    }
    lines.push(Line::styled("The figures beside each row", theme.title()));
    lines.extend(hanging(
        TextSpan::raw(" "),
        ROW_FIGURES,
        theme.text(),
        width,
    ));
    lines.extend(hanging(
        TextSpan::raw(" "),
        "#2 before a call: the second attempt of a retried call",
        theme.text(),
        width,
    ));
    lines.push(Line::styled("The chain list", theme.title()));
    for text in [
        "OUTCOME: how the request ended for its user (in flight, ok, late, 504, shed, cancelled, error)",
        "WASTED: the work its services did after everyone above had stopped waiting",
    ] {
        lines.extend(hanging(TextSpan::raw(" "), text, theme.text(), width));
    }
    lines.push(Line::styled("Keys", theme.title()));
    for keys in [
        "↑↓ j k move · PgUp PgDn a page · g G top, bottom · Enter open (on an edge or service: its chains) · Esc back",
        "Tab next view · Shift-Tab previous view · n/N next/previous finding of the selected chain · / search",
        "f filter: all, only chains with findings, only failed chains · s sort (newest, longest, most waste) · space pause · q quit",
        "e append the selected chain to budget-top-export.jsonl (check --input and replay read it)",
        "mouse: a click selects a row (a second click opens it), the wheel scrolls",
        "in a popup like this one: ↑↓ PgUp PgDn and the wheel scroll, Esc closes",
        "budget-top demo: 1-9 0 scenario · c cure it (run it with its mistake fixed) · [ ] pick a service · +/- its latency · w next workshop step",
    ] {
        lines.extend(hanging(TextSpan::raw(" "), keys, theme.text(), width));
    }
    lines
}

/// How far the open popup can scroll on a screen of size `area` (0 when it all fits).
pub fn max_scroll(state: &State, area: Rect) -> u16 {
    let theme = Theme {
        color: state.ui.color,
    };
    let (width, lines) = match state.ui.overlay {
        Overlay::None => return 0,
        Overlay::Legend => (
            LEGEND_WIDTH,
            legend_lines(theme, LEGEND_WIDTH.min(area.width).saturating_sub(2)),
        ),
        Overlay::Detail => match detail(state, theme, area.width) {
            Some((_, lines)) => (DETAIL_WIDTH, lines),
            None => return 0,
        },
    };
    let rect = fitted(area, width, &lines);
    let inner = inside(rect);
    let rows = wrapped(lines, inner.width).area.height;
    rows.saturating_sub(inner.height)
}

/// `lines` word-wrapped to `width` into a buffer just tall enough for them.
fn wrapped(lines: Vec<Line<'_>>, width: u16) -> Buffer {
    if width == 0 {
        return Buffer::empty(Rect::default());
    }
    // Word wrapping never takes more than twice the rows of the text cut at the width.
    let bound: usize = lines
        .iter()
        .map(|l| 2 * (l.width() / width as usize) + 1)
        .sum();
    let tall = Rect::new(0, 0, width, bound.clamp(1, 4000) as u16);
    let mut scratch = Buffer::empty(tall);
    Paragraph::new(lines)
        .wrap(Wrap { trim: false })
        .render(tall, &mut scratch);
    let used = (0..tall.height)
        .rev()
        .find(|y| (0..width).any(|x| scratch[(x, *y)].symbol() != " "))
        .map_or(0, |y| y + 1);
    scratch.resize(Rect::new(0, 0, width, used));
    scratch
}

/// Draw `lines` into `inner` (the inside of the box `rect`) from row `scroll` on, with a hint on
/// the box's bottom edge when there is more above or below.
fn scrolled(
    buf: &mut Buffer,
    rect: Rect,
    inner: Rect,
    lines: Vec<Line<'_>>,
    scroll: u16,
    theme: Theme,
) {
    let text = wrapped(lines, inner.width);
    let rows = text.area.height;
    let scroll = scroll.min(rows.saturating_sub(inner.height));
    for y in 0..inner.height.min(rows - scroll) {
        for x in 0..inner.width {
            buf[(inner.x + x, inner.y + y)] = text[(x, scroll + y)].clone();
        }
    }
    let (above, below) = (scroll > 0, scroll + inner.height < rows);
    let hint = match (above, below) {
        (false, false) => return,
        (false, true) => " ↓ more: ↓ PgDn ",
        (true, true) => " ↑↓ more: ↑ ↓ PgUp PgDn ",
        (true, false) => " ↑ more: ↑ PgUp ",
    };
    let width = super::unicode_width(hint) as u16;
    if rect.height >= 2 && rect.width > width + 2 {
        let x = rect.x + rect.width - width - 2;
        super::put(buf, x, rect.y + rect.height - 1, hint, width, theme.title());
    }
}

/// Draw the detail of the selected waterfall row, scrolled down `scroll` rows.
pub fn render_detail(state: &State, theme: Theme, area: Rect, scroll: u16, buf: &mut Buffer) {
    let Some((title, lines)) = detail(state, theme, area.width) else {
        return;
    };
    let rect = fitted(area, DETAIL_WIDTH, &lines);
    let inner = boxed(buf, rect, &title, theme);
    scrolled(buf, rect, inner, lines, scroll, theme);
}

/// The detail popup's title and text, for the selected waterfall row.
fn detail(state: &State, theme: Theme, width: u16) -> Option<(String, Vec<Line<'static>>)> {
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
                for_screen(&any_value(a.value.as_ref())).into_owned(),
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
    let findings: Vec<_> = waterfall::findings_of(&chain, span.span_id).collect();
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
            meaning(f.kind),
            theme.dim(),
            DETAIL_WIDTH.min(width).saturating_sub(2),
        ));
    }
    Some((title, lines))
}

/// An OTLP attribute value as text.
fn any_value(v: Option<&opentelemetry_proto::tonic::common::v1::AnyValue>) -> String {
    use opentelemetry_proto::tonic::common::v1::any_value::Value;
    match v.and_then(|v| v.value.as_ref()) {
        None => String::new(),
        Some(Value::StringValue(s)) => s.clone(),
        Some(Value::BoolValue(b)) => b.to_string(),
        Some(Value::IntValue(i)) => i.to_string(),
        Some(Value::DoubleValue(d)) => d.to_string(),
        Some(Value::BytesValue(b)) => format!("{} bytes", b.len()),
        Some(Value::ArrayValue(a)) => {
            let items: Vec<String> = a.values.iter().map(|v| any_value(Some(v))).collect();
            format!("[{}]", items.join(", "))
        }
        Some(Value::KvlistValue(l)) => {
            let items: Vec<String> = l
                .values
                .iter()
                .map(|kv| format!("{}={}", kv.key, any_value(kv.value.as_ref())))
                .collect();
            format!("{{{}}}", items.join(", "))
        }
        #[allow(unreachable_patterns)]
        Some(_) => "?".into(),
    }
}

//! The empty state: what to set so spans arrive, or how to start the demo.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::Line;
use ratatui::widgets::{Paragraph, Widget, Wrap};

use super::theme::Theme;
use crate::screen::{Mode, State};

/// Draw the empty state into the body.
pub fn render(state: &State, theme: Theme, area: Rect, buf: &mut Buffer) {
    let grpc = state
        .grpc_addr
        .map(|a| a.to_string())
        .unwrap_or_else(|| "127.0.0.1:4317".into());
    let http = state
        .http_addr
        .map(|a| a.to_string())
        .unwrap_or_else(|| "127.0.0.1:4318".into());
    let mut lines = vec![Line::styled("No spans yet.", theme.title()), Line::raw("")];
    match &state.mode {
        Mode::Replay(_) => lines.push(Line::raw(
            "The recording has no spans yet (or none that decode).",
        )),
        Mode::Demo => lines.push(Line::raw(
            "The demo's services are starting (a new scenario starts with an empty screen); their first requests appear here in a moment.",
        )),
        Mode::Live => {
            lines.push(Line::raw(
                "Point your services' OpenTelemetry exporter at budget-top:",
            ));
            lines.push(Line::raw(""));
            lines.push(Line::styled(
                format!("  OTEL_EXPORTER_OTLP_ENDPOINT=http://{grpc}"),
                theme.accent(),
            ));
            lines.push(Line::styled(
                format!("      (OTLP/gRPC; for OTLP/HTTP use http://{http})"),
                theme.dim(),
            ));
            lines.push(Line::raw(""));
            lines.push(Line::raw(
                "Every request chain then shows up here with where its budget went.",
            ));
            if state.demo_startable {
                lines.push(Line::raw(""));
                lines.push(Line::styled("Or press d to start the demo.", theme.title()));
            }
        }
    }
    let h = lines.len() as u16;
    let y = area.y + area.height.saturating_sub(h) / 3;
    let inner = Rect::new(
        area.x + 2,
        y,
        area.width.saturating_sub(4),
        area.height.saturating_sub(y - area.y),
    );
    Paragraph::new(lines)
        .wrap(Wrap { trim: false })
        .render(inner, buf);
}

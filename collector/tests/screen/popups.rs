//! The popups: a span's detail (its attributes, scrolled, and what was cut of them) and the
//! legend with the keys.

use budget_top::batch::{Batch, RawAttributes};
use budget_top::screen::fixtures::*;
use budget_top::screen::{Overlay, State};
use crossterm::event::{KeyCode, KeyModifiers};
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value::Value};

use crate::support::{key, select_chain, snap};

/// The detail popup of chain `trace`, one edge hop whose span carries `attributes`.
fn detail_of(trace: u64, attributes: Vec<KeyValue>) -> State {
    let mut state = empty_state();
    let mut chain = ChainBuilder::new(trace, 14_000);
    chain.edge(1, "checkout", "POST /buy", 0, 5, 100);
    state.data.add_batch(
        Batch {
            spans: chain.spans,
            attributes: vec![RawAttributes::from_key_values(&attributes)],
            raw: None,
            received: None,
        },
        NOW_NS,
    );
    state.settle();
    key(&mut state, KeyCode::Enter);
    key(&mut state, KeyCode::Enter);
    assert_eq!(state.ui.overlay, Overlay::Detail);
    state
}

/// A span attribute `key` of text `value`.
fn text_attribute(key: String, value: String) -> KeyValue {
    KeyValue {
        key,
        value: Some(AnyValue {
            value: Some(Value::StringValue(value)),
        }),
        ..KeyValue::default()
    }
}

#[test]
fn detail_popup_and_legend() {
    let mut state = fixture_state(false);
    select_chain(&mut state, 1);
    key(&mut state, KeyCode::Enter);
    key(&mut state, KeyCode::Enter);
    assert_eq!(state.ui.overlay, Overlay::Detail);
    let text = snap("detail", &state, 80, 24);
    assert!(text.contains("budget.forwarded_ms"), "{text}");
    snap("detail", &state, 200, 60);
    key(&mut state, KeyCode::Esc);
    assert_eq!(state.ui.overlay, Overlay::None);
    key(&mut state, KeyCode::Char('?'));
    assert_eq!(state.ui.overlay, Overlay::Legend);
    let text = snap("legend", &state, 80, 24);
    assert!(
        text.contains("│                     the next one works to a deadline"),
        "a wrapped explanation hangs under its text, not under its label: {text}"
    );
    let text = snap("legend", &state, 200, 60);
    assert!(text.contains("orphaned_work"));
    // The keys come last: at the end they show whole (more than a page down since the legend
    // says how a hop waiting for nobody is drawn).
    key(&mut state, KeyCode::End);
    state.clamp_popup_scroll(ratatui::layout::Rect::new(0, 0, 200, 60));
    let text = screen_text(&draw(&state, 200, 60));
    assert!(
        text.contains("budget-top demo: 1-9 0 ! @ scenario"),
        "{text}"
    );
    assert!(text.contains("g G top, bottom"), "{text}");
    assert!(text.contains("Shift-Tab previous view"), "{text}");
    assert!(text.contains("↑↓ PgUp PgDn and the wheel scroll"), "{text}");
}

/// A span with more attributes than an 80x24 popup shows: the popup scrolls with the keys and
/// the wheel, stops at its last row, and says when there is more.
#[test]
fn the_detail_popup_scrolls_through_long_attributes() {
    let attributes = (0..40)
        .map(|i| text_attribute(format!("app.attribute_{i:02}"), format!("value {i}")))
        .collect();
    let mut state = detail_of(700, attributes);
    let area = ratatui::layout::Rect::new(0, 0, 80, 24);
    let text = snap("detail_scroll_top", &state, 80, 24);
    assert!(text.contains("app.attribute_00"), "{text}");
    assert!(!text.contains("app.attribute_39"), "{text}");
    assert!(text.contains("↓ more"), "{text}");
    // Down one row at a time, a page at a time, and never past the end.
    key(&mut state, KeyCode::Down);
    state.clamp_popup_scroll(area);
    assert_eq!(state.ui.popup_scroll, 1);
    for _ in 0..10 {
        key(&mut state, KeyCode::PageDown);
        state.clamp_popup_scroll(area);
    }
    let end = state.ui.popup_scroll;
    assert!(end > 0 && end < 100, "{end}");
    let text = snap("detail_scroll_end", &state, 80, 24);
    assert!(text.contains("app.attribute_39 "), "{text}");
    assert!(text.contains("↑ more"), "{text}");
    assert!(!text.contains("↓ more"), "{text}");
    key(&mut state, KeyCode::Up);
    assert_eq!(
        state.ui.popup_scroll,
        end - 1,
        "one key back up from the end"
    );
    key(&mut state, KeyCode::PageUp);
    assert_eq!(state.ui.popup_scroll, end - 11);
    let wheel = |kind| crossterm::event::MouseEvent {
        kind,
        column: 10,
        row: 10,
        modifiers: KeyModifiers::NONE,
    };
    state.on_mouse(wheel(crossterm::event::MouseEventKind::ScrollUp), area);
    assert_eq!(
        state.ui.popup_scroll,
        end - 14,
        "the wheel scrolls the popup"
    );
    key(&mut state, KeyCode::Home);
    assert_eq!(state.ui.popup_scroll, 0);
    // At 200x60 it all fits: nothing to scroll, no hint.
    state.ui.popup_scroll = 5;
    let text = screen_text(&draw(&state, 200, 60));
    assert!(text.contains("app.attribute_00") && text.contains("app.attribute_39"));
    assert!(!text.contains("more:"), "{text}");
    // Esc closes; the next popup opens at its top.
    key(&mut state, KeyCode::Esc);
    key(&mut state, KeyCode::Char('?'));
    assert_eq!(state.ui.popup_scroll, 0);
}

/// Issue 14, item 1: a megabyte attribute is kept cut to 4 KiB with a marker, and the popup
/// says what was cut.
#[test]
fn the_detail_popup_says_when_an_attribute_value_was_cut() {
    let attributes = vec![text_attribute("db.statement".into(), "s".repeat(1 << 20))];
    let mut state = detail_of(701, attributes);
    let area = ratatui::layout::Rect::new(0, 0, 120, 40);
    state.ui.popup_scroll = u16::MAX;
    state.clamp_popup_scroll(area);
    let text = screen_text(&draw(&state, 120, 40));
    assert!(text.contains("more bytes cut]"), "{text}");
    assert!(text.contains("(1 value(s) cut to 4 KiB)"), "{text}");
}

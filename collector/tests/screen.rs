//! The live screen, drawn into ratatui's `TestBackend`: every view at 80x24 and 200x60 from a
//! fixed set of chains covering every finding kind, with the clock pinned, plus the keys.
#![allow(clippy::unwrap_used, clippy::expect_used)]

// The real binary in a tmux pane (needs it built with the demo). A file beside this one, not a
// binary of its own; this file stays where it is, beside the snapshots that name it.
#[cfg(feature = "demo")]
#[path = "screen/tmux.rs"]
mod tmux;

use budget_top::screen;

use budget_top::screen::fixtures::*;

#[test]
fn fixtures_cover_every_finding_kind() {
    let state = fixture_state(false);
    let mut seen = std::collections::BTreeSet::new();
    for id in &state.data.visible {
        let a = state.data.analysis(id).unwrap();
        for f in &a.findings {
            seen.insert(f.kind);
        }
    }
    for k in deadline_budget::analysis::FindingKind::ALL {
        // Judged per edge over at least 20 calls, or across chains for a report (the
        // analysis's tests cover them).
        if matches!(
            k,
            deadline_budget::analysis::FindingKind::TimeoutOversized
                | deadline_budget::analysis::FindingKind::ContextLost
        ) {
            continue;
        }
        assert!(seen.contains(&k), "no fixture shows {k}");
    }
}

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::style::Color;

use screen::{Overlay, State, View};

fn key(state: &mut State, code: KeyCode) -> bool {
    state.on_key(KeyEvent::new(code, KeyModifiers::NONE), &mut None)
}

fn select_chain(state: &mut State, trace: u64) {
    let i = state
        .data
        .visible
        .iter()
        .position(|id| *id == tid(trace))
        .unwrap();
    state.ui.view = View::Chains;
    key(state, KeyCode::Home);
    for _ in 0..i {
        key(state, KeyCode::Char('j'));
    }
    assert_eq!(state.data.visible[state.ui.selected], tid(trace));
}

#[track_caller]
fn snap(name: &str, state: &State, w: u16, h: u16) -> String {
    let text = screen_text(&draw(state, w, h));
    insta::assert_snapshot!(format!("{name}_{w}x{h}"), text);
    text
}

#[test]
fn chain_list_shows_newest_first_with_budget_and_worst_finding() {
    let state = fixture_state(false);
    for (w, h) in [(80, 24), (200, 60)] {
        let text = snap("chains", &state, w, h);
        assert!(text.contains("gateway POST /chec"));
        // How each request ended for its user, beside its worst finding.
        assert!(text.contains(" 504 "), "{text}");
        assert!(text.contains(" shed "), "{text}");
        assert!(text.contains("budget_reset"));
        assert!(text.contains("127.0.0.1:4317"));
        // newest first: the hostile chain (started last) is above checkout (started first).
        assert!(text.find("evil").unwrap() < text.find("POST /chec").unwrap());
    }
}

#[test]
fn waterfall_explains_the_first_finding_in_words() {
    let mut state = fixture_state(false);
    select_chain(&mut state, 1);
    key(&mut state, KeyCode::Enter);
    assert_eq!(state.ui.view, View::Waterfall);
    for (w, h) in [(80, 24), (200, 60)] {
        let text = snap("waterfall_checkout", &state, w, h);
        assert!(
            text.contains("forwarded 3000 ms with only 700 ms left"),
            "{text}"
        );
        assert!(text.contains("fwd 3000>700"), "{text}");
        assert!(
            text.contains('▓'),
            "work past the deadline is drawn: {text}"
        );
    }
    // n moves to the next finding: inventory's orphaned work.
    key(&mut state, KeyCode::Char('n'));
    let text = screen_text(&draw(&state, 80, 24));
    assert!(
        text.contains("inventory worked 280 ms after orders stopped waiting"),
        "{text}"
    );
}

#[test]
fn waterfall_of_every_fixture_chain_fits_80x24() {
    let mut state = fixture_state(false);
    for t in 2..=8 {
        select_chain(&mut state, t);
        state.ui.view = View::Waterfall;
        snap(&format!("waterfall_chain{t}"), &state, 80, 24);
    }
}

#[test]
fn big_terminal_shows_list_and_waterfall_together() {
    let mut state = fixture_state(false);
    select_chain(&mut state, 2);
    let text = screen_text(&draw(&state, 200, 60));
    assert!(text.contains("fwd ✕ none"), "{text}");
    assert!(
        text.contains("frontend had 790 ms left but forwarded no budget"),
        "{text}"
    );
}

/// What does not fit is marked or left out whole, never cut mid-word without a sign: names
/// end in `…`, the trace id shows whole or not at all, the table notes pick a shorter text.
#[test]
fn narrow_screens_mark_or_leave_out_what_does_not_fit() {
    let mut state = fixture_state(false);
    let text = screen_text(&draw(&state, 80, 24));
    assert!(text.contains("svc GET…"), "{text}");
    // On a wide screen the figures stay near the name they belong to.
    let wide = screen_text(&draw(&state, 200, 60));
    let row = wide
        .lines()
        .find(|l| l.contains("gateway POST /checkout"))
        .unwrap();
    let gap = row.find("1000ms").unwrap() - row.find("gateway").unwrap();
    assert!(gap < 72, "{row}");
    select_chain(&mut state, 1);
    key(&mut state, KeyCode::Enter);
    let trace = format!("trace {}", tid(1));
    let narrow = screen_text(&draw(&state, 80, 24));
    let title = narrow.lines().nth(3).unwrap();
    assert!(!title.contains("trace"), "{title}");
    let wide = screen_text(&draw(&state, 200, 60));
    assert!(wide.contains(&trace), "{wide}");
    key(&mut state, KeyCode::Tab);
    assert_eq!(state.ui.view, View::Edges);
    let text = screen_text(&draw(&state, 80, 24));
    assert!(text.contains("TMO ~inferred"), "{text}");
    key(&mut state, KeyCode::Tab);
    let text = screen_text(&draw(&state, 80, 24));
    assert!(text.contains("DEAD work for nobody"), "{text}");
}

/// The chain list's preview skips a newest chain whose callee's (late) hop has not arrived
/// yet: it would say "no findings" of a chain whose slow callee is still working. Once the
/// chain has been quiet for a while, a call without a hop is a call to an uninstrumented
/// service and the chain is previewed like any other.
#[test]
fn the_preview_waits_for_a_late_callee_hop() {
    let mut state = empty_state();
    let mut done = ChainBuilder::new(500, 10_000);
    done.edge(1, "pix-api", "GET /pay", 0, 600, 600);
    done.call(2, 1, "pix-api", "GET settlement", 10, 600, 590, Some(590));
    done.hop(3, Some(2), "settlement", "POST /settle", 12, 900, Some(588));
    let mut waiting = ChainBuilder::new(501, 14_000);
    waiting.edge(1, "pix-api", "GET /pay", 0, 600, 600);
    waiting.call(2, 1, "pix-api", "GET settlement", 10, 600, 590, Some(590));
    state.data.add_spans(done.spans, NOW_NS);
    state.data.add_spans(waiting.spans.clone(), NOW_NS);
    state.settle();
    assert_eq!(state.data.visible[0], tid(501), "newest first in the list");
    assert_eq!(state.ui.selected, 1, "the preview shows the complete chain");
    assert_eq!(state.ui.selected_id, Some(tid(500)));
    // Ten seconds later nothing came: settlement sends no spans; the newest is shown.
    state.now_unix_nano = NOW_NS + 10_000_000_000;
    let mut next = ChainBuilder::new(502, 5_000);
    next.edge(1, "other", "GET /x", 0, 10, 100);
    state.data.add_spans(next.spans, state.now_unix_nano);
    state.settle();
    assert_eq!(
        state.ui.selected_id,
        Some(tid(501)),
        "{:?}",
        state.data.visible
    );
}

/// A service's own work span often arrives before the request span it hangs under: such a
/// chain stays out of the list until its root arrives, or for a few seconds at most (its root
/// may never come), instead of filling the top of the list with rows nobody can read yet.
#[test]
fn a_chain_whose_root_has_not_arrived_waits_out_of_the_list() {
    let mut state = empty_state();
    let mut complete = ChainBuilder::new(600, 10_000);
    complete.edge(1, "gateway", "GET /order", 0, 300, 1000);
    // Two chains whose gateway work span came first; its request span (1) is not here yet.
    let mut late_root = ChainBuilder::new(601, 12_000);
    late_root.hop(2, Some(1), "gateway", "gateway work", 5, 100, Some(1000));
    let mut no_root = ChainBuilder::new(602, 13_000);
    no_root.hop(2, Some(1), "gateway", "gateway work", 5, 100, Some(1000));
    state.data.add_spans(complete.spans, NOW_NS);
    state.data.add_spans(late_root.spans, NOW_NS);
    state.data.add_spans(no_root.spans, NOW_NS);
    state.settle();
    assert_eq!(state.data.visible, vec![tid(600)]);
    assert_eq!(state.ui.selected_id, Some(tid(600)));

    // One root arrives a second later: that chain is listed at once, newest first.
    state.now_unix_nano = NOW_NS + 1_000_000_000;
    let mut root = ChainBuilder::new(601, 12_000);
    root.edge(1, "gateway", "GET /order", 0, 300, 1000);
    state.data.add_spans(root.spans, state.now_unix_nano);
    state.settle();
    assert_eq!(state.data.visible, vec![tid(601), tid(600)]);

    // The other root never comes: past the grace the chain is listed, and says so.
    state.now_unix_nano = NOW_NS + 5_000_000_000;
    assert!(state.settle(), "the list changes with no new span");
    assert_eq!(state.data.visible, vec![tid(602), tid(601), tid(600)]);
    let text = screen_text(&draw(&state, 120, 30));
    assert!(text.contains("root missing"), "{text}");
}

#[test]
fn edges_view_names_the_broken_links() {
    let mut state = fixture_state(false);
    key(&mut state, KeyCode::Tab);
    key(&mut state, KeyCode::Tab);
    assert_eq!(state.ui.view, View::Edges);
    for (w, h) in [(80, 24), (200, 60)] {
        let text = snap("edges", &state, w, h);
        assert!(text.contains("orders → inventory"));
        assert!(text.contains("frontend → catalog"));
    }
    // Enter on the worst edge lists the chains through its callee.
    key(&mut state, KeyCode::Enter);
    state.settle();
    assert_eq!(state.ui.view, View::Chains);
    assert_eq!(state.ui.query.search, "inventory");
    assert_eq!(state.data.visible, vec![tid(1)]);
}

#[test]
fn services_view_shows_littles_law_and_dead_work() {
    let mut state = fixture_state(false);
    // Shift-Tab from the list: the Map, then Services.
    key(&mut state, KeyCode::BackTab);
    key(&mut state, KeyCode::BackTab);
    assert_eq!(state.ui.view, View::Services);
    state.settle();
    for (w, h) in [(80, 24), (200, 60)] {
        let text = snap("services", &state, w, h);
        assert!(text.contains("payments"));
        assert!(text.contains("Little's law"), "{text}");
    }
    let payments = state
        .data
        .services
        .iter()
        .find(|(n, _)| &**n == "payments")
        .unwrap();
    assert!(
        payments.1.dead_share() > 0.3,
        "payments worked mostly for nobody"
    );
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
    use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value::Value};
    let mut state = empty_state();
    let mut chain = ChainBuilder::new(700, 14_000);
    chain.edge(1, "checkout", "POST /buy", 0, 5, 100);
    let attributes: Vec<KeyValue> = (0..40)
        .map(|i| KeyValue {
            key: format!("app.attribute_{i:02}"),
            value: Some(AnyValue {
                value: Some(Value::StringValue(format!("value {i}"))),
            }),
            ..KeyValue::default()
        })
        .collect();
    state.data.add_batch(
        budget_top::batch::Batch {
            spans: chain.spans,
            attributes: vec![budget_top::batch::RawAttributes::from_key_values(
                &attributes,
            )],
            raw: None,
            received: None,
        },
        NOW_NS,
    );
    state.settle();
    key(&mut state, KeyCode::Enter);
    key(&mut state, KeyCode::Enter);
    assert_eq!(state.ui.overlay, Overlay::Detail);
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
    use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value::Value};
    let mut state = empty_state();
    let mut chain = ChainBuilder::new(701, 14_000);
    chain.edge(1, "checkout", "POST /buy", 0, 5, 100);
    let attributes = vec![KeyValue {
        key: "db.statement".into(),
        value: Some(AnyValue {
            value: Some(Value::StringValue("s".repeat(1 << 20))),
        }),
        ..KeyValue::default()
    }];
    state.data.add_batch(
        budget_top::batch::Batch {
            spans: chain.spans,
            attributes: vec![budget_top::batch::RawAttributes::from_key_values(
                &attributes,
            )],
            raw: None,
            received: None,
        },
        NOW_NS,
    );
    state.settle();
    key(&mut state, KeyCode::Enter);
    key(&mut state, KeyCode::Enter);
    assert_eq!(state.ui.overlay, Overlay::Detail);
    let area = ratatui::layout::Rect::new(0, 0, 120, 40);
    state.ui.popup_scroll = u16::MAX;
    state.clamp_popup_scroll(area);
    let text = screen_text(&draw(&state, 120, 40));
    assert!(text.contains("more bytes cut]"), "{text}");
    assert!(text.contains("(1 value(s) cut to 4 KiB)"), "{text}");
}

#[test]
fn empty_state_tells_the_user_what_to_set() {
    let mut state = empty_state();
    for (w, h) in [(80, 24), (200, 60)] {
        let text = snap("empty", &state, w, h);
        assert!(text.contains("OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4317"));
        assert!(text.contains("press d to start the demo"));
    }
    key(&mut state, KeyCode::Char('d'));
    assert!(state.ui.start_demo_requested);
}

/// Built without the demo (or listening without gRPC, where the demo exports), the empty
/// screen does not offer `d`, and `d` does nothing.
#[test]
fn an_empty_screen_that_cannot_start_the_demo_does_not_offer_it() {
    let mut state = empty_state();
    state.demo_startable = false;
    let text = screen_text(&draw(&state, 120, 40));
    assert!(text.contains("OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4317"));
    assert!(!text.contains("press d"), "{text}");
    assert!(!text.contains("d demo"), "{text}");
    assert!(text.contains("? legend  q quit"), "{text}");
    assert!(!key(&mut state, KeyCode::Char('d')));
    assert!(!state.ui.start_demo_requested);
    assert_eq!(state.ui.message, None);
}

#[test]
fn filter_search_and_sort_change_the_list() {
    let mut state = fixture_state(false);
    let all = state.data.visible.len();
    key(&mut state, KeyCode::Char('f'));
    state.settle();
    assert_eq!(
        state.data.visible.len(),
        all - 2,
        "the healthy and the hostile chains have no finding"
    );
    // Then only the chains whose user got no usable answer: the 504s and the 503.
    key(&mut state, KeyCode::Char('f'));
    state.settle();
    let mut failed = state.data.visible.clone();
    failed.sort();
    assert_eq!(failed, vec![tid(3), tid(4), tid(9)]);
    assert!(screen_text(&draw(&state, 80, 24)).contains("filter: only failed"));
    key(&mut state, KeyCode::Char('f'));
    key(&mut state, KeyCode::Char('/'));
    for c in "INVENT".chars() {
        key(&mut state, KeyCode::Char(c));
    }
    key(&mut state, KeyCode::Enter);
    state.settle();
    assert_eq!(state.data.visible, vec![tid(1)]);
    let text = snap("search", &state, 80, 24);
    assert!(text.contains("search: INVENT"));
    key(&mut state, KeyCode::Esc);
    state.settle();
    assert_eq!(state.data.visible.len(), all);
    key(&mut state, KeyCode::Char('s'));
    key(&mut state, KeyCode::Char('s'));
    state.settle();
    assert_eq!(
        state.data.visible[0],
        tid(9),
        "most waste first: the layered timeouts' chain, app and payments working for nobody"
    );
}

#[test]
fn control_characters_from_spans_never_reach_the_screen() {
    let state = fixture_state(true);
    let terminal = draw(&state, 200, 60);
    let buf = terminal.backend().buffer();
    for cell in buf.content() {
        assert!(
            !cell.symbol().chars().any(char::is_control),
            "{:?}",
            cell.symbol()
        );
    }
    assert!(screen_text(&terminal).contains("evil[2J[31msvc"));
    // Nor bidirectional overrides or zero-width characters.
    for cell in buf.content() {
        assert!(
            !cell
                .symbol()
                .chars()
                .any(budget_top::span_text::is_unsafe_char),
            "{:?}",
            cell.symbol()
        );
    }
}

#[test]
fn no_color_draws_without_colour_but_with_the_same_text() {
    let plain = draw(&fixture_state(false), 200, 60);
    let coloured = draw(&fixture_state(true), 200, 60);
    assert_eq!(screen_text(&plain), screen_text(&coloured));
    let uses = |t: &ratatui::Terminal<ratatui::backend::TestBackend>| {
        t.backend()
            .buffer()
            .content()
            .iter()
            .any(|c| c.fg != Color::Reset || c.bg != Color::Reset)
    };
    assert!(!uses(&plain));
    assert!(uses(&coloured));
    // The legend never explains by colour alone.
    for (color, says) in [
        (false, "(past │: more than remained)"),
        (true, "(red: more than remained)"),
    ] {
        let mut state = fixture_state(color);
        key(&mut state, KeyCode::Char('?'));
        let text = screen_text(&draw(&state, 120, 60));
        assert!(text.contains(says), "{text}");
    }
    // In colour, the worst finding is red.
    let buf = coloured.backend().buffer();
    let red = buf
        .content()
        .iter()
        .filter(|c| c.fg == Color::Red && c.symbol() == "✖")
        .count();
    assert!(red >= 1);
}

#[test]
fn pause_holds_arriving_spans_until_resumed() {
    let mut state = fixture_state(false);
    let before = state.data.visible.len();
    key(&mut state, KeyCode::Char(' '));
    assert!(state.ui.paused);
    let mut c = ChainBuilder::new(99, 20_000);
    c.hop(1, None, "late", "GET /late", 0, 10, Some(100));
    state.add_batch(budget_top::batch::Batch {
        spans: c.spans,
        attributes: Vec::new(),
        raw: None,
        received: None,
    });
    state.settle();
    assert_eq!(state.data.visible.len(), before);
    assert!(screen_text(&draw(&state, 80, 24)).contains("PAUSED"));
    key(&mut state, KeyCode::Char(' '));
    state.settle();
    assert_eq!(state.data.visible.len(), before + 1);
    assert_eq!(state.data.visible[0], tid(99), "the new chain is on top");
}

#[test]
fn selection_follows_its_chain_when_new_chains_arrive() {
    let mut state = fixture_state(false);
    select_chain(&mut state, 3);
    let mut c = ChainBuilder::new(50, 25_000);
    c.hop(1, None, "new", "GET /new", 0, 10, Some(100));
    state.data.add_spans(c.spans, NOW_NS);
    state.settle();
    assert_eq!(state.data.visible[state.ui.selected], tid(3));
}

#[test]
fn mouse_click_selects_and_wheel_scrolls() {
    use crossterm::event::{MouseButton, MouseEvent, MouseEventKind};
    use ratatui::layout::Rect;
    let mut state = fixture_state(false);
    let area = Rect::new(0, 0, 80, 24);
    let click = |row| MouseEvent {
        kind: MouseEventKind::Down(MouseButton::Left),
        column: 10,
        row,
        modifiers: KeyModifiers::NONE,
    };
    // header 3 rows, list head 1 row: row 6 is the third chain.
    assert!(state.on_mouse(click(6), area));
    assert_eq!(state.ui.selected, 2);
    assert!(state.on_mouse(click(6), area), "a second click opens it");
    assert_eq!(state.ui.view, View::Waterfall);
    state.ui.view = View::Chains;
    let wheel = MouseEvent {
        kind: MouseEventKind::ScrollDown,
        column: 10,
        row: 6,
        modifiers: KeyModifiers::NONE,
    };
    state.on_mouse(wheel, area);
    assert_eq!(state.ui.selected, 5);
}

/// The loop itself, on a `TestBackend`: batches in, a redraw on the tick, `q` out.
#[tokio::test(start_paused = true)]
async fn the_loop_draws_what_arrives_and_quits_on_q() {
    use crossterm::event::Event;
    use ratatui::Terminal;
    use ratatui::backend::TestBackend;

    let mut terminal = Terminal::new(TestBackend::new(100, 30)).unwrap();
    let mut state = empty_state();
    let (batches, rx) = tokio::sync::mpsc::channel(4);
    let (keys, events) = futures::channel::mpsc::unbounded::<std::io::Result<Event>>();
    let controls = screen::Controls {
        clock: Box::new(|| NOW_NS),
        refused: Some(Box::new(|| screen::Refused {
            spans: 7,
            requests_unread: 3,
            requests_ignored: 2,
            requests_unauthenticated: 0,
        })),
        ..screen::Controls::default()
    };
    let task = tokio::spawn(async move {
        screen::run(&mut terminal, &mut state, rx, events, controls)
            .await
            .unwrap();
        (terminal, state)
    });
    batches
        .send(budget_top::batch::Batch {
            spans: fixture_spans(),
            attributes: Vec::new(),
            raw: None,
            received: None,
        })
        .await
        .unwrap();
    tokio::time::sleep(screen::FRAME * 3).await;
    keys.unbounded_send(Ok(Event::Key(KeyEvent::new(
        KeyCode::Char('q'),
        KeyModifiers::NONE,
    ))))
    .unwrap();
    let (terminal, state) = tokio::time::timeout(std::time::Duration::from_secs(5), task)
        .await
        .expect("the loop stops on q")
        .unwrap();
    assert!(state.ui.quit);
    assert_eq!(state.spans_dropped, 7);
    let text = screen_text(&terminal);
    assert!(text.contains("7 dropped"), "{text}");
    assert!(text.contains("3 requests refused"), "{text}");
    assert!(text.contains("2 ignored (metrics/logs)"), "{text}");
    assert!(text.contains("gateway POST /checkout"), "{text}");
}

/// A demo that only switches: the test turns its generation.
struct SwitchingDemo(std::sync::Arc<std::sync::atomic::AtomicU64>);

impl screen::DemoControl for SwitchingDemo {
    fn status(&self) -> screen::DemoStatus {
        screen::DemoStatus {
            scenario: "6/7 burst".into(),
            lesson: "the same burst done right".into(),
            keys: String::new(),
            focus: None,
        }
    }
    fn key(&mut self, _: char) -> bool {
        false
    }
    fn generation(&self) -> u64 {
        self.0.load(std::sync::atomic::Ordering::Relaxed)
    }
}

/// A scenario switch empties the screen: the chains and counts of the scenarios before are
/// gone, late spans of their chains are dropped, and the new scenario's chains show alone.
#[tokio::test(start_paused = true)]
async fn a_demo_switch_starts_the_screen_over() {
    use crossterm::event::Event;
    use ratatui::Terminal;
    use ratatui::backend::TestBackend;
    use std::sync::atomic::{AtomicU64, Ordering};

    let generation = std::sync::Arc::new(AtomicU64::new(3));
    let mut terminal = Terminal::new(TestBackend::new(100, 30)).unwrap();
    let mut state = empty_state();
    let (batches, rx) = tokio::sync::mpsc::channel(4);
    let (keys, events) = futures::channel::mpsc::unbounded::<std::io::Result<Event>>();
    let controls = screen::Controls {
        clock: Box::new(|| NOW_NS),
        demo: Some(Box::new(SwitchingDemo(generation.clone()))),
        ..screen::Controls::default()
    };
    let task = tokio::spawn(async move {
        screen::run(&mut terminal, &mut state, rx, events, controls)
            .await
            .unwrap();
        (terminal, state)
    });
    let batch = |spans| budget_top::batch::Batch {
        spans,
        attributes: Vec::new(),
        raw: None,
        received: None,
    };
    let old = fixture_spans();
    batches.send(batch(old.clone())).await.unwrap();
    tokio::time::sleep(screen::FRAME * 3).await;
    generation.fetch_add(1, Ordering::Relaxed);
    tokio::time::sleep(screen::FRAME * 3).await;
    // A late span of an old chain, then a chain of the new scenario.
    batches.send(batch(old[..1].to_vec())).await.unwrap();
    let mut fresh = ChainBuilder::new(900, 14_000);
    fresh.edge(1, "frontdoor", "GET /burst", 0, 5, 100);
    batches.send(batch(fresh.spans)).await.unwrap();
    tokio::time::sleep(screen::FRAME * 3).await;
    keys.unbounded_send(Ok(Event::Key(KeyEvent::new(
        KeyCode::Char('q'),
        KeyModifiers::NONE,
    ))))
    .unwrap();
    let (terminal, state) = tokio::time::timeout(std::time::Duration::from_secs(5), task)
        .await
        .expect("the loop stops on q")
        .unwrap();
    let text = screen_text(&terminal);
    assert_eq!(state.data.store.counters().chains_held, 1, "{text}");
    assert!(text.contains("frontdoor GET /burst"), "{text}");
    assert!(!text.contains("gateway"), "no chain of before: {text}");
    assert!(text.contains(" 1 chains "), "{text}");
    assert!(text.contains("✖ 0 error"), "the counts start over: {text}");
}

/// A demo that shows nothing until started (as on the live screen before `d`).
struct LaterDemo(std::sync::Arc<std::sync::atomic::AtomicBool>);

impl screen::DemoControl for LaterDemo {
    fn status(&self) -> screen::DemoStatus {
        if !self.0.load(std::sync::atomic::Ordering::Relaxed) {
            return screen::DemoStatus::default();
        }
        screen::DemoStatus {
            scenario: "starting 1/7 propagate…".into(),
            lesson: "Everything right".into(),
            keys: String::new(),
            focus: None,
        }
    }
    fn key(&mut self, _: char) -> bool {
        false
    }
}

/// `d` on the live screen: once the demo's status shows, the header says demo and the
/// "starting the demo..." notice is gone without another key.
#[tokio::test(start_paused = true)]
async fn d_turns_the_live_screen_into_the_demo_screen() {
    use crossterm::event::Event;
    use ratatui::Terminal;
    use ratatui::backend::TestBackend;
    use std::sync::atomic::{AtomicBool, Ordering};

    let started = std::sync::Arc::new(AtomicBool::new(false));
    let mut terminal = Terminal::new(TestBackend::new(80, 24)).unwrap();
    let mut state = empty_state();
    assert_eq!(state.mode, screen::Mode::Live);
    let (_batches, rx) = tokio::sync::mpsc::channel(4);
    let (keys, events) = futures::channel::mpsc::unbounded::<std::io::Result<Event>>();
    let start_flag = started.clone();
    let controls = screen::Controls {
        clock: Box::new(|| NOW_NS),
        demo: Some(Box::new(LaterDemo(started.clone()))),
        start_demo: Some(Box::new(move || start_flag.store(true, Ordering::Relaxed))),
        ..screen::Controls::default()
    };
    let (screens_tx, mut screens) = tokio::sync::mpsc::unbounded_channel();
    let task = tokio::spawn(async move {
        screen::run(&mut terminal, &mut state, rx, events, controls)
            .await
            .unwrap();
        let _ = screens_tx.send(screen_text(&terminal));
        state
    });
    tokio::time::sleep(screen::FRAME * 3).await;
    keys.unbounded_send(Ok(Event::Key(KeyEvent::new(
        KeyCode::Char('d'),
        KeyModifiers::NONE,
    ))))
    .unwrap();
    tokio::time::sleep(screen::FRAME * 3).await;
    assert!(started.load(Ordering::Relaxed), "d started the demo");
    keys.unbounded_send(Ok(Event::Key(KeyEvent::new(
        KeyCode::Char('q'),
        KeyModifiers::NONE,
    ))))
    .unwrap();
    let state = tokio::time::timeout(std::time::Duration::from_secs(5), task)
        .await
        .expect("the loop stops on q")
        .unwrap();
    let text = screens.recv().await.unwrap();
    assert_eq!(state.mode, screen::Mode::Demo);
    assert!(text.starts_with("budget-top demo"), "{text}");
    assert!(!text.contains("starting the demo..."), "{text}");
    assert!(text.contains("starting 1/7 propagate…"), "{text}");
}

/// When the terminal's event stream ends (the pty closed), the loop ends too.
#[tokio::test(start_paused = true)]
async fn the_loop_ends_when_the_terminal_goes_away() {
    use ratatui::Terminal;
    use ratatui::backend::TestBackend;

    let mut terminal = Terminal::new(TestBackend::new(80, 24)).unwrap();
    let mut state = empty_state();
    let (_batches, rx) = tokio::sync::mpsc::channel(1);
    let events = futures::stream::empty::<std::io::Result<crossterm::event::Event>>();
    let run = screen::run(
        &mut terminal,
        &mut state,
        rx,
        events,
        screen::Controls::default(),
    );
    tokio::time::timeout(std::time::Duration::from_secs(5), run)
        .await
        .expect("the loop stops")
        .unwrap();
}

struct FakeDemo {
    scenario: usize,
    latency_ms: i64,
    /// A lesson of its own instead of the short one with the latency.
    lesson: Option<&'static str>,
}

impl screen::DemoControl for FakeDemo {
    fn status(&self) -> screen::DemoStatus {
        screen::DemoStatus {
            scenario: format!("{}/7 fixed-timeout", self.scenario),
            lesson: self.lesson.map_or_else(
                || {
                    format!(
                        "bff forwards a fixed 3 s instead of what remains (inventory latency {} ms)",
                        self.latency_ms
                    )
                },
                str::to_owned,
            ),
            keys: "1-7 scenario  +/- latency".into(),
            focus: None,
        }
    }
    fn key(&mut self, key: char) -> bool {
        match key {
            '1'..='7' => self.scenario = key as usize - '0' as usize,
            '+' => self.latency_ms += 50,
            '-' => self.latency_ms -= 50,
            _ => return false,
        }
        true
    }
}

#[test]
fn demo_keys_reach_the_demo_and_its_lesson_is_on_screen() {
    let mut state = fixture_state(false);
    let mut demo: Option<Box<dyn screen::DemoControl>> = Some(Box::new(FakeDemo {
        scenario: 2,
        latency_ms: 100,
        lesson: None,
    }));
    state.demo = demo.as_ref().map(|d| d.status());
    let press = |state: &mut State, demo: &mut Option<Box<dyn screen::DemoControl>>, c: char| {
        state.on_key(KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE), demo)
    };
    assert!(press(&mut state, &mut demo, '3'));
    assert!(press(&mut state, &mut demo, '+'));
    assert!(
        !press(&mut state, &mut demo, 'z'),
        "an unused key is not claimed"
    );
    assert!(
        press(&mut state, &mut demo, 'j'),
        "the screen's own keys stay the screen's"
    );
    let text = snap("demo", &state, 80, 24);
    assert!(text.contains("3/7 fixed-timeout"), "{text}");
    assert!(text.contains("inventory latency 150 ms"), "{text}");
    snap("demo", &state, 200, 60);
}

/// The fixed-timeout lesson as the demo shows it: longer than 80 and than 120 columns.
const LONG_LESSON: &str = "bff forwards a fixed 3 s instead of what remains: orders and inventory keep working after the gateway gave up (budget_reset).";

#[test]
fn a_long_lesson_wraps_whole_and_the_list_gives_it_room() {
    let mut state = fixture_state(false);
    let demo = FakeDemo {
        scenario: 2,
        latency_ms: 100,
        lesson: Some(LONG_LESSON),
    };
    state.demo = Some(demo_status(&demo));
    for (w, h, rows) in [(80u16, 24u16, 2usize), (120, 40, 2)] {
        let text = snap("demo_lesson", &state, w, h);
        let lines: Vec<&str> = text.lines().collect();
        // Every word of the lesson is on screen, in order, on the rows above the key hints.
        let lesson: Vec<&str> = lines[lines.len() - 1 - rows..lines.len() - 1]
            .iter()
            .map(|l| l.trim_end())
            .collect();
        assert_eq!(lesson.join(" "), LONG_LESSON, "{text}");
        assert!(lines[lines.len() - 2 - rows].starts_with("▶ 2/7 fixed-timeout"));
        // The list ends above the footer: no row of it is hidden under the lesson.
        let l = screen::layout(&state, ratatui::layout::Rect::new(0, 0, w, h));
        assert_eq!(l.body.y + l.body.height, l.footer.y);
        for part in [l.list, l.waterfall].into_iter().flatten() {
            assert!(part.y + part.height <= l.footer.y, "{part:?} under {l:?}");
        }
        assert_eq!(l.footer.height as usize, rows + 2);
    }
    // Far too long a lesson: three lines at most, the cut marked.
    state.demo.as_mut().unwrap().lesson = LONG_LESSON.repeat(4);
    let l = screen::layout(&state, ratatui::layout::Rect::new(0, 0, 80, 24));
    assert_eq!(l.footer.height, 5);
    let text = screen_text(&draw(&state, 80, 24));
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[22].trim_end().ends_with('…'), "{text}");
    assert!(
        l.list.unwrap().height >= 10,
        "the list keeps most of the screen"
    );
}

/// At 80 columns the workshop's scenario line keeps its keys whole (the service knob gives way
/// first), and the lesson never parts a number from its unit.
#[test]
fn the_scenario_line_keeps_its_keys_whole_and_numbers_keep_their_units() {
    let mut state = fixture_state(false);
    state.demo = Some(screen::DemoStatus {
        scenario: "step 2/8 propagate, slow settlement  ·  settlement 750 ms".into(),
        lesson: "budget_reset on bff's call: 3000 ms forwarded with ~950 left. orders works ~600 ms after bff gave up (orphaned_work).".into(),
        keys: "w next  1-7 jump  [ ] +/- latency".into(),
        focus: None,
    });
    let text = screen_text(&draw(&state, 80, 24));
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines[20].trim_end(),
        "▶ step 2/8 propagate, slow settlement  w next  1-7 jump  [ ] +/- latency"
    );
    assert!(text.contains("~600 ms"), "{text}");
    let text = screen_text(&draw(&state, 120, 40));
    assert!(
        text.contains("settlement  ·  settlement 750 ms  w next  1-7 jump  [ ] +/- latency"),
        "{text}"
    );
    // Not even the keys fit next to the scenario: the scenario alone.
    state.demo.as_mut().unwrap().scenario = "x".repeat(60);
    let text = screen_text(&draw(&state, 80, 24));
    assert!(!text.contains("1-7 jump"), "{text}");
}

fn demo_status(demo: &FakeDemo) -> screen::DemoStatus {
    use screen::DemoControl as _;
    demo.status()
}

#[test]
fn evicted_chains_leave_the_list() {
    use budget_top::store::Store;
    let mut state = State::new(screen::ScreenData::new(Store::new(30)), screen::Mode::Live);
    state.now_unix_nano = NOW_NS;
    for t in 0..40 {
        let mut c = ChainBuilder::new(t + 100, t * 10);
        c.edge(1, "gateway", "GET /x", 0, 5, 100);
        c.call(2, 1, "gateway", "GET y", 1, 4, 99, Some(90));
        c.hop(3, Some(2), "y", "GET /y", 2, 3, Some(90));
        state.data.add_spans(c.spans, NOW_NS);
        if t % 7 == 0 {
            state.settle();
        }
    }
    state.settle();
    let held = state.data.store.counters().chains_held as usize;
    assert_eq!(held, 10, "30 spans of 3-span chains");
    assert_eq!(state.data.visible.len(), held);
    assert!(
        state
            .data
            .visible
            .iter()
            .all(|id| state.data.analysis(id).is_some())
    );
    assert_eq!(state.data.visible[0], tid(139), "the newest is on top");
    let text = screen_text(&draw(&state, 80, 24));
    assert!(text.contains("evicted: 30"), "{text}");
}

#[test]
fn export_writes_the_selected_chain_as_one_otlp_json_line() {
    use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;

    let mut state = fixture_state(false);
    let trace = state.data.visible[3];
    let i = state
        .data
        .visible
        .iter()
        .position(|id| *id == trace)
        .unwrap();
    state.ui.view = View::Chains;
    key(&mut state, KeyCode::Home);
    for _ in 0..i {
        key(&mut state, KeyCode::Char('j'));
    }
    let expected_spans = state.selected_chain().unwrap().summary.spans as usize;

    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("screen-export");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("chains.jsonl");
    let _ = std::fs::remove_file(&path);
    let message = state.export_selected(&path);
    assert_eq!(
        message,
        format!(
            "exported chain {trace} to {} (check --input or replay reads it)",
            path.display()
        )
    );
    let text = std::fs::read_to_string(&path).unwrap();
    assert_eq!(text.lines().count(), 1);
    let request: ExportTraceServiceRequest = serde_json::from_str(text.trim_end()).unwrap();
    let spans: Vec<_> = request
        .resource_spans
        .iter()
        .flat_map(|r| &r.scope_spans)
        .flat_map(|s| &s.spans)
        .collect();
    assert_eq!(spans.len(), expected_spans);
    assert!(spans.iter().all(|s| s.trace_id == trace.0.to_vec()));

    // Nothing selected: nothing written, and the footer says so.
    let mut empty = fixture_state(false);
    empty.ui.query.search = "no such service".into();
    empty.settle();
    assert_eq!(empty.export_selected(&path), "no chain selected to export");
    assert_eq!(std::fs::read_to_string(&path).unwrap().lines().count(), 1);
}

/// One truth on every screen: the chain list's wasted ms, the services' dead work and the
/// edges' waste are the same milliseconds (a root hop's own dead work has no edge into it).
#[test]
fn the_list_the_services_and_the_edges_count_the_same_waste() {
    let mut state = fixture_state(false);
    key(&mut state, KeyCode::BackTab);
    key(&mut state, KeyCode::BackTab);
    assert_eq!(state.ui.view, View::Services);
    state.settle();
    let mut chains = 0;
    let mut roots = 0;
    for id in &state.data.visible {
        let view = state.data.chain_view(id).unwrap();
        chains += view.summary.wasted_ms;
        roots += view
            .rows()
            .filter(|(row, span)| row.parent_row.is_none() && span.kind.is_hop())
            .map(|(row, _)| i64::from(row.dead_ms))
            .sum::<i64>();
    }
    let services: i64 = state
        .data
        .services
        .iter()
        .map(|(_, s)| s.totals.wasted_ms)
        .sum();
    let edges: i64 = state.data.store.edges().iter().map(|e| e.wasted_ms).sum();
    assert!(chains > 0);
    assert_eq!(services, chains);
    assert_eq!(state.data.store.wasted_ms(), chains);
    assert_eq!(edges, chains - roots);
    // The cart chain's root answered past the budget it was given: a late answer, not dead
    // work (no span shows its caller gone); no fixture's root works past its own span's end.
    assert_eq!(roots, 0);
}

/// `s s` sorts by most waste and selects the top of that order at once: the `Tab` right after
/// shows that chain's waterfall, not the one selected before.
#[test]
fn sorting_then_tab_shows_the_top_of_the_new_order() {
    let mut state = fixture_state(false);
    select_chain(&mut state, 7);
    key(&mut state, KeyCode::Home);
    key(&mut state, KeyCode::Char('s'));
    key(&mut state, KeyCode::Char('s'));
    key(&mut state, KeyCode::Tab);
    assert_eq!(state.ui.view, View::Waterfall);
    let most = state
        .data
        .visible
        .iter()
        .max_by_key(|id| state.data.analysis(id).unwrap().summary.wasted_ms)
        .copied()
        .unwrap();
    assert_eq!(state.selected_chain().unwrap().trace_id, most);
    let text = screen_text(&draw(&state, 200, 60));
    assert!(text.contains("sort: most waste"), "{text}");
}

/// In the chain list, `n`/`N` walk the selected chain's findings in the words under the list
/// (no waterfall fits at 80x24), and the one chosen stays as the list settles.
#[test]
fn n_in_the_chain_list_walks_the_findings_and_the_choice_stays() {
    let mut state = fixture_state(false);
    select_chain(&mut state, 1);
    let text = screen_text(&draw(&state, 80, 24));
    assert!(
        text.contains("finding 1/2: ✖ budget_reset (error)"),
        "{text}"
    );
    assert!(text.contains("Reset: a service forwarded"), "{text}");
    key(&mut state, KeyCode::Char('n'));
    state.now_unix_nano += 1_000_000_000;
    state.data.add_spans(Vec::new(), state.now_unix_nano);
    state.settle();
    let text = screen_text(&draw(&state, 80, 24));
    assert!(
        text.contains("finding 2/2: ✖ orphaned_work (error)"),
        "{text}"
    );
    assert!(
        text.contains("inventory worked 280 ms after orders stopped waiting"),
        "{text}"
    );
    key(&mut state, KeyCode::Char('N'));
    let text = screen_text(&draw(&state, 80, 24));
    assert!(text.contains("finding 1/2"), "{text}");
}

/// In the demo the list opens on the newest chain that shows what the scenario teaches, with
/// that finding explained, even when newer chains show something else or nothing.
#[test]
fn the_demo_opens_on_the_chain_that_shows_its_lesson() {
    use deadline_budget::analysis::FindingKind;
    let mut state = fixture_state(false);
    let lesson = |focus: Vec<FindingKind>| screen::DemoStatus {
        scenario: "7/10 no-dequeue-check".into(),
        lesson: "orders takes queued items without checking their deadline".into(),
        keys: String::new(),
        focus: Some(focus),
    };
    state.set_demo_status(Some(lesson(vec![FindingKind::RanAfterExpiry])));
    assert_eq!(state.selected_chain().unwrap().trace_id, tid(3));
    for (w, h) in [(80, 24), (120, 40)] {
        let text = screen_text(&draw(&state, w, h));
        assert!(
            text.contains("ran_after_expiry (error) at payments"),
            "{text}"
        );
        assert!(text.contains("Ran after expiry: work started"), "{text}");
        assert!(text.contains(" FINDING"), "{text}");
    }
    // The first kind that some chain shows wins; the column names it.
    state.set_demo_status(Some(lesson(vec![
        FindingKind::ShedExpired,
        FindingKind::QueuePressure,
    ])));
    assert_eq!(state.selected_chain().unwrap().trace_id, tid(4));
    let text = screen_text(&draw(&state, 120, 40));
    assert!(text.contains("shed_expired (info) at reports"), "{text}");
    assert!(text.contains("● shed_expired +"), "{text}");
    // Where nothing should go wrong, the newest chain that failed for its user.
    state.set_demo_status(Some(lesson(Vec::new())));
    let chain = state.selected_chain().unwrap();
    assert!(chain.summary.outcome.failed(), "{:?}", chain.summary);
}

/// Below 80x24 the screen says what to do instead of drawing a broken layout.
#[test]
fn a_window_below_80x24_asks_to_be_made_bigger() {
    let state = fixture_state(false);
    for (w, h) in [(79, 24), (80, 23), (40, 10)] {
        let text = screen_text(&draw(&state, w, h));
        assert!(text.contains("make it bigger"), "{w}x{h}: {text}");
        assert!(!text.contains("Chains │"), "{w}x{h}: {text}");
    }
    assert!(!screen_text(&draw(&state, 80, 24)).contains("make it bigger"));
}

/// A retried call's rows say which attempt each is; a hop's own span does not repeat the
/// service's name.
#[test]
fn retries_are_numbered_and_own_spans_not_named_twice() {
    let mut state = fixture_state(false);
    select_chain(&mut state, 5);
    key(&mut state, KeyCode::Enter);
    let text = screen_text(&draw(&state, 120, 40));
    assert!(text.contains("→ #1 PUT pricing"), "{text}");
    assert!(text.contains("→ #2 PUT pricing"), "{text}");
    assert!(
        text.contains("rcv: received"),
        "the key to the figures: {text}"
    );
}

/// A chain whose root has not arrived stays out of the list for `ROOTLESS_GRACE_NS` after its
/// first span arrived (its request span is usually a moment behind), then is listed even if the
/// root never comes; a later span does not restart the wait, and a listed chain that gains a
/// span with a missing parent stays listed.
#[test]
fn a_chain_without_its_root_waits_out_its_grace_from_its_first_span() {
    use budget_top::screen::{ListQuery, ROOTLESS_GRACE_NS, ScreenData};
    use budget_top::store::Store;
    let s = 1_000_000_000;
    let mut data = ScreenData::new(Store::new(10_000));
    let query = ListQuery::default();
    let mut whole = ChainBuilder::new(1, 0);
    whole.hop(1, None, "frontend", "GET /", 0, 100, Some(1000));
    let mut rootless = ChainBuilder::new(2, 0);
    rootless.hop(2, Some(1), "orders", "GET /orders", 10, 90, Some(900));
    data.add_spans(whole.spans.clone(), NOW_NS);
    data.add_spans(rootless.spans.clone(), NOW_NS);
    data.settle(&query, NOW_NS, false);
    assert_eq!(data.visible, vec![tid(1)], "the rootless chain waits");

    // Another span of it 3 s later: the wait still counts from the first.
    let mut more = ChainBuilder::new(2, 0);
    more.hop(3, Some(2), "inventory", "GET /stock", 20, 80, Some(800));
    data.add_spans(more.spans.clone(), NOW_NS + 3 * s);
    data.settle(&query, NOW_NS + 3 * s, false);
    assert_eq!(data.visible, vec![tid(1)]);
    data.settle(&query, NOW_NS + ROOTLESS_GRACE_NS - 1, false);
    assert_eq!(data.visible, vec![tid(1)]);
    data.settle(&query, NOW_NS + ROOTLESS_GRACE_NS, false);
    let mut listed = data.visible.clone();
    listed.sort();
    assert_eq!(
        listed,
        vec![tid(1), tid(2)],
        "listed once its grace is over"
    );

    // The listed whole chain gains a span whose parent it does not hold: it stays listed.
    let mut late = ChainBuilder::new(1, 0);
    late.hop(9, Some(8), "payments", "POST /pay", 30, 60, Some(500));
    data.add_spans(late.spans.clone(), NOW_NS + 6 * s);
    data.settle(&query, NOW_NS + 6 * s, false);
    assert!(data.visible.contains(&tid(1)), "{:?}", data.visible);
}

/// A burst larger than one frame's analysis slice is analysed over several frames, and every
/// chain of it reaches the list, not only those analysed in the first frame.
#[test]
fn every_chain_of_a_burst_analysed_over_several_frames_is_listed() {
    use budget_top::screen::{ListQuery, ScreenData};
    use budget_top::store::Store;
    const CHAINS: u64 = 20_000;
    let mut data = ScreenData::new(Store::new(1_000_000));
    let mut spans = Vec::new();
    for t in 0..CHAINS {
        let mut c = ChainBuilder::new(t + 1, t / 10);
        c.edge(1, "gateway", "GET /", 0, 100, 1000);
        c.call(2, 1, "gateway", "GET orders", 5, 95, 995, Some(990));
        c.hop(3, Some(2), "orders", "GET /orders", 8, 90, Some(990));
        spans.extend(c.spans);
    }
    data.add_spans(spans, NOW_NS);
    let query = ListQuery::default();
    let mut frames = 0;
    for _ in 0..2_000 {
        data.settle(&query, NOW_NS, false);
        frames += 1;
        if !data.store.has_dirty() && data.visible.len() == CHAINS as usize {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    assert!(!data.store.has_dirty(), "analysed within {frames} frames");
    assert_eq!(data.visible.len(), CHAINS as usize, "after {frames} frames");
}

/// In the `/` search box Ctrl-U clears the line and Ctrl-W deletes the word before the cursor,
/// as readline does; other Ctrl keys type nothing (issue 30: they typed their letter).
#[test]
fn the_search_box_takes_readlines_ctrl_u_and_ctrl_w() {
    let mut state = fixture_state(false);
    let ctrl = |state: &mut State, c: char| {
        state.on_key(
            KeyEvent::new(KeyCode::Char(c), KeyModifiers::CONTROL),
            &mut None,
        )
    };
    key(&mut state, KeyCode::Char('/'));
    for c in "orders inv".chars() {
        key(&mut state, KeyCode::Char(c));
    }
    assert_eq!(state.ui.query.search, "orders inv");
    assert!(ctrl(&mut state, 'w'));
    assert_eq!(state.ui.query.search, "orders ");
    assert!(ctrl(&mut state, 'w'));
    assert_eq!(
        state.ui.query.search, "",
        "the word and the spaces after it"
    );
    for c in "gateway".chars() {
        key(&mut state, KeyCode::Char(c));
    }
    assert!(!ctrl(&mut state, 'x'), "another Ctrl key types nothing");
    assert_eq!(state.ui.query.search, "gateway");
    assert!(ctrl(&mut state, 'u'));
    assert_eq!(state.ui.query.search, "");
    assert!(state.ui.searching, "still in the box");
    state.settle();
    assert!(screen_text(&draw(&state, 80, 24)).contains("/▏  Enter keeps"));
}

/// At 80x24 the scenario line has no room for the service knob, so `[ ]` and `+/-` say which
/// service and latency they act on in the footer (issue 30: it showed only at wide sizes).
#[test]
fn the_demo_knob_keys_say_the_service_and_latency_at_80_columns() {
    struct Knob {
        service: usize,
        ms: u64,
    }
    impl screen::DemoControl for Knob {
        fn status(&self) -> screen::DemoStatus {
            let name = ["orders", "inventory"][self.service];
            screen::DemoStatus {
                scenario: format!("2/10 fixed-timeout  ·  {name} {} ms", self.ms),
                lesson: "bff forwards a fixed 3 s instead of what remains.".into(),
                keys: "1-9 0 scenario  c cure  [ ] service  +/- latency".into(),
                focus: None,
            }
        }
        fn key(&mut self, key: char) -> bool {
            match key {
                ']' => self.service = (self.service + 1) % 2,
                '+' => self.ms += 50,
                _ => return false,
            }
            true
        }
    }
    let mut state = fixture_state(false);
    let mut demo: Option<Box<dyn screen::DemoControl>> = Some(Box::new(Knob {
        service: 1,
        ms: 1500,
    }));
    state.demo = demo.as_ref().map(|d| d.status());
    let text = screen_text(&draw(&state, 80, 24));
    assert!(
        !text.contains("inventory 1500 ms"),
        "no room for it: {text}"
    );
    let press = |state: &mut State, demo: &mut Option<Box<dyn screen::DemoControl>>, c: char| {
        state.on_key(KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE), demo)
    };
    assert!(press(&mut state, &mut demo, '+'));
    let text = screen_text(&draw(&state, 80, 24));
    assert!(
        text.contains("inventory 1550 ms  ([ ] service, +/- 50 ms)"),
        "{text}"
    );
    assert!(press(&mut state, &mut demo, ']'));
    let text = screen_text(&draw(&state, 80, 24));
    assert!(text.contains("orders 1550 ms"), "{text}");
    // Another demo key says nothing of the knob.
    state.ui.message = None;
    assert!(!press(&mut state, &mut demo, 'x'));
    assert_eq!(state.ui.message, None);
}

/// At 80x24 a line too long for the screen ends with `…` (a message, the header's coverage
/// warning), and an axis label is drawn whole or not at all: `┆3000ms` cut to `┆30` read as 30.
#[test]
fn lines_cut_at_80_columns_say_so() {
    use budget_top::screen::ScreenData;
    use budget_top::store::Store;
    let mut state = fixture_state(false);
    state.ui.message = Some(format!(
        "exported chain {} to budget-top-export.jsonl (check --input or replay reads it)",
        "0123456789abcdef".repeat(2)
    ));
    let text = screen_text(&draw(&state, 80, 24));
    let footer = text.lines().last().unwrap();
    assert!(footer.ends_with('…'), "{footer:?}");
    assert!(footer.starts_with("exported chain 0123"), "{footer:?}");

    // Stock instrumentation only: no hop carries a budget, and the header says so (once the
    // chain is judged: at once, with --settle 0s).
    let mut data = ScreenData::new(Store::new(1000).with_settle(std::time::Duration::ZERO));
    let mut c = ChainBuilder::new(1, 0);
    c.span(
        1,
        None,
        "gateway",
        "GET /",
        deadline_budget::analysis::SpanKind::Server,
        0,
        100,
    );
    data.add_spans(c.spans, NOW_NS);
    let mut blind = screen::State::new(data, screen::Mode::Live);
    blind.now_unix_nano = NOW_NS;
    blind.settle();
    let text = screen_text(&draw(&blind, 80, 24));
    let warning = text
        .lines()
        .find(|l| l.contains("⚠ budget"))
        .unwrap_or_else(|| panic!("{text}"));
    // At 80 columns the shorter form, whole: what to do is on the line, not cut off.
    assert!(
        warning.trim_end().ends_with("--budget-header"),
        "{warning:?}"
    );
    assert!(!warning.contains('…'), "{warning:?}");
    let text = screen_text(&draw(&blind, 200, 60));
    assert!(
        text.contains("⚠ budget known on 0 of 1 hops: add --budget-header or the contract's attributes (none: gateway)"),
        "whole where it fits: {text}"
    );

    // Every axis label of every waterfall at 80 columns is whole: a number and its unit.
    for trace in [1, 2, 3, 4, 9] {
        select_chain(&mut state, trace);
        key(&mut state, KeyCode::Enter);
        let text = screen_text(&draw(&state, 80, 24));
        let axis = text
            .lines()
            .find(|l| l.contains("┆0ms"))
            .unwrap_or_else(|| panic!("no axis: {text}"));
        for label in axis.split('┆').skip(1) {
            let label = label.trim_end();
            assert!(
                label.ends_with("ms") || label.ends_with('s'),
                "axis label {label:?} cut: {axis:?}"
            );
        }
        key(&mut state, KeyCode::Esc);
    }
}

/// A chain of three spans, gateway calling `callee`, for the tables' tests.
fn call_to(trace: u64, callee: &str) -> Vec<deadline_budget::analysis::Span> {
    let mut c = ChainBuilder::new(trace, 0);
    c.edge(1, "gateway", "GET /", 0, 100, 1000);
    c.call(2, 1, "gateway", "GET x", 5, 95, 995, Some(990));
    c.hop(3, Some(2), callee, "GET /x", 8, 90, Some(990));
    c.spans
}

/// The Edges and Services tables are the store's totals (`CONVENTIONS.md` section 6): every
/// chain judged, evicted ones included; `m` switches both to the chains judged in the last
/// minute, and back; the header says so.
#[test]
fn m_shows_the_tables_over_the_last_minute_evicted_chains_counted() {
    use budget_top::screen::ScreenData;
    use budget_top::store::Store;
    let s = 1_000_000_000;
    let store = Store::new(6).with_settle(std::time::Duration::ZERO);
    let mut state = State::new(ScreenData::new(store), screen::Mode::Live);
    state.ui.view = View::Edges;
    state.now_unix_nano = NOW_NS;
    state.data.add_spans(call_to(1, "orders"), NOW_NS);
    state.data.add_spans(call_to(2, "orders"), NOW_NS);
    state.settle();
    // 90 s later: two chains to payments; the orders chains leave memory (6 spans at most).
    state.now_unix_nano = NOW_NS + 90 * s;
    state
        .data
        .add_spans(call_to(3, "payments"), NOW_NS + 90 * s);
    state
        .data
        .add_spans(call_to(4, "payments"), NOW_NS + 90 * s);
    state.settle();
    assert_eq!(state.data.store.counters().chains_evicted, 2);
    let calls = |state: &State| -> Vec<(String, u64)> {
        let mut v: Vec<(String, u64)> = state
            .data
            .table_totals()
            .edges
            .sorted()
            .iter()
            .map(|e| (e.callee.to_string(), e.calls))
            .collect();
        v.sort();
        v
    };
    assert_eq!(
        calls(&state),
        [("orders".into(), 2), ("payments".into(), 2)],
        "since start, the evicted chains counted"
    );
    assert!(key(&mut state, KeyCode::Char('m')));
    assert_eq!(calls(&state), [("payments".into(), 2)], "the last minute");
    let text = screen_text(&draw(&state, 120, 30));
    assert!(text.contains("tables: last minute"), "{text}");
    assert!(text.contains("m minute/all"), "{text}");
    key(&mut state, KeyCode::Tab);
    assert_eq!(state.ui.view, View::Services);
    let services: Vec<&str> = state.data.services.iter().map(|(n, _)| &**n).collect();
    assert!(!services.contains(&"orders"), "{services:?}");
    assert!(services.contains(&"payments"), "{services:?}");
    let text = screen_text(&draw(&state, 120, 30));
    assert!(text.contains("last minute (m: since start)"), "{text}");
    assert!(key(&mut state, KeyCode::Char('m')));
    let services: Vec<&str> = state.data.services.iter().map(|(n, _)| &**n).collect();
    assert!(services.contains(&"orders"), "{services:?}");
    assert_eq!(calls(&state).len(), 2, "since start again");
}

/// Runs the screen loop on `state` for `time` of tokio's (paused) clock, `batch` sent first,
/// then `q`; gives the state back with the screen drawn.
async fn run_for(
    state: State,
    clock: impl Fn() -> u64 + Send + 'static,
    batch: Option<budget_top::batch::Batch>,
    time: std::time::Duration,
) -> (ratatui::Terminal<ratatui::backend::TestBackend>, State) {
    use crossterm::event::Event;
    let (batches, rx) = tokio::sync::mpsc::channel(4);
    let (keys, events) = futures::channel::mpsc::unbounded::<std::io::Result<Event>>();
    let controls = screen::Controls {
        clock: Box::new(clock),
        ..screen::Controls::default()
    };
    let mut state = state;
    let task = tokio::spawn(async move {
        let backend = ratatui::backend::TestBackend::new(120, 30);
        let mut terminal = ratatui::Terminal::new(backend).unwrap();
        screen::run(&mut terminal, &mut state, rx, events, controls)
            .await
            .unwrap();
        (terminal, state)
    });
    if let Some(batch) = batch {
        batches.send(batch).await.unwrap();
    }
    tokio::time::sleep(time).await;
    let q = KeyEvent::new(KeyCode::Char('q'), KeyModifiers::NONE);
    keys.unbounded_send(Ok(Event::Key(q))).unwrap();
    task.await.unwrap()
}

/// The live screen judges a chain once it has been quiet for `--settle` (5 s here), on the
/// loop's clock (tokio's, paused): the header's totals count it then, not before.
#[tokio::test(start_paused = true)]
async fn the_screen_judges_a_chain_once_quiet_for_settle() {
    use std::time::Duration;

    let started = tokio::time::Instant::now();
    let clock = move || NOW_NS + started.elapsed().as_nanos() as u64;
    let store = budget_top::store::Store::new(1000).with_settle(Duration::from_secs(5));
    let state = State::new(screen::ScreenData::new(store), screen::Mode::Live);
    let batch = budget_top::batch::Batch {
        spans: call_to(1, "orders"),
        attributes: Vec::new(),
        raw: None,
        received: None,
    };
    let (_, mut state) = run_for(state, clock, Some(batch), Duration::from_secs(3)).await;
    assert_eq!(state.data.store.totals().traces, 0, "quiet for 3 s of 5");
    assert_eq!(state.data.store.counters().chains_held, 1);

    // The same screen again, 4 s on: the chain is judged.
    state.ui.quit = false;
    let (terminal, state) = run_for(state, clock, None, Duration::from_secs(4)).await;
    assert_eq!(state.data.store.totals().traces, 1, "quiet for 7 s: judged");
    let text = screen_text(&terminal);
    assert!(text.contains("1 chains judged"), "{text}");
}

/// The Map: every service of the fixtures as a box, left to right by who calls whom, the reset
/// marked `✖` on its edge with its label, the services that work for nobody hatched; at 80x24
/// the view is on the worst edge, its words whole under the map. Without colour the marks
/// are all there.
#[test]
fn the_map_draws_who_calls_whom_with_the_reset_marked() {
    for color in [false, true] {
        let mut state = fixture_state(color);
        // Shift-Tab from the list: the Map.
        key(&mut state, KeyCode::BackTab);
        assert_eq!(state.ui.view, View::Map);
        state.settle();
        let shot = |state: &State, w, h| {
            if color {
                screen_text(&draw(state, w, h))
            } else {
                snap("map", state, w, h)
            }
        };
        let text = shot(&state, 200, 60);
        for service in [
            "gateway",
            "orders",
            "inventory",
            "frontend",
            "catalog",
            "payments",
        ] {
            assert!(text.contains(service), "{service}:\n{text}");
        }
        // Callers left of their callees.
        let map = state.data.map.as_ref().unwrap();
        let layer = |name: &str| map.layout.spots[map.box_named(name).unwrap()].layer;
        assert!(layer("gateway") < layer("orders") && layer("orders") < layer("inventory"));
        let row = text
            .lines()
            .find(|l| l.contains("orders") && l.contains("inventory"))
            .unwrap_or_else(|| panic!("orders → inventory in a row:\n{text}"));
        assert!(row.find("orders") < row.find("inventory"), "{row}");
        let label = text
            .lines()
            .find(|l| l.contains("fwd 3000>700"))
            .unwrap_or_else(|| panic!("the reset's label:\n{text}"));
        assert!(label.contains("✖ 0.1/s") && label.contains('▶'), "{label}");
        assert!(text.contains('▓'), "inventory works for nobody:\n{text}");
        // A callee that sends no spans (app's database): a dashed leaf below its layer's others.
        let db = map
            .boxes
            .iter()
            .position(|b| b.untraced)
            .expect("an untraced callee");
        let spot = map.layout.spots[db];
        assert!(text.contains("╎untraced"), "{text}");
        for (i, other) in map.layout.spots.iter().enumerate() {
            if i != db && other.layer == spot.layer {
                assert!(
                    other.y < spot.y,
                    "{} above {}",
                    map.boxes[i].name,
                    map.boxes[db].name
                );
            }
        }
        let text = shot(&state, 80, 24);
        assert!(text.contains('✖') && text.contains('▶'), "{text}");
        let words = text.lines().rev().nth(2).unwrap();
        assert!(
            words.contains(" → ") && words.contains('✖'),
            "the edge in words: {words}"
        );
    }
}

/// The Map's keys: it opens on the worst edge; Enter opens that edge's Edges row (its advice
/// under the table); the arrows go along the edges to the callee, whose Enter is its Services
/// row; `c` opens the worst chain through the selection on the call it went through; `h j k l`,
/// the wheel and a drag pan, within the map; a click selects.
#[test]
fn the_maps_keys_go_along_the_edges_to_the_tables_and_the_chains() {
    use crossterm::event::{MouseButton, MouseEvent, MouseEventKind};
    use screen::MapPick;
    let mut state = fixture_state(false);
    key(&mut state, KeyCode::BackTab);
    let map = state.data.map.clone().unwrap();
    let worst = map.worst_edge().unwrap();
    let (caller, callee) = map.edges[worst].row.clone();
    assert_eq!(
        state.ui.map_pick,
        Some(MapPick::Edge(caller.clone(), callee.clone()))
    );
    // Enter: the edge's row in Edges.
    key(&mut state, KeyCode::Enter);
    assert_eq!(state.ui.view, View::Edges);
    let mut rows = state.data.table_totals().edges.sorted();
    budget_top::present::edges::worst_first(&mut rows);
    let row = rows[state.ui.edge_row];
    assert_eq!((&row.caller, &row.callee), (&caller, &callee));
    let text = screen_text(&draw(&state, 200, 60));
    assert!(
        text.contains(&format!("{caller} → {callee}: ")),
        "its advice:\n{text}"
    );
    // Back to the Map, along the edge to the callee, Enter: its Services row.
    key(&mut state, KeyCode::Tab);
    key(&mut state, KeyCode::Tab);
    assert_eq!(state.ui.view, View::Map);
    key(&mut state, KeyCode::Right);
    assert_eq!(state.ui.map_pick, Some(MapPick::Box(callee.clone())));
    key(&mut state, KeyCode::Enter);
    assert_eq!(state.ui.view, View::Services);
    assert_eq!(state.data.services[state.ui.service_row].0, callee);
    // Left: a call into it, then that call's caller.
    key(&mut state, KeyCode::Tab);
    key(&mut state, KeyCode::Left);
    let Some(MapPick::Edge(from, to)) = state.ui.map_pick.clone() else {
        panic!("{:?}", state.ui.map_pick);
    };
    assert_eq!(to, callee);
    key(&mut state, KeyCode::Left);
    assert_eq!(state.ui.map_pick, Some(MapPick::Box(from.clone())));
    key(&mut state, KeyCode::Right);
    let Some(MapPick::Edge(caller, callee)) = state.ui.map_pick.clone() else {
        panic!("{:?}", state.ui.map_pick);
    };
    assert_eq!(caller, from);
    // c on the edge: the worst chain through it, on the call.
    key(&mut state, KeyCode::Char('c'));
    assert_eq!(state.ui.view, View::Waterfall);
    let chain = state.selected_chain().unwrap();
    assert!(
        chain
            .edges
            .iter()
            .any(|e| e.caller == caller && e.callee == callee)
    );
    let (_, span) = chain.row(state.ui.span_row).unwrap();
    assert!(span.kind.is_call() && span.service == caller, "{span:?}");
    assert!(!state.ui.follow, "the chain stays selected");
    // Up and Down in a layer, panning, a click.
    state.ui.view = View::Map;
    let area = ratatui::layout::Rect::new(0, 0, 80, 24);
    let before = screen_text(&draw(&state, 80, 24));
    key(&mut state, KeyCode::Char('k'));
    key(&mut state, KeyCode::Char('k'));
    key(&mut state, KeyCode::Char('h'));
    state.clamp_map_pan(area);
    let panned = screen_text(&draw(&state, 80, 24));
    assert_ne!(before, panned, "the view moved");
    for _ in 0..50 {
        key(&mut state, KeyCode::Char('k'));
        key(&mut state, KeyCode::Char('h'));
    }
    state.clamp_map_pan(area);
    let corner = state.ui.map_pan;
    key(&mut state, KeyCode::Char('j'));
    state.clamp_map_pan(area);
    assert_eq!(
        state.ui.map_pan.1,
        corner.1 + 1,
        "no slack past the map's edge"
    );
    let drag = |kind, column, row| MouseEvent {
        kind,
        column,
        row,
        modifiers: KeyModifiers::NONE,
    };
    state.on_mouse(drag(MouseEventKind::Down(MouseButton::Left), 40, 10), area);
    let pan = state.ui.map_pan;
    let mut moved = false;
    for (column, row) in [(37, 7), (43, 13)] {
        state.on_mouse(
            drag(MouseEventKind::Drag(MouseButton::Left), column, row),
            area,
        );
        moved |= state.ui.map_pan != pan;
    }
    assert!(moved, "a drag pans");
    // A click on a box's name selects it.
    let text = screen_text(&draw(&state, 80, 24));
    let (name, y, x) = map
        .boxes
        .iter()
        .find_map(|b| {
            let needle = format!("│{}", b.shown);
            text.lines().enumerate().find_map(|(y, l)| {
                let at = l.find(&needle)?;
                Some((
                    b.name.clone(),
                    y as u16,
                    (l[..at].chars().count() + 1) as u16,
                ))
            })
        })
        .expect("a box in view");
    state.on_mouse(drag(MouseEventKind::Down(MouseButton::Left), x, y), area);
    assert_eq!(state.ui.map_pick, Some(MapPick::Box(name.clone())));
    let text = screen_text(&draw(&state, 80, 24));
    assert!(
        text.contains("╔"),
        "the selected box is drawn double:\n{text}"
    );
    // Down: the next box of the same layer.
    let spot = |n: &str| map.layout.spots[map.box_named(n).unwrap()];
    state.ui.map_pick = Some(MapPick::Box("orders".into()));
    key(&mut state, KeyCode::Down);
    let Some(MapPick::Box(below)) = state.ui.map_pick.clone() else {
        panic!("{:?}", state.ui.map_pick);
    };
    assert_eq!(spot(&below).layer, spot("orders").layer);
    assert!(spot(&below).y > spot("orders").y);
    key(&mut state, KeyCode::Up);
    assert_eq!(state.ui.map_pick, Some(MapPick::Box("orders".into())));
    // m: the map of the last minute.
    key(&mut state, KeyCode::Char('m'));
    assert!(state.data.last_minute);
    let text = screen_text(&draw(&state, 200, 60));
    assert!(text.contains("last minute (m: since start)"), "{text}");
}

/// Sixty services: the busiest 49 and `other` (which says how many it holds), and panning
/// brings every box into an 80x24 view; the view follows a selection moved off it.
#[test]
fn the_map_of_sixty_services_folds_to_fifty_and_pans_to_every_box() {
    let mut state = many_services_state(60);
    state.ui.color = false;
    let map = state.data.map.clone().unwrap();
    assert_eq!(map.boxes.len(), 50);
    assert_eq!(map.folded, 11);
    let area = ratatui::layout::Rect::new(0, 0, 80, 24);
    let text = screen_text(&draw(&state, 80, 24));
    assert!(text.contains("11 in other"), "{text}");
    let (w, h) = (map.layout.place(10).width as i32, map.layout.height as i32);
    let mut seen = std::collections::BTreeSet::new();
    for dy in (-h..=h).step_by(10) {
        for dx in (-w..=w).step_by(40) {
            state.ui.map_pan = (dx, dy);
            state.clamp_map_pan(area);
            let text = screen_text(&draw(&state, 80, 24));
            for b in &map.boxes {
                if text.contains(&format!("│{}", b.shown))
                    || text.contains(&format!("║{}", b.shown))
                {
                    seen.insert(b.shown.clone());
                }
            }
        }
    }
    assert_eq!(seen.len(), 50, "{seen:?}");
    // A selection moved off the view brings the view to it.
    state.ui.map_pan = (-w, -h);
    state.clamp_map_pan(area);
    for _ in 0..30 {
        key(&mut state, KeyCode::Down);
        key(&mut state, KeyCode::Right);
        let text = screen_text(&draw(&state, 80, 24));
        let picked = match state.ui.map_pick.as_ref().unwrap() {
            screen::MapPick::Box(name) => {
                format!("║{}", map.boxes[map.box_named(name).unwrap()].shown)
            }
            screen::MapPick::Edge(..) => "▶".to_string(),
        };
        assert!(text.contains(&picked), "{picked}:\n{text}");
    }
}

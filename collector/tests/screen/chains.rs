//! The chain list: newest first, what waits out of it (a late callee's hop, a missing root),
//! eviction, a burst over several frames, pause, filter, search, sort, `n`, the mouse, export.

use budget_top::screen::fixtures::*;
use budget_top::screen::{self, State, View};
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

use crate::support::{batch, key, select_chain, snap};

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
fn pause_holds_arriving_spans_until_resumed() {
    let mut state = fixture_state(false);
    let before = state.data.visible.len();
    key(&mut state, KeyCode::Char(' '));
    assert!(state.ui.paused);
    let mut c = ChainBuilder::new(99, 20_000);
    c.hop(1, None, "late", "GET /late", 0, 10, Some(100));
    state.add_batch(batch(c.spans));
    state.settle();
    assert_eq!(state.data.visible.len(), before);
    assert!(screen_text(&draw(&state, 80, 24)).contains("PAUSED"));
    key(&mut state, KeyCode::Char(' '));
    state.settle();
    assert_eq!(state.data.visible.len(), before + 1);
    assert_eq!(state.data.visible[0], tid(99), "the new chain is on top");
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

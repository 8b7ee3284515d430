//! The Map of services: who calls whom in layers, the broken edges marked, its keys along the
//! edges to the tables and the chains, panning, and the fold past fifty services.

use budget_top::screen::fixtures::*;
use budget_top::screen::{self, State, View};
use crossterm::event::{KeyCode, KeyModifiers};

use crate::support::{key, snap};

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
/// row; `o` opens the worst chain through the selection on the call it went through; `h j k l`,
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
    // Nothing chosen yet: the selection is the worst edge, said in words under the map.
    assert_eq!(state.ui.map_pick, None);
    let text = screen_text(&draw(&state, 200, 60));
    assert!(
        text.lines()
            .any(|l| l.starts_with(&format!(" {caller} → {callee}  "))),
        "the worst edge selected:\n{text}"
    );
    // Enter: the edge's row in Edges. The edge opened stays selected: back on the Map the user
    // finds it, though the worst edge (the default) may change meanwhile.
    key(&mut state, KeyCode::Enter);
    assert_eq!(state.ui.view, View::Edges);
    assert_eq!(
        state.ui.map_pick,
        Some(MapPick::Edge(caller.clone(), callee.clone()))
    );
    let mut rows = state.data.table_totals().edges.sorted();
    budget_top::view_model::edges::worst_first(&mut rows);
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
    // o on the edge: the worst chain through it, on the call.
    key(&mut state, KeyCode::Char('o'));
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
    // c does what o does where no demo runs; in a demo it is left to the demo (its cure).
    let opened = state.selected_chain().unwrap().trace_id;
    state.ui.view = View::Map;
    key(&mut state, KeyCode::Char('c'));
    assert_eq!(state.ui.view, View::Waterfall);
    assert_eq!(state.selected_chain().unwrap().trace_id, opened);
    state.ui.view = View::Map;
    state.demo = Some(screen::DemoStatus {
        scenario: "3/12 fixed-timeout".into(),
        lesson: String::new(),
        keys: "c cure".into(),
        focus: None,
    });
    assert!(!key(&mut state, KeyCode::Char('c')), "the demo's c");
    assert_eq!(state.ui.view, View::Map);
    state.demo = None;
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

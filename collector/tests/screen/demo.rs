//! The workshop's screen: the demo's keys, its scenario line and lesson, the chain it opens on,
//! a scenario switch starting the screen over, and `d` turning the live screen into the demo's.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use budget_top::screen::fixtures::*;
use budget_top::screen::{self, State};
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

use crate::support::{Running, snap};

/// Presses `c` on a screen that holds `demo`; whether the screen or the demo took it.
fn press(state: &mut State, demo: &mut Option<Box<dyn screen::DemoControl>>, c: char) -> bool {
    state.on_key(KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE), demo)
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

fn demo_status(demo: &FakeDemo) -> screen::DemoStatus {
    use screen::DemoControl as _;
    demo.status()
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

/// A demo that only switches: the test turns its generation.
struct SwitchingDemo(Arc<AtomicU64>);

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
        self.0.load(Ordering::Relaxed)
    }
}

/// A scenario switch empties the screen: the chains and counts of the scenarios before are
/// gone, late spans of their chains are dropped, and the new scenario's chains show alone.
#[tokio::test(start_paused = true)]
async fn a_demo_switch_starts_the_screen_over() {
    let generation = Arc::new(AtomicU64::new(3));
    let controls = screen::Controls {
        clock: Box::new(|| NOW_NS),
        demo: Some(Box::new(SwitchingDemo(generation.clone()))),
        ..screen::Controls::default()
    };
    let running = Running::start(empty_state(), (100, 30), controls);
    let old = fixture_spans();
    running.send(old.clone()).await;
    tokio::time::sleep(screen::FRAME * 3).await;
    generation.fetch_add(1, Ordering::Relaxed);
    tokio::time::sleep(screen::FRAME * 3).await;
    // A late span of an old chain, then a chain of the new scenario.
    running.send(old[..1].to_vec()).await;
    let mut fresh = ChainBuilder::new(900, 14_000);
    fresh.edge(1, "frontdoor", "GET /burst", 0, 5, 100);
    running.send(fresh.spans).await;
    tokio::time::sleep(screen::FRAME * 3).await;
    let (terminal, state) = running.quit().await;
    let text = screen_text(&terminal);
    assert_eq!(state.data.store.counters().chains_held, 1, "{text}");
    assert!(text.contains("frontdoor GET /burst"), "{text}");
    assert!(!text.contains("gateway"), "no chain of before: {text}");
    assert!(text.contains(" 1 chains "), "{text}");
    assert!(text.contains("✖ 0 error"), "the counts start over: {text}");
}

/// A demo that shows nothing until started (as on the live screen before `d`).
struct LaterDemo(Arc<AtomicBool>);

impl screen::DemoControl for LaterDemo {
    fn status(&self) -> screen::DemoStatus {
        if !self.0.load(Ordering::Relaxed) {
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
    let started = Arc::new(AtomicBool::new(false));
    let state = empty_state();
    assert_eq!(state.mode, screen::Mode::Live);
    let start_flag = started.clone();
    let controls = screen::Controls {
        clock: Box::new(|| NOW_NS),
        demo: Some(Box::new(LaterDemo(started.clone()))),
        start_demo: Some(Box::new(move || start_flag.store(true, Ordering::Relaxed))),
        ..screen::Controls::default()
    };
    let running = Running::start(state, (80, 24), controls);
    tokio::time::sleep(screen::FRAME * 3).await;
    running.press('d');
    tokio::time::sleep(screen::FRAME * 3).await;
    assert!(started.load(Ordering::Relaxed), "d started the demo");
    let (terminal, state) = running.quit().await;
    let text = screen_text(&terminal);
    assert_eq!(state.mode, screen::Mode::Demo);
    assert!(text.starts_with("budget-top demo"), "{text}");
    assert!(!text.contains("starting the demo..."), "{text}");
    assert!(text.contains("starting 1/7 propagate…"), "{text}");
}

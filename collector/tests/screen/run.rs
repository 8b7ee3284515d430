//! `screen::run`, the loop, on tokio's paused clock: what arrives is drawn on the tick, `q` or
//! the end of the terminal's events ends it, and a chain is judged once quiet for `--settle`.

use std::time::Duration;

use budget_top::screen::fixtures::*;
use budget_top::screen::{self, State};
use ratatui::Terminal;
use ratatui::backend::TestBackend;

use crate::support::{Running, call_to};

/// The loop itself, on a `TestBackend`: batches in, a redraw on the tick, `q` out.
#[tokio::test(start_paused = true)]
async fn the_loop_draws_what_arrives_and_quits_on_q() {
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
    let running = Running::start(empty_state(), (100, 30), controls);
    running.send(fixture_spans()).await;
    tokio::time::sleep(screen::FRAME * 3).await;
    let (terminal, state) = running.quit().await;
    assert!(state.ui.quit);
    assert_eq!(state.spans_dropped, 7);
    let text = screen_text(&terminal);
    assert!(text.contains("7 dropped"), "{text}");
    assert!(text.contains("3 requests refused"), "{text}");
    assert!(text.contains("2 ignored (metrics/logs)"), "{text}");
    assert!(text.contains("gateway POST /checkout"), "{text}");
}

/// When the terminal's event stream ends (the pty closed), the loop ends too.
#[tokio::test(start_paused = true)]
async fn the_loop_ends_when_the_terminal_goes_away() {
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
    tokio::time::timeout(Duration::from_secs(5), run)
        .await
        .expect("the loop stops")
        .unwrap();
}

/// Runs the screen loop on `state` for `time` of tokio's (paused) clock, `spans` sent first,
/// then `q`; gives the state back with the screen drawn.
async fn run_for(
    state: State,
    clock: impl Fn() -> u64 + Send + 'static,
    spans: Option<Vec<deadline_budget::analysis::Span>>,
    time: Duration,
) -> (Terminal<TestBackend>, State) {
    let controls = screen::Controls {
        clock: Box::new(clock),
        ..screen::Controls::default()
    };
    let running = Running::start(state, (120, 30), controls);
    if let Some(spans) = spans {
        running.send(spans).await;
    }
    tokio::time::sleep(time).await;
    running.quit().await
}

/// The live screen judges a chain once it has been quiet for `--settle` (5 s here), on the
/// loop's clock (tokio's, paused): the header's totals count it then, not before.
#[tokio::test(start_paused = true)]
async fn the_screen_judges_a_chain_once_quiet_for_settle() {
    let started = tokio::time::Instant::now();
    let clock = move || NOW_NS + started.elapsed().as_nanos() as u64;
    let store = budget_top::store::Store::new(1000).with_settle(Duration::from_secs(5));
    let state = State::new(screen::ScreenData::new(store), screen::Mode::Live);
    let spans = call_to(1, "orders");
    let (_, mut state) = run_for(state, clock, Some(spans), Duration::from_secs(3)).await;
    assert_eq!(state.data.store.totals().traces, 0, "quiet for 3 s of 5");
    assert_eq!(state.data.store.counters().chains_held, 1);

    // The same screen again, 4 s on: the chain is judged.
    state.ui.quit = false;
    let (terminal, state) = run_for(state, clock, None, Duration::from_secs(4)).await;
    assert_eq!(state.data.store.totals().traces, 1, "quiet for 7 s: judged");
    let text = screen_text(&terminal);
    assert!(text.contains("1 chains judged"), "{text}");
}

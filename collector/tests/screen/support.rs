//! Helpers: keys, the chain to select, the snapshot of a screen, a small chain, and the screen's
//! loop running in a task of its own.

use std::time::Duration;

use budget_top::batch::Batch;
use budget_top::screen::fixtures::*;
use budget_top::screen::{self, State, View};
use crossterm::event::{Event, KeyCode, KeyEvent, KeyModifiers};
use ratatui::Terminal;
use ratatui::backend::TestBackend;

/// Presses `code` (no modifier, no demo); whether the screen took it.
pub fn key(state: &mut State, code: KeyCode) -> bool {
    state.on_key(KeyEvent::new(code, KeyModifiers::NONE), &mut None)
}

/// Selects chain `trace` in the chain list with the keys a user would press.
#[track_caller]
pub fn select_chain(state: &mut State, trace: u64) {
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

/// The screen at `w`x`h`, checked against `collector/tests/snapshots/screen__{name}_{w}x{h}.snap`:
/// the names insta gave these snapshots when the tests were one file, `tests/screen.rs`.
#[track_caller]
pub fn snap(name: &str, state: &State, w: u16, h: u16) -> String {
    let text = screen_text(&draw(state, w, h));
    let mut settings = insta::Settings::clone_current();
    settings.set_snapshot_path("../snapshots");
    settings.set_prepend_module_to_snapshot(false);
    settings.bind(|| insta::assert_snapshot!(format!("screen__{name}_{w}x{h}"), text));
    text
}

/// A batch of `spans` without attributes, as ingest sends it.
pub fn batch(spans: Vec<deadline_budget::analysis::Span>) -> Batch {
    Batch {
        spans,
        attributes: Vec::new(),
        raw: None,
        received: None,
    }
}

/// A chain of three spans, gateway calling `callee`, for the tables' tests.
pub fn call_to(trace: u64, callee: &str) -> Vec<deadline_budget::analysis::Span> {
    let mut c = ChainBuilder::new(trace, 0);
    c.edge(1, "gateway", "GET /", 0, 100, 1000);
    c.call(2, 1, "gateway", "GET x", 5, 95, 995, Some(990));
    c.hop(3, Some(2), callee, "GET /x", 8, 90, Some(990));
    c.spans
}

/// `screen::run` on a `TestBackend`, in a task of its own: the test sends it batches and keys,
/// then `q`.
pub struct Running {
    batches: tokio::sync::mpsc::Sender<Batch>,
    keys: futures::channel::mpsc::UnboundedSender<std::io::Result<Event>>,
    task: tokio::task::JoinHandle<(Terminal<TestBackend>, State)>,
}

impl Running {
    /// The loop on `state`, drawing at `width`x`height`.
    pub fn start(
        mut state: State,
        (width, height): (u16, u16),
        controls: screen::Controls,
    ) -> Running {
        let (batches, rx) = tokio::sync::mpsc::channel(4);
        let (keys, events) = futures::channel::mpsc::unbounded();
        let task = tokio::spawn(async move {
            let mut terminal = Terminal::new(TestBackend::new(width, height)).unwrap();
            screen::run(&mut terminal, &mut state, rx, events, controls)
                .await
                .unwrap();
            (terminal, state)
        });
        Running {
            batches,
            keys,
            task,
        }
    }

    /// Sends `spans` as one batch.
    pub async fn send(&self, spans: Vec<deadline_budget::analysis::Span>) {
        self.batches.send(batch(spans)).await.unwrap();
    }

    /// Presses `c`.
    pub fn press(&self, c: char) {
        let key = KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE);
        self.keys.unbounded_send(Ok(Event::Key(key))).unwrap();
    }

    /// Presses `q`; the terminal and the state once the loop has ended (within 5 s).
    pub async fn quit(self) -> (Terminal<TestBackend>, State) {
        self.press('q');
        tokio::time::timeout(Duration::from_secs(5), self.task)
            .await
            .expect("the loop stops on q")
            .unwrap()
    }
}

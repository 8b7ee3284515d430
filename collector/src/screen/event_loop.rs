//! The loop that owns the [`State`], and how the screen starts.
//!
//! Everything else sends the loop messages: span batches arrive on a bounded channel from the
//! receivers (or a replay, or the demo), keys and mouse events come from crossterm's
//! `EventStream`, and a frame tick redraws only when something changed, so a firehose of spans
//! never means a redraw per span. The loop is generic over the ratatui `Backend` so tests drive
//! it with `TestBackend`.

use std::io;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crossterm::event::Event;
use futures::{Stream, StreamExt};
use ratatui::Terminal;
use ratatui::backend::Backend;
use ratatui::layout::Rect;
use tokio::sync::mpsc;

use super::{DemoControl, Mode, Refused, ScreenData, State, views};
use crate::batch::Batch;
use crate::pump::{Clock, Intake, Pump, Tick, wall_clock};

/// How often the loop considers a redraw.
pub const FRAME: Duration = Duration::from_millis(100);

/// What the loop needs besides the state.
pub struct Controls {
    /// The demo's controls, in `budget-top demo`.
    pub demo: Option<Box<dyn DemoControl>>,
    /// Called once when the user asks for the demo from the empty screen.
    pub start_demo: Option<Box<dyn FnMut() + Send>>,
    /// Reads what the receivers refused under load.
    pub refused: Option<Box<dyn Fn() -> Refused + Send>>,
    /// The clock (Unix ns); the wall clock unless a replay drives its own.
    pub clock: Clock,
    /// A line to show in the footer, set by whoever feeds the screen (e.g. a replay's end or
    /// error).
    pub notice: Option<Arc<Mutex<Option<String>>>>,
}

impl Default for Controls {
    fn default() -> Self {
        Controls {
            demo: None,
            start_demo: None,
            refused: None,
            clock: Box::new(wall_clock),
            notice: None,
        }
    }
}

impl std::fmt::Debug for Controls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Controls")
            .field("demo", &self.demo.is_some())
            .finish_non_exhaustive()
    }
}

/// Run the screen until `q` (or the event stream ends, e.g. the pty closed): span batches from
/// `spans`, terminal events from `events`, a redraw at most every [`FRAME`] and only when
/// something changed.
pub async fn run<B, E>(
    terminal: &mut Terminal<B>,
    state: &mut State,
    spans: mpsc::Receiver<Batch>,
    events: E,
    controls: Controls,
) -> anyhow::Result<()>
where
    B: Backend,
    B::Error: Send + Sync + 'static,
    E: Stream<Item = io::Result<Event>> + Unpin,
{
    let mut events = events.fuse();
    // The frame tick is the screen's judging tick: the chains quiet for --settle are judged
    // as the frame settles what arrived.
    let Controls {
        demo,
        start_demo,
        refused,
        clock,
        notice,
    } = controls;
    let mut pump = Pump::new(spans)
        .with_clock(clock)
        .judging_every(FRAME, tokio::time::MissedTickBehavior::Skip);
    state.now_unix_nano = pump.now();
    if let Some(d) = demo.as_ref() {
        state.demo = d.status().shown();
    }
    let mut screen = Screen {
        demo_generation: demo.as_ref().map_or(0, |d| d.generation()),
        terminal,
        state,
        demo,
        start_demo,
        refused,
        notice,
        dirty: true,
    };
    loop {
        let mut input = false;
        tokio::select! {
            pumped = pump.step(&mut screen) => {
                pumped?;
            }
            event = events.next() => match event {
                Some(Ok(event)) => {
                    input = screen.on_event(event)?;
                }
                // The terminal went away (pty closed): stop, the caller restores what it can.
                Some(Err(_)) | None => break,
            },
        }
        if screen.state.ui.quit {
            break;
        }
        // What a person did shows at once, not at the next tick.
        if input {
            screen.draw_if_dirty()?;
        }
    }
    Ok(())
}

/// The screen as its pump feeds it: batches into the state, and on each frame tick what
/// arrived settled (the chains judged) and the screen drawn when something changed.
struct Screen<'a, B: Backend> {
    terminal: &'a mut Terminal<B>,
    state: &'a mut State,
    /// [`Controls`], but the clock (the pump's).
    demo: Option<Box<dyn DemoControl>>,
    start_demo: Option<Box<dyn FnMut() + Send>>,
    refused: Option<Box<dyn Fn() -> Refused + Send>>,
    notice: Option<Arc<Mutex<Option<String>>>>,
    /// Something changed since the last frame drawn.
    dirty: bool,
    demo_generation: u64,
}

impl<B> Screen<'_, B>
where
    B: Backend,
    B::Error: Send + Sync + 'static,
{
    /// A key, the mouse or a resize; returns whether it was one (it shows at once).
    fn on_event(&mut self, event: Event) -> anyhow::Result<bool> {
        let state = &mut *self.state;
        match event {
            Event::Key(key) => {
                // A message stays until the next key.
                self.dirty |= state.ui.message.take().is_some();
                self.dirty |= state.on_key(key, &mut self.demo);
                // Scrolling stops at the popup's last row on this screen.
                let size = self.terminal.size()?;
                state.clamp_popup_scroll(Rect::new(0, 0, size.width, size.height));
                state.clamp_map_pan(Rect::new(0, 0, size.width, size.height));
                if state.ui.start_demo_requested
                    && let Some(mut start) = self.start_demo.take()
                {
                    start();
                }
            }
            Event::Mouse(mouse) => {
                let size = self.terminal.size()?;
                self.dirty |= state.on_mouse(mouse, Rect::new(0, 0, size.width, size.height));
            }
            Event::Resize(..) => {
                self.terminal.autoresize()?;
                self.dirty = true;
            }
            _ => return Ok(false),
        }
        Ok(true)
    }

    fn draw_if_dirty(&mut self) -> anyhow::Result<()> {
        if self.dirty {
            let state = &*self.state;
            self.terminal.draw(|frame| {
                let area = frame.area();
                views::render(state, area, frame.buffer_mut());
            })?;
            self.dirty = false;
        }
        Ok(())
    }
}

impl<B> Intake for Screen<'_, B>
where
    B: Backend,
    B::Error: Send + Sync + 'static,
{
    /// A batch arrives at the frame's clock (the state's `now`), held back while paused.
    fn take(&mut self, batch: Batch, _now_unix_nano: u64) -> anyhow::Result<()> {
        self.state.add_batch(batch);
        Ok(())
    }

    fn judge(&mut self, tick: Tick) -> anyhow::Result<()> {
        let state = &mut *self.state;
        state.now_unix_nano = tick.now_unix_nano;
        if let Some(read) = self.refused.as_ref() {
            self.dirty |= state.set_ingest_refused(read());
        }
        // A notice (e.g. "replay finished") waits until the batches sent before it were
        // taken, so the frame that shows it shows them too.
        if let Some(notice) = self.notice.as_ref()
            && !tick.batches_waiting
            && let Ok(mut n) = notice.lock()
            && let Some(text) = n.take()
        {
            state.ui.message = Some(text);
            self.dirty = true;
        }
        if let Some(d) = self.demo.as_ref() {
            if d.generation() != self.demo_generation {
                self.demo_generation = d.generation();
                state.start_over();
                self.dirty = true;
            }
            self.dirty |= state.set_demo_status(d.status().shown());
        }
        self.dirty |= state.settle();
        self.draw_if_dirty()
    }
}

/// How the real screen starts.
#[derive(Debug, Default)]
pub struct LiveConfig {
    /// Where the spans come from.
    pub mode: Mode,
    /// The OTLP/gRPC receiver address, shown in the header.
    pub grpc_addr: Option<SocketAddr>,
    /// The OTLP/HTTP receiver address, shown in the header.
    pub http_addr: Option<SocketAddr>,
    /// What protects the receivers ("plain, no token", "TLS, token"...), shown in the header.
    pub protection: Option<&'static str>,
    /// Anyone on the network can send (`--allow-remote` with neither TLS nor a token): the
    /// header says so loudly.
    pub open_to_anyone: bool,
    /// How chains are held and judged (`--max-spans`, `--settle`, `--max-findings`).
    pub retention: crate::store::Retention,
    /// The most raw attribute bytes held for the detail view (`--max-attribute-bytes`); 0 for
    /// the store's default.
    pub max_attribute_bytes: usize,
    /// `--trace-url`: the link from a chain to its trace.
    pub links: Option<crate::view_model::trace_url::TraceUrl>,
}

/// Take over the terminal, run the screen on span batches from `spans`, and restore the
/// terminal on return, on Ctrl-C, on SIGTERM and on panic.
pub async fn run_live(
    config: LiveConfig,
    spans: mpsc::Receiver<Batch>,
    controls: Controls,
) -> anyhow::Result<()> {
    let attribute_bytes = if config.max_attribute_bytes == 0 {
        crate::batch::DEFAULT_MAX_ATTRIBUTE_BYTES
    } else {
        config.max_attribute_bytes
    };
    let store = config
        .retention
        .store()
        .with_attribute_budget(attribute_bytes);
    let mut state = State::new(ScreenData::new(store), config.mode);
    state.retention = config.retention;
    state.max_attribute_bytes = attribute_bytes;
    state.grpc_addr = config.grpc_addr;
    state.http_addr = config.http_addr;
    state.protection = config.protection;
    state.open_to_anyone = config.open_to_anyone;
    state.demo_startable = controls.start_demo.is_some();
    state.links = config.links;
    state.hyperlinks = super::term::takes_hyperlinks(|name| std::env::var(name).ok());
    let mut term = super::term::Term::enter()?;
    let events = crossterm::event::EventStream::new();
    let result = tokio::select! {
        r = run(term.terminal(), &mut state, spans, events, controls) => r,
        _ = super::term::shutdown_signal() => Ok(()),
    };
    term.leave()?;
    result
}

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
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crossterm::event::Event;
use futures::{Stream, StreamExt};
use ratatui::Terminal;
use ratatui::backend::Backend;
use ratatui::layout::Rect;
use tokio::sync::mpsc;

use super::{DemoControl, Mode, Refused, ScreenData, State, views};
use crate::batch::Batch;

/// How often the loop considers a redraw.
pub const FRAME: Duration = Duration::from_millis(100);

/// The wall clock in Unix ns.
pub fn wall_clock() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

/// What the loop needs besides the state.
pub struct Controls {
    /// The demo's controls, in `budget-top demo`.
    pub demo: Option<Box<dyn DemoControl>>,
    /// Called once when the user asks for the demo from the empty screen.
    pub start_demo: Option<Box<dyn FnMut() + Send>>,
    /// Reads what the receivers refused under load.
    pub refused: Option<Box<dyn Fn() -> Refused + Send>>,
    /// The clock (Unix ns); the wall clock unless a replay drives its own.
    pub clock: Box<dyn FnMut() -> u64 + Send>,
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
    mut spans: mpsc::Receiver<Batch>,
    events: E,
    mut controls: Controls,
) -> anyhow::Result<()>
where
    B: Backend,
    B::Error: Send + Sync + 'static,
    E: Stream<Item = io::Result<Event>> + Unpin,
{
    let mut events = events.fuse();
    let mut tick = tokio::time::interval(FRAME);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let mut spans_open = true;
    let mut dirty = true;
    state.now_unix_nano = (controls.clock)();
    let mut demo_generation = controls.demo.as_ref().map_or(0, |d| d.generation());
    if let Some(d) = controls.demo.as_ref() {
        state.demo = d.status().shown();
    }
    loop {
        let mut input = false;
        tokio::select! {
            batch = spans.recv(), if spans_open => match batch {
                Some(batch) => state.add_batch(batch),
                None => spans_open = false,
            },
            event = events.next() => match event {
                Some(Ok(Event::Key(key))) => {
                    input = true;
                    // A message stays until the next key.
                    dirty |= state.ui.message.take().is_some();
                    dirty |= state.on_key(key, &mut controls.demo);
                    // Scrolling stops at the popup's last row on this screen.
                    let size = terminal.size()?;
                    state.clamp_popup_scroll(Rect::new(0, 0, size.width, size.height));
                    state.clamp_map_pan(Rect::new(0, 0, size.width, size.height));
                    if state.ui.start_demo_requested
                        && let Some(mut start) = controls.start_demo.take()
                    {
                        start();
                    }
                }
                Some(Ok(Event::Mouse(mouse))) => {
                    input = true;
                    let size = terminal.size()?;
                    dirty |= state.on_mouse(mouse, Rect::new(0, 0, size.width, size.height));
                }
                Some(Ok(Event::Resize(..))) => {
                    input = true;
                    terminal.autoresize()?;
                    dirty = true;
                }
                Some(Ok(_)) => {}
                // The terminal went away (pty closed): stop, the caller restores what it can.
                Some(Err(_)) | None => break,
            },
            _ = tick.tick() => {
                state.now_unix_nano = (controls.clock)();
                if let Some(read) = controls.refused.as_ref() {
                    dirty |= state.set_ingest_refused(read());
                }
                // A notice (e.g. "replay finished") waits until the batches sent before it
                // were taken, so the frame that shows it shows them too.
                if let Some(notice) = controls.notice.as_ref()
                    && spans.is_empty()
                    && let Ok(mut n) = notice.lock()
                    && let Some(text) = n.take()
                {
                    state.ui.message = Some(text);
                    dirty = true;
                }
                if let Some(d) = controls.demo.as_ref() {
                    if d.generation() != demo_generation {
                        demo_generation = d.generation();
                        state.start_over();
                        dirty = true;
                    }
                    dirty |= state.set_demo_status(d.status().shown());
                }
                dirty |= state.settle();
                if dirty {
                    terminal.draw(|frame| {
                        let area = frame.area();
                        views::render(state, area, frame.buffer_mut());
                    })?;
                    dirty = false;
                }
            }
        }
        if state.ui.quit {
            break;
        }
        // What a person did shows at once, not at the next tick.
        if input && dirty {
            terminal.draw(|frame| {
                let area = frame.area();
                views::render(state, area, frame.buffer_mut());
            })?;
            dirty = false;
        }
    }
    Ok(())
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
    pub links: Option<crate::present::trace_url::TraceUrl>,
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

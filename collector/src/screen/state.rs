//! The live screen's loop and its state.
//!
//! One loop owns the [`State`] (the chains and the UI state) and everything else sends it
//! messages: span batches arrive on a bounded channel from ingest (or a replay, or the demo),
//! keys and mouse events come from crossterm's `EventStream`, and a frame tick redraws only when
//! something changed, so a firehose of spans never means a redraw per span. Rendering is the pure
//! function [`crate::screen::render`] of the state into a ratatui `Buffer`; the loop is generic over
//! the ratatui `Backend` so tests drive it with `TestBackend`.

use std::io;
use std::net::SocketAddr;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crossterm::event::{
    Event, KeyCode, KeyEvent, KeyEventKind, KeyModifiers, MouseButton, MouseEvent, MouseEventKind,
};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crate::ingest::Batch;
use crate::store::Store;
use deadline_budget::analysis::{FindingKind, SpanId, TraceId};
use futures::{Stream, StreamExt};
use ratatui::Terminal;
use ratatui::backend::Backend;
use ratatui::layout::{Position, Rect};
use tokio::sync::mpsc;

use super::{ChainView, ListQuery, ScreenData, SortBy};
use crate::screen::views as view;

/// How often the loop considers a redraw.
pub const FRAME: Duration = Duration::from_millis(100);

/// Where the spans on screen come from: shown in the header.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Mode {
    /// Listening for OTLP.
    #[default]
    Live,
    /// Playing back a recording (the file name).
    Replay(String),
    /// Running the demo services (`budget-top demo` passes it with its [`DemoControl`]).
    #[allow(dead_code)]
    Demo,
}

/// What the demo shows on screen: the scenario and its lesson.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DemoStatus {
    /// The scenario running now, e.g. "2/5 reset at orders".
    pub scenario: String,
    /// The lesson: what to look at and why, one or two sentences.
    pub lesson: String,
    /// The keys the demo answers to, e.g. "1-5 scenario  +/- inventory latency  w next step".
    pub keys: String,
    /// The finding kinds the running scenario teaches, the first the one to open on: the screen
    /// selects the newest chain that shows one (`None`: not a demo; empty: nothing should be
    /// wrong, so the newest chain that failed for its user, if any, shows where a budget cut).
    pub focus: Option<Vec<FindingKind>>,
}

impl DemoStatus {
    /// `None` for an empty status: a demo that can be started (from the live screen's empty
    /// state) but is not running takes no room on screen.
    fn shown(self) -> Option<Self> {
        (!self.scenario.is_empty()).then_some(self)
    }
}

/// The demo's controls, plugged into the screen by `budget-top demo`: the screen hands it every
/// key it does not use itself, and shows its status line.
pub trait DemoControl: Send {
    /// The scenario, lesson and key hints to show now.
    fn status(&self) -> DemoStatus;
    /// A key the screen did not use (digits, `+`, `-`, `[`, `]`, `w`, ...). Returns whether the
    /// demo used it.
    fn key(&mut self, key: char) -> bool;
    /// Counts the demo's scenario switches: when it changes, the screen starts over with an
    /// empty store, so it shows only what the current scenario does.
    fn generation(&self) -> u64 {
        0
    }
}

/// The top-level views, in `Tab` order.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum View {
    /// The chain list (with the selected chain's waterfall below it when there is room).
    #[default]
    Chains,
    /// The waterfall of one chain.
    Waterfall,
    /// Caller → callee links.
    Edges,
    /// Per-service Little's law and dead work.
    Services,
}

/// Something drawn over the view.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Overlay {
    /// Nothing.
    #[default]
    None,
    /// The legend (`?`).
    Legend,
    /// The detail of the selected span (Enter in the waterfall).
    Detail,
}

/// The UI state: what is selected and shown. Changed only by the loop.
#[derive(Clone, Debug, Default)]
pub struct Ui {
    /// The view.
    pub view: View,
    /// The overlay.
    pub overlay: Overlay,
    /// The chain list's filter, search and order.
    pub query: ListQuery,
    /// Typing a search (`/`): keys go to the search text.
    pub searching: bool,
    /// Index of the selected chain in the list.
    pub selected: usize,
    /// The selected chain's id, kept so the selection follows it as new chains arrive.
    pub selected_id: Option<TraceId>,
    /// Selected row of the waterfall (index into its rows).
    pub span_row: usize,
    /// The span `n`/`N` (or a click) chose in the selected chain: its row stays selected as the
    /// chain grows, instead of going back to the chain's first finding.
    pub pinned_span: Option<SpanId>,
    /// Selected row of the edges or services table.
    pub table_row: usize,
    /// How far the open popup (legend, detail) is scrolled, in rows.
    pub popup_scroll: u16,
    /// Paused: arriving spans wait until resumed.
    pub paused: bool,
    /// Colour allowed (false with `NO_COLOR`).
    pub color: bool,
    /// A one-line message (e.g. "starting the demo...").
    pub message: Option<String>,
    /// The user asked to start the demo from the empty screen ([`Controls::start_demo`] is
    /// called once).
    pub start_demo_requested: bool,
    /// Quit.
    pub quit: bool,
    /// The selection stays on the top row as chains arrive (until the user moves off it).
    pub follow: bool,
}

/// Everything the screen draws: the chains, the receiver facts and the UI state.
#[derive(Debug)]
pub struct State {
    /// The chains and aggregates.
    pub data: ScreenData,
    /// The UI state.
    pub ui: Ui,
    /// The clock the screen reads (Unix ns): set by the loop, never read inside render.
    pub now_unix_nano: u64,
    /// Where the spans come from.
    pub mode: Mode,
    /// The OTLP/gRPC receiver address, when listening.
    pub grpc_addr: Option<SocketAddr>,
    /// The OTLP/HTTP receiver address, when listening.
    pub http_addr: Option<SocketAddr>,
    /// Spans the receivers refused because the screen could not keep up, plus spans dropped
    /// while paused.
    pub spans_dropped: u64,
    /// Requests the receivers refused before reading them (overload): their spans are unknown.
    pub requests_refused_unread: u64,
    /// Metrics and logs requests the receivers answered and dropped.
    pub requests_ignored: u64,
    /// The demo's status line, when the demo is running.
    pub demo: Option<DemoStatus>,
    /// The most spans a fresh store holds (for [`State::start_over`]).
    pub max_spans: usize,
    /// The most raw attribute bytes a fresh store holds (for [`State::start_over`]).
    pub max_attribute_bytes: usize,
    /// Traces held when the screen last started over: their late spans are dropped, so the
    /// previous scenario's chains do not come back piece by piece.
    stale: std::collections::HashSet<TraceId>,
    /// Batches held back while paused.
    held: Vec<Batch>,
    held_spans: usize,
    paused_drops: u64,
}

/// What the receivers refused under load, as the header shows it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Refused {
    /// Spans refused after their request was read.
    pub spans: u64,
    /// Requests refused before they were read (their spans are unknown).
    pub requests_unread: u64,
    /// Metrics and logs requests answered with success and dropped.
    pub requests_ignored: u64,
}

impl Refused {
    /// Reads the receivers' counters.
    pub fn of(stats: &crate::ingest::IngestStats) -> Self {
        let counts = stats.snapshot();
        Refused {
            spans: counts.spans_refused,
            requests_unread: counts.requests_refused_unread,
            requests_ignored: counts.requests_ignored,
        }
    }
}

/// How many of the newest chains the list looks through for the one that shows the lesson.
const LESSON_LOOKAHEAD: usize = 64;

/// The notice after `d` on the live screen, until the demo's status shows.
const STARTING_DEMO: &str = "starting the demo...";
/// Where `e` appends the selected chain, in the directory budget-top was started from.
pub const EXPORT_FILE: &str = "budget-top-export.jsonl";

/// The most spans held back while paused; more are dropped (and counted).
pub const MAX_HELD_SPANS: usize = 200_000;

impl State {
    /// A new screen state.
    pub fn new(data: ScreenData, mode: Mode) -> Self {
        State {
            data,
            ui: Ui {
                color: color_allowed(),
                follow: true,
                ..Ui::default()
            },
            now_unix_nano: 0,
            mode,
            grpc_addr: None,
            http_addr: None,
            spans_dropped: 0,
            requests_refused_unread: 0,
            requests_ignored: 0,
            demo: None,
            max_spans: crate::store::DEFAULT_MAX_SPANS,
            max_attribute_bytes: crate::store::DEFAULT_MAX_ATTRIBUTE_BYTES,
            stale: std::collections::HashSet::new(),
            held: Vec::new(),
            held_spans: 0,
            paused_drops: 0,
        }
    }

    /// The selected chain, if any.
    pub fn selected_chain(&self) -> Option<ChainView<'_>> {
        self.data
            .visible
            .get(self.ui.selected)
            .and_then(|id| self.data.chain_view(id))
    }

    /// Append the selected chain to `path` as one OTLP/JSON line (what `check --input` and
    /// `replay` read), and say what happened in words for the footer.
    pub fn export_selected(&self, path: &Path) -> String {
        let Some(analysis) = self.selected_chain() else {
            return "no chain selected to export".into();
        };
        let id = analysis.trace_id;
        let store = &self.data.store;
        let Some(chain) = store.chain(id) else {
            return format!("chain {id} is no longer held");
        };
        match crate::export::write_chain(path, chain, |span| store.attributes(id, span)) {
            Ok(()) => format!(
                "exported chain {id} to {} (check --input or replay reads it)",
                path.display()
            ),
            Err(e) => format!("export failed: {e:#}"),
        }
    }

    /// Forget every chain and count (a new demo scenario starts): a new store, the selection
    /// back at the top. Spans that arrive later for the chains forgotten here are dropped.
    pub fn start_over(&mut self) {
        self.data.store.analyse_dirty();
        self.stale = self.data.store.chains().map(|c| c.trace_id).collect();
        self.stale.extend(
            self.held
                .iter()
                .flat_map(|b| b.spans.iter().map(|s| s.trace_id)),
        );
        self.held.clear();
        self.held_spans = 0;
        self.data = ScreenData::new(
            Store::new(self.max_spans).with_attribute_budget(self.max_attribute_bytes),
        );
        self.ui.selected = 0;
        self.ui.selected_id = None;
        self.ui.span_row = 0;
        self.ui.pinned_span = None;
        self.ui.table_row = 0;
        self.ui.follow = true;
        if self.ui.overlay == Overlay::Detail {
            self.ui.overlay = Overlay::None;
        }
        if self.ui.view == View::Waterfall {
            self.ui.view = View::Chains;
        }
    }

    /// Drop the spans of chains forgotten by [`State::start_over`].
    fn without_stale(&self, mut batch: Batch) -> Batch {
        if self.stale.is_empty() || !batch.spans.iter().any(|s| self.stale.contains(&s.trace_id)) {
            return batch;
        }
        let keep: Vec<bool> = batch
            .spans
            .iter()
            .map(|s| !self.stale.contains(&s.trace_id))
            .collect();
        let mut flags = keep.iter();
        batch.spans.retain(|_| *flags.next().unwrap_or(&true));
        if !batch.attributes.is_empty() {
            let mut flags = keep.iter();
            batch.attributes.retain(|_| *flags.next().unwrap_or(&true));
        }
        batch
    }

    /// Take in a batch of spans (held back while paused).
    pub fn add_batch(&mut self, batch: Batch) {
        let batch = self.without_stale(batch);
        if batch.spans.is_empty() {
            return;
        }
        if self.ui.paused {
            if self.held_spans + batch.spans.len() > MAX_HELD_SPANS {
                self.paused_drops += batch.spans.len() as u64;
                self.spans_dropped += batch.spans.len() as u64;
            } else {
                self.held_spans += batch.spans.len();
                self.held.push(batch);
            }
            return;
        }
        self.data.add_batch(batch, self.now_unix_nano);
    }

    /// Show the demo's status. The first one after `d` on the live screen means the demo is
    /// starting: the header says so and the "starting the demo..." notice has done its job.
    /// Returns whether the screen changed.
    pub fn set_demo_status(&mut self, status: Option<DemoStatus>) -> bool {
        if self.demo == status {
            return false;
        }
        if status.is_some() && self.ui.start_demo_requested {
            self.ui.start_demo_requested = false;
            self.mode = Mode::Demo;
            if self.ui.message.as_deref() == Some(STARTING_DEMO) {
                self.ui.message = None;
            }
        }
        let refocus = self.demo.as_ref().map(|d| &d.focus) != status.as_ref().map(|d| &d.focus);
        self.demo = status;
        if refocus {
            // A scenario that teaches something else: open on its lesson now.
            self.follow_selection();
        }
        true
    }

    /// Set what the receivers refused (the screen adds the spans it dropped while paused).
    pub fn set_ingest_refused(&mut self, refused: Refused) -> bool {
        let total = refused.spans + self.paused_drops;
        let changed = (total, refused.requests_unread, refused.requests_ignored)
            != (
                self.spans_dropped,
                self.requests_refused_unread,
                self.requests_ignored,
            );
        self.spans_dropped = total;
        self.requests_refused_unread = refused.requests_unread;
        self.requests_ignored = refused.requests_ignored;
        changed
    }

    /// Apply what arrived: analyse changed chains, reorder the list, keep the selection on the
    /// same chain. Returns whether the screen changed.
    pub fn settle(&mut self) -> bool {
        if self.ui.paused {
            return false;
        }
        let services = self.ui.view == View::Services;
        let changed = self
            .data
            .settle(&self.ui.query, self.now_unix_nano, services);
        if changed {
            self.follow_selection();
        }
        changed
    }

    fn follow_selection(&mut self) {
        let visible = &self.data.visible;
        if self.ui.follow && self.ui.view == View::Chains {
            let chosen = if self.ui.query.sort == SortBy::Time {
                self.lesson_chain()
            } else {
                // Sorted by size or waste: the top of that order is the one to show.
                0
            };
            let id = self.data.visible.get(chosen).copied();
            if id != self.ui.selected_id {
                self.ui.pinned_span = None;
            }
            self.ui.selected = chosen;
            self.ui.selected_id = id;
            self.ui.span_row = self.preview_row();
            return;
        }
        if let Some(id) = self.ui.selected_id
            && let Some(i) = visible.iter().position(|v| *v == id)
        {
            self.ui.selected = i;
            if self.ui.view == View::Chains {
                // The preview shows the chosen or first finding; the chain may have grown since.
                self.ui.span_row = self.preview_row();
            }
            return;
        }
        self.ui.selected = self.ui.selected.min(visible.len().saturating_sub(1));
        self.ui.selected_id = visible.get(self.ui.selected).copied();
        self.ui.pinned_span = None;
        self.ui.span_row = self.preview_row();
    }

    /// The chain the list follows, newest first: the newest chain whose spans have all arrived
    /// (its root is not missing, no callee is still on its way), so the preview does not show
    /// half a chain. In the demo, the newest such chain that shows what the scenario teaches:
    /// one of its finding kinds, in the scenario's order; or, where nothing should be wrong,
    /// one that failed for its user (where a budget cut a slow step).
    fn lesson_chain(&self) -> usize {
        let now = self.now_unix_nano;
        let complete: Vec<(usize, ChainView<'_>)> = self
            .data
            .visible
            .iter()
            .take(LESSON_LOOKAHEAD)
            .enumerate()
            .filter_map(|(i, id)| Some((i, self.data.chain_view(id)?)))
            .filter(|(_, a)| a.summary.orphans == 0 && a.summary.hops > 0 && !awaits(a, now))
            .collect();
        let focus = self.demo.as_ref().and_then(|d| d.focus.as_deref());
        if let Some(kinds) = focus {
            for kind in kinds {
                if let Some((i, _)) = complete
                    .iter()
                    .find(|(_, a)| a.findings.iter().any(|f| f.kind == *kind))
                {
                    return *i;
                }
            }
            if kinds.is_empty()
                && let Some((i, _)) = complete.iter().find(|(_, a)| a.summary.outcome.failed())
            {
                return *i;
            }
        }
        complete.first().map_or(0, |(i, _)| *i)
    }

    fn select(&mut self, index: usize) {
        let len = self.data.visible.len();
        if len == 0 {
            return;
        }
        let index = index.min(len - 1);
        self.ui.follow = index == 0;
        if self.ui.selected_id != self.data.visible.get(index).copied() {
            self.ui.selected = index;
            self.ui.selected_id = self.data.visible.get(index).copied();
            self.ui.pinned_span = None;
            self.ui.span_row = self.preview_row();
        }
    }

    /// The waterfall row the selected chain opens on: the span `n`/`N` chose, else the first
    /// finding of a kind the demo teaches, else the first finding (0 when none).
    fn preview_row(&self) -> usize {
        let Some(chain) = self.selected_chain() else {
            return 0;
        };
        if let Some(pinned) = self.ui.pinned_span
            && let Some(row) = chain.rows().position(|(_, s)| s.span_id == pinned)
        {
            return row;
        }
        let focus = self.focus_kinds();
        let lesson = focus
            .iter()
            .find_map(|kind| chain.findings.iter().find(|f| f.kind == *kind));
        lesson
            .or(chain.findings.first())
            .and_then(|f| chain.rows().position(|(_, s)| s.span_id == f.span_id))
            .unwrap_or(0)
    }

    /// The finding kinds the demo teaches, in order (none outside the demo).
    pub fn focus_kinds(&self) -> &[FindingKind] {
        self.demo
            .as_ref()
            .and_then(|d| d.focus.as_deref())
            .unwrap_or(&[])
    }

    fn selected_span(&self) -> Option<SpanId> {
        let chain = self.selected_chain()?;
        chain.row(self.ui.span_row).map(|(_, s)| s.span_id)
    }

    fn move_by(&mut self, delta: isize) {
        let step = |cur: usize, len: usize| -> usize {
            if len == 0 {
                0
            } else {
                (cur as isize + delta).clamp(0, len as isize - 1) as usize
            }
        };
        match self.ui.view {
            View::Chains => self.select(step(self.ui.selected, self.data.visible.len())),
            View::Waterfall => {
                let len = self.selected_chain().map(|c| c.rows.len()).unwrap_or(0);
                self.ui.span_row = step(self.ui.span_row, len);
            }
            View::Edges => {
                self.ui.table_row = step(self.ui.table_row, self.data.store.edges().len())
            }
            View::Services => self.ui.table_row = step(self.ui.table_row, self.data.services.len()),
        }
    }

    /// Jump to the next (or previous) finding of the selected chain in the waterfall.
    fn next_finding(&mut self, forward: bool) {
        let Some(chain) = self.selected_chain() else {
            return;
        };
        let with: Vec<usize> = chain
            .rows
            .iter()
            .enumerate()
            .filter(|(_, r)| !r.findings.is_empty())
            .map(|(i, _)| i)
            .collect();
        let cur = self.ui.span_row;
        let next = if forward {
            with.iter().find(|i| **i > cur).or(with.first())
        } else {
            with.iter().rev().find(|i| **i < cur).or(with.last())
        };
        if let Some(n) = next {
            self.ui.span_row = *n;
            // The person is reading this chain: it stays selected, on this row.
            self.ui.follow = false;
            self.ui.pinned_span = self.selected_span();
        }
    }

    /// Handle one key; `demo` gets the keys the screen does not use. Returns whether the
    /// screen needs a redraw.
    pub fn on_key(&mut self, key: KeyEvent, demo: &mut Option<Box<dyn DemoControl>>) -> bool {
        if key.kind == KeyEventKind::Release {
            return false;
        }
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        if ctrl && matches!(key.code, KeyCode::Char('c') | KeyCode::Char('d')) {
            self.ui.quit = true;
            return true;
        }
        if self.ui.searching {
            match key.code {
                KeyCode::Esc => {
                    self.ui.searching = false;
                    self.ui.query.search.clear();
                }
                KeyCode::Enter => self.ui.searching = false,
                KeyCode::Backspace => {
                    self.ui.query.search.pop();
                }
                KeyCode::Char(c) if !c.is_control() && self.ui.query.search.len() < 64 => {
                    self.ui.query.search.push(c)
                }
                _ => return false,
            }
            self.ui.selected = 0;
            self.ui.selected_id = None;
            return true;
        }
        if self.ui.overlay != Overlay::None {
            let scroll = self.ui.popup_scroll;
            self.ui.popup_scroll = match key.code {
                KeyCode::Esc | KeyCode::Enter | KeyCode::Char('?') | KeyCode::Char('q') => {
                    self.ui.overlay = Overlay::None;
                    0
                }
                KeyCode::Down | KeyCode::Char('j') => scroll.saturating_add(1),
                KeyCode::Up | KeyCode::Char('k') => scroll.saturating_sub(1),
                KeyCode::PageDown | KeyCode::Char(' ') => scroll.saturating_add(10),
                KeyCode::PageUp => scroll.saturating_sub(10),
                KeyCode::Home | KeyCode::Char('g') => 0,
                KeyCode::End | KeyCode::Char('G') => u16::MAX,
                _ => return false,
            };
            return true;
        }
        match key.code {
            KeyCode::Char('q') => self.ui.quit = true,
            KeyCode::Char('?') => {
                self.ui.overlay = Overlay::Legend;
                self.ui.popup_scroll = 0;
            }
            KeyCode::Char(' ') => self.toggle_pause(),
            KeyCode::Char('/') => {
                self.ui.searching = true;
                self.ui.view = View::Chains;
            }
            KeyCode::Char('f') | KeyCode::Char('s') => {
                if key.code == KeyCode::Char('f') {
                    self.ui.query.filter = self.ui.query.filter.next();
                } else {
                    self.ui.query.sort = self.ui.query.sort.next();
                }
                // The list in its new order now, its top (or the lesson) selected, so a Tab
                // right after shows that chain and not the one selected before.
                self.ui.follow = true;
                self.ui.selected_id = None;
                if self.ui.view == View::Chains {
                    self.settle();
                }
            }
            KeyCode::Down | KeyCode::Char('j') => self.move_by(1),
            KeyCode::Up | KeyCode::Char('k') => self.move_by(-1),
            KeyCode::PageDown => self.move_by(10),
            KeyCode::PageUp => self.move_by(-10),
            KeyCode::Home | KeyCode::Char('g') => self.move_by(isize::MIN / 2),
            KeyCode::End | KeyCode::Char('G') => self.move_by(isize::MAX / 2),
            KeyCode::Char('n') if matches!(self.ui.view, View::Waterfall | View::Chains) => {
                self.next_finding(true)
            }
            KeyCode::Char('N') if matches!(self.ui.view, View::Waterfall | View::Chains) => {
                self.next_finding(false)
            }
            KeyCode::Enter => match self.ui.view {
                View::Chains if self.selected_chain().is_some() => {
                    self.ui.view = View::Waterfall;
                    self.ui.span_row = self.preview_row();
                }
                View::Waterfall if self.selected_span().is_some() => {
                    self.ui.overlay = Overlay::Detail;
                    self.ui.popup_scroll = 0;
                }
                // From a table row to the chains through that service.
                View::Edges | View::Services => {
                    let name = if self.ui.view == View::Edges {
                        view::tables::edge_rows(self)
                            .get(self.ui.table_row)
                            .map(|e| e.callee.to_string())
                    } else {
                        view::tables::service_rows(self)
                            .get(self.ui.table_row)
                            .map(|(n, _)| n.to_string())
                    };
                    let Some(name) = name else { return false };
                    self.ui.query.search =
                        name.chars().filter(|c| !c.is_control()).take(64).collect();
                    self.ui.view = View::Chains;
                    self.ui.selected = 0;
                    self.ui.selected_id = None;
                }
                _ => return false,
            },
            KeyCode::Esc => match self.ui.view {
                View::Waterfall | View::Edges | View::Services => self.ui.view = View::Chains,
                View::Chains if !self.ui.query.search.is_empty() => self.ui.query.search.clear(),
                View::Chains => return false,
            },
            KeyCode::Tab => self.cycle_view(true),
            KeyCode::BackTab => self.cycle_view(false),
            KeyCode::Char('e') if matches!(self.ui.view, View::Chains | View::Waterfall) => {
                self.ui.message = Some(self.export_selected(Path::new(EXPORT_FILE)));
            }
            KeyCode::Char('d') if self.data.is_empty() && self.mode == Mode::Live => {
                self.ui.start_demo_requested = true;
                self.ui.message = Some(STARTING_DEMO.into());
            }
            KeyCode::Char(c) => {
                return match demo {
                    Some(d) => {
                        let used = d.key(c);
                        if used {
                            self.demo = d.status().shown();
                        }
                        used
                    }
                    None => false,
                };
            }
            _ => return false,
        }
        true
    }

    fn toggle_pause(&mut self) {
        self.ui.paused = !self.ui.paused;
        if !self.ui.paused {
            self.held_spans = 0;
            for batch in std::mem::take(&mut self.held) {
                self.data.add_batch(batch, self.now_unix_nano);
            }
        }
    }

    fn cycle_view(&mut self, forward: bool) {
        const ORDER: [View; 4] = [View::Chains, View::Waterfall, View::Edges, View::Services];
        let i = ORDER.iter().position(|v| *v == self.ui.view).unwrap_or(0);
        let n = if forward { (i + 1) % 4 } else { (i + 3) % 4 };
        self.ui.view = ORDER[n];
        self.ui.table_row = 0;
    }

    /// Keep the popup's scroll within what it has to show on a screen of size `area`.
    pub fn clamp_popup_scroll(&mut self, area: Rect) {
        self.ui.popup_scroll = self
            .ui
            .popup_scroll
            .min(view::popup::max_scroll(self, area));
    }

    /// Handle a mouse event on a screen of size `area`. Returns whether to redraw.
    pub fn on_mouse(&mut self, mouse: MouseEvent, area: Rect) -> bool {
        if self.ui.overlay != Overlay::None {
            let scroll = self.ui.popup_scroll;
            self.ui.popup_scroll = match mouse.kind {
                MouseEventKind::ScrollDown => scroll.saturating_add(3),
                MouseEventKind::ScrollUp => scroll.saturating_sub(3),
                _ => return false,
            };
            self.clamp_popup_scroll(area);
            return true;
        }
        match mouse.kind {
            MouseEventKind::ScrollDown => self.move_by(3),
            MouseEventKind::ScrollUp => self.move_by(-3),
            MouseEventKind::Down(MouseButton::Left) => {
                let pos = Position::new(mouse.column, mouse.row);
                match view::hit(self, area, pos) {
                    Some(view::Hit::Chain(i)) => {
                        if self.ui.selected == i && self.ui.view == View::Chains {
                            self.ui.view = View::Waterfall;
                            self.ui.span_row = self.preview_row();
                        }
                        self.select(i);
                    }
                    Some(view::Hit::SpanRow(i)) => {
                        self.ui.span_row = i;
                        self.ui.pinned_span = self.selected_span();
                    }
                    Some(view::Hit::TableRow(i)) => self.ui.table_row = i,
                    None => return false,
                }
            }
            _ => return false,
        }
        true
    }
}

/// How long after a chain's last span ended a call without its callee's hop is taken to be a
/// call to a service that sends no spans, rather than one whose spans are still on the way.
const CALLEE_GRACE_NS: u64 = 5_000_000_000;

/// Whether the chain still waits for a callee's spans: a call that was sent (not refused) has no
/// hop under it yet, and the chain ended only moments ago. The chain list's preview skips such
/// chains, so it does not say "no findings" of a chain whose slow, late hop has not arrived.
fn awaits(chain: &ChainView<'_>, now_unix_nano: u64) -> bool {
    let ended = chain
        .summary
        .start_unix_nano
        .saturating_add(chain.summary.duration_ms.max(0) as u64 * 1_000_000);
    if now_unix_nano.saturating_sub(ended) > CALLEE_GRACE_NS {
        return false;
    }
    // Each row's span, unpacked from the chain once.
    let rows: Vec<_> = chain.rows().collect();
    let mut answered = vec![false; rows.len()];
    for (row, span) in &rows {
        if span.kind.is_hop()
            && let Some(parent) = row.parent_row
            && let Some(slot) = answered.get_mut(parent as usize)
        {
            *slot = true;
        }
    }
    rows.iter().zip(answered).any(|((_, span), answered)| {
        span.kind.is_call()
            && !answered
            && span.budget.outcome != Some(deadline_budget::analysis::Outcome::Refused)
    })
}

/// Whether colour is allowed: `NO_COLOR` set to anything non-empty turns it off.
pub fn color_allowed() -> bool {
    std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

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
                        view::render(state, area, frame.buffer_mut());
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
                view::render(state, area, frame.buffer_mut());
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
    /// The most spans held (oldest chains evicted first); 0 for the store's default.
    pub max_spans: usize,
    /// The most raw attribute bytes held for the detail view (`--max-attribute-bytes`); 0 for
    /// the store's default.
    pub max_attribute_bytes: usize,
}

/// Take over the terminal, run the screen on span batches from `spans`, and restore the
/// terminal on return, on Ctrl-C, on SIGTERM and on panic.
pub async fn run_live(
    config: LiveConfig,
    spans: mpsc::Receiver<Batch>,
    controls: Controls,
) -> anyhow::Result<()> {
    let max = if config.max_spans == 0 {
        crate::store::DEFAULT_MAX_SPANS
    } else {
        config.max_spans
    };
    let attribute_bytes = if config.max_attribute_bytes == 0 {
        crate::store::DEFAULT_MAX_ATTRIBUTE_BYTES
    } else {
        config.max_attribute_bytes
    };
    let store = Store::new(max).with_attribute_budget(attribute_bytes);
    let mut state = State::new(ScreenData::new(store), config.mode);
    state.max_spans = max;
    state.max_attribute_bytes = attribute_bytes;
    state.grpc_addr = config.grpc_addr;
    state.http_addr = config.http_addr;
    let mut term = crate::screen::term::Term::enter()?;
    let events = crossterm::event::EventStream::new();
    let result = tokio::select! {
        r = run(term.terminal(), &mut state, spans, events, controls) => r,
        _ = crate::screen::term::shutdown_signal() => Ok(()),
    };
    term.leave()?;
    result
}

/// Plain `budget-top`: starts the receivers and hands their batches and refusal count to the
/// screen; `d` on the empty screen starts the demo services exporting to these receivers.
pub async fn run_listening(
    listen: crate::cli::Listen,
    max_spans: usize,
    max_attribute_bytes: usize,
    carriers: Arc<deadline_budget::carrier::Carriers>,
) -> anyhow::Result<()> {
    let mut config = listen.ingest_config();
    config.carriers = carriers;
    // What may wait in the channel is bounded like what the store holds.
    config.max_queued_attribute_bytes = max_attribute_bytes;
    let ingest = crate::ingest::start(config).await?;
    let stats = ingest.stats.clone();
    #[cfg(feature = "demo")]
    let (demo, start_demo, driver) = match crate::demo::for_live_screen(ingest.grpc_addr) {
        Some(d) => (Some(d.control), Some(d.start), Some(d.driver)),
        None => (None, None, None),
    };
    #[cfg(not(feature = "demo"))]
    let (demo, start_demo) = (None, None);
    let controls = Controls {
        demo,
        start_demo,
        refused: Some(Box::new(move || Refused::of(&stats))),
        ..Controls::default()
    };
    let config = LiveConfig {
        mode: Mode::Live,
        grpc_addr: ingest.grpc_addr,
        http_addr: ingest.http_addr,
        max_spans,
        max_attribute_bytes,
    };
    let result = run_live(config, ingest.receiver, controls).await;
    ingest.shutdown_token.cancel();
    #[cfg(feature = "demo")]
    if let Some(driver) = driver {
        driver.stop().await;
    }
    result
}

/// `budget-top replay FILE`: play a recording (OTLP/JSON lines, gzip or not) into the same
/// screen, paced by the spans' own start times, `speed` times faster (0 or less: as fast as it
/// reads). The screen's clock follows the recording, so rates and λ read as they were.
pub async fn run_replay(
    file: PathBuf,
    speed: f64,
    max_spans: usize,
    carriers: Arc<deadline_budget::carrier::Carriers>,
) -> anyhow::Result<()> {
    // Fail before taking over the terminal when the file cannot be opened.
    crate::check::open_lines(&file).map_err(|e| anyhow::anyhow!("{}", e.0))?;
    let (tx, rx) = mpsc::channel::<Batch>(64);
    let notice = Arc::new(Mutex::new(None));
    let recording_t0 = Arc::new(AtomicU64::new(0));
    let started = std::time::Instant::now();
    let feeder = {
        let (file, notice, recording_t0) = (file.clone(), notice.clone(), recording_t0.clone());
        tokio::task::spawn_blocking(move || {
            let text = match feed_recording(&file, speed, &tx, &recording_t0, started, carriers) {
                Ok(n) => format!("replay finished: {n} spans from {}", file.display()),
                Err(e) => format!("replay stopped: {e}"),
            };
            if let Ok(mut n) = notice.lock() {
                *n = Some(text);
            }
        })
    };
    let clock_t0 = recording_t0.clone();
    let pace = if speed > 0.0 && speed.is_finite() {
        speed
    } else {
        1.0
    };
    let controls = Controls {
        clock: Box::new(move || match clock_t0.load(Ordering::Relaxed) {
            0 => wall_clock(),
            t0 => t0 + (started.elapsed().as_nanos() as f64 * pace) as u64,
        }),
        notice: Some(notice),
        ..Controls::default()
    };
    let config = LiveConfig {
        mode: Mode::Replay(file.display().to_string()),
        max_spans,
        ..LiveConfig::default()
    };
    let result = run_live(config, rx, controls).await;
    feeder.abort();
    result
}

/// Read `file` and send its batches, sleeping so they arrive as they were recorded. Returns
/// the spans sent; stops quietly when the screen has gone.
fn feed_recording(
    file: &std::path::Path,
    speed: f64,
    tx: &mpsc::Sender<Batch>,
    recording_t0: &AtomicU64,
    started: std::time::Instant,
    carriers: Arc<deadline_budget::carrier::Carriers>,
) -> Result<u64, String> {
    use crate::ingest::decode;
    let mut lines = crate::check::open_lines(file).map_err(|e| e.0)?;
    let mut interner = decode::Interner::with_carriers(carriers);
    let (mut bytes, mut line) = (Vec::new(), String::new());
    let (mut number, mut sent) = (0usize, 0u64);
    loop {
        number += 1;
        match crate::check::read_line(&mut *lines, &mut bytes, &mut line, file, number) {
            Ok((0, _)) => return Ok(sent),
            // Repaired UTF-8 is shown as U+FFFD; stderr is the screen here, so no warning.
            Ok(_) => {}
            Err(e) => return Err(e.0),
        }
        let Some(mut request) = crate::check::parse_line(file, number, &line).map_err(|e| e.0)?
        else {
            continue;
        };
        let decoded = decode::decode_request(&mut request, &mut interner, true);
        let Some(first) = decoded.spans.iter().map(|s| s.start_unix_nano).min() else {
            continue;
        };
        let t0 = match recording_t0.compare_exchange(0, first, Ordering::Relaxed, Ordering::Relaxed)
        {
            Ok(_) => first,
            Err(t0) => t0,
        };
        if speed > 0.0 && speed.is_finite() {
            let due = Duration::from_nanos((first.saturating_sub(t0) as f64 / speed) as u64);
            if let Some(wait) = due.checked_sub(started.elapsed()) {
                std::thread::sleep(wait.min(Duration::from_secs(60)));
            }
        }
        sent += decoded.spans.len() as u64;
        let batch = Batch {
            spans: decoded.spans,
            attributes: decoded.attributes,
            raw: None,
        };
        if tx.blocking_send(batch).is_err() {
            return Ok(sent);
        }
    }
}

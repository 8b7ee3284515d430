//! The screen's state: the chains on screen ([`ScreenData`]) and what the person chose to see
//! ([`Ui`]), changed only by the loop.
//!
//! Span batches enter through [`State::add_batch`] (held back while paused) and are analysed on
//! the frame tick by [`State::settle`], which also keeps the selection on the chain the person
//! (or the demo's lesson) chose. Nothing here draws or reads a clock: the loop sets `now`.

use std::net::SocketAddr;
use std::path::Path;

use deadline_budget::analysis::{FindingKind, SpanId, TraceId};

use super::data::Through;
use super::{ChainView, ListQuery, ScreenData, SortBy};
use crate::batch::Batch;

/// Where the spans on screen come from: shown in the header.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Mode {
    /// Listening for OTLP.
    #[default]
    Live,
    /// Playing back a recording (the file name).
    Replay(String),
    /// Running the demo services (`budget-top demo` passes it with its [`DemoControl`]).
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
    pub(crate) fn shown(self) -> Option<Self> {
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

/// The top-level views. Each is drawn and answers keys through its
/// [`Pane`](super::views::Pane), registered in [`super::views::pane`].
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
    /// Who calls whom: the services as boxes, the edges with their budgets and findings.
    Map,
}

impl View {
    /// Every view, in `Tab` order (the header's tabs follow it).
    pub const ALL: [View; 5] = [
        View::Chains,
        View::Waterfall,
        View::Edges,
        View::Services,
        View::Map,
    ];
}

/// What the Map has selected: a box or an edge, by the names of its boxes, so that the
/// selection stays on it as the map is drawn anew.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MapPick {
    /// A box (a service, an untraced callee, or `other`).
    Box(std::sync::Arc<str>),
    /// The edge from one box to another.
    Edge(std::sync::Arc<str>, std::sync::Arc<str>),
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
    /// Selected row of the edges table (the Edges pane's own).
    pub edge_row: usize,
    /// Selected row of the services table (the Services pane's own).
    pub service_row: usize,
    /// The Map's selection (the Map pane's own).
    pub map_pick: Option<MapPick>,
    /// How far the Map is panned from where its selection puts it, in cells.
    pub map_pan: (i32, i32),
    /// Where a drag on the Map is (a left button held since a click on it).
    pub map_drag: Option<(u16, u16)>,
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
    /// What protects the receivers ("plain, no token", "TLS, token"...), when known.
    pub protection: Option<&'static str>,
    /// Anyone on the network can send (`--allow-remote` with neither TLS nor a token).
    pub open_to_anyone: bool,
    /// Spans the receivers refused because the screen could not keep up, plus spans dropped
    /// while paused.
    pub spans_dropped: u64,
    /// Requests the receivers refused before reading them (overload): their spans are unknown.
    pub requests_refused_unread: u64,
    /// Metrics and logs requests the receivers answered and dropped.
    pub requests_ignored: u64,
    /// Requests the receivers refused for a missing or wrong bearer token.
    pub requests_unauthenticated: u64,
    /// The demo's status line, when the demo is running.
    pub demo: Option<DemoStatus>,
    /// Whether `d` on the empty live screen can start the demo: [`super::run_live`] sets it
    /// from its controls (no demo when budget-top was built without it, or listens without
    /// gRPC, where the demo's services export).
    pub demo_startable: bool,
    /// How a fresh store holds and judges chains (for [`State::start_over`]).
    pub retention: crate::store::Retention,
    /// The most raw attribute bytes a fresh store holds (for [`State::start_over`]).
    pub max_attribute_bytes: usize,
    /// `--trace-url`: the link from the chain on screen to its trace (the waterfall's title,
    /// the detail).
    pub links: Option<crate::view_model::trace_url::TraceUrl>,
    /// Whether the terminal takes OSC 8 hyperlinks: set once at start ([`super::term`]), so
    /// drawing reads no environment.
    pub hyperlinks: bool,
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
    /// Requests refused for a missing or wrong bearer token.
    pub requests_unauthenticated: u64,
}

impl Refused {
    /// Reads the receivers' counters.
    pub fn of(stats: &crate::ingest::IngestStats) -> Self {
        let counts = stats.snapshot();
        Refused {
            spans: counts.spans_refused,
            requests_unread: counts.requests_refused_unread,
            requests_ignored: counts.requests_ignored,
            requests_unauthenticated: counts.requests_unauthenticated,
        }
    }
}

/// How many of the newest chains the list looks through for the one that shows the lesson.
const LESSON_LOOKAHEAD: usize = 64;

/// The notice after `d` on the live screen, until the demo's status shows.
pub(crate) const STARTING_DEMO: &str = "starting the demo...";
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
            protection: None,
            open_to_anyone: false,
            spans_dropped: 0,
            requests_refused_unread: 0,
            requests_ignored: 0,
            requests_unauthenticated: 0,
            demo: None,
            demo_startable: true,
            retention: crate::store::Retention::default(),
            max_attribute_bytes: crate::batch::DEFAULT_MAX_ATTRIBUTE_BYTES,
            links: None,
            hyperlinks: false,
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
        // Every span's attributes in one pass over the chain's records, not one pass a span.
        let attributes = store.chain_attributes(id);
        match crate::chain_export::write_chain(path, chain, |span| attributes.get(&span).cloned()) {
            Ok(()) => format!(
                "exported chain {id} to {} (check --input or replay reads it)",
                path.display()
            ),
            Err(e) => format!("export failed: {e}"),
        }
    }

    /// `e`: append the selected chain to [`EXPORT_FILE`] and say so in the footer.
    pub(crate) fn export_selected_here(&mut self) {
        self.ui.message = Some(self.export_selected(Path::new(EXPORT_FILE)));
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
            self.retention
                .store()
                .with_attribute_budget(self.max_attribute_bytes),
        );
        self.ui.selected = 0;
        self.ui.selected_id = None;
        self.ui.span_row = 0;
        self.ui.pinned_span = None;
        self.ui.edge_row = 0;
        self.ui.service_row = 0;
        self.ui.map_pick = None;
        self.ui.map_pan = (0, 0);
        self.ui.follow = true;
        if self.ui.overlay == Overlay::Detail {
            self.ui.overlay = Overlay::None;
        }
        if self.ui.view.needs().chosen_chain {
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
        let changed = (
            total,
            refused.requests_unread,
            refused.requests_ignored,
            refused.requests_unauthenticated,
        ) != (
            self.spans_dropped,
            self.requests_refused_unread,
            self.requests_ignored,
            self.requests_unauthenticated,
        );
        self.spans_dropped = total;
        self.requests_refused_unread = refused.requests_unread;
        self.requests_ignored = refused.requests_ignored;
        self.requests_unauthenticated = refused.requests_unauthenticated;
        changed
    }

    /// Apply what arrived: analyse changed chains, reorder the list, keep the selection on the
    /// same chain. Returns whether the screen changed.
    pub fn settle(&mut self) -> bool {
        if self.ui.paused {
            return false;
        }
        let needs = self.ui.view.needs();
        self.data.map_wanted = needs.map;
        let changed = self
            .data
            .settle(&self.ui.query, self.now_unix_nano, needs.table_figures);
        if changed {
            self.follow_selection();
        }
        changed
    }

    fn follow_selection(&mut self) {
        let visible = &self.data.visible;
        let preview = self.ui.view.needs().chain_preview;
        if self.ui.follow && preview {
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
            if preview {
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
            .filter(|(_, a)| a.summary.orphans == 0 && a.summary.hops > 0 && !a.awaits_callee(now))
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

    /// Select the chain at `index` of the list (following the top when it is the first).
    pub(crate) fn select(&mut self, index: usize) {
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
    pub(crate) fn preview_row(&self) -> usize {
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

    /// Open chain `trace` in its waterfall (the Map's `o`), selected in the list (which shows
    /// every chain again when its filter or search hid it), on the row where it goes
    /// `through` (else the row its preview would show).
    pub(crate) fn open_chain(&mut self, trace: TraceId, through: &Through) {
        if !self.data.visible.contains(&trace) {
            self.ui.query.filter = super::Filter::All;
            self.ui.query.search.clear();
            self.data.settle(&self.ui.query, self.now_unix_nano, false);
        }
        let Some(index) = self.data.visible.iter().position(|id| *id == trace) else {
            return;
        };
        self.select(index);
        self.ui.follow = false;
        self.ui.view = View::Waterfall;
        // The callee's hop under its caller, or rather the call above it, where a reset or a
        // drop is found.
        let row = self.selected_chain().and_then(|chain| {
            let (i, row) = chain.rows().enumerate().find_map(|(i, (row, span))| {
                let parent = row
                    .parent_row
                    .and_then(|p| chain.row(p as usize))
                    .map(|(_, s)| s.service);
                through
                    .is_at(&span.service, parent.as_deref(), span.kind.is_hop())
                    .then_some((i, *row))
            })?;
            let call = row
                .parent_row
                .filter(|&p| chain.row(p as usize).is_some_and(|(_, s)| s.kind.is_call()));
            Some(call.map_or(i, |p| p as usize))
        });
        match row {
            Some(row) => {
                self.ui.span_row = row;
                self.ui.pinned_span = self.selected_span();
            }
            None => self.ui.span_row = self.preview_row(),
        }
    }

    /// The finding kinds the demo teaches, in order (none outside the demo).
    pub fn focus_kinds(&self) -> &[FindingKind] {
        self.demo
            .as_ref()
            .and_then(|d| d.focus.as_deref())
            .unwrap_or(&[])
    }

    /// The span of the selected waterfall row, if any.
    pub(crate) fn selected_span(&self) -> Option<SpanId> {
        let chain = self.selected_chain()?;
        chain.row(self.ui.span_row).map(|(_, s)| s.span_id)
    }

    /// `n`/`N`: jump to the next (or previous) finding of the selected chain.
    pub(crate) fn next_finding(&mut self, forward: bool) {
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

    /// Space: pause (arriving spans wait, up to [`MAX_HELD_SPANS`]) or resume (they go in).
    pub(crate) fn toggle_pause(&mut self) {
        self.ui.paused = !self.ui.paused;
        if !self.ui.paused {
            self.held_spans = 0;
            for batch in std::mem::take(&mut self.held) {
                self.data.add_batch(batch, self.now_unix_nano);
            }
        }
    }
}

/// Whether colour is allowed: `NO_COLOR` set to anything non-empty turns it off.
pub fn color_allowed() -> bool {
    std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

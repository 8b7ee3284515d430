//! What a person does: keys and the mouse, turned into changes of the [`State`].
//!
//! The screen's own keys (quit, legend, pause, search, filter, order, moving, Tab) are answered
//! from one table (`views::keys::SCREEN`), the same in every view; what a key means in one view
//! (Enter, Esc, `n`/`N`, `e`) and where a click lands are the view's own
//! ([`Pane`](super::views::Pane), from its key table); a letter nobody used goes to the demo.
//! The footer's hints are made from the same tables. Returns say whether the screen needs a
//! redraw.

use crossterm::event::{
    KeyCode, KeyEvent, KeyEventKind, KeyModifiers, MouseButton, MouseEvent, MouseEventKind,
};
use ratatui::layout::{Position, Rect};

use super::state::STARTING_DEMO;
use super::views::{self, MIN_SIZE, keys, pane};
use super::{DemoControl, Mode, Overlay, State, View};

impl State {
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
                // readline's keys, which every terminal user's fingers know: Ctrl-U clears the
                // line, Ctrl-W deletes the word before the cursor (and the spaces after it).
                KeyCode::Char('u') if ctrl => self.ui.query.search.clear(),
                KeyCode::Char('w') if ctrl => {
                    let search = &mut self.ui.query.search;
                    let kept = search
                        .trim_end()
                        .trim_end_matches(|c: char| !c.is_whitespace());
                    search.truncate(kept.len());
                }
                // Any other Ctrl key types nothing (it used to type its letter).
                KeyCode::Char(_) if ctrl => return false,
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
        if let Some(redraw) = keys::answer(&keys::SCREEN, self, key.code) {
            return redraw;
        }
        match key.code {
            KeyCode::Char('d')
                if self.data.is_empty() && self.mode == Mode::Live && self.demo_startable =>
            {
                self.ui.start_demo_requested = true;
                self.ui.message = Some(STARTING_DEMO.into());
            }
            code => {
                if let Some(redraw) = pane(self.ui.view).on_key(self, code) {
                    return redraw;
                }
                let KeyCode::Char(c) = code else {
                    return false;
                };
                return match demo {
                    Some(d) => {
                        let used = d.key(c);
                        if used {
                            self.demo = d.status().shown();
                            self.say_the_knob(c);
                        }
                        used
                    }
                    None => false,
                };
            }
        }
        true
    }

    /// After `[ ]` or `+/-`: the service and the latency they act on, on the message line (until
    /// the next key), which every width shows; the scenario line drops them first when short of
    /// room (80 columns).
    fn say_the_knob(&mut self, key: char) {
        if !matches!(key, '[' | ']' | '+' | '=' | '-' | '_') {
            return;
        }
        let knob = self
            .demo
            .as_ref()
            .and_then(|demo| demo.scenario.split_once("  ·  "))
            .map(|(_, knob)| knob.to_owned());
        if let Some(knob) = knob {
            self.ui.message = Some(format!("{knob}  ([ ] service, +/- 50 ms)"));
        }
    }

    /// Move the view's selection by `delta` rows.
    pub(crate) fn move_by(&mut self, delta: isize) {
        pane(self.ui.view).move_by(self, delta);
    }

    /// An arrow or `j`/`k`: what the view does with it (a row down or up, in most).
    pub(crate) fn move_key(&mut self, key: KeyCode) {
        pane(self.ui.view).move_key(self, key);
    }

    /// Tab and Shift-Tab: the next (or previous) view in [`View::ALL`]'s order.
    pub(crate) fn cycle_view(&mut self, forward: bool) {
        let n = View::ALL.len();
        let i = View::ALL
            .iter()
            .position(|v| *v == self.ui.view)
            .unwrap_or(0);
        let next = if forward {
            (i + 1) % n
        } else {
            (i + n - 1) % n
        };
        self.ui.view = View::ALL[next];
        pane(self.ui.view).enter(self);
    }

    fn sideways(&mut self, delta: isize, area: Rect) -> bool {
        let changed = pane(self.ui.view).move_sideways(self, delta);
        self.clamp_map_pan(area);
        changed
    }

    /// Keep the Map's pan within what the map can move by on a screen of size `area`.
    pub fn clamp_map_pan(&mut self, area: Rect) {
        if self.ui.view == View::Map && area.width >= MIN_SIZE.0 && area.height >= MIN_SIZE.1 {
            views::map::clamp_pan(self, area);
        }
    }

    /// Keep the popup's scroll within what it has to show on a screen of size `area`.
    pub fn clamp_popup_scroll(&mut self, area: Rect) {
        self.ui.popup_scroll = self.ui.popup_scroll.min(views::max_scroll(self, area));
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
            MouseEventKind::ScrollRight => return self.sideways(3, area),
            MouseEventKind::ScrollLeft => return self.sideways(-3, area),
            MouseEventKind::Down(MouseButton::Left) | MouseEventKind::Drag(MouseButton::Left) => {
                if area.width < MIN_SIZE.0 || area.height < MIN_SIZE.1 {
                    return false;
                }
                let layout = views::layout(self, area);
                let pos = Position::new(mouse.column, mouse.row);
                let changed = if matches!(mouse.kind, MouseEventKind::Drag(_)) {
                    pane(self.ui.view).drag(self, &layout, pos)
                } else {
                    pane(self.ui.view).click(self, &layout, pos)
                };
                self.clamp_map_pan(area);
                return changed;
            }
            _ => return false,
        }
        self.clamp_map_pan(area);
        true
    }
}

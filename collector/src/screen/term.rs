//! Taking over the terminal and always giving it back.
//!
//! [`Term::enter`] switches to the alternate screen, raw mode and mouse capture, and installs a
//! panic hook that restores the terminal before the panic message is printed. The terminal is
//! restored again when the [`Term`] is dropped (normal exit, `?` errors), and
//! [`shutdown_signal`] lets the loop stop on Ctrl-C (outside raw mode), SIGTERM and SIGHUP (the
//! pty closed). Restoring twice is harmless.

use std::io::{self, Stdout, Write};
use std::sync::Once;

use anyhow::Context;
use crossterm::event::{DisableMouseCapture, EnableMouseCapture};
use crossterm::terminal::{
    EnterAlternateScreen, LeaveAlternateScreen, disable_raw_mode, enable_raw_mode,
};
use crossterm::{cursor, execute};
use ratatui::Terminal;
use ratatui::backend::CrosstermBackend;

/// The terminal while the screen owns it.
#[derive(Debug)]
pub struct Term {
    terminal: Terminal<CrosstermBackend<Stdout>>,
    restored: bool,
}

static HOOK: Once = Once::new();

impl Term {
    /// Take over the terminal.
    pub fn enter() -> anyhow::Result<Self> {
        install_panic_hook();
        enable_raw_mode().context("cannot put the terminal in raw mode: is stdout a terminal?")?;
        let mut out = io::stdout();
        if let Err(e) = execute!(out, EnterAlternateScreen, EnableMouseCapture, cursor::Hide) {
            restore();
            return Err(e).context("cannot switch to the alternate screen");
        }
        let terminal = match Terminal::new(CrosstermBackend::new(out)) {
            Ok(t) => t,
            Err(e) => {
                restore();
                return Err(e).context("cannot size the terminal");
            }
        };
        Ok(Term {
            terminal,
            restored: false,
        })
    }

    /// The ratatui terminal to draw on.
    pub fn terminal(&mut self) -> &mut Terminal<CrosstermBackend<Stdout>> {
        &mut self.terminal
    }

    /// Give the terminal back.
    pub fn leave(&mut self) -> anyhow::Result<()> {
        if !self.restored {
            self.restored = true;
            restore();
        }
        Ok(())
    }
}

impl Drop for Term {
    fn drop(&mut self) {
        if !self.restored {
            restore();
        }
    }
}

/// Put the terminal back as it was: leave the alternate screen, stop mouse capture, show the
/// cursor, leave raw mode. Errors are ignored: this runs on the way out, even in a panic.
pub fn restore() {
    let mut out = io::stdout();
    let _ = execute!(out, DisableMouseCapture, LeaveAlternateScreen, cursor::Show);
    let _ = disable_raw_mode();
    let _ = out.flush();
}

fn install_panic_hook() {
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            restore();
            previous(info);
        }));
    });
}

/// Resolves on Ctrl-C, SIGTERM or SIGHUP (the terminal closed).
pub async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let term = signal(SignalKind::terminate());
        let hup = signal(SignalKind::hangup());
        match (term, hup) {
            (Ok(mut term), Ok(mut hup)) => {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    _ = term.recv() => {}
                    _ = hup.recv() => {}
                }
            }
            _ => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}

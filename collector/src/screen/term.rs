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

/// Whether the terminal turns OSC 8 sequences into hyperlinks, from its environment (`env`
/// reads a variable): `FORCE_HYPERLINK` decides when set (`0` off, anything else on, as other
/// tools read it); else the terminals known to take them (iTerm2, WezTerm, kitty, Ghostty,
/// foot, Alacritty, VS Code's, Windows Terminal, Konsole, and VTE's: GNOME Terminal and its
/// kin), and tmux from 3.4 (which passes them on). Anywhere else the link is plain text, which
/// an old terminal would otherwise show as garbage around it.
pub fn takes_hyperlinks(env: impl Fn(&str) -> Option<String>) -> bool {
    if let Some(forced) = env("FORCE_HYPERLINK") {
        return forced.trim() != "0";
    }
    let program = env("TERM_PROGRAM").unwrap_or_default();
    if program == "tmux" {
        // "3.4", "3.5a", "next-3.6": the first number and the one after its dot.
        let version = env("TERM_PROGRAM_VERSION").unwrap_or_default();
        let digits: String = version
            .trim_start_matches(|c: char| !c.is_ascii_digit())
            .chars()
            .take_while(|c| c.is_ascii_digit() || *c == '.')
            .collect();
        let mut parts = digits.split('.').map(|p| p.parse::<u32>().unwrap_or(0));
        let (major, minor) = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
        return (major, minor) >= (3, 4);
    }
    if env("TMUX").is_some() || env("TERM").is_some_and(|t| t.starts_with("screen")) {
        // A multiplexer that does not say it passes them on.
        return false;
    }
    if [
        "iTerm.app",
        "WezTerm",
        "vscode",
        "ghostty",
        "Hyper",
        "Tabby",
        "rio",
    ]
    .contains(&program.as_str())
    {
        return true;
    }
    let term = env("TERM").unwrap_or_default();
    if [
        "xterm-kitty",
        "xterm-ghostty",
        "wezterm",
        "foot",
        "alacritty",
        "contour",
    ]
    .iter()
    .any(|t| term.starts_with(t))
    {
        return true;
    }
    if [
        "KITTY_WINDOW_ID",
        "WT_SESSION",
        "KONSOLE_VERSION",
        "DOMTERM",
    ]
    .iter()
    .any(|v| env(v).is_some())
    {
        return true;
    }
    env("VTE_VERSION").and_then(|v| v.trim().parse::<u32>().ok()) >= Some(5000)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hyperlinks_where_the_terminal_is_known_to_take_them() {
        let with = |vars: &[(&str, &str)]| {
            let vars: Vec<(String, String)> = vars
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            takes_hyperlinks(|k| vars.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone()))
        };
        assert!(!with(&[]));
        assert!(!with(&[("TERM", "xterm-256color")]));
        assert!(with(&[("TERM", "xterm-kitty")]));
        assert!(with(&[("TERM_PROGRAM", "iTerm.app")]));
        assert!(with(&[("VTE_VERSION", "7200")]));
        assert!(!with(&[("VTE_VERSION", "4000")]));
        assert!(!with(&[
            ("TERM_PROGRAM", "tmux"),
            ("TERM_PROGRAM_VERSION", "3.3a")
        ]));
        assert!(with(&[
            ("TERM_PROGRAM", "tmux"),
            ("TERM_PROGRAM_VERSION", "3.4")
        ]));
        assert!(!with(&[("TMUX", "/tmp/x"), ("VTE_VERSION", "7200")]));
        assert!(with(&[("FORCE_HYPERLINK", "1")]));
        assert!(!with(&[("FORCE_HYPERLINK", "0"), ("TERM", "xterm-kitty")]));
    }
}

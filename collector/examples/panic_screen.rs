//! A screen that panics: takes over the terminal with budget-top's own `term` module, draws,
//! waits for a key, then panics. `tests/screen/tmux.rs` runs it in a real pty to prove that the
//! panic hook gives the terminal back (alternate screen left, raw mode off) and that the panic
//! message is readable on the restored terminal.

use budget_top::screen::term;
use ratatui::widgets::Paragraph;

fn main() -> anyhow::Result<()> {
    let mut screen = term::Term::enter()?;
    screen.terminal().draw(|frame| {
        frame.render_widget(Paragraph::new("SCREEN-UP: press a key"), frame.area())
    })?;
    crossterm::event::read()?;
    panic!("a deliberate panic while the screen owns the terminal");
}

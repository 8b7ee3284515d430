//! The styles of the screen, in one place, so `NO_COLOR` turns every colour off at once and
//! the screen still reads: every colour is paired with a glyph or a word.

use deadline_budget::analysis::Severity;
use ratatui::style::{Color, Modifier, Style};

/// The palette: colours when allowed, plain text with bold/reverse otherwise.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Theme {
    /// Colour allowed.
    pub color: bool,
}

impl Theme {
    fn fg(self, c: Color) -> Style {
        if self.color {
            Style::new().fg(c)
        } else {
            Style::new()
        }
    }
    /// Plain text.
    pub fn text(self) -> Style {
        Style::new()
    }
    /// Secondary text.
    pub fn dim(self) -> Style {
        if self.color {
            Style::new().fg(Color::DarkGray)
        } else {
            Style::new()
        }
    }
    /// Titles and column heads.
    pub fn title(self) -> Style {
        Style::new().add_modifier(Modifier::BOLD)
    }
    /// Numbers worth a look.
    pub fn accent(self) -> Style {
        self.fg(Color::Cyan)
    }
    /// The selected row.
    pub fn selected(self) -> Style {
        if self.color {
            Style::new()
                .bg(Color::Rgb(40, 44, 60))
                .add_modifier(Modifier::BOLD)
        } else {
            Style::new().add_modifier(Modifier::REVERSED)
        }
    }
    /// A severity's style.
    pub fn severity(self, s: Severity) -> Style {
        match s {
            Severity::Error => self.fg(Color::Red).add_modifier(Modifier::BOLD),
            Severity::Warning => self.fg(Color::Yellow),
            Severity::Info => self.fg(Color::Cyan),
        }
    }
    /// The received budget, up to the deadline.
    pub fn budget(self) -> Style {
        self.fg(Color::Blue)
    }
    /// Queue wait.
    pub fn queue(self) -> Style {
        self.fg(Color::Yellow)
    }
    /// Work inside the budget.
    pub fn work(self) -> Style {
        self.fg(Color::Green)
    }
    /// Work past the deadline.
    pub fn late(self) -> Style {
        self.fg(Color::Red).add_modifier(Modifier::BOLD)
    }
    /// Waiting on a call past the moment everyone above stopped waiting.
    pub fn waiting(self) -> Style {
        self.fg(Color::Red)
    }
    /// A call.
    pub fn call(self) -> Style {
        self.fg(Color::Magenta)
    }
    /// The paused badge and other alerts.
    pub fn alert(self) -> Style {
        if self.color {
            Style::new()
                .fg(Color::Black)
                .bg(Color::Yellow)
                .add_modifier(Modifier::BOLD)
        } else {
            Style::new().add_modifier(Modifier::REVERSED | Modifier::BOLD)
        }
    }
}

//! Lines for a person on stderr and stdout that never panic: `eprintln!` and `println!` panic
//! when their stream is a closed pipe (`budget-demo list | head -1`, a supervisor that went
//! away), which would turn a clean run into exit status 101. [`crate::stderr_line!`] and
//! [`crate::stdout_line!`] write the same line and drop it when the stream cannot take it:
//! nobody is left to read it, and the exit status still says how the run ended.

use std::fmt;
use std::io::Write;

/// Writes `args` and a newline to `stream` in one locked write, ignoring any error (a broken
/// pipe, a full disk behind a redirection): there is nowhere left to say it.
fn write_line(mut stream: impl Write, args: fmt::Arguments<'_>) {
    let _ = stream
        .write_fmt(args)
        .and_then(|()| stream.write_all(b"\n"))
        .and_then(|()| stream.flush());
}

/// A line on stderr; see [`crate::console`].
pub fn stderr_line(args: fmt::Arguments<'_>) {
    write_line(std::io::stderr().lock(), args);
}

/// A line on stdout; see [`crate::console`].
pub fn stdout_line(args: fmt::Arguments<'_>) {
    write_line(std::io::stdout().lock(), args);
}

/// `eprintln!` that does not panic when stderr is closed: see [`crate::console`].
#[macro_export]
macro_rules! stderr_line {
    ($($arg:tt)*) => {
        $crate::console::stderr_line(::std::format_args!($($arg)*))
    };
}

/// `println!` that does not panic when stdout is closed: see [`crate::console`].
#[macro_export]
macro_rules! stdout_line {
    ($($arg:tt)*) => {
        $crate::console::stdout_line(::std::format_args!($($arg)*))
    };
}

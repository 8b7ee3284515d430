//! Lines for a person on stderr that never panic: `eprintln!` panics when stderr is a closed
//! pipe (`budget-top check ... 2> >(head -c 0)`, a supervisor that went away), which would turn
//! a report already written, or a clear refusal, into exit status 101. [`crate::stderr_line!`]
//! writes the same line and drops it when stderr cannot take it: nobody is left to read it, and
//! the exit status still says how the run ended.

use std::fmt;
use std::io::Write as _;

/// Writes `args` and a newline to stderr in one locked write, ignoring any error (a broken
/// pipe, a full disk behind a redirection): there is nowhere left to say it.
pub fn write_line(args: fmt::Arguments<'_>) {
    let mut stderr = std::io::stderr().lock();
    let _ = stderr
        .write_fmt(args)
        .and_then(|()| stderr.write_all(b"\n"));
}

/// `eprintln!` that does not panic when stderr is closed: see [`crate::stderr`].
#[macro_export]
macro_rules! stderr_line {
    ($($arg:tt)*) => {
        $crate::stderr::write_line(::std::format_args!($($arg)*))
    };
}

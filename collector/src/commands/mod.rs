//! The subcommands, one file each: what `main.rs` dispatches to. Each starts its source of
//! spans (the receivers, a file, the demo), feeds the store or the screen, and says how it
//! ended (an exit status, or an error for a person to read).
//!
//! - [`live`]: plain `budget-top`, the receivers and the live screen;
//! - [`check`]: the analysis without the screen, for CI (text, JSON, HTML);
//! - [`record`]: what arrives, written as OTLP/JSON lines ([`crate::otlp_lines`]);
//! - [`replay`]: a recording played into the screen;
//! - [`merge`]: the JSON reports of several instances merged into one;
//! - [`serve`]: the receivers and the judging for days, with the HTTP API ([`crate::api`]);
//! - `demo`: the demo services exporting to our own receivers (feature `demo`), driven by
//!   `demo_driver`, with the screen's keys and the guided workshop in `workshop`;
//! - [`listen`]: listening until told to stop, what `check`, `record` and `demo --check` share.

pub mod check;
#[cfg(feature = "demo")]
pub mod demo;
#[cfg(feature = "demo")]
mod demo_driver;
pub mod listen;
pub mod live;
pub mod merge;
pub mod record;
pub mod replay;
pub mod serve;
#[cfg(feature = "demo")]
mod workshop;

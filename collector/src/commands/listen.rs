//! Listening until told to stop: what `check`, `record` and `demo --check` share. The
//! receivers feed a store through a [`Pump`] ([`pump`]) until Ctrl-C or SIGTERM ([`Signals`]),
//! a fixed time, or the input going quiet ([`Pump::feed_until`]); [`finish`] then takes in
//! everything they already answered.

use std::time::Duration;

use anyhow::Context as _;

use crate::ingest::{Ingest, IngestCounts};
use crate::pump::{self, Pump};
use crate::store::Store;

/// How often a listening store judges the chains quiet for `--settle` (the store itself looks
/// at most ten times a settle period).
pub const JUDGE_TICK: Duration = Duration::from_millis(100);

/// The pump of a listening `check` or `demo --check`: every [`JUDGE_TICK`], the chains quiet
/// for `--settle` are judged into the totals (`CONVENTIONS.md` section 6), as the live screen
/// does. Its clock is tokio's, from where `store`'s left off.
pub fn pump(ingest: Ingest, store: &Store) -> Pump {
    Pump::of(ingest)
        .with_clock(pump::tokio_clock(store.clock()))
        .judging_every(JUDGE_TICK, tokio::time::MissedTickBehavior::Delay)
}

/// Stops the receivers and takes everything they accepted into `store`; returns their counts.
pub async fn finish(ingest: Ingest, store: &mut Store) -> IngestCounts {
    let stats = ingest.stats.clone();
    // The store takes every batch: nothing fails.
    let _ = pump(ingest, store).drain(store).await;
    stats.snapshot()
}

/// Ctrl-C and SIGTERM, as one stream.
pub struct Signals {
    #[cfg(unix)]
    term: tokio::signal::unix::Signal,
    #[cfg(unix)]
    interrupt: tokio::signal::unix::Signal,
}

impl std::fmt::Debug for Signals {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Signals")
    }
}

impl Signals {
    /// Starts listening for both signals, from now on (not from the first `recv`).
    pub fn new() -> anyhow::Result<Self> {
        #[cfg(unix)]
        use tokio::signal::unix::{SignalKind, signal};
        Ok(Signals {
            #[cfg(unix)]
            term: signal(SignalKind::terminate()).context("cannot listen for SIGTERM")?,
            #[cfg(unix)]
            interrupt: signal(SignalKind::interrupt()).context("cannot listen for Ctrl-C")?,
        })
    }

    /// Waits for Ctrl-C or SIGTERM.
    pub async fn recv(&mut self) {
        #[cfg(unix)]
        tokio::select! {
            _ = self.interrupt.recv() => {}
            _ = self.term.recv() => {}
        }
        #[cfg(not(unix))]
        let _ = tokio::signal::ctrl_c().await;
    }
}

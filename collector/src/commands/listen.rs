//! Listening until told to stop: what `check`, `record` and `demo --check` share. The
//! receivers feed a store until Ctrl-C or SIGTERM ([`Signals`]), a fixed time, or the input
//! going quiet ([`feed_until`]); [`finish`] then takes in everything they already answered.

use std::pin::pin;
use std::time::Duration;

use anyhow::Context as _;
use tokio::time::Instant;

use crate::ingest::{Ingest, IngestCounts};
use crate::store::Store;

/// How often a listening store judges the chains quiet for `--settle` (the store itself looks
/// at most ten times a settle period).
pub const JUDGE_TICK: Duration = Duration::from_millis(100);

/// Feeds `store` from the receivers until `stop` completes or, with `idle`, once spans have
/// arrived and none came for that long. The receivers keep running: more can follow (e.g. what
/// services flush as they stop), until [`finish`]. Meanwhile, every [`JUDGE_TICK`], the chains
/// quiet for `--settle` are judged into the totals (`CONVENTIONS.md` section 6), as the live
/// screen does: the store's clock is tokio's, from where the store's last left off.
pub async fn feed_until(
    ingest: &mut Ingest,
    store: &mut Store,
    idle: Option<Duration>,
    stop: impl Future<Output = ()>,
) {
    let mut stop = pin!(stop);
    let mut last_span: Option<Instant> = None;
    let started = Instant::now();
    let base = store.clock();
    let clock = move || base.saturating_add(started.elapsed().as_nanos() as u64);
    let mut tick = tokio::time::interval(JUDGE_TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let idle_at = match (idle, last_span) {
            (Some(idle), Some(last)) => Some(last + idle),
            _ => None,
        };
        tokio::select! {
            batch = ingest.receiver.recv() => {
                let Some(batch) = batch else { break };
                if !batch.spans.is_empty() {
                    last_span = Some(Instant::now());
                }
                store.set_clock(clock());
                store.insert_batch(batch);
            }
            _ = tick.tick() => {
                store.set_clock(clock());
                store.judge_settled();
            }
            () = sleep_until(idle_at) => break,
            () = &mut stop => break,
        }
    }
}

/// Stops the receivers and takes everything they accepted into `store`; returns their counts.
pub async fn finish(mut ingest: Ingest, store: &mut Store) -> IngestCounts {
    ingest.shutdown();
    // Whatever was answered with success is in the channel: take all of it.
    ingest.receiver.close();
    while let Some(batch) = ingest.receiver.recv().await {
        store.insert_batch(batch);
    }
    ingest.stats.snapshot()
}

/// Sleeps until `at`; forever when there is none.
pub async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
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

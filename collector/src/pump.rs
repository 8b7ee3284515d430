//! The pump: what feeds the loop that owns the store, in every command and the screen.
//!
//! Its three jobs: taking each batch from ingest's bounded channel, the judging tick (chains
//! quiet for `--settle` judged into the totals, `CONVENTIONS.md` section 6), and the drain at
//! the end (the receivers stopped, every batch they answered with success taken in). What it
//! feeds is an [`Intake`]: the [`Store`] itself (`check`, `demo --check`), `serve`'s store with
//! its forwarding stage after judging, `record`'s file, or the screen. The loop stays the one
//! owner of its state (STYLE.md habit 1): it selects [`Pump::step`] beside its own branches
//! (keys, the API's asks, a signal), and the pump hands each batch and tick to the intake.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::sync::mpsc;
use tokio::time::{Instant, Interval, MissedTickBehavior};
use tokio_util::sync::CancellationToken;

use crate::batch::Batch;
use crate::ingest::Ingest;
use crate::store::Store;

/// A clock in Unix ns: the wall clock, tokio's, or a replay's.
pub type Clock = Box<dyn FnMut() -> u64 + Send>;

/// What the pump knows at a judging tick.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tick {
    /// The pump's clock now, Unix ns.
    pub now_unix_nano: u64,
    /// Whether batches still wait in the channel.
    pub batches_waiting: bool,
}

/// What a pump feeds.
pub trait Intake {
    /// Takes in one batch, arrived at `now_unix_nano` on the pump's clock.
    fn take(&mut self, batch: Batch, now_unix_nano: u64) -> anyhow::Result<()>;

    /// The judging tick.
    fn judge(&mut self, tick: Tick) -> anyhow::Result<()>;
}

/// The store fed as it is: each batch inserted at its arrival, and the chains quiet for
/// `--settle` judged on each tick.
impl Intake for Store {
    fn take(&mut self, batch: Batch, now_unix_nano: u64) -> anyhow::Result<()> {
        self.set_clock(now_unix_nano);
        self.insert_batch(batch);
        Ok(())
    }

    fn judge(&mut self, tick: Tick) -> anyhow::Result<()> {
        self.set_clock(tick.now_unix_nano);
        self.judge_settled();
        Ok(())
    }
}

/// What one [`Pump::step`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pumped {
    /// A batch was taken in.
    Batch,
    /// The intake judged on the tick.
    Tick,
    /// The channel is closed and empty: no batch will come again (the tick goes on, unless
    /// the pump is draining).
    Ended,
}

/// The pump. See the module documentation.
pub struct Pump {
    batches: mpsc::Receiver<Batch>,
    /// Stops the receivers that send on `batches`, at the drain (none for a replay's channel).
    receivers: Option<CancellationToken>,
    clock: Clock,
    judging: Option<Interval>,
    /// The channel still gives batches (not ended).
    open: bool,
    /// Set by [`Pump::close`]: the tick stops, what is in the channel is still taken.
    draining: bool,
    /// When a batch with spans was last taken.
    last_spans: Option<Instant>,
}

impl std::fmt::Debug for Pump {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pump")
            .field("open", &self.open)
            .field("draining", &self.draining)
            .finish_non_exhaustive()
    }
}

impl Pump {
    /// A pump of the batches `batches` brings, on the wall clock, with no judging tick.
    pub fn new(batches: mpsc::Receiver<Batch>) -> Self {
        Pump {
            batches,
            receivers: None,
            clock: Box::new(wall_clock),
            judging: None,
            open: true,
            draining: false,
            last_spans: None,
        }
    }

    /// A pump of what the receivers send; its drain stops them.
    pub fn of(ingest: Ingest) -> Self {
        let mut pump = Pump::new(ingest.receiver);
        pump.receivers = Some(ingest.shutdown_token);
        pump
    }

    /// The same pump on another clock.
    pub fn with_clock(mut self, clock: Clock) -> Self {
        self.clock = clock;
        self
    }

    /// The same pump judging every `period` (the first tick at once), a tick missed under load
    /// being `missed`.
    pub fn judging_every(mut self, period: Duration, missed: MissedTickBehavior) -> Self {
        let mut judging = tokio::time::interval(period);
        judging.set_missed_tick_behavior(missed);
        self.judging = Some(judging);
        self
    }

    /// The pump's clock now.
    pub fn now(&mut self) -> u64 {
        (self.clock)()
    }

    /// Waits for the next batch or tick and hands it to `intake`. Cancel-safe: a `select!`
    /// branch that wins instead loses nothing.
    pub async fn step(&mut self, intake: &mut impl Intake) -> anyhow::Result<Pumped> {
        let ticking = !self.draining && self.judging.is_some();
        let judging = self.judging.as_mut();
        tokio::select! {
            batch = self.batches.recv(), if self.open => match batch {
                Some(batch) => {
                    if !batch.spans.is_empty() {
                        self.last_spans = Some(Instant::now());
                    }
                    intake.take(batch, (self.clock)())?;
                    Ok(Pumped::Batch)
                }
                None => {
                    self.open = false;
                    Ok(Pumped::Ended)
                }
            },
            _ = next_tick(judging), if ticking => {
                let tick = Tick {
                    now_unix_nano: (self.clock)(),
                    batches_waiting: !self.batches.is_empty(),
                };
                intake.judge(tick)?;
                Ok(Pumped::Tick)
            }
            else => std::future::pending().await,
        }
    }

    /// Feeds `intake` until `stop` completes, the channel ends, or, with `idle`, once spans
    /// have arrived and none came for that long. The receivers keep running: more can follow
    /// (what services flush as they stop), until [`Pump::drain`].
    pub async fn feed_until(
        &mut self,
        intake: &mut impl Intake,
        idle: Option<Duration>,
        stop: impl Future<Output = ()>,
    ) -> anyhow::Result<()> {
        let mut stop = std::pin::pin!(stop);
        loop {
            let idle_at = idle.zip(self.last_spans).map(|(idle, last)| last + idle);
            tokio::select! {
                pumped = self.step(intake) => if pumped? == Pumped::Ended {
                    return Ok(());
                },
                () = sleep_until(idle_at) => return Ok(()),
                () = &mut stop => return Ok(()),
            }
        }
    }

    /// Stops the receivers and closes the channel: no tick from now on, and
    /// [`Pump::step`] takes what is in the channel, then says [`Pumped::Ended`]. Whatever the
    /// receivers answered with success is in it.
    pub fn close(&mut self) {
        if let Some(receivers) = &self.receivers {
            receivers.cancel();
        }
        self.batches.close();
        self.draining = true;
    }

    /// The drain at the end: [`Pump::close`], then every batch in the channel taken in.
    pub async fn drain(&mut self, intake: &mut impl Intake) -> anyhow::Result<()> {
        self.close();
        while self.step(intake).await? != Pumped::Ended {}
        Ok(())
    }
}

/// The next tick of `judging`.
async fn next_tick(judging: Option<&mut Interval>) {
    match judging {
        Some(judging) => {
            judging.tick().await;
        }
        None => std::future::pending().await,
    }
}

/// Sleeps until `at`; forever when there is none.
pub async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// The wall clock in Unix ns.
pub fn wall_clock() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

/// Tokio's clock in Unix ns, from `base` now (a store's clock where it left off): paused in
/// tests, as time is.
pub fn tokio_clock(base: u64) -> Clock {
    let started = Instant::now();
    Box::new(move || base.saturating_add(started.elapsed().as_nanos() as u64))
}

//! The exporter task: what the forwarding stage queued, sent to the backend as the Collector's
//! `exporterhelper` sends, off the loop that owns the store.
//!
//! Chains come in on a bounded channel (the stage counts what did not fit). They are batched
//! (sent once [`MAX_BATCH_SPANS`] or [`MAX_BATCH_BYTES`] are waiting, or [`BATCH_DELAY`] after
//! the first), encoded once, and at most [`IN_FLIGHT`] requests are out at a time; while that
//! many are, the channel is not read and fills. An answer worth retrying is retried with
//! exponential backoff and jitter (or after the wait the backend named), until `--forward-retry-
//! for` has passed since the first attempt; a refusal is never retried. Every span ends in one
//! count: sent, failed (refused, or out of retries), or dropped at stop (the drain's deadline
//! came first: [`ForwardStats::dropped_stopped`]).

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::client::{Answer, Client};
use super::request;
use super::stats::ForwardStats;
use crate::store::ReceivedChain;

/// A batch is sent once it holds this many spans...
pub const MAX_BATCH_SPANS: u64 = 8192;
/// ...or this many bytes (well under the 4 MiB a gRPC server takes by default)...
pub const MAX_BATCH_BYTES: usize = 2 * 1024 * 1024;
/// ...or this long after its first chain came.
pub const BATCH_DELAY: Duration = Duration::from_millis(200);
/// Requests out at once.
pub const IN_FLIGHT: usize = 4;
/// The first wait before a retry...
const FIRST_WAIT: Duration = Duration::from_secs(1);
/// ...each next one this many times longer...
const MULTIPLIER: f64 = 1.5;
/// ...up to this.
const LONGEST_WAIT: Duration = Duration::from_secs(30);

/// A chain queued for sending, and what it holds in bytes (counted in the queue).
#[derive(Debug)]
pub(super) struct Queued {
    pub(super) chain: ReceivedChain,
    pub(super) bytes: usize,
}

/// What every request needs.
pub(super) struct Settings {
    pub(super) client: Client,
    /// `--forward-timeout`.
    pub(super) timeout: Duration,
    /// `--forward-retry-for`.
    pub(super) retry_for: Duration,
}

/// Runs until the channel is closed and every batch is answered, or `stop` is cancelled.
pub(super) async fn run(
    mut rx: mpsc::Receiver<Queued>,
    settings: Arc<Settings>,
    stats: Arc<ForwardStats>,
    stop: CancellationToken,
) {
    let mut pending: Vec<Queued> = Vec::new();
    let (mut spans, mut bytes) = (0u64, 0usize);
    let mut due = Instant::now();
    let mut in_flight = JoinSet::new();
    let send = |pending: &mut Vec<Queued>, in_flight: &mut JoinSet<()>| {
        let batch = std::mem::take(pending);
        in_flight.spawn(send_batch(
            batch,
            settings.clone(),
            stats.clone(),
            stop.clone(),
        ));
    };
    loop {
        let room = in_flight.len() < IN_FLIGHT;
        tokio::select! {
            biased;
            () = stop.cancelled() => break,
            Some(_) = in_flight.join_next(), if !in_flight.is_empty() => {}
            item = rx.recv(), if room => match item {
                Some(queued) => {
                    if pending.is_empty() {
                        due = Instant::now() + BATCH_DELAY;
                        (spans, bytes) = (0, 0);
                    }
                    spans += u64::from(queued.chain.len());
                    bytes += queued.bytes;
                    pending.push(queued);
                    if spans >= MAX_BATCH_SPANS || bytes >= MAX_BATCH_BYTES {
                        send(&mut pending, &mut in_flight);
                    }
                }
                None => {
                    // Closed (serve stops): what waits goes now, then the answers.
                    if !pending.is_empty() {
                        send(&mut pending, &mut in_flight);
                    }
                    loop {
                        tokio::select! {
                            () = stop.cancelled() => break,
                            done = in_flight.join_next() => if done.is_none() { break },
                        }
                    }
                    break;
                }
            },
            () = tokio::time::sleep_until(due), if room && !pending.is_empty() => {
                send(&mut pending, &mut in_flight);
            }
        }
    }
    // Stopped: what was not sent is dropped and counted; the requests out count their own.
    rx.close();
    while let Ok(queued) = rx.try_recv() {
        pending.push(queued);
    }
    for queued in pending {
        stats.stopped(u64::from(queued.chain.len()), queued.bytes);
    }
    while in_flight.join_next().await.is_some() {}
}

/// Sends one batch until it is answered for good, retrying what is worth it.
async fn send_batch(
    batch: Vec<Queued>,
    settings: Arc<Settings>,
    stats: Arc<ForwardStats>,
    stop: CancellationToken,
) {
    let spans: u64 = batch.iter().map(|q| u64::from(q.chain.len())).sum();
    let bytes: usize = batch.iter().map(|q| q.bytes).sum();
    let body = Bytes::from(request::encode(batch.iter().map(|q| &q.chain)));
    drop(batch);
    let first = Instant::now();
    let mut attempt: i32 = 0;
    loop {
        let answer = tokio::select! {
            answer = settings.client.export(body.clone(), settings.timeout) => answer,
            () = stop.cancelled() => {
                stats.stopped(spans, bytes);
                return;
            }
        };
        let why = match answer {
            Answer::Accepted { rejected, message } => {
                let rejected = rejected.min(spans);
                stats
                    .spans_sent
                    .fetch_add(spans - rejected, Ordering::Relaxed);
                stats.requests_sent.fetch_add(1, Ordering::Relaxed);
                if rejected > 0 {
                    stats.failed(
                        rejected,
                        0,
                        format!("the backend rejected {rejected} span(s): {message}"),
                    );
                }
                stats.dequeue(spans, bytes);
                return;
            }
            Answer::Refused { why } => {
                stats.failed(spans, bytes, format!("{why} (not retried)"));
                return;
            }
            Answer::Retry { after, why } => (after, why),
        };
        let (after, why) = why;
        let wait = after.unwrap_or_else(|| backoff(attempt));
        if first.elapsed() + wait > settings.retry_for {
            stats.failed(
                spans,
                bytes,
                format!(
                    "{why} (given up: retried for {:?}, --forward-retry-for {:?})",
                    first.elapsed(),
                    settings.retry_for
                ),
            );
            return;
        }
        stats.note(&format!("{why} (retrying)"));
        tokio::select! {
            () = tokio::time::sleep(wait) => {}
            () = stop.cancelled() => {
                stats.stopped(spans, bytes);
                return;
            }
        }
        stats.spans_retried.fetch_add(spans, Ordering::Relaxed);
        attempt = attempt.saturating_add(1);
    }
}

/// The wait before retry `attempt` (0 first): exponential, up to [`LONGEST_WAIT`], with
/// ±50 % jitter (so that many senders do not come back at the same instant).
fn backoff(attempt: i32) -> Duration {
    let base = FIRST_WAIT.as_secs_f64() * MULTIPLIER.powi(attempt.min(64));
    let base = base.min(LONGEST_WAIT.as_secs_f64());
    Duration::from_secs_f64(base * (0.5 + fastrand::f64()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_grows_to_its_ceiling_with_jitter() {
        for attempt in [0, 1, 5, 100] {
            let base = (FIRST_WAIT.as_secs_f64() * MULTIPLIER.powi(attempt.min(64)))
                .min(LONGEST_WAIT.as_secs_f64());
            for _ in 0..100 {
                let wait = backoff(attempt).as_secs_f64();
                assert!(
                    wait >= base * 0.5 && wait <= base * 1.5,
                    "{attempt}: {wait}"
                );
            }
        }
    }
}

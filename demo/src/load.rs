//! The load generator: drives the edge service at a steady rate with jitter, or in bursts of
//! simultaneous requests, bounded in count and in time.
//!
//! It runs on its own thread and runtime (it is the "user", not a service: it has no telemetry
//! and sends no budget, so the edge assigns its own), counts the answers by status, and reports
//! when it is done.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::DemoError;

/// How to drive the edge.
#[derive(Clone, Debug, PartialEq)]
pub struct LoadPlan {
    /// Requests per second (for bursts: bursts per second).
    pub rate: f64,
    /// Nobody chose `rate`: each scenario runs at its own (slow-dependency's needs 100 answered
    /// calls before payments turns slow).
    pub scenario_rate: bool,
    /// Relative jitter of the gap between requests, 0.0..=1.0 (0.3: each gap is 70%..130%).
    pub jitter: f64,
    /// Requests sent at the same instant (1: a steady stream).
    pub burst: u32,
    /// Stop after this many requests in total.
    pub requests: Option<u64>,
    /// Stop sending after this long.
    pub duration: Option<Duration>,
    /// How long one request may take before the load generator gives up on it (a safety net;
    /// the edge's own budget ends requests well before).
    pub request_timeout: Duration,
}

impl Default for LoadPlan {
    fn default() -> Self {
        Self {
            rate: 3.0,
            scenario_rate: false,
            jitter: 0.3,
            burst: 1,
            requests: None,
            duration: None,
            request_timeout: Duration::from_secs(30),
        }
    }
}

/// Answers seen by the load generator, by class. Cheap to clone; all clones share the counters.
#[derive(Clone, Debug, Default)]
pub struct LoadStats {
    inner: Arc<Counters>,
}

#[derive(Debug, Default)]
struct Counters {
    sent: AtomicU64,
    ok: AtomicU64,
    shed_full: AtomicU64,
    timed_out: AtomicU64,
    other_status: AtomicU64,
    failed: AtomicU64,
}

/// A snapshot of [`LoadStats`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LoadCounts {
    /// Requests sent.
    pub sent: u64,
    /// 2xx answers.
    pub ok: u64,
    /// 503 answers (shed: queue full).
    pub shed_full: u64,
    /// 504 answers (the budget ran out somewhere, or expired in a queue).
    pub timed_out: u64,
    /// Any other status.
    pub other_status: u64,
    /// No answer at all (connection error, load-side timeout).
    pub failed: u64,
}

impl LoadCounts {
    /// Requests answered or failed so far.
    pub fn finished(&self) -> u64 {
        self.ok + self.shed_full + self.timed_out + self.other_status + self.failed
    }
}

impl LoadStats {
    /// The counts so far.
    pub fn counts(&self) -> LoadCounts {
        let c = &self.inner;
        LoadCounts {
            sent: c.sent.load(Ordering::Relaxed),
            ok: c.ok.load(Ordering::Relaxed),
            shed_full: c.shed_full.load(Ordering::Relaxed),
            timed_out: c.timed_out.load(Ordering::Relaxed),
            other_status: c.other_status.load(Ordering::Relaxed),
            failed: c.failed.load(Ordering::Relaxed),
        }
    }

    fn record(&self, answer: Result<u16, ()>) {
        let c = &self.inner;
        let counter = match answer {
            Ok(200..=299) => &c.ok,
            Ok(503) => &c.shed_full,
            Ok(504) => &c.timed_out,
            Ok(_) => &c.other_status,
            Err(()) => &c.failed,
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }
}

/// A running load generator.
#[derive(Debug)]
pub(crate) struct Load {
    stop: CancellationToken,
    done: watch::Receiver<bool>,
    stats: LoadStats,
    thread: Option<thread::JoinHandle<()>>,
}

impl Load {
    /// Start sending to `urls`, in turn, according to `plan`.
    pub(crate) fn start(urls: Vec<String>, plan: LoadPlan) -> Result<Self, DemoError> {
        let stop = CancellationToken::new();
        let stats = LoadStats::default();
        let (done_tx, done) = watch::channel(false);
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(DemoError::Io)?;
        let client = reqwest::Client::builder()
            .timeout(plan.request_timeout)
            .build()
            .map_err(|e| DemoError::Client(e.to_string()))?;
        let (thread_stop, thread_stats) = (stop.clone(), stats.clone());
        let thread = thread::Builder::new()
            .name("load".into())
            .spawn(move || {
                runtime.block_on(drive(client, urls, plan, thread_stop, thread_stats));
                let _ = done_tx.send(true);
            })
            .map_err(DemoError::Io)?;
        Ok(Self {
            stop,
            done,
            stats,
            thread: Some(thread),
        })
    }

    /// The shared counters.
    pub(crate) fn stats(&self) -> LoadStats {
        self.stats.clone()
    }

    /// Wait until every request was sent and answered (or the load was stopped).
    pub(crate) async fn finished(&self) {
        let mut done = self.done.clone();
        let _ = done.wait_for(|done| *done).await;
    }

    /// Stop sending, abandon requests in flight, join the thread. Blocks.
    pub(crate) fn join(mut self) {
        self.stop.cancel();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for Load {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

async fn drive(
    client: reqwest::Client,
    urls: Vec<String>,
    plan: LoadPlan,
    stop: CancellationToken,
    stats: LoadStats,
) {
    let started = Instant::now();
    let mut jitter = Jitter::seeded();
    let mut in_flight = tokio::task::JoinSet::new();
    let gap = Duration::from_secs_f64(1.0 / plan.rate.clamp(0.01, 10_000.0));
    let mut sent = 0u64;
    loop {
        let out_of_count = plan.requests.is_some_and(|max| sent >= max);
        let out_of_time = plan.duration.is_some_and(|d| started.elapsed() >= d);
        if out_of_count || out_of_time || stop.is_cancelled() {
            break;
        }
        let burst = u64::from(plan.burst.max(1));
        let burst = plan.requests.map_or(burst, |max| burst.min(max - sent));
        for _ in 0..burst {
            let Some(url) = urls.get(sent as usize % urls.len().max(1)) else {
                return;
            };
            sent += 1;
            let (client, url, stats) = (client.clone(), url.clone(), stats.clone());
            stats.inner.sent.fetch_add(1, Ordering::Relaxed);
            in_flight.spawn(async move {
                let answer = client.get(&url).send().await;
                stats.record(answer.map(|r| r.status().as_u16()).map_err(|_| ()));
            });
        }
        if plan.requests.is_some_and(|max| sent >= max) {
            break;
        }
        let pause = jitter.spread(gap, plan.jitter);
        tokio::select! {
            () = tokio::time::sleep(pause) => {}
            () = stop.cancelled() => break,
        }
        // Reap answers already in, so a long run does not hold every finished task.
        while in_flight.try_join_next().is_some() {}
    }
    tokio::select! {
        () = async { while in_flight.join_next().await.is_some() {} } => {}
        () = stop.cancelled() => in_flight.abort_all(),
    }
}

/// A tiny xorshift generator: jitter needs spread, not cryptography.
#[derive(Debug)]
struct Jitter(u64);

impl Jitter {
    fn seeded() -> Self {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0x9e37_79b9, |d| d.subsec_nanos() as u64);
        Self(nanos | 1)
    }

    fn next_unit(&mut self) -> f64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        (x >> 11) as f64 / (1u64 << 53) as f64
    }

    /// `gap` spread by up to ±`jitter` (a fraction of it).
    fn spread(&mut self, gap: Duration, jitter: f64) -> Duration {
        let jitter = jitter.clamp(0.0, 1.0);
        let factor = 1.0 + jitter * (2.0 * self.next_unit() - 1.0);
        gap.mul_f64(factor.max(0.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jitter_stays_within_its_spread() {
        let mut jitter = Jitter(12345);
        let gap = Duration::from_millis(300);
        for _ in 0..1000 {
            let d = jitter.spread(gap, 0.3);
            assert!(
                d >= Duration::from_millis(210) && d <= Duration::from_millis(390),
                "{d:?}"
            );
        }
        assert_eq!(jitter.spread(gap, 0.0), gap);
    }

    #[tokio::test]
    async fn sends_exactly_the_bounded_count_and_counts_answers() {
        use axum::http::StatusCode;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let hits = Arc::new(AtomicU64::new(0));
        let counted = hits.clone();
        let app = axum::Router::new().route(
            "/",
            axum::routing::get(move || {
                let n = counted.fetch_add(1, Ordering::Relaxed);
                async move {
                    if n.is_multiple_of(2) {
                        StatusCode::OK
                    } else {
                        StatusCode::SERVICE_UNAVAILABLE
                    }
                }
            }),
        );
        let server = tokio::spawn(async move { axum::serve(listener, app).await });
        let plan = LoadPlan {
            rate: 200.0,
            burst: 3,
            requests: Some(10),
            ..LoadPlan::default()
        };
        let load = Load::start(vec![format!("http://{addr}/")], plan).unwrap();
        tokio::time::timeout(Duration::from_secs(10), load.finished())
            .await
            .expect("load finishes");
        let counts = load.stats().counts();
        assert_eq!(counts.sent, 10);
        assert_eq!(counts.finished(), 10);
        assert_eq!(counts.ok, 5);
        assert_eq!(counts.shed_full, 5);
        assert_eq!(hits.load(Ordering::Relaxed), 10);
        tokio::task::spawn_blocking(move || load.join())
            .await
            .unwrap();
        server.abort();
    }
}

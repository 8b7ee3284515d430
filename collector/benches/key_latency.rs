//! How long a key press takes to reach the screen while a burst of spans pours in (not a
//! criterion bench: it prints percentiles). Target (issue 6): a burst never delays a key press by
//! more than one frame (100 ms).
//!
//! The real screen loop (`screen::run`) runs on a 2-worker tokio runtime against a test terminal
//! whose backend notes the time of every frame it is given. A feeder task on the same runtime
//! decodes `budget-demo load`'s requests with the receivers' `decode_protobuf` (keeping raw
//! attributes, as the screen asks) and sends them as fast as the screen's channel takes them, for
//! `BURST_SECS` (default 20); meanwhile a key press (`j`/`k`, alternately) is sent every 97 ms.
//! A key's latency is from the moment it was sent to the first frame drawn after the loop took
//! it. A first phase without spans gives the baseline: the screen draws on a 100 ms tick, so a
//! key waits up to one tick even when idle.
//!
//! `cargo bench -p budget-top --bench key_latency`; knobs: `BURST_SECS`, `MAX_SPANS`.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod support;
use support::{env, filtered_out};

use budget_top::screen;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use budget_demo::otlp_load::Template;
use budget_top::batch::Batch;
use budget_top::ingest::decode::decode_protobuf;
use budget_top::ingest::decode::interner::Interner;
use budget_top::store::Store;
use crossterm::event::{Event, KeyCode, KeyEvent};
use futures::StreamExt as _;
use ratatui::Terminal;
use ratatui::backend::{Backend, ClearType, TestBackend, WindowSize};
use ratatui::buffer::Cell;
use ratatui::layout::{Position, Size};

use screen::{Controls, Mode, ScreenData, State};

/// A test terminal that notes when each frame is flushed.
struct Timed {
    inner: TestBackend,
    frames: Arc<Mutex<Vec<Instant>>>,
}

impl Backend for Timed {
    type Error = <TestBackend as Backend>::Error;
    fn draw<'a, I>(&mut self, content: I) -> Result<(), Self::Error>
    where
        I: Iterator<Item = (u16, u16, &'a Cell)>,
    {
        self.inner.draw(content)
    }
    fn hide_cursor(&mut self) -> Result<(), Self::Error> {
        self.inner.hide_cursor()
    }
    fn show_cursor(&mut self) -> Result<(), Self::Error> {
        self.inner.show_cursor()
    }
    fn get_cursor_position(&mut self) -> Result<Position, Self::Error> {
        self.inner.get_cursor_position()
    }
    fn set_cursor_position<P: Into<Position>>(&mut self, position: P) -> Result<(), Self::Error> {
        self.inner.set_cursor_position(position)
    }
    fn clear(&mut self) -> Result<(), Self::Error> {
        self.inner.clear()
    }
    fn clear_region(&mut self, clear_type: ClearType) -> Result<(), Self::Error> {
        self.inner.clear_region(clear_type)
    }
    fn size(&self) -> Result<Size, Self::Error> {
        self.inner.size()
    }
    fn window_size(&mut self) -> Result<WindowSize, Self::Error> {
        self.inner.window_size()
    }
    fn flush(&mut self) -> Result<(), Self::Error> {
        self.frames.lock().unwrap().push(Instant::now());
        self.inner.flush()
    }
}

fn key(c: char) -> std::io::Result<Event> {
    Ok(Event::Key(KeyEvent::from(KeyCode::Char(c))))
}

/// Milliseconds from each key's sending to the first frame after the loop took it.
fn latencies(sent: &[Instant], taken: &[Instant], frames: &[Instant]) -> Vec<f64> {
    sent.iter()
        .zip(taken)
        .filter_map(|(s, t)| {
            let f = frames.iter().find(|f| *f >= t)?;
            Some(f.duration_since(*s).as_secs_f64() * 1000.0)
        })
        .collect()
}

fn report(phase: &str, mut ms: Vec<f64>, frames: usize, spans: u64, secs: f64) {
    ms.sort_by(f64::total_cmp);
    let at = |q: f64| ms[((q * ms.len() as f64).ceil() as usize).clamp(1, ms.len()) - 1];
    println!(
        "{phase}: {} key presses, latency p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms; {frames} frames; {spans} spans in {secs:.1} s ({:.0}/s)",
        ms.len(),
        at(0.50),
        at(0.99),
        at(1.0),
        spans as f64 / secs,
    );
}

/// Runs the screen for `secs`, with a burst of spans when `burst`; returns key latencies (ms),
/// frames drawn and spans taken in.
async fn phase(burst: bool, secs: f64, max_spans: usize) -> (Vec<f64>, usize, u64) {
    let frames = Arc::new(Mutex::new(Vec::new()));
    let backend = Timed {
        inner: TestBackend::new(200, 60),
        frames: frames.clone(),
    };
    let mut terminal = Terminal::new(backend).unwrap();
    let mut state = State::new(ScreenData::new(Store::new(max_spans)), Mode::Live);
    let (batches, spans_rx) = tokio::sync::mpsc::channel::<Batch>(64);
    let (keys, events) = futures::channel::mpsc::unbounded();
    let taken = Arc::new(Mutex::new(Vec::new()));
    let taken_in = taken.clone();
    let events = events.inspect(move |e: &std::io::Result<Event>| {
        if matches!(e, Ok(Event::Key(_))) {
            taken_in.lock().unwrap().push(Instant::now());
        }
    });
    let stop = Arc::new(AtomicBool::new(false));
    let fed = Arc::new(AtomicU64::new(0));
    let feeder = burst.then(|| {
        let (stop, fed) = (stop.clone(), fed.clone());
        tokio::spawn(async move {
            let template = Template::new(512, 4);
            let mut interner = Interner::default();
            let mut n = 0u32;
            while !stop.load(Ordering::Relaxed) {
                n = n.wrapping_add(1);
                let decoded = decode_protobuf(&template.request(n), &mut interner, true).unwrap();
                let count = decoded.spans.len() as u64;
                let batch = Batch {
                    spans: decoded.spans,
                    attributes: decoded.attributes,
                    raw: None,
                    received: None,
                };
                if batches.send(batch).await.is_err() {
                    break;
                }
                fed.fetch_add(count, Ordering::Relaxed);
            }
        })
    });
    let presser = tokio::spawn(async move {
        let mut sent = Vec::new();
        let started = Instant::now();
        let mut i = 0u32;
        while started.elapsed().as_secs_f64() < secs {
            tokio::time::sleep(Duration::from_millis(97)).await;
            sent.push(Instant::now());
            keys.unbounded_send(key(if i.is_multiple_of(2) { 'j' } else { 'k' }))
                .unwrap();
            i += 1;
        }
        // Let the last key reach a frame, then quit.
        tokio::time::sleep(Duration::from_millis(300)).await;
        keys.unbounded_send(key('q')).unwrap();
        sent
    });
    let controls = Controls::default();
    screen::run(&mut terminal, &mut state, spans_rx, events, controls)
        .await
        .unwrap();
    stop.store(true, Ordering::Relaxed);
    if let Some(f) = feeder {
        f.abort();
    }
    let sent = presser.await.unwrap();
    let taken = taken.lock().unwrap().clone();
    let frames = frames.lock().unwrap().clone();
    let n = sent.len().min(taken.len());
    (
        latencies(&sent[..n], &taken[..n], &frames),
        frames.len(),
        fed.load(Ordering::Relaxed),
    )
}

fn main() {
    if filtered_out("key_latency") {
        return;
    }
    let secs: f64 = env("BURST_SECS", 20.0);
    let max_spans: usize = env("MAX_SPANS", 1_000_000);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let (ms, frames, _) = phase(false, secs.min(5.0), max_spans).await;
        report("idle", ms, frames, 0, secs.min(5.0));
        let (ms, frames, spans) = phase(true, secs, max_spans).await;
        report("burst", ms, frames, spans, secs);
    });
}

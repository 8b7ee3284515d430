//! `budget-top serve` (CONVENTIONS §7): budget-top beside a team's Collector for days. The
//! receivers feed one loop that owns the store; a timer judges the chains quiet for `--settle`
//! into the totals (section 6) and publishes them to the metrics; the HTTP API ([`crate::api`])
//! asks the loop for the report and the chains of a finding. No screen.
//!
//! Every file and flag is checked before anything listens (an unwritable `--report` or `--html`
//! path, the TLS files, the token file: exit 2 with a sentence). SIGTERM or Ctrl-C closes the
//! listeners, takes in everything the receivers accepted, answers the API's requests in
//! progress, judges every chain held and writes `--report` (and `--html`); a second signal
//! exits at once.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use deadline_budget::analysis::Severity;
use deadline_budget::carrier::Carriers;

use super::listen::Signals;
use crate::api;
use crate::batch::Batch;
use crate::cli::ServeArgs;
use crate::forward::{self, Forwarder};
use crate::ingest;
use crate::pump::{self, Intake, Pump, Pumped, Tick};
use crate::report::{Context, html as report_html, json as report_json};
use crate::store::{Retention, Store};

/// The exit status of a second signal: the report is not written.
pub const EXIT_SECOND_SIGNAL: i32 = 130;

/// How long the API's requests in progress may take to be answered once a signal came, and
/// the chains queued for `--forward` to be sent.
const DRAIN: Duration = Duration::from_secs(10);

/// Runs `serve` until SIGTERM or Ctrl-C; returns 0 once the report is written. Errors mean
/// exit status 2.
pub async fn run(
    args: ServeArgs,
    retention: Retention,
    carriers: Arc<Carriers>,
) -> anyhow::Result<u8> {
    for (path, flag) in [(&args.report, "--report"), (&args.html, "--html")] {
        if let Some(path) = path {
            check_writable(path, flag)?;
        }
    }
    // Every file of --forward read and checked before anything listens.
    let forwarder = args.forward.config().map(forward::start).transpose()?;
    // Before the receivers start: a signal right after the first request must be handled.
    let mut signals = Signals::new()?;
    let mut config = args.listen.ingest_config();
    config.carriers = carriers;
    // The page shows each drawn span's attributes: keep them only when it is asked for.
    config.keep_attributes = args.html.is_some();
    config.keep_received = forwarder.is_some();
    let ingest = ingest::start(config.clone()).await?;
    let view = forwarder.as_ref().map(Forwarder::view);
    let mut api = match api::start(
        args.api,
        &config,
        ingest.stats.clone(),
        args.max_series,
        view,
    )
    .await
    {
        Ok(api) => api,
        Err(error) => {
            ingest.shutdown();
            return Err(error);
        }
    };
    api.answers.link_traces(args.links.trace_url.clone());
    api.readiness.ready();
    for line in startup_lines(&ingest, &api, &args, forwarder.as_ref()) {
        crate::stderr_line!("{line}");
    }

    // A sidecar shares its cores with the services: the least CPU, not the shortest burst.
    let mut store = retention
        .store()
        .with_analyses_on_one_thread()
        .with_exemplars();
    if let Some(forwarder) = &forwarder {
        let config = forwarder.config();
        store = store.keep_received(config.held_bytes(), config.policy().keep());
    }
    let stats = ingest.stats.clone();
    let mut pump = Pump::of(ingest).judging_every(
        judge_period(retention.settle),
        tokio::time::MissedTickBehavior::Delay,
    );
    let mut served = Served {
        store,
        forwarder,
        // Chains a span joined after their verdict are judged again by `analyse_dirty`, once a
        // settle period: sooner would analyse chains still arriving a second time.
        analyse_every: retention.settle.max(Duration::from_millis(100)),
        analysed_at: tokio::time::Instant::now(),
    };
    loop {
        tokio::select! {
            pumped = pump.step(&mut served) => match pumped? {
                Pumped::Ended => break,
                // The totals judged on the tick, to the metrics.
                Pumped::Tick => api.answers.publish(&served.store),
                Pumped::Batch => {}
            },
            Some(ask) = api.asks.recv() => api.answers.answer(ask, &served.store),
            () = signals.recv() => break,
        }
    }

    crate::stderr_line!(
        "stopping: the listeners are closed; finishing the requests in progress, then judging every chain held (a second signal exits at once, without the report)"
    );
    tokio::spawn(async move {
        signals.recv().await;
        crate::stderr_line!("budget-top: a second signal: exiting at once, without the report");
        std::process::exit(EXIT_SECOND_SIGNAL);
    });
    // Whatever the receivers answered with success is in the channel: take all of it, and
    // answer the API's requests in progress meanwhile.
    pump.close();
    api.shutdown();
    loop {
        tokio::select! {
            pumped = pump.step(&mut served) => if pumped? == Pumped::Ended {
                break;
            },
            Some(ask) = api.asks.recv() => api.answers.answer(ask, &served.store),
        }
    }
    let drained = tokio::time::sleep(DRAIN);
    tokio::pin!(drained);
    loop {
        tokio::select! {
            _ = &mut api.server => break,
            Some(ask) = api.asks.recv() => api.answers.answer(ask, &served.store),
            () = &mut drained => break,
        }
    }
    let counts = stats.snapshot();
    let Served {
        mut store,
        mut forwarder,
        ..
    } = served;
    store.set_clock(pump::wall_clock());
    let report = store.report();
    // Every chain judged now is handed on, and what is queued sent within the drain's limit.
    let forwarded = match forwarder.take() {
        Some(mut forwarder) => {
            hand_on(&mut store, Some(&mut forwarder));
            let view = forwarder.view();
            let sent = forwarder.finish(DRAIN).await;
            crate::stderr_line!("{}", forward::summary_line(&sent));
            Some(forward::json(
                &view.config,
                &sent,
                store.counters().received_bytes,
            ))
        }
        None => None,
    };
    write_reports(&store, &report, counts, forwarded, &args)?;
    // The process ends next: freeing a million spans' allocations one by one would cost CPU
    // (as in `check`) for memory the exit gives back anyway.
    std::mem::forget(store);
    Ok(0)
}

/// What `serve`'s pump feeds: the store, and the forwarding stage after its judging (ingest →
/// store → judge → totals / forward).
struct Served {
    store: Store,
    forwarder: Option<Forwarder>,
    /// How often the chains a span joined after their verdict are judged again.
    analyse_every: Duration,
    analysed_at: tokio::time::Instant,
}

impl Intake for Served {
    fn take(&mut self, batch: Batch, now_unix_nano: u64) -> anyhow::Result<()> {
        self.store.take(batch, now_unix_nano)?;
        hand_on(&mut self.store, self.forwarder.as_mut());
        Ok(())
    }

    fn judge(&mut self, tick: Tick) -> anyhow::Result<()> {
        self.store.judge(tick)?;
        if self.analysed_at.elapsed() >= self.analyse_every {
            self.store.analyse_dirty();
            self.analysed_at = tokio::time::Instant::now();
        }
        hand_on(&mut self.store, self.forwarder.as_mut());
        Ok(())
    }
}

/// What the store handed on since the last call, to the forwarder (when forwarding).
fn hand_on(store: &mut Store, forwarder: Option<&mut Forwarder>) {
    if let Some(forwarder) = forwarder {
        forwarder.take(store.take_handoffs());
    }
}

/// The judging timer's period: a tenth of `--settle` (as often as `judge_settled` looks),
/// between 10 ms and 1 s.
fn judge_period(settle: Duration) -> Duration {
    (settle / 10).clamp(Duration::from_millis(10), Duration::from_secs(1))
}

/// Refuses at start a path the report could not be written to at the end: a directory, a
/// folder that does not exist, a file or folder without write permission. A file that exists
/// is left as it is (not emptied) until then.
pub fn check_writable(path: &Path, flag: &str) -> anyhow::Result<()> {
    let shown = path.display();
    if path.is_dir() {
        anyhow::bail!("{shown} ({flag}) is a directory: give the file to write the report to");
    }
    let existed = path.exists();
    std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(path)
        .with_context(|| {
            format!("cannot write {shown} ({flag}), where the report goes when serve stops")
        })?;
    if !existed {
        let _ = std::fs::remove_file(path);
    }
    Ok(())
}

/// What `serve` says on stderr once it listens: where the receivers and the API are, what
/// protects them, the warnings, and how it ends.
fn startup_lines(
    ingest: &ingest::Ingest,
    api: &api::Api,
    args: &ServeArgs,
    forwarder: Option<&Forwarder>,
) -> Vec<String> {
    let scheme = if ingest.tls { "https" } else { "http" };
    let mut lines = vec![
        format!(
            "serving: receivers {} ({}); API {scheme}://{} ({}; /healthz and /readyz need no token)",
            ingest.describe(),
            ingest.protection(),
            api.addr,
            ingest.protection(),
        ),
        format!(
            "API: GET /metrics, /api/report, /api/chains?kind=K&limit=N, /healthz, /readyz; metrics bounded at --max-series {} label sets per family",
            args.max_series
        ),
    ];
    lines.extend(
        ingest
            .protection_lines()
            .into_iter()
            .filter(|l| l.starts_with("warning")),
    );
    lines.extend(forwarder.map(Forwarder::describe).unwrap_or_default());
    let ends = match (&args.report, &args.html) {
        (Some(report), Some(html)) => format!(
            "writes the report to {} and the page to {}",
            report.display(),
            html.display()
        ),
        (Some(report), None) => format!("writes the report to {}", report.display()),
        (None, Some(html)) => format!("writes the page to {}", html.display()),
        (None, None) => "writes no report (no --report given)".to_owned(),
    };
    lines.push(format!(
        "SIGTERM or Ctrl-C judges every chain held, {ends} and exits; a second signal exits at once"
    ));
    lines
}

/// Writes `--report` (JSON, with the `forward` object when forwarding) and `--html`.
fn write_reports(
    store: &Store,
    report: &deadline_budget::analysis::Report,
    counts: ingest::IngestCounts,
    forwarded: Option<serde_json::Value>,
    args: &ServeArgs,
) -> anyhow::Result<()> {
    let context = Context {
        ingest: Some(&counts),
        source: None,
        links: args.links.trace_url.as_ref(),
    };
    if let Some(path) = &args.report {
        let counters = store.counters();
        let additions = report_json::Additions {
            lines_torn: 0,
            store: Some(&counters),
            forward: forwarded,
        };
        let json = report_json::render(report, &context, additions)?;
        std::fs::write(path, json)
            .with_context(|| format!("cannot write the report to {}", path.display()))?;
        crate::stderr_line!(
            "wrote the report of {} chain(s), {} span(s) to {}",
            report.summary.traces,
            report.summary.spans,
            path.display()
        );
    }
    if let Some(path) = &args.html {
        let page = report_html::render(store, report, &context, Severity::Error);
        std::fs::write(path, page)
            .with_context(|| format!("cannot write the HTML report to {}", path.display()))?;
        crate::stderr_line!("wrote the page to {}", path.display());
    }
    Ok(())
}

//! `budget-top demo`: the demo services (`budget_demo`) exporting to budget-top's own receivers,
//! on the live screen, as a guided workshop, or headless with the `check` report.
//!
//! On the screen, one task (the [`Driver`], in `demo_driver`) owns the running demo: the
//! screen's [`DemoControl`] (the `workshop` module's `Controller`) sends it orders and reads what
//! runs. When the screen closes, the driver stops the services and joins their threads, so no
//! process or port is left over. Plain `budget-top` starts the same demo from its empty screen
//! ([`for_live_screen`]).

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use budget_demo::{Demo, Scenario};
use deadline_budget::carrier::Carriers;
use deadline_budget::duration::format_duration;
use tokio::time::Instant;

use super::check;
use super::demo_driver::{Driver, Order};
use super::listen::{self, Signals};
use super::workshop::{Controller, Workshop};
use crate::cli::{DemoArgs, FailOn, Format};
use crate::ingest::{self, Ingest, IngestConfig};
use crate::screen::{self, DemoControl};
use crate::store::Retention;

/// How long `demo --check` sends load when neither `--for` nor `--requests` says.
pub const DEFAULT_CHECK_FOR: Duration = Duration::from_secs(15);

/// How long past `--for` `demo --check` waits for the requests still in flight to be answered.
pub const ANSWER_GRACE: Duration = Duration::from_secs(10);

/// `budget-top demo ...`: returns the exit status.
pub async fn run(
    args: DemoArgs,
    retention: Retention,
    carriers: Arc<Carriers>,
) -> anyhow::Result<u8> {
    if args.check {
        headless(args, retention, carriers).await
    } else {
        screen(args, retention, carriers).await.map(|()| 0)
    }
}

/// Both receivers on free loopback ports.
fn loopback_ingest(keep_attributes: bool, carriers: Arc<Carriers>) -> IngestConfig {
    let any_port = SocketAddr::from((Ipv4Addr::LOCALHOST, 0));
    IngestConfig {
        grpc: Some(any_port),
        http: Some(any_port),
        keep_attributes,
        carriers,
        ..IngestConfig::default()
    }
}

/// Where the demo's exporters send: the receiver's own gRPC address.
fn endpoint(ingest: &Ingest) -> anyhow::Result<String> {
    let grpc = ingest
        .grpc_addr
        .context("the gRPC receiver did not start, and the demo exports over OTLP/gRPC")?;
    Ok(format!("http://{grpc}"))
}

/// What `demo --check` says under its scenario line, so that 15 quiet seconds do not look
/// hung: how long the load runs, and that the report follows.
fn how_the_load_ends(run_for: Option<Duration>, requests: Option<u64>) -> String {
    let load = match (run_for, requests) {
        (Some(d), None) => format!("sends load for {}", format_duration(d)),
        (None, Some(n)) => format!("sends {n} request(s)"),
        (Some(d), Some(n)) => format!(
            "sends {n} request(s), or load for {} if that ends first",
            format_duration(d)
        ),
        (None, None) => "sends load".to_owned(),
    };
    let grace = if run_for.is_some() {
        format!(" (at most {} more)", format_duration(ANSWER_GRACE))
    } else {
        String::new()
    };
    format!(
        "{load}, then prints the report once the requests in flight are answered{grace}; Ctrl-C ends it early and still reports"
    )
}

/// `demo --check`: services and load without the screen, then the `check` report. The demo is
/// stopped (its exporters flushed into the receivers) before the report is printed.
async fn headless(
    args: DemoArgs,
    retention: Retention,
    carriers: Arc<Carriers>,
) -> anyhow::Result<u8> {
    // Before anything starts: a Ctrl-C from now on ends the load early but still reports.
    let mut signals = Signals::new()?;
    // The HTML page shows each drawn span's attributes: keep them only when it is asked for.
    let ingest = ingest::start(loopback_ingest(args.html.is_some(), carriers)).await?;
    let run_for = args
        .for_
        .or(args.run.requests.is_none().then_some(DEFAULT_CHECK_FOR));
    let config = args.run.config(endpoint(&ingest)?, run_for);
    if let Err(error) = config.check_latencies() {
        ingest.shutdown();
        anyhow::bail!("--latency, scenario {}: {error}", config.scenario);
    }
    if let Err(error) = config.check_clock_skew() {
        ingest.shutdown();
        anyhow::bail!(error);
    }
    let demo = Demo::start(config)
        .await
        .context("cannot start the demo services")?;
    crate::stderr_line!("listening: {}", ingest.describe());
    for line in ingest.protection_lines() {
        crate::stderr_line!("{line}");
    }
    let cured = demo.scenario().cure_note(demo.cured());
    crate::stderr_line!("scenario {}{cured}: {}", demo.scenario(), demo.lesson());
    crate::stderr_line!("{}", how_the_load_ends(run_for, args.run.requests));
    let mut store = retention.store();
    // The load stops sending after --for (or --requests), then finishes once every request in
    // flight is answered. Waiting for that (a little past --for) keeps requests from being
    // abandoned half-way, which the report would rightly show as callers that hung up.
    let give_up_at = run_for.map(|d| Instant::now() + d + ANSWER_GRACE);
    let stop = async {
        tokio::select! {
            () = demo.load_finished() => {}
            () = crate::pump::sleep_until(give_up_at) => {}
            () = signals.recv() => {}
        }
    };
    let stats = ingest.stats.clone();
    let mut pump = listen::pump(ingest, &store);
    pump.feed_until(&mut store, None, stop).await?;
    let counts = demo.load_counts();
    // Stopping flushes every service's exporter into the receivers: keep taking batches.
    let mut stopping = tokio::spawn(demo.shutdown());
    let stopped = async {
        let _ = (&mut stopping).await;
    };
    pump.feed_until(&mut store, None, stopped).await?;
    if !stopping.is_finished() {
        let _ = stopping.await;
    }
    pump.drain(&mut store).await?;
    let ingest_counts = stats.snapshot();
    // Every request sent is accounted for: those without an answer when the load stopped
    // were abandoned in flight.
    crate::stderr_line!(
        "load: {} sent, {} ok, {} shed (503), {} timed out (504), {} other status, {} failed, {} abandoned in flight when the load stopped",
        counts.sent,
        counts.ok,
        counts.shed_full,
        counts.timed_out,
        counts.other_status,
        counts.failed,
        counts.sent.saturating_sub(counts.finished())
    );
    let fail_on = if args.fail_on.is_empty() {
        vec![FailOn::Error]
    } else {
        args.fail_on
    };
    let empty = store.counters().spans_held == 0 && store.counters().chains_evicted == 0;
    if empty {
        crate::stderr_line!("warning: no span arrived from the demo; the report covers nothing");
    }
    let context = crate::report::Context {
        ingest: Some(&ingest_counts),
        source: None,
        links: args.links.trace_url.as_ref(),
    };
    let status = check::print_report(
        &mut store,
        args.format.unwrap_or(Format::Text),
        &fail_on,
        &context,
        0,
        retention.max_spans,
        args.html.as_deref(),
    )?;
    Ok(if empty && fail_on.contains(&FailOn::Empty) {
        1
    } else {
        status
    })
}

/// `demo` and `demo --workshop`: the receivers, the services and the live screen.
async fn screen(
    args: DemoArgs,
    retention: Retention,
    carriers: Arc<Carriers>,
) -> anyhow::Result<()> {
    let ingest = ingest::start(loopback_ingest(true, carriers)).await?;
    let mut config = args.run.config(endpoint(&ingest)?, None);
    // Without a scenario the screen teaches: the workshop, from its first step with something
    // wrong on screen (from its very first with --workshop).
    let workshop = (args.workshop || args.run.scenario.is_none()).then(|| {
        let start = match (args.run.scenario, args.workshop) {
            (Some(scenario), _) => scenario,
            (None, true) => Scenario::ALL[0],
            (None, false) => Scenario::FIRST_BROKEN,
        };
        Workshop::starting_at(start, config.timing)
    });
    if let Some(w) = &workshop {
        config.scenario = w.running();
    }
    if let Err(error) = config.check_latencies() {
        ingest.shutdown();
        anyhow::bail!("--latency, scenario {}: {error}", config.scenario);
    }
    let handle = match Demo::start(config.clone()).await {
        Ok(handle) => handle,
        Err(error) => {
            ingest.shutdown();
            return Err(error).context("cannot start the demo services");
        }
    };
    let driver = Driver::spawn(Some(handle), config);
    let control = Controller::new(driver.link(), workshop);
    let stats = ingest.stats.clone();
    let controls = screen::Controls {
        demo: Some(Box::new(control)),
        refused: Some(Box::new(move || screen::Refused::of(&stats))),
        ..screen::Controls::default()
    };
    let live = screen::LiveConfig {
        mode: screen::Mode::Demo,
        grpc_addr: ingest.grpc_addr,
        http_addr: ingest.http_addr,
        retention,
        max_attribute_bytes: 0,
        links: args.links.trace_url.clone(),
        ..screen::LiveConfig::default()
    };
    let Ingest {
        receiver,
        shutdown_token,
        ..
    } = ingest;
    let result = screen::run_live(live, receiver, controls).await;
    // The receivers go first: the services' last flush then fails fast instead of waiting on a
    // screen that is gone.
    shutdown_token.cancel();
    driver.stop().await;
    result
}

/// What plain `budget-top` (live) needs to start the demo from its empty screen.
pub struct LiveDemo {
    /// The demo's keys and status line, for the screen (empty until started).
    pub control: Box<dyn DemoControl>,
    /// The screen's `start_demo` hook: starts the first broken scenario (`fixed-timeout`)
    /// exporting to the receivers.
    pub start: Box<dyn FnMut() + Send>,
    /// Stop it after the screen closes.
    pub driver: Driver,
}

impl std::fmt::Debug for LiveDemo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LiveDemo")
            .field("driver", &self.driver)
            .finish_non_exhaustive()
    }
}

/// The demo, ready to start against the gRPC receiver at `grpc` (none without one).
pub fn for_live_screen(grpc: Option<SocketAddr>) -> Option<LiveDemo> {
    let config = budget_demo::DemoArgs::default().config(format!("http://{}", grpc?), None);
    let driver = Driver::spawn(None, config);
    let link = driver.link();
    Some(LiveDemo {
        control: Box::new(Controller::new(driver.link(), None)),
        start: Box::new(move || link.send(Order::Start)),
        driver,
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn demo_check_says_how_its_load_ends() {
        use std::time::Duration;
        assert_eq!(
            super::how_the_load_ends(Some(super::DEFAULT_CHECK_FOR), None),
            "sends load for 15s, then prints the report once the requests in flight are answered (at most 10s more); Ctrl-C ends it early and still reports"
        );
        assert_eq!(
            super::how_the_load_ends(None, Some(10)),
            "sends 10 request(s), then prints the report once the requests in flight are answered; Ctrl-C ends it early and still reports"
        );
        assert!(
            super::how_the_load_ends(Some(Duration::from_millis(1500)), Some(3))
                .starts_with("sends 3 request(s), or load for 1.5s if that ends first, then")
        );
    }

    use super::*;
    use std::time::Duration;

    use crate::screen::DemoStatus;

    async fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
        let deadline = Instant::now() + Duration::from_secs(60);
        while !done() {
            assert!(Instant::now() < deadline, "timed out waiting for {what}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn d_on_the_live_screen_starts_the_demo_into_its_receivers_and_stop_frees_every_port() {
        let mut ingest = ingest::start(loopback_ingest(false, Arc::default()))
            .await
            .unwrap();
        let LiveDemo {
            mut control,
            mut start,
            driver,
        } = for_live_screen(ingest.grpc_addr).unwrap();
        assert_eq!(control.status(), DemoStatus::default(), "nothing until d");
        assert_eq!(control.generation(), 0);
        assert!(!control.key('2'), "keys wait for the demo to start");
        start();
        wait_for("the demo to start", || {
            control.status().scenario.starts_with("3/12 fixed-timeout")
        })
        .await;
        // The services export to the receivers the screen reads.
        let batch = tokio::time::timeout(Duration::from_secs(60), ingest.receiver.recv())
            .await
            .expect("spans within a minute")
            .expect("the receivers run");
        assert!(!batch.spans.is_empty());
        // A workshop step that slows a service of the running scenario does not restart it.
        let addrs = || -> Vec<SocketAddr> {
            let snapshot = driver.link.snapshot();
            snapshot.services.iter().map(|s| s.addr).collect()
        };
        let before = addrs();
        driver.link.send(Order::Switch(
            Scenario::FixedTimeout,
            vec![("inventory", 777)],
            false,
        ));
        wait_for("the slower inventory", || {
            control.status().scenario.ends_with("inventory 777 ms")
        })
        .await;
        let after = addrs();
        assert_eq!(before, after, "the same services, still running");
        assert_eq!(
            control.generation(),
            1,
            "a workshop step starts the screen over"
        );
        assert!(control.key('4'));
        wait_for("the switch", || {
            control.status().scenario.starts_with("4/12 drop-header")
        })
        .await;
        assert_eq!(control.generation(), 2, "so does a switch");
        // c runs the same scenario cured, and c again broken.
        assert!(control.key('c'));
        wait_for("the cure", || {
            control
                .status()
                .scenario
                .starts_with("4/12 drop-header (cured)")
        })
        .await;
        assert_eq!(control.status().lesson, Scenario::DropHeader.cured_lesson());
        let services = driver.link.snapshot().services.clone();
        assert_eq!(services.first().map(|s| s.name), Some("gateway"));
        tokio::time::timeout(Duration::from_secs(60), driver.stop())
            .await
            .expect("the demo stops within a minute");
        for service in services {
            assert!(
                tokio::net::TcpStream::connect(service.addr).await.is_err(),
                "{} still listens on {}",
                service.name,
                service.addr
            );
        }
        ingest.shutdown();
    }
}

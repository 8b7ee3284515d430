//! `budget-top demo`: the demo services (`budget_demo`) exporting to budget-top's own receivers,
//! on the live screen, as a guided workshop, or headless with the `check` report.
//!
//! On the screen, one task (the [`Driver`]) owns the running [`DemoHandle`]: the screen's
//! [`DemoControl`] sends it orders (switch scenario, start) and reads a shared snapshot of what
//! runs; latency changes go straight to the services' shared knobs. When the screen closes, the
//! driver stops the services and joins their threads, so no process or port is left over.

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use crate::check;
use crate::cli::DemoArgs;
use crate::ingest::{self, Ingest, IngestConfig};
use crate::listen::{self, Signals};
use crate::store::Store;
use anyhow::Context as _;
use budget_demo::{Demo, DemoConfig, DemoHandle, Latencies, Scenario, ServiceInfo, Timing};
use deadline_budget::carrier::Carriers;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::screen::{self, DemoControl, DemoStatus};

/// The scenario a digit key picks from [`Scenario::ALL`] (the teaching order): `1` the first,
/// `0` the tenth.
fn scenario_of_digit(key: char) -> Option<Scenario> {
    let index = match key.to_digit(10)? {
        0 => 9,
        d => d as usize - 1,
    };
    Scenario::ALL.get(index).copied()
}

/// How much `+` and `-` change the selected service's work time.
pub const LATENCY_STEP_MS: u64 = 50;

/// How long `demo --check` sends load when neither `--for` nor `--requests` says.
pub const DEFAULT_CHECK_FOR: Duration = Duration::from_secs(15);

/// How long past `--for` `demo --check` waits for the requests still in flight to be answered.
pub const ANSWER_GRACE: Duration = Duration::from_secs(10);

/// `budget-top demo ...`: returns the exit status.
pub async fn run(args: DemoArgs, max_spans: usize, carriers: Arc<Carriers>) -> anyhow::Result<u8> {
    if args.check {
        headless(args, max_spans, carriers).await
    } else {
        screen(args, max_spans, carriers).await.map(|()| 0)
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

/// `demo --check`: services and load without the screen, then the `check` report. The demo is
/// stopped (its exporters flushed into the receivers) before the report is printed.
async fn headless(args: DemoArgs, max_spans: usize, carriers: Arc<Carriers>) -> anyhow::Result<u8> {
    // Before anything starts: a Ctrl-C from now on ends the load early but still reports.
    let mut signals = Signals::new()?;
    // The HTML page shows each drawn span's attributes: keep them only when it is asked for.
    let mut ingest = ingest::start(loopback_ingest(args.html.is_some(), carriers)).await?;
    let run_for = args
        .for_
        .or(args.run.requests.is_none().then_some(DEFAULT_CHECK_FOR));
    let config = args.run.config(endpoint(&ingest)?, run_for);
    let demo = Demo::start(config)
        .await
        .context("cannot start the demo services")?;
    eprintln!("listening: {}", ingest.describe());
    let cured = if demo.cured() { " (cured)" } else { "" };
    eprintln!("scenario {}{cured}: {}", demo.scenario(), demo.lesson());
    let mut store = Store::new(max_spans);
    // The load stops sending after --for (or --requests), then finishes once every request in
    // flight is answered. Waiting for that (a little past --for) keeps requests from being
    // abandoned half-way, which the report would rightly show as callers that hung up.
    let give_up_at = run_for.map(|d| Instant::now() + d + ANSWER_GRACE);
    let stop = async {
        tokio::select! {
            () = demo.load_finished() => {}
            () = listen::sleep_until(give_up_at) => {}
            () = signals.recv() => {}
        }
    };
    listen::feed_until(&mut ingest, &mut store, None, stop).await;
    let counts = demo.load_counts();
    // Stopping flushes every service's exporter into the receivers: keep taking batches.
    let mut stopping = tokio::spawn(demo.shutdown());
    let stopped = async {
        let _ = (&mut stopping).await;
    };
    listen::feed_until(&mut ingest, &mut store, None, stopped).await;
    if !stopping.is_finished() {
        let _ = stopping.await;
    }
    let ingest_counts = listen::finish(ingest, &mut store).await;
    // Every request sent is accounted for: those without an answer when the load stopped
    // were abandoned in flight.
    eprintln!(
        "load: {} sent, {} ok, {} shed (503), {} timed out (504), {} other status, {} failed, {} abandoned in flight when the load stopped",
        counts.sent,
        counts.ok,
        counts.shed_full,
        counts.timed_out,
        counts.other_status,
        counts.failed,
        counts.sent.saturating_sub(counts.finished())
    );
    check::print_report(
        &mut store,
        args.format,
        &[args.fail_on],
        Some(ingest_counts),
        max_spans,
        args.html.as_deref(),
    )
}

/// `demo` and `demo --workshop`: the receivers, the services and the live screen.
async fn screen(args: DemoArgs, max_spans: usize, carriers: Arc<Carriers>) -> anyhow::Result<()> {
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
        max_spans,
        max_attribute_bytes: 0,
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

/// What the driver is asked to do.
#[derive(Debug)]
enum Order {
    /// Start the configured scenario (from the live screen's empty state).
    Start,
    /// Run this scenario (cured or not), then set these work times (ms, as given).
    Switch(Scenario, Vec<(&'static str, u64)>, bool),
}

/// What runs now, as the screen reads it (never blocking: the driver holds the lock only to
/// copy into it).
#[derive(Debug, Default)]
struct Snapshot {
    /// The scenario running, once started.
    scenario: Option<Scenario>,
    /// Whether its cured variant runs.
    cure: bool,
    /// Its services, edge first.
    services: Vec<ServiceInfo>,
    /// Their work-time knobs.
    latencies: Option<Latencies>,
    /// Counts starts and switches, so the screen notices a new set of services.
    published: u64,
    /// Counts scenario switches (and workshop steps), bumped when one begins: the screen then
    /// starts over with an empty store.
    switches: u64,
    /// An order in progress: starting (`false`) or switching to (`true`) this scenario.
    busy: Option<(bool, Scenario, bool)>,
    /// The last order that failed, in words.
    error: Option<String>,
}

/// The screen's side of the driver.
#[derive(Clone, Debug)]
struct Link {
    orders: mpsc::Sender<Order>,
    snapshot: Arc<Mutex<Snapshot>>,
}

impl Link {
    fn snapshot(&self) -> MutexGuard<'_, Snapshot> {
        self.snapshot
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn send(&self, order: Order) {
        if self.orders.try_send(order).is_err() {
            self.snapshot().error = Some("too many keys at once: try again".into());
        }
    }
}

/// The task that owns the running demo.
#[derive(Debug)]
pub struct Driver {
    link: Link,
    stop: CancellationToken,
    task: JoinHandle<()>,
}

impl Driver {
    /// Takes over `handle` (or starts `config` on [`Order::Start`] when there is none).
    fn spawn(handle: Option<DemoHandle>, config: DemoConfig) -> Self {
        let (orders, receiver) = mpsc::channel(16);
        let snapshot = Arc::new(Mutex::new(Snapshot::default()));
        let link = Link { orders, snapshot };
        if let Some(handle) = &handle {
            publish(&link, handle);
        }
        let stop = CancellationToken::new();
        let task = tokio::spawn(drive(handle, config, receiver, link.clone(), stop.clone()));
        Driver { link, stop, task }
    }

    fn link(&self) -> Link {
        self.link.clone()
    }

    /// Stops the services (after an order in progress finishes) and waits until every thread
    /// is joined and every port closed.
    pub async fn stop(self) {
        if self.link.snapshot().scenario.is_some() {
            // The screen is gone; the drain of in-flight requests can take a second or two.
            eprintln!("budget-top: stopping the demo services...");
        }
        self.stop.cancel();
        let _ = self.task.await;
    }
}

async fn drive(
    mut handle: Option<DemoHandle>,
    config: DemoConfig,
    mut orders: mpsc::Receiver<Order>,
    link: Link,
    stop: CancellationToken,
) {
    loop {
        let order = tokio::select! {
            () = stop.cancelled() => break,
            order = orders.recv() => match order {
                Some(order) => order,
                None => break,
            },
        };
        // Keys pressed while a switch ran: only the last switch matters.
        let order = match order {
            Order::Switch(..) => {
                let mut last = order;
                while let Ok(next) = orders.try_recv() {
                    last = next;
                }
                last
            }
            Order::Start => order,
        };
        match (order, handle.as_mut()) {
            (Order::Start, None) => {
                set_busy(&link, false, config.scenario, config.cure);
                match Demo::start(config.clone()).await {
                    Ok(started) => {
                        publish(&link, &started);
                        handle = Some(started);
                    }
                    Err(e) => fail(&link, format!("cannot start the demo: {e}")),
                }
            }
            (Order::Start, Some(_)) => {}
            // A workshop step that only slows a service of the running scenario: no restart.
            (Order::Switch(scenario, latencies, cure), Some(running))
                if scenario == running.scenario()
                    && cure == running.cured()
                    && !latencies.is_empty() =>
            {
                link.snapshot().switches += 1;
                for (service, ms) in latencies {
                    let _ = running.set_latency(service, ms);
                }
                publish(&link, running);
            }
            // Also the digit of the running scenario: a fresh start with its own latencies.
            (Order::Switch(scenario, latencies, cure), Some(running)) => {
                set_busy(&link, true, scenario, cure);
                match running.restart(scenario, cure).await {
                    Ok(()) => {
                        for (service, ms) in latencies {
                            // A step's services are the scenario's own: this cannot miss.
                            let _ = running.set_latency(service, ms);
                        }
                        publish(&link, running);
                    }
                    Err(e) => fail(&link, format!("cannot switch to {scenario}: {e}")),
                }
            }
            (Order::Switch(..), None) => {}
        }
    }
    if let Some(running) = handle {
        running.shutdown().await;
    }
}

fn set_busy(link: &Link, switching: bool, scenario: Scenario, cure: bool) {
    let mut s = link.snapshot();
    if switching {
        s.switches += 1;
    }
    s.busy = Some((switching, scenario, cure));
    s.error = None;
}

fn fail(link: &Link, error: String) {
    let mut s = link.snapshot();
    s.busy = None;
    s.error = Some(error);
}

fn publish(link: &Link, handle: &DemoHandle) {
    let mut s = link.snapshot();
    s.scenario = Some(handle.scenario());
    s.cure = handle.cured();
    s.services = handle.services();
    s.latencies = Some(handle.latencies());
    s.published += 1;
    s.busy = None;
    s.error = None;
}

/// The screen's demo keys and status line.
#[derive(Debug)]
struct Controller {
    link: Link,
    /// The selected service (for `+`/`-`), by name, and the generation it was chosen in.
    selected: Option<(&'static str, u64)>,
    workshop: Option<Workshop>,
}

impl Controller {
    fn new(link: Link, workshop: Option<Workshop>) -> Self {
        Controller {
            link,
            selected: None,
            workshop,
        }
    }

    /// The selected service: the one chosen with `[`/`]` while these services run, else the
    /// scenario's slow service (else the deepest callee).
    fn selected(&self, snapshot: &Snapshot) -> Option<&'static str> {
        match self.selected {
            Some((name, generation))
                if generation == snapshot.published
                    && snapshot.services.iter().any(|s| s.name == name) =>
            {
                Some(name)
            }
            _ => snapshot
                .scenario
                .and_then(|sc| {
                    let slow = sc.slow_service();
                    snapshot.services.iter().find(|s| s.name == slow)
                })
                .or(snapshot.services.last())
                .map(|s| s.name),
        }
    }

    fn select_next(&mut self, forward: bool) {
        let snapshot = self.link.snapshot();
        let services = &snapshot.services;
        if services.is_empty() {
            return;
        }
        let current = self
            .selected(&snapshot)
            .and_then(|name| services.iter().position(|s| s.name == name))
            .unwrap_or(0);
        let n = services.len();
        let next = if forward {
            (current + 1) % n
        } else {
            (current + n - 1) % n
        };
        let chosen = (services[next].name, snapshot.published);
        drop(snapshot);
        self.selected = Some(chosen);
    }

    fn nudge_latency(&mut self, up: bool) {
        let snapshot = self.link.snapshot();
        let (Some(name), Some(knobs)) = (self.selected(&snapshot), snapshot.latencies.as_ref())
        else {
            return;
        };
        let Some(ms) = knobs.get(name) else { return };
        let ms = if up {
            ms.saturating_add(LATENCY_STEP_MS)
        } else {
            ms.saturating_sub(LATENCY_STEP_MS)
        };
        knobs.set(name, ms);
        let generation = snapshot.published;
        drop(snapshot);
        self.selected = Some((name, generation));
    }

    fn switch(&mut self, scenario: Scenario, latencies: Vec<(&'static str, u64)>) {
        self.link.send(Order::Switch(scenario, latencies, false));
    }

    /// `c`: the running scenario again, cured (or broken again).
    fn toggle_cure(&mut self) -> bool {
        let (scenario, cure) = {
            let snapshot = self.link.snapshot();
            let Some(scenario) = snapshot.busy.map(|b| b.1).or(snapshot.scenario) else {
                return false;
            };
            let cure = snapshot.busy.map_or(snapshot.cure, |b| b.2);
            (scenario, cure)
        };
        if !scenario.has_cure() {
            return false;
        }
        self.link.send(Order::Switch(scenario, Vec::new(), !cure));
        true
    }
}

impl DemoControl for Controller {
    fn status(&self) -> DemoStatus {
        let snapshot = self.link.snapshot();
        let Some(running) = snapshot.scenario else {
            // Not started (the live screen before `d`): nothing to show, unless it is starting
            // or failed to.
            return match (snapshot.busy, &snapshot.error) {
                (None, None) => DemoStatus::default(),
                (busy, error) => DemoStatus {
                    scenario: busy.map_or_else(|| "demo".into(), busy_label),
                    lesson: match (error, busy) {
                        (Some(error), _) => error.clone(),
                        (None, Some((_, scenario, cure))) => lesson(scenario, cure).to_owned(),
                        (None, None) => String::new(),
                    },
                    ..DemoStatus::default()
                },
            };
        };
        let knob = self.selected(&snapshot).map(|name| {
            let ms = snapshot
                .latencies
                .as_ref()
                .and_then(|k| k.get(name))
                .unwrap_or(0);
            format!("{name} {ms} ms")
        });
        let cure = snapshot.cure;
        let mut status = match &self.workshop {
            Some(workshop) => workshop.status(),
            None => DemoStatus {
                scenario: scenario_label(running, cure),
                lesson: lesson(running, cure).to_owned(),
                keys: keys_for(running, "1-9 0 scenario", "[ ] service  +/- latency"),
                ..DemoStatus::default()
            },
        };
        if self.workshop.is_some() && cure {
            // The step's words are about the mistake; the cure has its own.
            status.scenario = format!("{} (cured)", status.scenario);
            status.lesson = lesson(running, cure).to_owned();
        }
        status.focus = Some(running.focus(cure).to_vec());
        if let Some(busy) = snapshot.busy {
            status.scenario = busy_label(busy);
            status.focus = Some(busy.1.focus(busy.2).to_vec());
            if self.workshop.is_none() || busy.2 {
                status.lesson = lesson(busy.1, busy.2).to_owned();
            }
        } else if let Some(knob) = knob
            && self
                .workshop
                .as_ref()
                .is_none_or(|w| w.phase != Phase::Coming)
        {
            status.scenario = format!("{}  ·  {knob}", status.scenario);
        }
        if let Some(error) = &snapshot.error {
            status.lesson = error.clone();
        }
        status
    }

    fn key(&mut self, key: char) -> bool {
        if self.link.snapshot().scenario.is_none() {
            return false;
        }
        match key {
            '0'..='9' => {
                let Some(scenario) = scenario_of_digit(key) else {
                    return false;
                };
                match &mut self.workshop {
                    Some(workshop) => {
                        let (scenario, latencies) = workshop.jump_to(scenario);
                        self.switch(scenario, latencies);
                    }
                    None => self.switch(scenario, Vec::new()),
                }
            }
            'c' => return self.toggle_cure(),
            '[' => self.select_next(false),
            ']' => self.select_next(true),
            '+' | '=' => self.nudge_latency(true),
            '-' | '_' => self.nudge_latency(false),
            'w' | 'n' => {
                let Some(workshop) = &mut self.workshop else {
                    return false;
                };
                if let Some((scenario, latencies)) = workshop.advance() {
                    self.switch(scenario, latencies);
                }
            }
            _ => return false,
        }
        true
    }

    fn generation(&self) -> u64 {
        self.link.snapshot().switches
    }
}

/// "switching to 3/10 drop-header…" while an order runs.
fn busy_label((switching, scenario, cure): (bool, Scenario, bool)) -> String {
    let verb = if switching {
        "switching to"
    } else {
        "starting"
    };
    format!("{verb} {}…", scenario_label(scenario, cure))
}

/// "3/10 drop-header" (", cured" when cured): the scenario's place in the teaching order
/// ([`Scenario::ALL`]) and its name.
fn scenario_label(scenario: Scenario, cure: bool) -> String {
    let place = Scenario::ALL
        .iter()
        .position(|s| *s == scenario)
        .map_or(0, |i| i + 1);
    let cured = if cure && scenario.has_cure() {
        " (cured)"
    } else {
        ""
    };
    format!("{place}/{} {scenario}{cured}", Scenario::ALL.len())
}

/// The lesson of a run.
fn lesson(scenario: Scenario, cure: bool) -> &'static str {
    if cure {
        scenario.cured_lesson()
    } else {
        scenario.lesson()
    }
}

/// The demo's keys for the scenario line: `c cure` only where there is something to cure.
fn keys_for(scenario: Scenario, digits: &str, rest: &str) -> String {
    if scenario.has_cure() {
        format!("{digits}  c cure  {rest}")
    } else {
        format!("{digits}  {rest}")
    }
}

/// One step of the workshop: a scenario (and maybe a slowed service), what the teacher says
/// before it starts, and what to point at once it runs.
#[derive(Debug)]
struct Step {
    scenario: Scenario,
    /// A service's work time for this step, in workshop ms (scaled by `--time-scale`).
    latency: Option<(&'static str, u64)>,
    /// Shown before the step starts: what is about to happen.
    coming: &'static str,
    /// Shown while it runs: what to look at on the screen.
    watch: &'static str,
}

impl Step {
    /// "propagate", or "propagate, slow settlement" for a step that slows a service.
    fn title(&self) -> String {
        match self.latency {
            Some((service, _)) => format!("{}, slow {service}", self.scenario),
            None => self.scenario.to_string(),
        }
    }
}

/// The workshop, in teaching order. Figures are the workshop's (`--time-scale 1`).
const STEPS: [Step; 11] = [
    Step {
        scenario: Scenario::Propagate,
        latency: None,
        coming: "First, propagation done right: pix-api gets 1200 ms and forwards only what is left to antifraud, then settlement.",
        watch: "No findings. One settlement in four is slow: its chain ends in a 504 at pix-api's deadline, cut by what remained.",
    },
    Step {
        scenario: Scenario::Propagate,
        latency: Some(("settlement", 1500)),
        coming: "Next, a slow dependency: settlement will take 1500 ms, far more than the ~900 ms left when pix-api calls it.",
        watch: "pix-api answers 504 at its deadline: settlement is cut at ~900 ms (what remained), not at its 1 s SLA. Still no errors.",
    },
    Step {
        scenario: Scenario::FixedTimeout,
        latency: None,
        coming: "Next, a reset: the gateway gives 1 s, but bff calls orders with a fixed 3 s timeout; inventory is slow (1500 ms).",
        watch: "budget_reset on bff's call: 3000 ms forwarded with ~950 left. orders works ~600 ms after bff gave up (orphaned_work).",
    },
    Step {
        scenario: Scenario::DropHeader,
        latency: None,
        coming: "Next, a dropped budget: bff calls orders without x-budget-ms, like a proxy or client that loses the header.",
        watch: "budget_dropped on bff's call. Enter, then the orders row and Enter: budget.source = none, no deadline from there on.",
    },
    Step {
        scenario: Scenario::AbsoluteDeadline,
        latency: None,
        coming: "Next, a deadline sent as a time of day (x-request-deadline), as many Java and Rails services do; ledger's clock is off.",
        watch: "clock_skew on ledger: its clock is 1.5 s behind, so it works ~500 ms after storefront gave up. c sends x-budget-ms.",
    },
    Step {
        scenario: Scenario::ProxyTimeouts,
        latency: None,
        coming: "Next, fixed timeouts in layers: proxy waits 1 s, app spends 950 ms in its database, then calls with a fixed 800 ms.",
        watch: "timeout_inverted on app's call: 800 ms when proxy stops within ~50. c: app reads a budget and refuses the call.",
    },
    Step {
        scenario: Scenario::NoCancel,
        latency: None,
        coming: "Next, work nobody waits for: settlement (1500 ms) ignores both its deadline and pix-api hanging up.",
        watch: "orphaned_work on settlement (once its late span arrives): ~600 ms per request after pix-api gave up; see wasted ms/s.",
    },
    Step {
        scenario: Scenario::NoDequeueCheck,
        latency: None,
        coming: "Next, a queue: bursts of 40 hit orders (4 workers, queue of 20), which runs items without checking their deadline.",
        watch: "ran_after_expiry on orders: items started after their deadline. s s sorts by most waste; Tab Tab Tab: Services.",
    },
    Step {
        scenario: Scenario::Burst,
        latency: None,
        coming: "Next, the same burst done right: orders rejects what cannot fit and checks each item's deadline when it takes it.",
        watch: "shed_full (503) and shed_expired (504): info, the right behaviour. ▲ queue_pressure: waited over half its budget.",
    },
    Step {
        scenario: Scenario::MessageDeadline,
        latency: None,
        coming: "Next, a job queue: api puts jobs with their deadline on a queue; worker takes 400 ms a job and 10 arrive at once.",
        watch: "ran_after_expiry on worker's CONSUMER spans: jobs run after their deadline. c: worker drops the expired ones.",
    },
    Step {
        scenario: Scenario::RetryStorm,
        latency: None,
        coming: "Last, a retry storm: antifraud is slow (600 ms) and pix-api retries it, forwarding all that remains each time.",
        watch: "retry_over_budget on pix-api's antifraud calls: together the attempts forwarded ~1900 ms with only ~1170 ms left.",
    },
];

const WORKSHOP_DONE: &str = "That was every scenario. 1-9 0 runs one again, c cures it, +/- slow a service down, w starts over.";

/// Where the workshop is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// The step runs: what to look at.
    Watch,
    /// The step still runs; the next one is announced and starts on the next `w`.
    Coming,
    /// Past the last step.
    Done,
}

/// `--workshop`: the steps in teaching order, one `w` at a time.
#[derive(Debug)]
struct Workshop {
    step: usize,
    phase: Phase,
    timing: Timing,
}

impl Workshop {
    /// At the first step of `scenario` (the first step when that is `propagate`, the default).
    fn starting_at(scenario: Scenario, timing: Timing) -> Self {
        Workshop {
            step: first_step_of(scenario),
            phase: Phase::Watch,
            timing,
        }
    }

    /// The scenario of the current step.
    fn running(&self) -> Scenario {
        STEPS[self.step].scenario
    }

    /// `w`: announce the next step, or start it. Returns what to run when a step starts.
    fn advance(&mut self) -> Option<(Scenario, Vec<(&'static str, u64)>)> {
        match self.phase {
            Phase::Watch if self.step + 1 < STEPS.len() => {
                self.phase = Phase::Coming;
                None
            }
            Phase::Watch => {
                self.phase = Phase::Done;
                None
            }
            Phase::Coming => {
                self.step += 1;
                self.phase = Phase::Watch;
                Some(self.order())
            }
            Phase::Done => {
                // Start over at the first step.
                self.step = 0;
                self.phase = Phase::Watch;
                Some(self.order())
            }
        }
    }

    /// A digit: go to the first step of `scenario` and run it.
    fn jump_to(&mut self, scenario: Scenario) -> (Scenario, Vec<(&'static str, u64)>) {
        self.step = first_step_of(scenario);
        self.phase = Phase::Watch;
        self.order()
    }

    /// The current step's scenario and work times, scaled.
    fn order(&self) -> (Scenario, Vec<(&'static str, u64)>) {
        let step = &STEPS[self.step];
        let latencies = step
            .latency
            .map(|(service, ms)| (service, self.timing.ms(ms)))
            .into_iter()
            .collect();
        (step.scenario, latencies)
    }

    fn status(&self) -> DemoStatus {
        let n = STEPS.len();
        let step = &STEPS[self.step];
        match self.phase {
            Phase::Watch => DemoStatus {
                scenario: format!("step {}/{n} {}", self.step + 1, step.title()),
                lesson: step.watch.to_owned(),
                keys: keys_for(step.scenario, "w next  1-9 0 jump", "[ ] +/- latency"),
                ..DemoStatus::default()
            },
            Phase::Coming => {
                let next = &STEPS[self.step + 1];
                DemoStatus {
                    scenario: format!("step {}/{n} next: {}", self.step + 2, next.title()),
                    lesson: next.coming.to_owned(),
                    keys: "w start it  1-9 0 jump".to_owned(),
                    ..DemoStatus::default()
                }
            }
            Phase::Done => DemoStatus {
                scenario: format!("workshop done: {n} steps"),
                lesson: WORKSHOP_DONE.to_owned(),
                keys: "w start over  1-9 0 scenario  q quit".to_owned(),
                ..DemoStatus::default()
            },
        }
    }
}

fn first_step_of(scenario: Scenario) -> usize {
    STEPS
        .iter()
        .position(|s| s.scenario == scenario)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_workshop_teaches_every_scenario_in_order() {
        let mut scenarios: Vec<Scenario> = STEPS.iter().map(|s| s.scenario).collect();
        scenarios.dedup();
        assert_eq!(scenarios, Scenario::ALL);
        for scenario in Demo::scenarios() {
            assert!(
                Scenario::ALL.contains(scenario),
                "{scenario} missing from Scenario::ALL"
            );
        }
    }

    #[test]
    fn each_step_is_announced_then_started_by_one_key() {
        let mut w = Workshop::starting_at(Scenario::Propagate, Timing::default());
        assert_eq!(w.status().lesson, STEPS[0].watch);
        // First w: the next step is announced, nothing switches yet.
        assert_eq!(w.advance(), None);
        assert_eq!(w.status().lesson, STEPS[1].coming);
        assert_eq!(
            w.status().scenario,
            "step 2/11 next: propagate, slow settlement"
        );
        // Second w: it starts (here: same scenario, settlement slowed).
        assert_eq!(
            w.advance(),
            Some((Scenario::Propagate, vec![("settlement", 1500)]))
        );
        assert_eq!(w.status().lesson, STEPS[1].watch);
        assert_eq!(w.advance(), None);
        assert_eq!(w.advance(), Some((Scenario::FixedTimeout, vec![])));
        // Through to the end, then over.
        for _ in 0..(STEPS.len() - 3) * 2 {
            w.advance();
        }
        assert_eq!(w.running(), Scenario::RetryStorm);
        assert_eq!(w.advance(), None);
        assert_eq!(w.status().lesson, WORKSHOP_DONE);
        assert_eq!(w.advance(), Some((Scenario::Propagate, vec![])));
    }

    #[test]
    fn workshop_latencies_follow_the_time_scale_and_digits_jump() {
        let mut w = Workshop::starting_at(Scenario::Burst, Timing::new(0.5));
        assert_eq!(w.running(), Scenario::Burst);
        assert_eq!(
            w.jump_to(Scenario::NoCancel),
            (Scenario::NoCancel, Vec::new())
        );
        w.step = 0;
        w.phase = Phase::Coming;
        assert_eq!(
            w.advance(),
            Some((Scenario::Propagate, vec![("settlement", 750)]))
        );
    }

    #[test]
    fn step_texts_fit_a_wide_terminal_line() {
        for step in &STEPS {
            for text in [step.coming, step.watch] {
                assert!(text.chars().count() <= 120, "{} chars: {text}", text.len());
            }
        }
        assert!(WORKSHOP_DONE.chars().count() <= 120);
    }

    fn link() -> (Link, mpsc::Receiver<Order>) {
        let (orders, receiver) = mpsc::channel(16);
        let snapshot = Arc::new(Mutex::new(Snapshot::default()));
        (Link { orders, snapshot }, receiver)
    }

    /// Publishes the payment services (pix-api 30 ms, antifraud 250 ms, settlement 200 ms) as
    /// started for `scenario`; returns their knobs.
    fn payment_started(link: &Link, scenario: Scenario) -> Latencies {
        let knobs = Latencies::new(&[("pix-api", 30), ("antifraud", 250), ("settlement", 200)]);
        let mut s = link.snapshot();
        s.scenario = Some(scenario);
        s.services = ["pix-api", "antifraud", "settlement"]
            .into_iter()
            .map(|name| ServiceInfo {
                name,
                addr: SocketAddr::from((Ipv4Addr::LOCALHOST, 9)),
                latency_ms: 0,
            })
            .collect();
        s.latencies = Some(knobs.clone());
        s.published += 1;
        knobs
    }

    #[test]
    fn the_latency_knob_starts_on_the_service_the_scenario_is_about() {
        let (link, _orders) = link();
        let control = Controller::new(link.clone(), None);
        for (scenario, slow) in [
            (Scenario::RetryStorm, "antifraud 250 ms"),
            (Scenario::NoCancel, "settlement 200 ms"),
        ] {
            payment_started(&link, scenario);
            let status = control.status();
            assert!(status.scenario.ends_with(slow), "{scenario}: {status:?}");
        }
    }

    #[test]
    fn keys_switch_select_and_change_latency() {
        let (link, mut orders) = link();
        let mut control = Controller::new(link.clone(), None);
        // Not started: no status, no keys taken.
        assert_eq!(control.status(), DemoStatus::default());
        assert!(!control.key('3'));
        let knobs = payment_started(&link, Scenario::Propagate);
        let status = control.status();
        assert!(status.scenario.starts_with("1/10 propagate"), "{status:?}");
        assert_eq!(status.focus, Some(Vec::new()), "nothing should go wrong");
        assert!(status.scenario.ends_with("settlement 200 ms"), "{status:?}");
        assert_eq!(status.lesson, Scenario::Propagate.lesson());
        assert!(control.key('+') && control.key('+'));
        assert_eq!(knobs.get("settlement"), Some(300));
        assert!(control.status().scenario.ends_with("settlement 300 ms"));
        assert!(control.key('[') && control.key('-'));
        assert_eq!(knobs.get("antifraud"), Some(200));
        assert!(control.key(']') && control.key(']'));
        assert!(control.status().scenario.ends_with("pix-api 30 ms"));
        for _ in 0..3 {
            control.key('-');
        }
        assert_eq!(knobs.get("pix-api"), Some(0), "never below zero");
        assert!(control.key('6'));
        assert!(matches!(
            orders.try_recv(),
            Ok(Order::Switch(Scenario::NoCancel, _, false))
        ));
        assert!(control.key('0'), "0 is the tenth");
        assert!(matches!(
            orders.try_recv(),
            Ok(Order::Switch(Scenario::RetryStorm, _, false))
        ));
        assert!(!control.key('c'), "propagate has nothing to cure");
        assert!(!control.key('w'), "w is the workshop's");
        assert!(!control.key('x'));
        link.snapshot().busy = Some((true, Scenario::NoCancel, false));
        let status = control.status();
        assert_eq!(status.scenario, "switching to 6/10 no-cancel…");
        assert_eq!(
            status.focus.as_deref(),
            Some(&[deadline_budget::analysis::FindingKind::OrphanedWork][..]),
            "the screen looks for what the coming scenario teaches"
        );
        assert_eq!(
            status.lesson,
            Scenario::NoCancel.lesson(),
            "the coming lesson"
        );
    }

    #[test]
    fn in_the_workshop_w_announces_then_switches() {
        let (link, mut orders) = link();
        let workshop = Workshop::starting_at(Scenario::Propagate, Timing::default());
        let mut control = Controller::new(link.clone(), Some(workshop));
        {
            let mut s = link.snapshot();
            s.scenario = Some(Scenario::Propagate);
            s.published = 1;
        }
        assert_eq!(control.status().lesson, STEPS[0].watch);
        assert!(control.key('w') && control.key('w'));
        assert_eq!(control.status().lesson, STEPS[1].watch);
        assert!(control.key('w'));
        assert_eq!(control.status().lesson, STEPS[2].coming);
        assert!(orders.try_recv().is_ok(), "step 2 slowed settlement");
        assert!(orders.try_recv().is_err(), "announcing switches nothing");
        assert!(
            control.key('n'),
            "n works too where the screen does not use it"
        );
        assert!(matches!(
            orders.try_recv(),
            Ok(Order::Switch(Scenario::FixedTimeout, _, false))
        ));
        assert!(
            control
                .status()
                .scenario
                .starts_with("step 3/11 fixed-timeout")
        );
    }

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
            control.status().scenario.starts_with("2/10 fixed-timeout")
        })
        .await;
        // The services export to the receivers the screen reads.
        let batch = tokio::time::timeout(Duration::from_secs(60), ingest.receiver.recv())
            .await
            .expect("spans within a minute")
            .expect("the receivers run");
        assert!(!batch.spans.is_empty());
        // A workshop step that slows a service of the running scenario does not restart it.
        let before: Vec<SocketAddr> = driver
            .link
            .snapshot()
            .services
            .iter()
            .map(|s| s.addr)
            .collect();
        driver.link.send(Order::Switch(
            Scenario::FixedTimeout,
            vec![("inventory", 777)],
            false,
        ));
        wait_for("the slower inventory", || {
            control.status().scenario.ends_with("inventory 777 ms")
        })
        .await;
        let after: Vec<SocketAddr> = driver
            .link
            .snapshot()
            .services
            .iter()
            .map(|s| s.addr)
            .collect();
        assert_eq!(before, after, "the same services, still running");
        assert_eq!(
            control.generation(),
            1,
            "a workshop step starts the screen over"
        );
        assert!(control.key('3'));
        wait_for("the switch", || {
            control.status().scenario.starts_with("3/10 drop-header")
        })
        .await;
        assert_eq!(control.generation(), 2, "so does a switch");
        // c runs the same scenario cured, and c again broken.
        assert!(control.key('c'));
        wait_for("the cure", || {
            control
                .status()
                .scenario
                .starts_with("3/10 drop-header (cured)")
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

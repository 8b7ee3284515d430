//! The services of each topology, built only with the `deadline-budget` public API: a
//! [`BudgetLayer`] on every service (the edge with its default budget), a [`BudgetClient`] for
//! every outgoing HTTP call, a [`DeadlineQueueLayer`] in front of `orders` in the queue case.
//! `antifraud` is a gRPC service (tonic, [`crate::antifraud`]): pix-api calls it through a
//! [`BudgetChannelLayer`], so the budget crosses HTTP → gRPC → HTTP in the payment chain. The
//! broken variants of each scenario are the library's own options, set here per service.
//!
//! [`Blueprint::start`] starts the callees first (so their callers know where they listen) and
//! returns the hosts edge first. With `--cure` each broken option is set right again: the
//! scenario's mistake is one choice, and the cure is the other.

use std::convert::Infallible;
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::{MethodRouter, get};
use deadline_budget::budget::Deadline;
use deadline_budget::client::{BudgetClient, CallError, CallOptions, Forward};
use deadline_budget::queue::DeadlineQueueLayer;
use deadline_budget::server::BudgetLayer;
use deadline_budget::{BudgetChannelLayer, CallOptions as Options};
use tower::Layer as _;
use tracing::Instrument as _;

use crate::antifraud::{AntifraudClient, AntifraudServer, CheckRequest};
use crate::hop::{Answer, Hop, Slow, Slowdown};
use crate::host::ServiceHost;
use crate::messaging;
use crate::telemetry::Export;
use crate::{DemoConfig, DemoError, Latencies, Scenario, Timing, Topology};

/// The scenario's own rate when `--rate` does not say one.
pub(crate) fn default_rate(scenario: Scenario) -> Option<f64> {
    // Half the requests are checkouts: 20 calls a second to payments give its advice the 100
    // answered calls it needs before payments turns slow 6 s in, and keep orders' 4 workers
    // under 3/4 busy in the cure (a checkout holds one for at most ~120 ms).
    (scenario == Scenario::SlowDependency).then_some(40.0)
}

/// Requests the load generator sends at once in this scenario.
pub(crate) fn burst_size(scenario: Scenario) -> u32 {
    match scenario.topology() {
        Topology::Queue => 40,
        Topology::Jobs => 10,
        Topology::Payment
        | Topology::Chain
        | Topology::Ledger
        | Topology::Proxy
        | Topology::Shop => 1,
    }
}

/// How far ledger's clock runs off in `absolute-deadline` unless `--clock-skew` says: behind by
/// more than the 1 s the analysis allows an absolute deadline (`CONVENTIONS.md`, `clock_skew`).
pub const DEFAULT_CLOCK_SKEW_MS: i64 = -1500;

/// In `propagate`, one settlement in this many is slow: the step that budgets cut.
const SLOW_EVERY: u64 = 4;

/// A scenario's services, ready to start.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Blueprint {
    scenario: Scenario,
    timing: Timing,
    cure: bool,
    clock_skew_ms: i64,
}

/// The services a scenario runs and where the load generator knocks: in turn on each of the
/// edge's paths (`slow-dependency`'s gateway serves two).
pub(crate) struct Started {
    pub(crate) hosts: Vec<ServiceHost>,
    pub(crate) edge_paths: &'static [&'static str],
}

impl Blueprint {
    pub(crate) fn new(config: &DemoConfig) -> Self {
        Self {
            scenario: config.scenario,
            timing: config.timing,
            cure: config.cure,
            clock_skew_ms: config.clock_skew_ms.unwrap_or(DEFAULT_CLOCK_SKEW_MS),
        }
    }

    /// Whether the run makes `scenario`'s mistake: it is that scenario, and not cured.
    fn broken(&self, scenario: Scenario) -> bool {
        self.scenario == scenario && !self.cure
    }

    /// The initial local work time of each service (scaled): the scenario's slow dependency is
    /// set here.
    pub(crate) fn latencies(&self) -> Latencies {
        let t = self.timing;
        let s = self.scenario;
        let figures: Vec<(&'static str, u64)> = match s.topology() {
            Topology::Payment => vec![
                ("pix-api", 30),
                // Slower than its 400 ms SLA in retry-storm, so every attempt times out.
                (
                    "antifraud",
                    if s == Scenario::RetryStorm { 600 } else { 250 },
                ),
                // Slower than what remains in no-cancel, so pix-api gives up on it.
                (
                    "settlement",
                    if s == Scenario::NoCancel { 1500 } else { 200 },
                ),
            ],
            // 6 rounds of 350 ms against orders' ~1,390 ms: the 5th starts at its deadline, the 6th
            // ~360 ms past it, so arrivals spread by a loaded machine still show expired work.
            Topology::Queue => vec![("gateway", 600), ("orders", 350)],
            Topology::Chain => vec![
                ("gateway", 20),
                ("bff", 30),
                ("orders", 50),
                // Slower than the gateway's budget in fixed-timeout: only the reset hides it. In
                // retry-layers, slower than orders' 300 ms per attempt: every attempt times out.
                (
                    "inventory",
                    match s {
                        Scenario::FixedTimeout => 1500,
                        Scenario::RetryLayers => 500,
                        _ => 100,
                    },
                ),
            ],
            // ledger is slower than storefront's budget: only its clock decides when it stops.
            Topology::Ledger => vec![("storefront", 100), ("ledger", 2400)],
            // nginx's 10 s, Rails' 9.5 s in the database and 8 s call, scaled by 1/10.
            Topology::Proxy => vec![("proxy", 0), ("app", 950), ("payments", 500)],
            // 10 jobs at once, 400 ms each: the last ones wait past their 2 s deadline.
            Topology::Jobs => vec![("api", 20), ("worker", 400)],
            // payments answers in 80 ms until it turns slow (see `start_shop`).
            Topology::Shop => vec![("gateway", 20), ("orders", 20), ("payments", 80)],
        };
        let scaled: Vec<_> = figures.into_iter().map(|(n, ms)| (n, t.ms(ms))).collect();
        Latencies::new(&scaled)
    }

    /// Start every service, callees first. Blocks briefly while each thread starts.
    pub(crate) fn start(&self, endpoint: &Export, knobs: &Latencies) -> Result<Started, DemoError> {
        let mut hosts = Hosts {
            endpoint,
            knobs,
            started: Vec::new(),
        };
        let result = match self.scenario.topology() {
            Topology::Payment => self.start_payment(&mut hosts),
            Topology::Queue => self.start_queue(&mut hosts),
            Topology::Chain => self.start_chain(&mut hosts),
            Topology::Ledger => self.start_ledger(&mut hosts),
            Topology::Proxy => self.start_proxy(&mut hosts),
            Topology::Jobs => self.start_jobs(&mut hosts),
            Topology::Shop => self.start_shop(&mut hosts),
        };
        let mut hosts = hosts.started;
        match result {
            Ok(edge_paths) => {
                hosts.reverse();
                Ok(Started { hosts, edge_paths })
            }
            Err(e) => {
                for host in hosts {
                    host.join();
                }
                Err(e)
            }
        }
    }

    /// An HTTP call to `path` of `callee`, listening at `url`.
    fn call(&self, callee: &'static str, url: &str, path: &'static str) -> Call {
        let t = self.timing;
        Call {
            callee,
            url: format!("{url}{path}"),
            options: CallOptions::new()
                .name(format!("GET {callee} {path}"))
                .peer_service(callee)
                .margin(t.duration(10))
                .min_worth_calling(t.duration(50)),
            grpc: None,
            attempts: 1,
            forward_full_remaining: false,
            ignores_deadline: false,
        }
    }

    /// A gRPC call to antifraud's `Check` at `url` (the span takes gRPC's own name).
    fn grpc_call(&self, callee: &'static str, url: &str) -> Call {
        let mut call = self.call(callee, url, "");
        call.options.name = None;
        call.grpc = Some(Grpc::Address(url.to_owned()));
        call
    }

    /// The edge's budget layer: it gives a request without a budget `ms` (scaled).
    fn edge(&self, ms: u64) -> BudgetLayer {
        BudgetLayer::new().default_budget(self.timing.duration(ms))
    }

    /// pix-api (edge, 1200 ms) -> antifraud over gRPC (SLA 400 ms), then -> settlement (SLA 1 s).
    fn start_payment(&self, hosts: &mut Hosts) -> Result<EdgePaths, DemoError> {
        let t = self.timing;
        let s = self.scenario;

        let mut settlement = hosts.hop("settlement");
        // no-cancel: settlement neither watches its deadline nor notices pix-api hang up.
        let no_cancel = self.broken(Scenario::NoCancel);
        settlement.respects_deadline = !no_cancel;
        if s == Scenario::Propagate {
            // A tail: one settlement in four is slower than what pix-api has left, so the cut
            // shows without touching a knob.
            settlement.slow = Some(Slow::every(SLOW_EVERY, t.ms(1500)));
        }
        let layer = BudgetLayer::new().cancel_on_disconnect(!no_cancel);
        let settlement = hosts.leaf(settlement, "/settle", layer)?;

        let antifraud = AntifraudServer::new(hosts.hop("antifraud"));
        let antifraud = hosts.add(ServiceHost::start_grpc(
            "antifraud",
            hosts.endpoint,
            BudgetLayer::new(),
            move || tonic::service::Routes::new(antifraud),
        ))?;

        let mut check = self.grpc_call("antifraud", &antifraud);
        check.options = check.options.sla(t.duration(400));
        if s == Scenario::RetryStorm {
            check.attempts = 3;
            check.forward_full_remaining = !self.cure;
        }
        let mut settle = self.call("settlement", &settlement, "/settle");
        settle.options = settle.options.sla(t.duration(1000));
        let pix = hosts.hop("pix-api");
        hosts.relay(pix, vec![check, settle], "/pay", self.edge(1200))?;
        Ok(&["/pay"])
    }

    /// gateway (edge, 2 s) -> orders (4 workers, 350 ms per item, a queue of 20).
    fn start_queue(&self, hosts: &mut Hosts) -> Result<EdgePaths, DemoError> {
        let checked = !self.broken(Scenario::NoDequeueCheck);
        let mut orders = hosts.hop("orders");
        // Without the dequeue check, the handler trusts the queue and does not look either.
        orders.respects_deadline = checked;
        // Callers cannot take an item back out of this queue (as with most real queues: a
        // broker, a channel feeding a worker pool): the dequeue check is the only protection.
        let queue = DeadlineQueueLayer::new(4, 20)
            .check_at_dequeue(checked)
            .drop_cancelled(false);
        let layer = BudgetLayer::new().cancel_on_disconnect(false);
        let name = orders.name;
        let orders = hosts.add(ServiceHost::start(name, hosts.endpoint, move |_stop| {
            Router::new()
                .route("/orders", get(work_only))
                .with_state(orders)
                .layer(queue)
                .layer(layer)
        }))?;

        let to_orders = self.call("orders", &orders, "/orders");
        let gateway = hosts.hop("gateway");
        hosts.relay(gateway, vec![to_orders], "/order", self.edge(2000))?;
        Ok(&["/order"])
    }

    /// gateway (edge, 1 s) -> bff -> orders -> inventory, each doing local work first.
    fn start_chain(&self, hosts: &mut Hosts) -> Result<EdgePaths, DemoError> {
        let t = self.timing;
        let s = self.scenario;
        // The inner services run their work to the end even when the caller hangs up (as most
        // stacks do): only the budget they received tells them when to stop.
        let inner = || BudgetLayer::new().cancel_on_disconnect(false);

        let inventory = hosts.leaf(hosts.hop("inventory"), "/reserve", inner())?;

        let mut reserve = self.call("inventory", &inventory, "/reserve");
        if s == Scenario::RetryLayers {
            // orders' own retry, broken or cured: 2 attempts of at most 300 ms each, within
            // what remains.
            reserve.attempts = 2;
            reserve.options = reserve.options.sla(t.duration(300));
        }
        let orders = hosts.relay(hosts.hop("orders"), vec![reserve], "/orders", inner())?;

        let mut to_orders = self.call("orders", &orders, "/orders");
        to_orders.options = match s {
            _ if self.cure => to_orders.options,
            Scenario::FixedTimeout => to_orders.options.forward(Forward::Fixed(t.duration(3000))),
            Scenario::DropHeader => to_orders.options.forward(Forward::Nothing),
            _ => to_orders.options,
        };
        let retry_layers = self.broken(Scenario::RetryLayers);
        if s == Scenario::RetryLayers {
            to_orders.options = to_orders.options.sla(t.duration(800));
        }
        if retry_layers {
            // A retry policy of its own: 3 attempts of 800 ms each, whatever remains (a client
            // configured with a per-attempt timeout, and no overall one).
            to_orders.attempts = 3;
            to_orders.ignores_deadline = true;
        }
        // Broken retry-layers: bff runs its retries to the end when the gateway hangs up.
        let layer = if retry_layers {
            inner()
        } else {
            BudgetLayer::new()
        };
        let bff = hosts.relay(hosts.hop("bff"), vec![to_orders], "/checkout", layer)?;

        let to_bff = self.call("bff", &bff, "/checkout");
        let gateway = hosts.hop("gateway");
        hosts.relay(gateway, vec![to_bff], "/order", self.edge(1000))?;
        Ok(&["/order"])
    }

    /// storefront (edge, 2 s) -> ledger, the deadline written as a time of day
    /// (`x-request-deadline`); ledger reads it against a clock `clock_skew_ms` off. Cured,
    /// storefront writes `x-budget-ms` and the clock no longer matters.
    fn start_ledger(&self, hosts: &mut Hosts) -> Result<EdgePaths, DemoError> {
        // ledger (a Java service, say) runs its work to the end when the caller hangs up: only
        // the deadline it read tells it when to stop.
        let layer = BudgetLayer::new()
            .cancel_on_disconnect(false)
            .clock_offset_ms(self.clock_skew_ms);
        let ledger = hosts.leaf(hosts.hop("ledger"), "/entries", layer)?;
        let mut post = self.call("ledger", &ledger, "/entries");
        post.options = post
            .options
            .absolute_deadline(self.broken(Scenario::AbsoluteDeadline));
        let storefront = hosts.hop("storefront");
        hosts.relay(storefront, vec![post], "/checkout", self.edge(2000))?;
        Ok(&["/checkout"])
    }

    /// proxy (a fixed 1 s timeout) -> app (950 ms in its database, then payments with a fixed
    /// 800 ms timeout) -> payments (500 ms). Nobody propagates a budget: each layer has its own
    /// timeout. Cured, proxy sends its 1 s as a budget, and app refuses a call it has no time
    /// for.
    fn start_proxy(&self, hosts: &mut Hosts) -> Result<EdgePaths, DemoError> {
        let t = self.timing;
        let broken = self.broken(Scenario::ProxyTimeouts);
        let forward = if broken {
            Forward::Nothing
        } else {
            Forward::Budget
        };
        let payments = hosts.leaf(hosts.hop("payments"), "/charge", BudgetLayer::new())?;

        let mut charge = self.call("payments", &payments, "/charge");
        charge.options = charge.options.sla(t.duration(800)).forward(forward);
        let mut app = hosts.hop("app");
        app.work_name = Some("SELECT orders (database)");
        // A Rails app, say: it runs the request to the end when the proxy hangs up.
        let layer = BudgetLayer::new().cancel_on_disconnect(false);
        let app = hosts.relay(app, vec![charge], "/orders", layer)?;

        let mut to_app = self.call("app", &app, "/orders");
        to_app.options = to_app.options.sla(t.duration(1000)).forward(forward);
        // nginx's proxy_read_timeout is a timeout, not a budget: broken, the proxy has none
        // to give; cured, its 1 s is the budget it sends.
        let layer = if broken {
            BudgetLayer::new()
        } else {
            self.edge(1000)
        };
        hosts.relay(hosts.hop("proxy"), vec![to_app], "/orders", layer)?;
        Ok(&["/orders"])
    }

    /// api (edge, 2 s) puts a job carrying its deadline on the `jobs` queue and answers 202;
    /// worker takes one job at a time (400 ms each). Broken, it runs every job however late;
    /// cured, it drops the expired ones when it takes them.
    fn start_jobs(&self, hosts: &mut Hosts) -> Result<EdgePaths, DemoError> {
        let t = self.timing;
        let checked = !self.broken(Scenario::MessageDeadline);
        let (queue, jobs) = messaging::queue();
        let mut worker = hosts.hop("worker");
        worker.respects_deadline = checked;
        hosts.add(messaging::start_consumer(
            hosts.endpoint,
            worker,
            jobs,
            checked,
        ))?;
        let producer =
            messaging::Producer::new(hosts.hop("api"), queue, t.duration(10), t.duration(50));
        let edge = self.edge(2000);
        hosts.add(messaging::start_producer(
            hosts.endpoint,
            producer,
            "/jobs",
            edge,
        ))?;
        Ok(&["/jobs"])
    }
}

impl Blueprint {
    /// gateway (edge, 1 s) -> orders `/checkout` -> payments, and gateway -> orders `/catalog`,
    /// which calls nothing; orders serves both on one pool of 4 workers (a queue of 20) and
    /// runs a checkout to the end when its caller hangs up. payments answers in
    /// 80 ms, then, 6 s in, in 40 s. Broken, orders calls payments with no timeout and forwards
    /// nothing: its workers end up waiting on payments and `/catalog` queues behind them.
    /// Cured, orders times out at 100 ms (p99.9 of the 80 ms) and forwards the budget.
    fn start_shop(&self, hosts: &mut Hosts) -> Result<EdgePaths, DemoError> {
        let t = self.timing;
        let broken = self.broken(Scenario::SlowDependency);
        let mut payments = hosts.hop("payments");
        payments.slowdown = Some(Slowdown::after(t.duration(6000), t.ms(40_000)));
        let payments = hosts.leaf(payments, "/charge", BudgetLayer::new())?;

        let mut charge = self.call("payments", &payments, "/charge");
        if broken {
            charge.options = charge.options.forward(Forward::Nothing);
            charge.ignores_deadline = true;
        } else {
            charge.options = charge.options.sla(t.duration(100));
        }
        let checkout = Relay::new(hosts.hop("orders"), vec![charge])?;
        let catalog = hosts.hop("orders");
        // One layer value is one queue: both routes share its 4 workers. A checkout, once
        // taken, runs to the end (a payment is not left half done); a catalog read leaves the
        // queue, or stops, when its caller hangs up.
        let queue = DeadlineQueueLayer::new(4, 20);
        let orders = hosts.add(ServiceHost::start("orders", hosts.endpoint, move |_stop| {
            let checkout: MethodRouter = get(work_then_call)
                .with_state(checkout.connect())
                .layer::<_, Infallible>(queue.clone())
                .layer::<_, Infallible>(BudgetLayer::new().cancel_on_disconnect(false));
            let catalog: MethodRouter = get(work_only)
                .with_state(catalog)
                .layer::<_, Infallible>(queue)
                .layer::<_, Infallible>(BudgetLayer::new());
            Router::new()
                .route("/checkout", checkout)
                .route("/catalog", catalog)
        }))?;

        let mut gateway = Router::new();
        for path in SHOP_PATHS {
            let relay = Relay::new(
                hosts.hop("gateway"),
                vec![self.call("orders", &orders, path)],
            )?;
            gateway = gateway.route(path, get(work_then_call).with_state(relay));
        }
        let layer = self.edge(1000);
        hosts.add(ServiceHost::start(
            "gateway",
            hosts.endpoint,
            move |_stop| gateway.layer(layer),
        ))?;
        Ok(&SHOP_PATHS)
    }
}

/// The paths the load calls at the edge.
type EdgePaths = &'static [&'static str];

/// The gateway's paths in `slow-dependency`, which the load calls in turn: one needs payments,
/// the other does not.
const SHOP_PATHS: [&str; 2] = ["/checkout", "/catalog"];

fn client() -> Result<BudgetClient, DemoError> {
    let http = reqwest::Client::builder()
        .build()
        .map_err(|e| DemoError::Client(e.to_string()))?;
    Ok(BudgetClient::new(http))
}

/// The services started so far, callees first, and what each is started with.
struct Hosts<'a> {
    endpoint: &'a Export,
    knobs: &'a Latencies,
    started: Vec<ServiceHost>,
}

impl Hosts<'_> {
    /// A hop of the service `name`, working as long as its latency knob says.
    fn hop(&self, name: &'static str) -> Hop {
        Hop::new(name, self.knobs)
    }

    /// Keeps a service started; returns its URL.
    fn add(&mut self, host: Result<ServiceHost, DemoError>) -> Result<String, DemoError> {
        let host = host?;
        let url = host.url();
        self.started.push(host);
        Ok(url)
    }

    /// A service that only does local work, at `path`; returns its URL.
    fn leaf(
        &mut self,
        hop: Hop,
        path: &'static str,
        layer: BudgetLayer,
    ) -> Result<String, DemoError> {
        let name = hop.name;
        self.add(ServiceHost::start(name, self.endpoint, move |_stop| {
            Router::new()
                .route(path, get(work_only))
                .with_state(hop)
                .layer(layer)
        }))
    }

    /// A service that does local work at `path`, then `calls` in order; returns its URL.
    fn relay(
        &mut self,
        hop: Hop,
        calls: Vec<Call>,
        path: &'static str,
        layer: BudgetLayer,
    ) -> Result<String, DemoError> {
        let relay = Relay::new(hop, calls)?;
        let name = relay.hop.name;
        self.add(ServiceHost::start(name, self.endpoint, move |_stop| {
            // gRPC channels are made here, on the service's own runtime, which drives them.
            Router::new()
                .route(path, get(work_then_call))
                .with_state(relay.connect())
                .layer(layer)
        }))
    }
}

async fn work_only(State(hop): State<Hop>) -> Answer {
    hop.work().await
}

/// One outgoing call of a hop.
#[derive(Clone, Debug)]
struct Call {
    callee: &'static str,
    url: String,
    options: CallOptions,
    /// Set for a gRPC call to antifraud instead of an HTTP GET of `url`.
    grpc: Option<Grpc>,
    /// Attempts in all (retries = attempts - 1).
    attempts: u32,
    /// The retry-storm bug: each attempt forwards everything that remains, not its timeout.
    forward_full_remaining: bool,
    /// Made as if the hop had no deadline, as a client configured with a fixed timeout (or
    /// none) is: the timeout is the SLA alone, and what is forwarded too. The slow-dependency
    /// and retry-layers bugs.
    ignores_deadline: bool,
}

/// A gRPC callee: its address until the calling service connects, then its client.
#[derive(Clone, Debug)]
enum Grpc {
    Address(String),
    Client(AntifraudClient),
}

/// A hop that works, then calls.
#[derive(Clone, Debug)]
struct Relay {
    hop: Hop,
    calls: Vec<Call>,
    client: BudgetClient,
}

async fn work_then_call(State(relay): State<Relay>) -> Answer {
    relay.hop.work().await?;
    for call in &relay.calls {
        relay.call(call).await?;
    }
    Ok(format!("{} done", relay.hop.name))
}

impl Relay {
    /// `hop`, making `calls` in order with a client of its own.
    fn new(hop: Hop, calls: Vec<Call>) -> Result<Self, DemoError> {
        Ok(Relay {
            hop,
            calls,
            client: client()?,
        })
    }

    /// Connect the gRPC calls: a lazy channel (it connects on first use) with the budget layer,
    /// one line on the channel. Must run inside the service's runtime.
    fn connect(mut self) -> Self {
        for call in &mut self.calls {
            if let Some(Grpc::Address(url)) = &call.grpc
                && let Ok(endpoint) = tonic::transport::Endpoint::from_shared(url.clone())
            {
                let channel =
                    BudgetChannelLayer::new(call.options.clone()).layer(endpoint.connect_lazy());
                call.grpc = Some(Grpc::Client(AntifraudClient::new(channel)));
            }
        }
        self
    }

    /// One attempt of a gRPC call, its failure as the status pix-api answers with.
    async fn send_grpc(&self, call: &Call, options: Options) -> Result<(), (StatusCode, String)> {
        let Some(Grpc::Client(client)) = &call.grpc else {
            return Err((
                StatusCode::BAD_GATEWAY,
                format!("{}: no gRPC channel", call.callee),
            ));
        };
        let mut request = tonic::Request::new(CheckRequest {
            payment_id: "pix-demo".to_owned(),
            amount_cents: 12_000,
        });
        // This attempt's own options (its number, what it forwards) over the channel's.
        request.extensions_mut().insert(options);
        match client.clone().check(request).await {
            Ok(_) => Ok(()),
            Err(status) => {
                let code = match status.code() {
                    tonic::Code::DeadlineExceeded => StatusCode::GATEWAY_TIMEOUT,
                    tonic::Code::ResourceExhausted => StatusCode::SERVICE_UNAVAILABLE,
                    _ => StatusCode::BAD_GATEWAY,
                };
                Err((code, format!("{}: {}", call.callee, status.message())))
            }
        }
    }

    /// Make one call (with its retries); an error names the step that ran out.
    async fn call(&self, call: &Call) -> Answer {
        let mut last = None;
        for attempt in 1..=call.attempts.max(1) {
            let mut options = call.options.clone().attempt(attempt);
            if call.forward_full_remaining
                && let Some(deadline) = Deadline::current()
            {
                options = options.forward(Forward::Fixed(deadline.remaining()));
            }
            if call.grpc.is_some() {
                match self.send_grpc(call, options).await {
                    Ok(()) => return Ok(String::new()),
                    Err(failed) => {
                        let retryable = failed.0 == StatusCode::GATEWAY_TIMEOUT;
                        last = Some(failed);
                        if retryable {
                            continue;
                        }
                        break;
                    }
                }
            }
            let sent = if call.ignores_deadline {
                // The hop's deadline is a task-local: a task of its own does not see it. The
                // span goes along, so the call stays in the request's trace.
                let (client, url) = (self.client.clone(), call.url.clone());
                let send = async move { client.send(client.get(&url), &options).await };
                match tokio::spawn(send.instrument(tracing::Span::current())).await {
                    Ok(sent) => sent,
                    Err(e) => Err(CallError::Transport(Box::new(e))),
                }
            } else {
                self.client.send(self.client.get(&call.url), &options).await
            };
            let failed = match sent {
                Ok(response) if response.status().is_success() => return Ok(String::new()),
                Ok(response) => {
                    let status = response.status();
                    let why = response.text().await.unwrap_or_default();
                    let why = if why.is_empty() {
                        format!("{}: answered {status}", call.callee)
                    } else {
                        why
                    };
                    (status, why)
                }
                Err(CallError::Refused { remaining_ms, .. }) => (
                    StatusCode::GATEWAY_TIMEOUT,
                    format!(
                        "{}: not called, only {remaining_ms} ms left in {}'s budget",
                        call.callee, self.hop.name
                    ),
                ),
                Err(CallError::DeadlineExceeded { timeout }) => (
                    StatusCode::GATEWAY_TIMEOUT,
                    format!(
                        "{}: no answer within {} ms",
                        call.callee,
                        timeout.as_millis()
                    ),
                ),
                Err(other) => (StatusCode::BAD_GATEWAY, format!("{}: {other}", call.callee)),
            };
            let retryable = failed.0 == StatusCode::GATEWAY_TIMEOUT;
            last = Some(failed);
            if !retryable {
                break;
            }
        }
        Err(last.unwrap_or((
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("{}: not called", call.callee),
        )))
    }
}

/// The pause that lets one burst drain before the next (scaled): 40 items at orders, or 10 jobs
/// at the worker.
pub(crate) fn burst_gap(timing: Timing) -> Duration {
    timing.duration(5000)
}

//! The services of each topology, built only with the `deadline-budget` public API: a
//! [`BudgetLayer`] on every service (the edge with its default budget), a [`BudgetClient`] for
//! every outgoing HTTP call, a [`DeadlineQueueLayer`] in front of `orders` in the queue case.
//! `antifraud` is a gRPC service (tonic, [`crate::antifraud`]): pix-api calls it through a
//! [`BudgetChannelLayer`], so the budget crosses HTTP → gRPC → HTTP in the payment chain. The
//! broken variants of each scenario are the library's own options, set here per service.
//!
//! [`Blueprint::start`] starts the callees first (so their callers know where they listen) and
//! returns the hosts edge first.

use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use deadline_budget::budget::Deadline;
use deadline_budget::client::{BudgetClient, CallError, CallOptions, Forward};
use deadline_budget::queue::DeadlineQueueLayer;
use deadline_budget::server::BudgetLayer;
use deadline_budget::{BudgetChannelLayer, CallOptions as Options};
use tower::Layer as _;
use tracing::Instrument as _;

use crate::antifraud::{AntifraudClient, AntifraudServer, CheckRequest};
use crate::host::ServiceHost;
use crate::{DemoError, Latencies, Scenario, Timing, Topology};

/// A handler's answer: a short text, or a status with a text naming the step that failed.
type Answer = Result<String, (StatusCode, String)>;

/// Requests the load generator sends at once in this scenario.
pub(crate) fn burst_size(scenario: Scenario) -> u32 {
    match scenario.topology() {
        Topology::Queue => 40,
        Topology::Payment | Topology::Chain => 1,
    }
}

/// A scenario's services, ready to start.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Blueprint {
    scenario: Scenario,
    timing: Timing,
}

/// The services a scenario runs and where the load generator knocks.
pub(crate) struct Started {
    pub(crate) hosts: Vec<ServiceHost>,
    pub(crate) edge_path: &'static str,
}

impl Blueprint {
    pub(crate) fn new(scenario: Scenario, timing: Timing) -> Self {
        Self { scenario, timing }
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
            Topology::Queue => vec![("gateway", 600), ("orders", 300)],
            Topology::Chain => vec![
                ("gateway", 20),
                ("bff", 30),
                ("orders", 50),
                // Slower than the gateway's budget in fixed-timeout: only the reset hides it.
                (
                    "inventory",
                    if s == Scenario::FixedTimeout {
                        1500
                    } else {
                        100
                    },
                ),
            ],
        };
        let scaled: Vec<_> = figures.into_iter().map(|(n, ms)| (n, t.ms(ms))).collect();
        Latencies::new(&scaled)
    }

    /// Start every service, callees first. Blocks briefly while each thread starts.
    pub(crate) fn start(&self, endpoint: &str, knobs: &Latencies) -> Result<Started, DemoError> {
        let mut hosts: Vec<ServiceHost> = Vec::new();
        let result = match self.scenario.topology() {
            Topology::Payment => self.start_payment(endpoint, knobs, &mut hosts),
            Topology::Queue => self.start_queue(endpoint, knobs, &mut hosts),
            Topology::Chain => self.start_chain(endpoint, knobs, &mut hosts),
        };
        match result {
            Ok(edge_path) => {
                hosts.reverse();
                Ok(Started { hosts, edge_path })
            }
            Err(e) => {
                for host in hosts {
                    host.join();
                }
                Err(e)
            }
        }
    }

    fn hop(&self, name: &'static str, knobs: &Latencies) -> Hop {
        Hop {
            name,
            knobs: knobs.clone(),
            respects_deadline: true,
        }
    }

    fn call(&self, callee: &'static str, host: &ServiceHost, path: &'static str) -> Call {
        let t = self.timing;
        Call {
            callee,
            url: format!("{}{path}", host.url()),
            options: CallOptions::new()
                .name(format!("GET {callee} {path}"))
                .margin(t.duration(10))
                .min_worth_calling(t.duration(50)),
            grpc: None,
            attempts: 1,
            forward_full_remaining: false,
        }
    }

    /// A gRPC call to antifraud's `Check` at `host` (the span takes gRPC's own name).
    fn grpc_call(&self, callee: &'static str, host: &ServiceHost) -> Call {
        let mut call = self.call(callee, host, "");
        call.options.name = None;
        call.grpc = Some(Grpc::Address(host.url()));
        call
    }

    /// pix-api (edge, 1200 ms) -> antifraud over gRPC (SLA 400 ms), then -> settlement (SLA 1 s).
    fn start_payment(
        &self,
        endpoint: &str,
        knobs: &Latencies,
        hosts: &mut Vec<ServiceHost>,
    ) -> Result<&'static str, DemoError> {
        let t = self.timing;
        let s = self.scenario;

        let mut settlement = self.hop("settlement", knobs);
        // no-cancel: settlement neither watches its deadline nor notices pix-api hang up.
        settlement.respects_deadline = s != Scenario::NoCancel;
        let layer = BudgetLayer::new().cancel_on_disconnect(s != Scenario::NoCancel);
        hosts.push(leaf(endpoint, settlement, "/settle", layer)?);

        let antifraud = AntifraudServer::new(self.hop("antifraud", knobs));
        hosts.push(ServiceHost::start_grpc(
            "antifraud",
            endpoint,
            BudgetLayer::new(),
            move || tonic::service::Routes::new(antifraud),
        )?);

        let mut check = self.grpc_call("antifraud", &hosts[1]);
        check.options = check.options.sla(t.duration(400));
        if s == Scenario::RetryStorm {
            check.attempts = 3;
            check.forward_full_remaining = true;
        }
        let mut settle = self.call("settlement", &hosts[0], "/settle");
        settle.options = settle.options.sla(t.duration(1000));
        let pix = Relay {
            hop: self.hop("pix-api", knobs),
            calls: vec![check, settle],
            client: client()?,
        };
        let layer = BudgetLayer::new().default_budget(t.duration(1200));
        hosts.push(relay(endpoint, pix, "/pay", layer)?);
        Ok("/pay")
    }

    /// gateway (edge, 2 s) -> orders (4 workers, 300 ms per item, a queue of 20).
    fn start_queue(
        &self,
        endpoint: &str,
        knobs: &Latencies,
        hosts: &mut Vec<ServiceHost>,
    ) -> Result<&'static str, DemoError> {
        let t = self.timing;
        let checked = self.scenario != Scenario::NoDequeueCheck;
        let mut orders = self.hop("orders", knobs);
        // Without the dequeue check, the handler trusts the queue and does not look either.
        orders.respects_deadline = checked;
        // Callers cannot take an item back out of this queue (as with most real queues: a
        // broker, a channel feeding a worker pool): the dequeue check is the only protection.
        let queue = DeadlineQueueLayer::new(4, 20)
            .check_at_dequeue(checked)
            .drop_cancelled(false);
        let layer = BudgetLayer::new().cancel_on_disconnect(false);
        let name = orders.name;
        hosts.push(ServiceHost::start(name, endpoint, move |_stop| {
            Router::new()
                .route("/orders", get(work_only))
                .with_state(orders)
                .layer(queue)
                .layer(layer)
        })?);

        let gateway = Relay {
            hop: self.hop("gateway", knobs),
            calls: vec![self.call("orders", &hosts[0], "/orders")],
            client: client()?,
        };
        let layer = BudgetLayer::new().default_budget(t.duration(2000));
        hosts.push(relay(endpoint, gateway, "/order", layer)?);
        Ok("/order")
    }

    /// gateway (edge, 1 s) -> bff -> orders -> inventory, each doing local work first.
    fn start_chain(
        &self,
        endpoint: &str,
        knobs: &Latencies,
        hosts: &mut Vec<ServiceHost>,
    ) -> Result<&'static str, DemoError> {
        let t = self.timing;
        let s = self.scenario;
        // The inner services run their work to the end even when the caller hangs up (as most
        // stacks do): only the budget they received tells them when to stop.
        let inner = || BudgetLayer::new().cancel_on_disconnect(false);

        hosts.push(leaf(
            endpoint,
            self.hop("inventory", knobs),
            "/reserve",
            inner(),
        )?);

        let orders = Relay {
            hop: self.hop("orders", knobs),
            calls: vec![self.call("inventory", &hosts[0], "/reserve")],
            client: client()?,
        };
        hosts.push(relay(endpoint, orders, "/orders", inner())?);

        let mut to_orders = self.call("orders", &hosts[1], "/orders");
        to_orders.options = match s {
            Scenario::FixedTimeout => to_orders.options.forward(Forward::Fixed(t.duration(3000))),
            Scenario::DropHeader => to_orders.options.forward(Forward::Nothing),
            _ => to_orders.options,
        };
        let bff = Relay {
            hop: self.hop("bff", knobs),
            calls: vec![to_orders],
            client: client()?,
        };
        hosts.push(relay(endpoint, bff, "/checkout", BudgetLayer::new())?);

        let gateway = Relay {
            hop: self.hop("gateway", knobs),
            calls: vec![self.call("bff", &hosts[2], "/checkout")],
            client: client()?,
        };
        let layer = BudgetLayer::new().default_budget(t.duration(1000));
        hosts.push(relay(endpoint, gateway, "/order", layer)?);
        Ok("/order")
    }
}

fn client() -> Result<BudgetClient, DemoError> {
    let http = reqwest::Client::builder()
        .build()
        .map_err(|e| DemoError::Client(e.to_string()))?;
    Ok(BudgetClient::new(http))
}

/// A service that only does local work.
fn leaf(
    endpoint: &str,
    hop: Hop,
    path: &'static str,
    layer: BudgetLayer,
) -> Result<ServiceHost, DemoError> {
    let name = hop.name;
    ServiceHost::start(name, endpoint, move |_stop| {
        Router::new()
            .route(path, get(work_only))
            .with_state(hop)
            .layer(layer)
    })
}

/// A service that does local work, then its calls in order.
fn relay(
    endpoint: &str,
    relay: Relay,
    path: &'static str,
    layer: BudgetLayer,
) -> Result<ServiceHost, DemoError> {
    let name = relay.hop.name;
    ServiceHost::start(name, endpoint, move |_stop| {
        // gRPC channels are made here, on the service's own runtime, which drives them.
        Router::new()
            .route(path, get(work_then_call))
            .with_state(relay.connect())
            .layer(layer)
    })
}

/// One service's own work.
#[derive(Clone, Debug)]
pub(crate) struct Hop {
    name: &'static str,
    knobs: Latencies,
    /// Stop the work when the hop's deadline passes (the right thing).
    respects_deadline: bool,
}

impl Hop {
    /// The local work: as long as the service's latency knob says, inside its own span.
    pub(crate) async fn work(&self) -> Answer {
        let time = self.knobs.work(self.name);
        let deadline = Deadline::current().filter(|_| self.respects_deadline);
        if deadline.is_some_and(|d| d.is_expired()) {
            // Nothing left: do not start work nobody will wait for.
            return Err((
                StatusCode::GATEWAY_TIMEOUT,
                format!("{}: the budget ran out before local work", self.name),
            ));
        }
        let span = tracing::info_span!("work", otel.name = %format_args!("{} work", self.name));
        async move {
            match deadline {
                Some(deadline) => {
                    tokio::time::timeout_at(deadline.instant(), tokio::time::sleep(time))
                        .await
                        .map_err(|_| {
                            (
                                StatusCode::GATEWAY_TIMEOUT,
                                format!("{}: the budget ran out during local work", self.name),
                            )
                        })?;
                }
                None => tokio::time::sleep(time).await,
            }
            Ok(format!("{} done", self.name))
        }
        .instrument(span)
        .await
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
            let failed = match self.client.send(self.client.get(&call.url), &options).await {
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

/// The pause that lets one burst drain before the next (scaled).
pub(crate) fn burst_gap(timing: Timing) -> Duration {
    timing.duration(5000)
}

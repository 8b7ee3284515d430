//! budget-demo: real instrumented services on loopback that teach deadline budget propagation.
//!
//! Each scenario starts a few services, each on its own thread with its own tokio runtime,
//! listener on 127.0.0.1 and OpenTelemetry pipeline (its own `service.name`), exporting spans
//! over OTLP/gRPC; a load generator drives the edge. The services are built only with the
//! `deadline-budget` library's public API: they are the example a Rust user copies.

pub mod antifraud;
mod args;
pub mod console;
mod hop;
mod host;
mod latency;
mod load;
mod messaging;
pub mod otlp_load;
mod scenario;
mod telemetry;
mod topology;

pub use args::{DemoArgs, at_least_one, parse_positive_duration};
pub use deadline_budget::duration::parse_duration;
pub use host::STOP_WAIT;
pub use latency::Latencies;
pub use load::{LoadCounts, LoadPlan, LoadStats};
pub use scenario::{Scenario, Timing, Topology, UnknownScenario};
pub use telemetry::{ExportCounts, ExportSnapshot};
pub use topology::DEFAULT_CLOCK_SKEW_MS;

/// What can go wrong starting or steering the demo.
#[derive(Debug, thiserror::Error)]
pub enum DemoError {
    /// A socket, thread or runtime could not be created.
    #[error("demo: {0}")]
    Io(#[from] std::io::Error),
    /// A service's OTLP exporter could not be built.
    #[error("service {service}: cannot build the OTLP exporter: {message}")]
    Telemetry {
        /// The service.
        service: String,
        /// What the exporter said.
        message: String,
    },
    /// An HTTP client could not be built.
    #[error("demo: cannot build an HTTP client: {0}")]
    Client(String),
    /// A service thread ended before it was listening.
    #[error("service {0} stopped while starting")]
    ServiceDied(&'static str),
    /// `--clock-skew` given for a run of one scenario that has no skewed clock.
    #[error(
        "--clock-skew sets ledger's clock in absolute-deadline, and scenario {scenario} has no such clock: add --scenario absolute-deadline, or drop --clock-skew"
    )]
    ClockSkewUnused {
        /// The scenario that runs.
        scenario: Scenario,
    },
    /// `set_latency` named a service this scenario does not run.
    #[error("no service {service:?} in this scenario; it runs: {running}")]
    UnknownService {
        /// The name asked for.
        service: String,
        /// The services that run.
        running: String,
    },
}

use std::net::SocketAddr;

use host::ServiceHost;
use load::Load;

/// Everything a demo run needs.
#[derive(Clone, Debug, PartialEq)]
pub struct DemoConfig {
    /// The scenario to run.
    pub scenario: Scenario,
    /// Run its cured variant: the same services with the mistake fixed.
    pub cure: bool,
    /// `absolute-deadline`: how far ledger's clock runs ahead in ms (negative: behind);
    /// `None` for the scenario's own -1500.
    pub clock_skew_ms: Option<i64>,
    /// Where every service exports its spans over OTLP/gRPC (`http://host:port`).
    pub otlp_endpoint: String,
    /// The traffic; its `burst` is ignored (the scenario decides it: `burst` sends 40 at once).
    pub load: LoadPlan,
    /// Scales every budget, SLA and work time (1.0: the workshop's figures).
    pub timing: Timing,
    /// Work times to set at start, overriding the scenario's own: (service name, ms), taken
    /// as given (not scaled by `timing`).
    pub latencies: Vec<(String, u64)>,
}

impl DemoConfig {
    /// A scenario with the workshop's figures and default traffic (about 3 requests a second,
    /// unbounded), exporting to `otlp_endpoint`.
    pub fn new(scenario: Scenario, otlp_endpoint: impl Into<String>) -> Self {
        Self {
            scenario,
            cure: false,
            clock_skew_ms: None,
            otlp_endpoint: otlp_endpoint.into(),
            load: LoadPlan::default(),
            timing: Timing::default(),
            latencies: Vec::new(),
        }
    }

    /// Refuses `--clock-skew` for a run that stays on one scenario (`--check`, `budget-demo`)
    /// other than `absolute-deadline`, the only one whose clocks it moves: it was accepted
    /// and did nothing. The screen, which can switch to `absolute-deadline`, keeps it.
    pub fn check_clock_skew(&self) -> Result<(), DemoError> {
        if self.clock_skew_ms.is_some() && self.scenario != Scenario::AbsoluteDeadline {
            return Err(DemoError::ClockSkewUnused {
                scenario: self.scenario,
            });
        }
        Ok(())
    }

    /// Refuses a work time set for a service the scenario does not run (a typo, or a service
    /// of another scenario), naming the ones it runs. [`Demo::start`] checks it too.
    pub fn check_latencies(&self) -> Result<(), DemoError> {
        let knobs = topology::Blueprint::new(self).latencies();
        match self
            .latencies
            .iter()
            .find(|(service, _)| knobs.get(service).is_none())
        {
            Some((service, _)) => Err(DemoError::UnknownService {
                service: service.clone(),
                running: knobs
                    .snapshot()
                    .iter()
                    .map(|(name, _)| *name)
                    .collect::<Vec<_>>()
                    .join(", "),
            }),
            None => Ok(()),
        }
    }
}

/// One running service, for display.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServiceInfo {
    /// Its `service.name`.
    pub name: &'static str,
    /// Where it listens (127.0.0.1).
    pub addr: SocketAddr,
    /// Its current local work time, in ms (already scaled).
    pub latency_ms: u64,
}

/// The entry point: `Demo::start(config).await` runs a scenario until `shutdown`.
#[derive(Debug)]
pub struct Demo;

impl Demo {
    /// Every scenario, in the order the workshop teaches them.
    pub fn scenarios() -> &'static [Scenario] {
        &Scenario::ALL
    }

    /// Start the scenario's services and its load. Returns once every service listens.
    pub async fn start(config: DemoConfig) -> Result<DemoHandle, DemoError> {
        let exports = ExportCounts::default();
        let running = Running::start(config.clone(), &exports).await?;
        Ok(DemoHandle {
            config,
            running,
            exports,
        })
    }
}

/// A running demo: steer it (latency, scenario) and stop it.
#[derive(Debug)]
pub struct DemoHandle {
    config: DemoConfig,
    running: Running,
    exports: ExportCounts,
}

impl DemoHandle {
    /// How the services' span exports go, over every scenario this handle runs (a run whose
    /// endpoint has nothing listening fails every export). Still counts the flush of
    /// [`DemoHandle::shutdown`].
    pub fn exports(&self) -> ExportCounts {
        self.exports.clone()
    }

    /// The scenario running now.
    pub fn scenario(&self) -> Scenario {
        self.config.scenario
    }

    /// Whether the cured variant runs.
    pub fn cured(&self) -> bool {
        self.config.cure
    }

    /// Its one-line lesson (the cured variant's when cured), for the screen.
    pub fn lesson(&self) -> &'static str {
        if self.config.cure {
            self.config.scenario.cured_lesson()
        } else {
            self.config.scenario.lesson()
        }
    }

    /// The running services, edge first.
    pub fn services(&self) -> Vec<ServiceInfo> {
        self.running
            .services
            .iter()
            .map(|s| ServiceInfo {
                name: s.name(),
                addr: s.addr(),
                latency_ms: self.running.latencies.get(s.name()).unwrap_or(0),
            })
            .collect()
    }

    /// The URL the load generator calls (the edge service; the first of its paths when it
    /// calls several in turn).
    pub fn edge_url(&self) -> String {
        self.running.edge_url.clone()
    }

    /// The latency knobs (share them with a screen: changes apply to the next piece of work).
    pub fn latencies(&self) -> Latencies {
        self.running.latencies.clone()
    }

    /// Set the local work time of `service` to `ms` (not scaled: this is what the service does
    /// from now on).
    pub fn set_latency(&self, service: &str, ms: u64) -> Result<(), DemoError> {
        if self.running.latencies.set(service, ms) {
            Ok(())
        } else {
            Err(DemoError::UnknownService {
                service: service.to_owned(),
                running: self
                    .running
                    .latencies
                    .snapshot()
                    .iter()
                    .map(|(name, _)| *name)
                    .collect::<Vec<_>>()
                    .join(", "),
            })
        }
    }

    /// What the load generator has seen so far.
    pub fn load_counts(&self) -> LoadCounts {
        self.running.load.stats().counts()
    }

    /// Wait until the load generator sent every request and got every answer (never, for
    /// unbounded load: race it with a timer or a signal).
    pub async fn load_finished(&self) {
        self.running.load.finished().await;
    }

    /// Stop the current scenario (as `shutdown` does) and start another on the same endpoint
    /// with the same traffic settings.
    pub async fn switch_scenario(&mut self, scenario: Scenario) -> Result<(), DemoError> {
        self.restart(scenario, false).await
    }

    /// [`DemoHandle::switch_scenario`], choosing the broken or the cured variant.
    pub async fn restart(&mut self, scenario: Scenario, cure: bool) -> Result<(), DemoError> {
        let mut config = self.config.clone();
        config.scenario = scenario;
        config.cure = cure;
        config.latencies.clear();
        let next = Running::start(config.clone(), &self.exports).await?;
        let previous = std::mem::replace(&mut self.running, next);
        previous.stop().await;
        self.config = config;
        Ok(())
    }

    /// Stop the load, stop every service (listeners closed, in-flight requests given a short
    /// drain), flush every exporter and join every thread.
    pub async fn shutdown(self) {
        self.running.stop().await;
    }
}

#[derive(Debug)]
struct Running {
    services: Vec<ServiceHost>,
    load: Load,
    latencies: Latencies,
    edge_url: String,
}

impl Running {
    async fn start(config: DemoConfig, exports: &ExportCounts) -> Result<Self, DemoError> {
        config.check_latencies()?;
        let blueprint = topology::Blueprint::new(&config);
        let latencies = blueprint.latencies();
        for (service, ms) in &config.latencies {
            latencies.set(service, *ms);
        }
        let endpoint = telemetry::Export {
            endpoint: endpoint_url(&config.otlp_endpoint),
            counts: exports.clone(),
        };
        let knobs = latencies.clone();
        // Starting a service waits (briefly, on a std channel) for its thread to listen.
        let started = tokio::task::spawn_blocking(move || blueprint.start(&endpoint, &knobs))
            .await
            .map_err(|e| DemoError::Io(std::io::Error::other(e)))??;
        let services = started.hosts;
        let edge_urls: Vec<String> = started
            .edge_paths
            .iter()
            .map(|path| format!("{}{path}", services[0].url()))
            .collect();
        let edge_url = edge_urls.first().cloned().unwrap_or_default();
        let mut plan = config.load.clone();
        if plan.scenario_rate {
            plan.rate = topology::default_rate(config.scenario).unwrap_or(plan.rate);
        }
        plan.burst = topology::burst_size(config.scenario);
        if plan.burst > 1 {
            // A burst is followed by a pause long enough for the queue to drain.
            let gap = topology::burst_gap(config.timing).as_secs_f64();
            plan.rate = plan.rate.min(1.0 / gap);
        }
        let load = match Load::start(edge_urls, plan) {
            Ok(load) => load,
            Err(e) => {
                stop_services(services).await;
                return Err(e);
            }
        };
        Ok(Self {
            services,
            load,
            latencies,
            edge_url,
        })
    }

    async fn stop(self) {
        let Running { services, load, .. } = self;
        let _ = tokio::task::spawn_blocking(move || load.join()).await;
        stop_services(services).await;
    }
}

async fn stop_services(services: Vec<ServiceHost>) {
    // Signal all first, so they drain in parallel, then join each (flushing its exporter).
    for service in &services {
        service.signal_stop();
    }
    let _ = tokio::task::spawn_blocking(move || {
        for service in services {
            service.join();
        }
    })
    .await;
}

/// Checks an OTLP/gRPC endpoint as people type it: a URL (`http://127.0.0.1:4317`,
/// `https://collector:4317`) or an address `HOST:PORT`; returns it as given. `notaurl` (no
/// scheme, no port) is refused rather than dialled as `http://notaurl:80`.
pub fn parse_endpoint(text: &str) -> Result<String, String> {
    let expected = "expected a URL such as http://127.0.0.1:4317, or HOST:PORT";
    let text = text.trim();
    let url = if text.contains("://") {
        text.to_owned()
    } else {
        format!("http://{text}")
    };
    let uri: http::Uri = url
        .parse()
        .map_err(|_| format!("{expected}; got {text:?}"))?;
    let scheme_ok = matches!(uri.scheme_str(), Some("http" | "https"));
    let host_ok = uri.host().is_some_and(|h| !h.is_empty());
    let port_ok = text.contains("://") || uri.port().is_some();
    if scheme_ok && host_ok && port_ok {
        Ok(text.to_owned())
    } else {
        Err(format!("{expected}; got {text:?}"))
    }
}

/// The endpoint as a URL: `127.0.0.1:4317` becomes `http://127.0.0.1:4317` (the exporter needs
/// a scheme; a bare address is what people type).
fn endpoint_url(endpoint: &str) -> String {
    let endpoint = endpoint.trim().trim_end_matches('/');
    if endpoint.contains("://") {
        endpoint.to_owned()
    } else {
        format!("http://{endpoint}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_endpoint_is_a_url_or_host_and_port() {
        for good in [
            "127.0.0.1:4317",
            "http://127.0.0.1:4317",
            "https://collector:4317/",
            "http://collector",
            "localhost:4317",
        ] {
            assert_eq!(parse_endpoint(good).as_deref(), Ok(good), "{good}");
        }
        for bad in ["notaurl", "", "ftp://x:1", "http://", "127.0.0.1:port"] {
            let error = parse_endpoint(bad).unwrap_err();
            assert!(error.contains("http://127.0.0.1:4317"), "{bad}: {error}");
        }
    }

    #[test]
    fn a_bare_address_gets_a_scheme() {
        assert_eq!(endpoint_url("127.0.0.1:4317"), "http://127.0.0.1:4317");
        assert_eq!(
            endpoint_url("http://127.0.0.1:4317/"),
            "http://127.0.0.1:4317"
        );
        assert_eq!(
            endpoint_url("https://collector:4317"),
            "https://collector:4317"
        );
    }

    #[test]
    fn the_handle_and_knobs_can_move_to_another_thread() {
        fn shareable<T: Send + Sync>() {}
        shareable::<DemoHandle>();
        shareable::<Latencies>();
        shareable::<LoadStats>();
    }
}

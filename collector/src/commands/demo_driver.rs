//! The task that owns the running demo ([`Driver`]): the screen's demo keys send it orders
//! (start, switch scenario, cure) and read a shared [`Snapshot`] of what runs; latency changes
//! go straight to the services' shared knobs. When the screen closes, the driver stops the
//! services and joins their threads, so no process or port is left over.

use std::sync::{Arc, Mutex, MutexGuard};

use budget_demo::{Demo, DemoConfig, DemoHandle, Latencies, Scenario, ServiceInfo};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// What the driver is asked to do.
#[derive(Debug)]
pub(super) enum Order {
    /// Start the configured scenario (from the live screen's empty state).
    Start,
    /// Run this scenario (cured or not), then set these work times (ms, as given).
    Switch(Scenario, Vec<(&'static str, u64)>, bool),
}

/// What runs now, as the screen reads it (never blocking: the driver holds the lock only to
/// copy into it).
#[derive(Debug, Default)]
pub(super) struct Snapshot {
    /// The scenario running, once started.
    pub(super) scenario: Option<Scenario>,
    /// Whether its cured variant runs.
    pub(super) cure: bool,
    /// Its services, edge first.
    pub(super) services: Vec<ServiceInfo>,
    /// Their work-time knobs.
    pub(super) latencies: Option<Latencies>,
    /// Counts starts and switches, so the screen notices a new set of services.
    pub(super) published: u64,
    /// Counts scenario switches (and workshop steps), bumped when one begins: the screen then
    /// starts over with an empty store.
    pub(super) switches: u64,
    /// An order in progress: starting (`false`) or switching to (`true`) this scenario.
    pub(super) busy: Option<(bool, Scenario, bool)>,
    /// The last order that failed, in words.
    pub(super) error: Option<String>,
}

/// The screen's side of the driver.
#[derive(Clone, Debug)]
pub(super) struct Link {
    pub(super) orders: mpsc::Sender<Order>,
    pub(super) snapshot: Arc<Mutex<Snapshot>>,
}

impl Link {
    pub(super) fn snapshot(&self) -> MutexGuard<'_, Snapshot> {
        self.snapshot
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    pub(super) fn send(&self, order: Order) {
        if self.orders.try_send(order).is_err() {
            self.snapshot().error = Some("too many keys at once: try again".into());
        }
    }
}

/// The task that owns the running demo.
#[derive(Debug)]
pub struct Driver {
    pub(super) link: Link,
    stop: CancellationToken,
    task: JoinHandle<()>,
}

impl Driver {
    /// Takes over `handle` (or starts `config` on [`Order::Start`] when there is none).
    pub(super) fn spawn(handle: Option<DemoHandle>, config: DemoConfig) -> Self {
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

    pub(super) fn link(&self) -> Link {
        self.link.clone()
    }

    /// Stops the services (after an order in progress finishes) and waits until every thread
    /// is joined and every port closed.
    pub async fn stop(self) {
        if self.link.snapshot().scenario.is_some() {
            // The screen is gone; the drain of work in flight can take seconds (slow-dependency's
            // outlived work): say how long at most, so it does not look hung.
            crate::stderr_line!(
                "budget-top: stopping the demo services (up to {}: letting work in flight end, then flushing its spans)...",
                deadline_budget::duration::format_duration(budget_demo::STOP_WAIT)
            );
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

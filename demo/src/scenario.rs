//! The scenarios: which services run, how each one is (mis)configured, what traffic drives it,
//! and the one-line lesson the screen shows.
//!
//! Every figure here is the workshop's real one; [`Timing`] scales them all at once so tests
//! can run the same scenario faster.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use deadline_budget::analysis::FindingKind;

/// A demo scenario, selected with `--scenario NAME`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, clap::ValueEnum)]
#[value(rename_all = "kebab-case")]
pub enum Scenario {
    /// Everything right: the payment chain forwards what remains at each hop.
    Propagate,
    /// payments turns slow and orders calls it with no timeout: its pool of workers ends up
    /// stuck waiting, and the requests that never touch payments queue behind them.
    SlowDependency,
    /// bff forwards a fixed 3 s instead of what remains.
    FixedTimeout,
    /// bff forwards no budget at all.
    DropHeader,
    /// storefront sends an absolute deadline; ledger's clock is off.
    AbsoluteDeadline,
    /// A proxy and an app with fixed timeouts of their own, and no budget between them.
    ProxyTimeouts,
    /// settlement keeps working after its caller stopped waiting.
    NoCancel,
    /// orders takes queued items without checking their deadline.
    NoDequeueCheck,
    /// 40 simultaneous requests against 4 workers and a queue of 20.
    Burst,
    /// Jobs on a message queue carry their deadline; a slow consumer runs them late.
    MessageDeadline,
    /// pix-api retries antifraud, forwarding the full budget on each attempt.
    RetryStorm,
    /// bff retries orders and orders retries inventory: the attempts multiply.
    RetryLayers,
}

/// The shape of the services a scenario runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Topology {
    /// pix-api (edge, 1200 ms) calls antifraud (SLA 400 ms), then settlement (SLA 1 s).
    Payment,
    /// gateway (edge, 2 s) calls orders: 4 workers, 350 ms per item, a queue of 20.
    Queue,
    /// gateway calls bff calls orders calls inventory, each doing local work first.
    Chain,
    /// storefront (edge, 2 s) calls ledger with an absolute deadline.
    Ledger,
    /// proxy (1 s timeout) calls app, which queries its database, then calls payments.
    Proxy,
    /// api (edge, 2 s) puts a job on a queue; worker takes one job at a time.
    Jobs,
    /// gateway (edge, 1 s) calls orders' `/checkout` (which calls payments) and `/catalog`
    /// (which calls nothing), both served by one pool of 4 workers.
    Shop,
}

impl Scenario {
    /// Every scenario, in the order the workshop teaches them (the screen's digit keys 1-9 and
    /// 0 follow it, then `!` and `@`, shift 1 and 2, for the eleventh and twelfth).
    pub const ALL: [Scenario; 12] = [
        Scenario::Propagate,
        Scenario::SlowDependency,
        Scenario::FixedTimeout,
        Scenario::DropHeader,
        Scenario::AbsoluteDeadline,
        Scenario::ProxyTimeouts,
        Scenario::NoCancel,
        Scenario::NoDequeueCheck,
        Scenario::Burst,
        Scenario::MessageDeadline,
        Scenario::RetryStorm,
        Scenario::RetryLayers,
    ];

    /// The scenario a run without `--scenario` starts with: the workshop's first one where
    /// something goes wrong within seconds, so the first screen a newcomer sees has a finding
    /// on it (`slow-dependency`'s show once the calls stuck on payments end, 40 s after it
    /// turns slow).
    pub const FIRST_BROKEN: Scenario = Scenario::FixedTimeout;

    /// The name used on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Scenario::Propagate => "propagate",
            Scenario::SlowDependency => "slow-dependency",
            Scenario::FixedTimeout => "fixed-timeout",
            Scenario::DropHeader => "drop-header",
            Scenario::AbsoluteDeadline => "absolute-deadline",
            Scenario::ProxyTimeouts => "proxy-timeouts",
            Scenario::NoCancel => "no-cancel",
            Scenario::NoDequeueCheck => "no-dequeue-check",
            Scenario::Burst => "burst",
            Scenario::MessageDeadline => "message-deadline",
            Scenario::RetryStorm => "retry-storm",
            Scenario::RetryLayers => "retry-layers",
        }
    }

    /// The one-line lesson shown on screen (with the workshop's figures).
    pub fn lesson(self) -> &'static str {
        match self {
            Scenario::Propagate => {
                "Each hop forwards what is left of its budget. One settlement in four is slow (1500 ms): cut when pix-api's budget runs out (504), not at its 1 s SLA; no work for a caller who has gone. Map: pix-api → settlement."
            }
            Scenario::SlowDependency => {
                "payments turns slow (80 ms, then 40 s) and orders calls it with no timeout: its 4 workers end up stuck waiting, and /catalog, which never calls payments, queues behind them (queue_pressure). Map: orders → payments."
            }
            Scenario::FixedTimeout => {
                "bff forwards a fixed 3 s instead of what remains: inventory works ~625 ms after the gateway gave up, orders waiting on it (budget_reset). On the Map: ✖ on bff → orders."
            }
            Scenario::DropHeader => {
                "bff calls orders without x-budget-ms: from there on no hop knows how long the caller will wait (budget_dropped). On the Map: ✖ on bff → orders, no budget."
            }
            Scenario::AbsoluteDeadline => {
                "storefront sends its deadline as a time of day (x-request-deadline) and ledger's clock runs 1.5 s behind: ledger believes it has 1.5 s more than storefront waits and works for nobody (clock_skew). Map: storefront → ledger."
            }
            Scenario::ProxyTimeouts => {
                "proxy gives up after 1 s (nginx's 10 s), app spends 950 ms in its database, then calls payments with a fixed 800 ms timeout: proxy answered 504 while payments works on and app waits (timeout_inverted). Map: app → payments."
            }
            Scenario::NoCancel => {
                "settlement keeps working after pix-api stopped waiting: the work is wasted and the capacity gone (orphaned_work). On the Map: pix-api → settlement, settlement hatched."
            }
            Scenario::NoDequeueCheck => {
                "orders takes queued items without checking their deadline: workers spend their time on answers nobody waits for (ran_after_expiry). On the Map: gateway → orders."
            }
            Scenario::Burst => {
                "40 requests at once, 4 workers, a queue of 20: shed what cannot fit (503), drop what expired in the queue (504), never run an expired item. ▲ queue_pressure (expected): waited over half its budget. Map: gateway → orders."
            }
            Scenario::MessageDeadline => {
                "api puts jobs on a queue with their deadline; worker takes 400 ms a job and bursts of 10 pile up: it runs jobs whose deadline has passed, for nobody (ran_after_expiry on its CONSUMER spans). Map: api → worker."
            }
            Scenario::RetryStorm => {
                "pix-api retries antifraud forwarding the full budget each time: together the attempts promise more than the caller has (retry_over_budget). On the Map: ▲ on pix-api → antifraud."
            }
            Scenario::RetryLayers => {
                "bff tries orders 3 times (800 ms each), orders tries slow inventory twice: one request calls inventory 6 times, and bff's attempts do not fit its 1 s (retry_amplified, retry_over_budget). Map: orders → inventory."
            }
        }
    }

    /// The lesson of the cured variant (`--cure`): what changed and what it shows now. The
    /// same as [`Scenario::lesson`] for a scenario that has no mistake to cure.
    pub fn cured_lesson(self) -> &'static str {
        match self {
            Scenario::Propagate | Scenario::Burst => self.lesson(),
            Scenario::SlowDependency => {
                "Cured: orders times out payments at 100 ms (p99.9 of its 80 ms) and forwards the budget: a slow payments costs a fast 504 on /checkout, the workers stay free, /catalog keeps answering."
            }
            Scenario::FixedTimeout => {
                "Cured: bff forwards what remains. orders and inventory stop when the gateway's budget runs out: a 504, and no work for nobody."
            }
            Scenario::DropHeader => {
                "Cured: bff forwards what remains in x-budget-ms, so orders and inventory know how long the gateway waits."
            }
            Scenario::AbsoluteDeadline => {
                "Cured: storefront sends x-budget-ms, a relative budget. ledger's clock is still 1.5 s off, but a relative budget needs no shared clock: ledger stops when storefront does."
            }
            Scenario::ProxyTimeouts => {
                "Cured: proxy sends its 1 s as a budget and app reads it. After 950 ms in the database only ~40 ms are left: app refuses the call to payments before opening a socket and answers 504 at once."
            }
            Scenario::NoCancel => {
                "Cured: settlement stops at its deadline and when pix-api hangs up. A slow settlement costs a 504, not work for nobody."
            }
            Scenario::NoDequeueCheck => {
                "Cured: orders checks each item's deadline as it leaves the queue: what expired while queued is dropped (504, shed_expired), never run."
            }
            Scenario::MessageDeadline => {
                "Cured: worker checks each job's deadline when it takes it and drops the expired ones (shed_expired): the backlog clears in half the time and no job runs for nobody."
            }
            Scenario::RetryStorm => {
                "Cured: each attempt forwards only its own timeout. Together the attempts never promise more than pix-api has left."
            }
            Scenario::RetryLayers => {
                "Cured: only orders retries, each attempt within what remains; bff makes one attempt. inventory gets at most 2 calls a request, and every attempt fits the budget."
            }
        }
    }

    /// Whether `--cure` changes anything: `propagate` and `burst` are already done right.
    pub fn has_cure(self) -> bool {
        !matches!(self, Scenario::Propagate | Scenario::Burst)
    }

    /// What the start-up line says after the scenario's name: ` (cured)` when `cure` changes
    /// it, and that it changes nothing for a scenario that is right already (it said
    /// `propagate (cured)`, as though there had been something to cure).
    pub fn cure_note(self, cure: bool) -> &'static str {
        match (cure, self.has_cure()) {
            (false, _) => "",
            (true, true) => " (cured)",
            (true, false) => " (right already: --cure changes nothing)",
        }
    }

    /// The finding kinds this scenario exists to show (empty for `propagate`: no findings).
    /// The first is the one the screen opens on.
    pub fn shows(self) -> &'static [FindingKind] {
        match self {
            Scenario::Propagate => &[],
            Scenario::SlowDependency => &[FindingKind::QueuePressure, FindingKind::OrphanedWork],
            Scenario::FixedTimeout => &[FindingKind::BudgetReset],
            Scenario::DropHeader => &[FindingKind::BudgetDropped],
            Scenario::AbsoluteDeadline => &[
                FindingKind::ClockSkew,
                FindingKind::BudgetReset,
                FindingKind::OrphanedWork,
            ],
            Scenario::ProxyTimeouts => &[FindingKind::TimeoutInverted, FindingKind::OrphanedWork],
            Scenario::NoDequeueCheck => &[FindingKind::RanAfterExpiry],
            Scenario::NoCancel => &[FindingKind::OrphanedWork],
            Scenario::Burst => &[FindingKind::ShedExpired, FindingKind::ShedFull],
            Scenario::MessageDeadline => &[FindingKind::RanAfterExpiry],
            Scenario::RetryStorm => &[FindingKind::RetryOverBudget],
            Scenario::RetryLayers => &[FindingKind::RetryAmplified, FindingKind::RetryOverBudget],
        }
    }

    /// The finding kinds a run shows, the first the one the screen opens on: [`Scenario::shows`],
    /// or for a cured run the right behaviour it shows instead (often nothing).
    pub fn focus(self, cure: bool) -> &'static [FindingKind] {
        if !cure || !self.has_cure() {
            return self.shows();
        }
        match self {
            Scenario::NoDequeueCheck => Scenario::Burst.shows(),
            Scenario::MessageDeadline => &[FindingKind::ShedExpired],
            _ => &[],
        }
    }

    /// The service whose work time the scenario is about: the one the screen's `+`/`-` knob
    /// starts on.
    pub fn slow_service(self) -> &'static str {
        match self {
            Scenario::Propagate | Scenario::NoCancel => "settlement",
            Scenario::RetryStorm => "antifraud",
            Scenario::SlowDependency => "payments",
            Scenario::Burst | Scenario::NoDequeueCheck => "orders",
            Scenario::FixedTimeout | Scenario::DropHeader | Scenario::RetryLayers => "inventory",
            Scenario::AbsoluteDeadline => "ledger",
            Scenario::ProxyTimeouts => "app",
            Scenario::MessageDeadline => "worker",
        }
    }

    /// The services it runs.
    pub fn topology(self) -> Topology {
        match self {
            Scenario::Propagate | Scenario::NoCancel | Scenario::RetryStorm => Topology::Payment,
            Scenario::Burst | Scenario::NoDequeueCheck => Topology::Queue,
            Scenario::FixedTimeout | Scenario::DropHeader | Scenario::RetryLayers => {
                Topology::Chain
            }
            Scenario::SlowDependency => Topology::Shop,
            Scenario::AbsoluteDeadline => Topology::Ledger,
            Scenario::ProxyTimeouts => Topology::Proxy,
            Scenario::MessageDeadline => Topology::Jobs,
        }
    }
}

impl fmt::Display for Scenario {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// An unknown scenario name.
#[derive(Debug, thiserror::Error)]
#[error("unknown scenario {0:?}; the scenarios are: {names}", names = scenario_names())]
pub struct UnknownScenario(pub String);

fn scenario_names() -> String {
    Scenario::ALL
        .iter()
        .map(|s| s.name())
        .collect::<Vec<_>>()
        .join(", ")
}

impl FromStr for Scenario {
    type Err = UnknownScenario;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Scenario::ALL
            .into_iter()
            .find(|scenario| scenario.name() == s)
            .ok_or_else(|| UnknownScenario(s.to_owned()))
    }
}

/// Scales every duration of a scenario: 1.0 is the workshop, smaller runs the same story faster.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Timing {
    scale: f64,
}

impl Default for Timing {
    fn default() -> Self {
        Self { scale: 1.0 }
    }
}

impl Timing {
    /// A time scale; values outside 0.05..=10 are clamped (below that, scheduling noise on a
    /// busy machine would be larger than the figures).
    pub fn new(scale: f64) -> Self {
        let scale = if scale.is_finite() { scale } else { 1.0 };
        Self {
            scale: scale.clamp(Self::MIN_SCALE, Self::MAX_SCALE),
        }
    }

    /// The smallest scale (a run 20 times faster than the workshop's figures).
    pub const MIN_SCALE: f64 = 0.05;
    /// The largest scale (10 times slower).
    pub const MAX_SCALE: f64 = 10.0;

    /// The scale factor.
    pub fn scale(self) -> f64 {
        self.scale
    }

    /// A workshop figure in ms, scaled.
    pub fn ms(self, workshop_ms: u64) -> u64 {
        (workshop_ms as f64 * self.scale).round() as u64
    }

    /// A workshop figure in ms, scaled, as a duration.
    pub fn duration(self, workshop_ms: u64) -> Duration {
        Duration::from_millis(self.ms(workshop_ms))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_scenario_round_trips_through_its_name() {
        for scenario in Scenario::ALL {
            assert_eq!(scenario.name().parse::<Scenario>().unwrap(), scenario);
            assert!(!scenario.lesson().is_empty());
        }
    }

    #[test]
    fn an_unknown_name_lists_the_real_ones() {
        let err = "retry".parse::<Scenario>().unwrap_err().to_string();
        assert!(err.contains("retry-storm"), "{err}");
        assert!(err.contains("propagate"), "{err}");
    }

    #[test]
    fn clap_accepts_the_same_names() {
        for scenario in Scenario::ALL {
            assert_eq!(
                <Scenario as clap::ValueEnum>::from_str(scenario.name(), false).unwrap(),
                scenario
            );
        }
    }

    #[test]
    fn every_lesson_fits_three_lines_of_an_80_column_screen() {
        for scenario in Scenario::ALL {
            for text in [scenario.lesson(), scenario.cured_lesson()] {
                assert!(text.chars().count() <= 230, "{scenario}: {text}");
            }
            assert_eq!(
                scenario.focus(false),
                scenario.shows(),
                "{scenario}: the broken run opens on what it shows"
            );
            for kind in scenario.focus(true) {
                assert!(
                    !scenario.has_cure() || !scenario.shows().contains(kind),
                    "{scenario}: its cure still shows {kind}"
                );
            }
        }
    }

    #[test]
    fn only_propagate_shows_nothing_wrong() {
        for scenario in Scenario::ALL {
            let errors = scenario
                .shows()
                .iter()
                .filter(|k| k.severity() == deadline_budget::analysis::Severity::Error)
                .count();
            match scenario {
                Scenario::Propagate
                | Scenario::Burst
                | Scenario::RetryStorm
                | Scenario::RetryLayers => {
                    assert_eq!(errors, 0, "{scenario}")
                }
                _ => assert!(errors > 0, "{scenario}"),
            }
        }
    }

    #[test]
    fn timing_scales_the_workshop_figures() {
        assert_eq!(Timing::default().ms(1200), 1200);
        assert_eq!(Timing::new(0.25).ms(1200), 300);
        assert_eq!(Timing::new(0.0).scale(), 0.05);
        assert_eq!(Timing::new(f64::NAN).scale(), 1.0);
    }
}

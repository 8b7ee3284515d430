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
    /// bff forwards a fixed 3 s instead of what remains.
    FixedTimeout,
    /// bff forwards no budget at all.
    DropHeader,
    /// orders takes queued items without checking their deadline.
    NoDequeueCheck,
    /// settlement keeps working after its caller stopped waiting.
    NoCancel,
    /// 40 simultaneous requests against 4 workers and a queue of 20.
    Burst,
    /// pix-api retries antifraud, forwarding the full budget on each attempt.
    RetryStorm,
}

/// The shape of the services a scenario runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Topology {
    /// pix-api (edge, 1200 ms) calls antifraud (SLA 400 ms), then settlement (SLA 1 s).
    Payment,
    /// gateway (edge, 2 s) calls orders: 4 workers, 300 ms per item, a queue of 20.
    Queue,
    /// gateway calls bff calls orders calls inventory, each doing local work first.
    Chain,
}

impl Scenario {
    /// Every scenario, in the order the workshop teaches them.
    pub const ALL: [Scenario; 7] = [
        Scenario::Propagate,
        Scenario::FixedTimeout,
        Scenario::DropHeader,
        Scenario::NoDequeueCheck,
        Scenario::NoCancel,
        Scenario::Burst,
        Scenario::RetryStorm,
    ];

    /// The name used on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Scenario::Propagate => "propagate",
            Scenario::FixedTimeout => "fixed-timeout",
            Scenario::DropHeader => "drop-header",
            Scenario::NoDequeueCheck => "no-dequeue-check",
            Scenario::NoCancel => "no-cancel",
            Scenario::Burst => "burst",
            Scenario::RetryStorm => "retry-storm",
        }
    }

    /// The one-line lesson shown on screen.
    pub fn lesson(self) -> &'static str {
        match self {
            Scenario::Propagate => {
                "Each hop forwards what is left of the caller's budget: a slow step is cut where it should be, and nobody works for a caller who has gone."
            }
            Scenario::FixedTimeout => {
                "bff forwards a fixed 3 s instead of what remains: orders and inventory keep working after the gateway gave up (budget_reset)."
            }
            Scenario::DropHeader => {
                "bff calls orders without x-budget-ms: from there on no hop knows how long the caller will wait (budget_dropped)."
            }
            Scenario::NoDequeueCheck => {
                "orders takes queued items without checking their deadline: workers spend their time on answers nobody waits for (ran_after_expiry)."
            }
            Scenario::NoCancel => {
                "settlement keeps working after pix-api stopped waiting: the work is wasted and the capacity gone (orphaned_work)."
            }
            Scenario::Burst => {
                "40 requests at once against 4 workers and a queue of 20: shed what cannot fit (503), drop what expired while queued (504), never run an expired item."
            }
            Scenario::RetryStorm => {
                "pix-api retries antifraud forwarding the full budget each time: together the attempts promise more than the caller has (retry_over_budget)."
            }
        }
    }

    /// The finding kinds this scenario exists to show (empty for `propagate`: no findings).
    pub fn shows(self) -> &'static [FindingKind] {
        match self {
            Scenario::Propagate => &[],
            Scenario::FixedTimeout => &[FindingKind::BudgetReset],
            Scenario::DropHeader => &[FindingKind::BudgetDropped],
            Scenario::NoDequeueCheck => &[FindingKind::RanAfterExpiry],
            Scenario::NoCancel => &[FindingKind::OrphanedWork],
            Scenario::Burst => &[FindingKind::ShedFull, FindingKind::ShedExpired],
            Scenario::RetryStorm => &[FindingKind::RetryOverBudget],
        }
    }

    /// The service whose work time the scenario is about: the one the screen's `+`/`-` knob
    /// starts on.
    pub fn slow_service(self) -> &'static str {
        match self {
            Scenario::Propagate | Scenario::NoCancel => "settlement",
            Scenario::RetryStorm => "antifraud",
            Scenario::Burst | Scenario::NoDequeueCheck => "orders",
            Scenario::FixedTimeout | Scenario::DropHeader => "inventory",
        }
    }

    /// The services it runs.
    pub fn topology(self) -> Topology {
        match self {
            Scenario::Propagate | Scenario::NoCancel | Scenario::RetryStorm => Topology::Payment,
            Scenario::Burst | Scenario::NoDequeueCheck => Topology::Queue,
            Scenario::FixedTimeout | Scenario::DropHeader => Topology::Chain,
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
            scale: scale.clamp(0.05, 10.0),
        }
    }

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
    fn only_propagate_shows_nothing_wrong() {
        for scenario in Scenario::ALL {
            let errors = scenario
                .shows()
                .iter()
                .filter(|k| k.severity() == deadline_budget::analysis::Severity::Error)
                .count();
            match scenario {
                Scenario::Propagate | Scenario::Burst | Scenario::RetryStorm => {
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

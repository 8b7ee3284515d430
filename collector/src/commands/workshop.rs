//! The demo's keys and status line on the screen ([`Controller`], the screen's `DemoControl`),
//! and the guided workshop (`--workshop`, and `demo` without a scenario): its steps, derived
//! from [`Scenario::ALL`], and what it says at each.
//!
//! Enters: the keys the screen hands over (digits, `c`, `[` `]`, `+` `-`, `w`). Leaves: orders to
//! the demo's driver (switch scenario, cure, slow a service) and the status line the screen
//! draws, read from the driver's snapshot.

use budget_demo::{Scenario, Timing};

use super::demo_driver::{Link, Order, Snapshot};
use crate::screen::{DemoControl, DemoStatus};

/// The scenario a digit key picks from [`Scenario::ALL`] (the teaching order): `1` the first,
/// `0` the tenth, then shift 1 and 2 (`!`, `@`) the eleventh and twelfth.
fn scenario_of_digit(key: char) -> Option<Scenario> {
    let index = match key {
        '!' => 10,
        '@' => 11,
        _ => match key.to_digit(10)? {
            0 => 9,
            d => d as usize - 1,
        },
    };
    Scenario::ALL.get(index).copied()
}

/// How much `+` and `-` change the selected service's work time.
pub const LATENCY_STEP_MS: u64 = 50;

/// The screen's demo keys and status line.
#[derive(Debug)]
pub(super) struct Controller {
    link: Link,
    /// The selected service (for `+`/`-`), by name, and the generation it was chosen in.
    selected: Option<(&'static str, u64)>,
    workshop: Option<Workshop>,
}

impl Controller {
    pub(super) fn new(link: Link, workshop: Option<Workshop>) -> Self {
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
                keys: keys_for(running, "1-9 0 ! @ scenario", "[ ] service  +/- latency"),
                ..DemoStatus::default()
            },
        };
        if cure && self.workshop.as_ref().is_some_and(Workshop::watching) {
            // The step's words are about the mistake; the cure has its own. Not once the next
            // step is announced: it starts broken, and its words say what is coming (they
            // read "next: drop-header (cured)" over the cured step's lesson).
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
            '0'..='9' | '!' | '@' => {
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

/// "switching to 4/12 drop-header…" while an order runs.
fn busy_label((switching, scenario, cure): (bool, Scenario, bool)) -> String {
    let verb = if switching {
        "switching to"
    } else {
        "starting"
    };
    format!("{verb} {}…", scenario_label(scenario, cure))
}

/// "4/12 drop-header" (", cured" when cured): the scenario's place in the teaching order
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

/// What the workshop says at one step, and the service it slows (if any).
#[derive(Debug)]
struct Words {
    /// A service's work time for this step, in workshop ms (scaled by `--time-scale`).
    latency: Option<(&'static str, u64)>,
    /// Shown before the step starts: what is about to happen.
    coming: &'static str,
    /// Shown while it runs: what to look at on the screen.
    watch: &'static str,
}

/// The workshop's steps of `scenario`, in order: one for each, two for `propagate` (then a slow
/// dependency). Figures are the workshop's (`--time-scale 1`). The order of the scenarios is
/// [`Scenario::ALL`]'s, and the match is exhaustive: a new scenario does not build until the
/// workshop says something about it.
fn words(scenario: Scenario) -> &'static [Words] {
    match scenario {
        Scenario::Propagate => &[
            Words {
                latency: None,
                coming: "First, propagation done right: pix-api gets 1200 ms and forwards only what is left to antifraud, then settlement.",
                watch: "No findings. One settlement in four is slow: its chain ends in a 504 at pix-api's deadline, cut by what remained.",
            },
            Words {
                latency: Some(("settlement", 1500)),
                coming: "Next, a slow dependency: settlement will take 1500 ms, far more than the ~900 ms left when pix-api calls it.",
                watch: "pix-api answers 504 at its deadline: settlement is cut at ~900 ms (what remained), not at its 1 s SLA. Still no errors.",
            },
        ],
        Scenario::SlowDependency => &[Words {
            latency: None,
            coming: "Next, slow is worse than down: payments answers in 80 ms, then in 40 s; orders calls it with no timeout.",
            watch: "orders' 4 workers wait on payments, /catalog queues behind them (queue_pressure); press Tab to the Map. c: 100 ms.",
        }],
        Scenario::FixedTimeout => &[Words {
            latency: None,
            coming: "Next, a reset: the gateway gives 1 s, but bff calls orders with a fixed 3 s timeout; inventory is slow (1500 ms).",
            watch: "budget_reset on bff's call: 3000 ms forwarded with ~950 left. Press Tab to the Map: ✖ on bff → orders.",
        }],
        Scenario::DropHeader => &[Words {
            latency: None,
            coming: "Next, a dropped budget: bff calls orders without x-budget-ms, like a proxy or client that loses the header.",
            watch: "budget_dropped on bff's call: press Tab to the Map, ✖ on bff → orders; Enter there shows its row in Edges.",
        }],
        Scenario::AbsoluteDeadline => &[Words {
            latency: None,
            coming: "Next, a deadline sent as a time of day (x-request-deadline), as many Java and Rails services do; ledger's clock is off.",
            watch: "clock_skew on ledger: its clock is 1.5 s behind, so it works ~500 ms after storefront gave up. c sends x-budget-ms.",
        }],
        Scenario::ProxyTimeouts => &[Words {
            latency: None,
            coming: "Next, fixed timeouts in layers: proxy waits 1 s, app spends 950 ms in its database, then calls with a fixed 800 ms.",
            watch: "timeout_inverted on app's call: 800 ms when proxy stops within ~50. c: app reads a budget and refuses the call.",
        }],
        Scenario::NoCancel => &[Words {
            latency: None,
            coming: "Next, work nobody waits for: settlement (1500 ms) ignores both its deadline and pix-api hanging up.",
            watch: "orphaned_work on settlement (once its late span arrives): ~600 ms per request after pix-api gave up; see wasted ms/s.",
        }],
        Scenario::NoDequeueCheck => &[Words {
            latency: None,
            coming: "Next, a queue: bursts of 40 hit orders (4 workers, queue of 20), which runs items without checking their deadline.",
            watch: "ran_after_expiry on orders: items started after their deadline. s s sorts by most waste; Tab Tab Tab: Services.",
        }],
        Scenario::Burst => &[Words {
            latency: None,
            coming: "Next, the same burst done right: orders rejects what cannot fit and checks each item's deadline when it takes it.",
            watch: "shed_full (503) and shed_expired (504): info, the right behaviour. ▲ queue_pressure: waited over half its budget.",
        }],
        Scenario::MessageDeadline => &[Words {
            latency: None,
            coming: "Next, a job queue: api puts jobs with their deadline on a queue; worker takes 400 ms a job and 10 arrive at once.",
            watch: "ran_after_expiry on worker's CONSUMER spans: jobs run after their deadline. c: worker drops the expired ones.",
        }],
        Scenario::RetryStorm => &[Words {
            latency: None,
            coming: "Next, a retry storm: antifraud is slow (600 ms) and pix-api retries it, forwarding all that remains each time.",
            watch: "retry_over_budget on pix-api's antifraud calls: together the attempts forwarded ~1900 ms with only ~1170 ms left.",
        }],
        Scenario::RetryLayers => &[Words {
            latency: None,
            coming: "Last, retries in layers: bff tries orders 3 times (800 ms each), orders tries inventory (500 ms) twice.",
            watch: "retry_amplified: inventory called 6 times a request; press Tab to the Map: orders → inventory. c: one layer retries.",
        }],
    }
}

/// One step of the workshop: a scenario (and maybe a slowed service), what the teacher says
/// before it starts, and what to point at once it runs.
#[derive(Clone, Copy, Debug)]
struct Step {
    scenario: Scenario,
    words: &'static Words,
}

impl Step {
    /// "propagate", or "propagate, slow settlement" for a step that slows a service.
    fn title(&self) -> String {
        match self.words.latency {
            Some((service, _)) => format!("{}, slow {service}", self.scenario),
            None => self.scenario.to_string(),
        }
    }
}

/// The workshop, in teaching order: the steps of each scenario of [`Scenario::ALL`].
fn steps() -> Vec<Step> {
    Scenario::ALL
        .into_iter()
        .flat_map(|scenario| {
            words(scenario)
                .iter()
                .map(move |words| Step { scenario, words })
        })
        .collect()
}

const WORKSHOP_DONE: &str = "That was every scenario. 1-9 0 ! @ runs one again, c cures it, +/- slow a service down, w starts over.";

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
pub(super) struct Workshop {
    steps: Vec<Step>,
    step: usize,
    phase: Phase,
    timing: Timing,
}

impl Workshop {
    /// At the first step of `scenario` (the first step when that is `propagate`, the default).
    pub(super) fn starting_at(scenario: Scenario, timing: Timing) -> Self {
        let steps = steps();
        Workshop {
            step: first_step_of(&steps, scenario),
            steps,
            phase: Phase::Watch,
            timing,
        }
    }

    /// The scenario of the current step.
    pub(super) fn running(&self) -> Scenario {
        self.steps[self.step].scenario
    }

    /// `w`: announce the next step, or start it. Returns what to run when a step starts.
    fn advance(&mut self) -> Option<(Scenario, Vec<(&'static str, u64)>)> {
        match self.phase {
            Phase::Watch if self.step + 1 < self.steps.len() => {
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
        self.step = first_step_of(&self.steps, scenario);
        self.phase = Phase::Watch;
        self.order()
    }

    /// The current step's scenario and work times, scaled.
    fn order(&self) -> (Scenario, Vec<(&'static str, u64)>) {
        let step = &self.steps[self.step];
        let latencies = step
            .words
            .latency
            .map(|(service, ms)| (service, self.timing.ms(ms)))
            .into_iter()
            .collect();
        (step.scenario, latencies)
    }

    /// Whether the current step runs (not yet announcing the next, nor done).
    fn watching(&self) -> bool {
        matches!(self.phase, Phase::Watch)
    }

    fn status(&self) -> DemoStatus {
        let n = self.steps.len();
        let step = &self.steps[self.step];
        match self.phase {
            Phase::Watch => DemoStatus {
                scenario: format!("step {}/{n} {}", self.step + 1, step.title()),
                lesson: step.words.watch.to_owned(),
                keys: keys_for(step.scenario, "w next  1-9 0 ! @ jump", "[ ] +/- latency"),
                ..DemoStatus::default()
            },
            Phase::Coming => {
                let next = &self.steps[self.step + 1];
                DemoStatus {
                    scenario: format!("step {}/{n} next: {}", self.step + 2, next.title()),
                    lesson: next.words.coming.to_owned(),
                    keys: "w start it  1-9 0 ! @ jump".to_owned(),
                    ..DemoStatus::default()
                }
            }
            Phase::Done => DemoStatus {
                scenario: format!("workshop done: {n} steps"),
                lesson: WORKSHOP_DONE.to_owned(),
                keys: "w start over  1-9 0 ! @ scenario  q quit".to_owned(),
                ..DemoStatus::default()
            },
        }
    }
}

fn first_step_of(steps: &[Step], scenario: Scenario) -> usize {
    steps
        .iter()
        .position(|s| s.scenario == scenario)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use budget_demo::{Demo, Latencies, ServiceInfo};
    use std::net::{Ipv4Addr, SocketAddr};
    use std::sync::{Arc, Mutex};
    use tokio::sync::mpsc;

    #[test]
    fn the_workshop_teaches_every_scenario_in_order() {
        let mut scenarios: Vec<Scenario> = steps().iter().map(|s| s.scenario).collect();
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
        assert_eq!(w.status().lesson, steps()[0].words.watch);
        // First w: the next step is announced, nothing switches yet.
        assert_eq!(w.advance(), None);
        assert_eq!(w.status().lesson, steps()[1].words.coming);
        assert_eq!(
            w.status().scenario,
            "step 2/13 next: propagate, slow settlement"
        );
        // Second w: it starts (here: same scenario, settlement slowed).
        assert_eq!(
            w.advance(),
            Some((Scenario::Propagate, vec![("settlement", 1500)]))
        );
        assert_eq!(w.status().lesson, steps()[1].words.watch);
        assert_eq!(w.advance(), None);
        assert_eq!(w.advance(), Some((Scenario::SlowDependency, vec![])));
        // Through to the end, then over.
        for _ in 0..(steps().len() - 3) * 2 {
            w.advance();
        }
        assert_eq!(w.running(), Scenario::RetryLayers);
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
        for step in steps() {
            for text in [step.words.coming, step.words.watch] {
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
        assert!(status.scenario.starts_with("1/12 propagate"), "{status:?}");
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
        assert!(control.key('7'));
        assert!(matches!(
            orders.try_recv(),
            Ok(Order::Switch(Scenario::NoCancel, _, false))
        ));
        assert!(control.key('0'), "0 is the tenth");
        assert!(matches!(
            orders.try_recv(),
            Ok(Order::Switch(Scenario::MessageDeadline, _, false))
        ));
        assert!(control.key('!'), "shift 1 is the eleventh");
        assert!(matches!(
            orders.try_recv(),
            Ok(Order::Switch(Scenario::RetryStorm, _, false))
        ));
        assert!(control.key('@'), "shift 2 is the twelfth");
        assert!(matches!(
            orders.try_recv(),
            Ok(Order::Switch(Scenario::RetryLayers, _, false))
        ));
        assert!(!control.key('c'), "propagate has nothing to cure");
        assert!(!control.key('w'), "w is the workshop's");
        assert!(!control.key('x'));
        link.snapshot().busy = Some((true, Scenario::NoCancel, false));
        let status = control.status();
        assert_eq!(status.scenario, "switching to 7/12 no-cancel…");
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
        assert_eq!(control.status().lesson, steps()[0].words.watch);
        assert!(control.key('w') && control.key('w'));
        assert_eq!(control.status().lesson, steps()[1].words.watch);
        assert!(control.key('w'));
        assert_eq!(control.status().lesson, steps()[2].words.coming);
        assert!(orders.try_recv().is_ok(), "step 2 slowed settlement");
        assert!(orders.try_recv().is_err(), "announcing switches nothing");
        assert!(
            control.key('n'),
            "n works too where the screen does not use it"
        );
        assert!(matches!(
            orders.try_recv(),
            Ok(Order::Switch(Scenario::SlowDependency, _, false))
        ));
        assert!(
            control
                .status()
                .scenario
                .starts_with("step 3/13 slow-dependency")
        );
    }

    #[test]
    fn the_next_step_is_announced_in_its_own_words_after_a_cured_one() {
        let (link, _orders) = link();
        let workshop = Workshop::starting_at(Scenario::FixedTimeout, Timing::default());
        let mut control = Controller::new(link.clone(), Some(workshop));
        {
            let mut s = link.snapshot();
            s.scenario = Some(Scenario::FixedTimeout);
            s.cure = true;
            s.published = 1;
        }
        let status = control.status();
        assert!(
            status.scenario.ends_with("fixed-timeout (cured)"),
            "{status:?}"
        );
        assert_eq!(status.lesson, Scenario::FixedTimeout.cured_lesson());
        // w announces drop-header, which starts broken: no "(cured)", its coming words.
        assert!(control.key('w'));
        let status = control.status();
        assert!(status.scenario.contains("next: drop-header"), "{status:?}");
        assert!(!status.scenario.contains("cured"), "{status:?}");
        let step = first_step_of(&steps(), Scenario::DropHeader);
        assert_eq!(status.lesson, steps()[step].words.coming);
    }
}

//! The command-line arguments of a demo run, shared by `budget-demo` and `budget-top demo`
//! (which flattens [`DemoArgs`] into its own subcommand).

use std::time::Duration;

use crate::{DemoConfig, LoadPlan, Scenario, Timing};

/// Options of a demo run.
#[derive(Clone, Debug, PartialEq, clap::Args)]
pub struct DemoArgs {
    /// The scenario to run [default: fixed-timeout, the first where something goes wrong; on
    /// the screen, the workshop from that step].
    #[arg(long, value_enum)]
    pub scenario: Option<Scenario>,
    /// Run the scenario with its mistake fixed, to see what the cure changes (propagate and
    /// burst are already right).
    #[arg(long)]
    pub cure: bool,
    /// absolute-deadline: how far ledger's clock runs ahead, in ms (negative: behind)
    /// [default: -1500]; with --check (and in budget-demo) refused for another scenario.
    #[arg(
        long,
        value_name = "MS",
        allow_negative_numbers = true,
        value_parser = parse_clock_skew
    )]
    pub clock_skew: Option<i64>,
    /// Requests per second sent to the edge service, 0.01 to 10000 [default: 3; slow-dependency
    /// 40] (no-dequeue-check and burst send 40 at once, message-deadline 10, every 5 s at most).
    #[arg(long, value_name = "R", value_parser = parse_rate)]
    pub rate: Option<f64>,
    /// Relative jitter of the gap between requests, 0 to 1.
    #[arg(long, default_value_t = 0.3, value_name = "F", value_parser = parse_jitter)]
    pub jitter: f64,
    /// Stop the load after this many requests, at least 1 (default: no limit).
    #[arg(long, value_name = "N", value_parser = at_least_one::<u64>)]
    pub requests: Option<u64>,
    /// Scale every budget, SLA and work time, 0.05 to 10 (1 = the workshop's figures; 0.25
    /// runs four times faster).
    #[arg(long, default_value_t = 1.0, value_name = "F", value_parser = parse_time_scale)]
    pub time_scale: f64,
    /// Set a service's local work time at start, in ms (repeatable): `--latency settlement=1500`;
    /// SERVICE is one of the scenario's services (another is refused, naming them).
    #[arg(long = "latency", value_name = "SERVICE=MS", value_parser = parse_latency)]
    pub latencies: Vec<(String, u64)>,
}

impl Default for DemoArgs {
    fn default() -> Self {
        Self {
            scenario: None,
            cure: false,
            clock_skew: None,
            rate: None,
            jitter: 0.3,
            requests: None,
            time_scale: 1.0,
            latencies: Vec::new(),
        }
    }
}

impl DemoArgs {
    /// The run these arguments describe, exporting to `otlp_endpoint`, sending load for at most
    /// `duration` (the `--for` of the caller).
    pub fn config(
        &self,
        otlp_endpoint: impl Into<String>,
        duration: Option<Duration>,
    ) -> DemoConfig {
        DemoConfig {
            scenario: self.scenario.unwrap_or(Scenario::FIRST_BROKEN),
            cure: self.cure,
            clock_skew_ms: self.clock_skew,
            otlp_endpoint: otlp_endpoint.into(),
            load: LoadPlan {
                rate: self.rate.unwrap_or(LoadPlan::default().rate),
                scenario_rate: self.rate.is_none(),
                jitter: self.jitter,
                requests: self.requests,
                duration,
                ..LoadPlan::default()
            },
            timing: Timing::new(self.time_scale),
            latencies: self.latencies.clone(),
        }
    }
}

/// A count that must be 1 or more: 0 would send or keep nothing.
pub fn at_least_one<T: std::str::FromStr + PartialEq + From<u8>>(text: &str) -> Result<T, String> {
    match text.trim().parse::<T>() {
        Ok(n) if n == T::from(0) => Err("must be at least 1".to_owned()),
        Ok(n) => Ok(n),
        Err(_) => Err(format!(
            "expected a whole number of at least 1, got {text:?}"
        )),
    }
}

/// A duration (`15s`, `500ms`, `2m`, `1h`, or a bare number of seconds) longer than zero: `--for 0s` would run nothing.
pub fn parse_positive_duration(text: &str) -> Result<Duration, String> {
    let duration = crate::parse_duration(text)?;
    if duration.is_zero() {
        Err(format!(
            "must be longer than 0 (e.g. 15s or 500ms), got {text:?}"
        ))
    } else {
        Ok(duration)
    }
}

/// A number in `low..=high`, or a sentence that says the range.
fn number_in(text: &str, low: f64, high: f64, what: &str) -> Result<f64, String> {
    let value: f64 = text
        .trim()
        .parse()
        .map_err(|_| format!("expected a number from {low} to {high}, got {text:?}"))?;
    if (low..=high).contains(&value) {
        Ok(value)
    } else {
        Err(format!("must be from {low} to {high} ({what})"))
    }
}

fn parse_rate(text: &str) -> Result<f64, String> {
    number_in(text, 0.01, 10_000.0, "requests per second")
}

fn parse_jitter(text: &str) -> Result<f64, String> {
    number_in(text, 0.0, 1.0, "a fraction of the gap between requests")
}

fn parse_clock_skew(text: &str) -> Result<i64, String> {
    text.trim()
        .parse()
        .map_err(|_| "must be whole milliseconds, e.g. 2000 ahead or -1500 behind".to_owned())
}

fn parse_time_scale(text: &str) -> Result<f64, String> {
    number_in(
        text,
        Timing::MIN_SCALE,
        Timing::MAX_SCALE,
        "1 is the workshop's figures, 0.5 twice as fast",
    )
}

fn parse_latency(text: &str) -> Result<(String, u64), String> {
    let (service, ms) = text
        .split_once('=')
        .ok_or_else(|| format!("expected SERVICE=MS, got {text:?}"))?;
    let ms = ms
        .trim()
        .trim_end_matches("ms")
        .parse::<u64>()
        .map_err(|_| format!("expected a number of ms after '=', got {ms:?}"))?;
    Ok((service.trim().to_owned(), ms))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        demo: DemoArgs,
    }

    #[test]
    fn defaults_are_the_workshop() {
        let cli = Cli::try_parse_from(["demo"]).unwrap();
        assert_eq!(cli.demo, DemoArgs::default());
        let config = cli.demo.config("http://127.0.0.1:4317", None);
        assert_eq!(config.load.rate, 3.0);
        // Nobody chose the rate: slow-dependency runs at its own 40 a second.
        assert!(config.load.scenario_rate);
        assert_eq!(
            crate::topology::default_rate(Scenario::SlowDependency),
            Some(40.0)
        );
        assert_eq!(crate::topology::default_rate(Scenario::FixedTimeout), None);
        let chosen = Cli::try_parse_from(["demo", "--rate", "5"]).unwrap();
        let config = chosen.demo.config("http://127.0.0.1:4317", None);
        assert_eq!((config.load.rate, config.load.scenario_rate), (5.0, false));
        let config = cli.demo.config("http://127.0.0.1:4317", None);
        assert_eq!(config.timing, Timing::default());
        assert_eq!(
            config.scenario,
            Scenario::FixedTimeout,
            "something goes wrong"
        );
        assert!(!config.cure);
    }

    #[test]
    fn scenario_and_latencies_parse() {
        let cli = Cli::try_parse_from([
            "demo",
            "--scenario",
            "no-cancel",
            "--latency",
            "settlement=1500",
            "--latency",
            "antifraud=90ms",
            "--requests",
            "5",
        ])
        .unwrap();
        assert_eq!(cli.demo.scenario, Some(Scenario::NoCancel));
        assert_eq!(
            cli.demo.latencies,
            vec![
                ("settlement".to_owned(), 1500),
                ("antifraud".to_owned(), 90)
            ]
        );
        assert_eq!(cli.demo.requests, Some(5));
        assert!(Cli::try_parse_from(["demo", "--latency", "settlement"]).is_err());
        let skewed = Cli::try_parse_from([
            "demo",
            "--scenario",
            "absolute-deadline",
            "--clock-skew",
            "-800",
            "--cure",
        ])
        .unwrap();
        let config = skewed.demo.config("http://127.0.0.1:4317", None);
        assert_eq!(config.clock_skew_ms, Some(-800));
        assert!(config.cure);
        assert!(Cli::try_parse_from(["demo", "--scenario", "nope"]).is_err());
    }
}

//! The command line (clap derive). `check` and `record` run here; the live screen (no
//! subcommand), `demo` and `replay` are dispatched from `main.rs`.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};
use deadline_budget::analysis::Severity;

use crate::ingest;
use crate::store;

/// A live terminal view of deadline budgets flowing through a chain of services.
#[derive(Debug, Parser)]
#[command(name = "budget-top", version, about)]
pub struct Cli {
    /// What to do; without one, the live screen.
    #[command(subcommand)]
    pub command: Option<Command>,
    /// Listening and retention options for the live screen.
    #[command(flatten)]
    pub listen: Listen,
    /// Chains held at most, counted in spans; the oldest chains go first.
    #[arg(long, global = true, default_value_t = store::DEFAULT_MAX_SPANS, value_name = "N")]
    pub max_spans: usize,
}

/// Where to receive OTLP.
#[derive(Clone, Debug, Args)]
pub struct Listen {
    /// OTLP/gRPC listen address (port 0 picks a free port).
    #[arg(long, value_name = "ADDR", default_value = ingest::DEFAULT_GRPC)]
    pub grpc: SocketAddr,
    /// OTLP/HTTP listen address (port 0 picks a free port).
    #[arg(long, value_name = "ADDR", default_value = ingest::DEFAULT_HTTP)]
    pub http: SocketAddr,
    /// Largest request body accepted, in bytes, before and after decompression.
    #[arg(long, value_name = "BYTES", default_value_t = ingest::DEFAULT_MAX_BODY)]
    pub max_body: usize,
}

impl Listen {
    /// The ingest configuration these flags describe.
    pub fn ingest_config(&self) -> ingest::IngestConfig {
        ingest::IngestConfig {
            grpc: Some(self.grpc),
            http: Some(self.http),
            max_body: self.max_body,
            ..ingest::IngestConfig::default()
        }
    }
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Analyse spans headlessly and report findings (for CI and scripts).
    Check(CheckArgs),
    /// Listen and write every export request received as one OTLP/JSON line.
    Record(RecordArgs),
    /// Play a recording into the live screen.
    Replay(ReplayArgs),
    /// Run the demo services and watch them live.
    Demo(DemoArgs),
}

/// `budget-top check`.
#[derive(Debug, Args)]
pub struct CheckArgs {
    /// Read OTLP/JSON lines from FILE (gzip or not; `-` for stdin) instead of listening.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["idle", "for_"])]
    pub input: Option<PathBuf>,
    /// Where to listen when there is no --input.
    #[command(flatten)]
    pub listen: Listen,
    /// Stop once spans have arrived and none came for D (e.g. 3s, 500ms).
    #[arg(long, value_name = "D", value_parser = parse_duration)]
    pub idle: Option<Duration>,
    /// Stop after listening for D.
    #[arg(long = "for", id = "for_", value_name = "D", value_parser = parse_duration)]
    pub for_: Option<Duration>,
    /// Report format on stdout.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
    /// Exit 1 when a finding reaches this severity.
    #[arg(long, value_enum, default_value_t = FailOn::Error)]
    pub fail_on: FailOn,
}

/// `budget-top record`.
#[derive(Debug, Args)]
pub struct RecordArgs {
    /// The file to write (created or truncated).
    #[arg(long, short, value_name = "FILE")]
    pub output: PathBuf,
    /// Where to listen.
    #[command(flatten)]
    pub listen: Listen,
}

/// `budget-top replay`.
#[derive(Debug, Args)]
pub struct ReplayArgs {
    /// A recording (OTLP/JSON lines, gzip or not).
    pub file: PathBuf,
    /// Play N times faster than recorded.
    #[arg(long, default_value_t = 1.0)]
    pub speed: f64,
}

/// `budget-top demo`: the demo engineer's arguments, passed through.
#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Arguments for the demo.
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    pub args: Vec<String>,
}

/// The check report's format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// A readable table.
    Text,
    /// The JSON report of CONVENTIONS section 4.
    Json,
}

/// `--fail-on`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum FailOn {
    /// Errors only.
    Error,
    /// Warnings and errors.
    Warning,
    /// Any finding.
    Info,
}

impl FailOn {
    /// The lowest severity that fails.
    pub fn severity(self) -> Severity {
        match self {
            FailOn::Error => Severity::Error,
            FailOn::Warning => Severity::Warning,
            FailOn::Info => Severity::Info,
        }
    }
}

/// `3s`, `500ms`, `2m`, `1h`, or a plain number of seconds (`1.5`).
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (number, unit) = s.split_at(split);
    let value: f64 = number
        .parse()
        .map_err(|_| format!("invalid duration {s:?}: expected e.g. 3s, 500ms, 2m"))?;
    let seconds = match unit.trim() {
        "" | "s" => value,
        "ms" => value / 1000.0,
        "m" => value * 60.0,
        "h" => value * 3600.0,
        other => {
            return Err(format!(
                "invalid duration unit {other:?} in {s:?}: use ms, s, m or h"
            ));
        }
    };
    Duration::try_from_secs_f64(seconds).map_err(|e| format!("invalid duration {s:?}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_with_units() {
        assert_eq!(parse_duration("3s"), Ok(Duration::from_secs(3)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("1.5"), Ok(Duration::from_millis(1500)));
        assert!(parse_duration("3x").is_err());
        assert!(parse_duration("").is_err());
    }

    #[test]
    fn check_parses_the_conventions_command_lines() {
        let cli = Cli::try_parse_from([
            "budget-top",
            "check",
            "--grpc",
            "127.0.0.1:0",
            "--http",
            "127.0.0.1:0",
            "--idle",
            "3s",
            "--format",
            "json",
            "--fail-on",
            "warning",
        ])
        .unwrap();
        let Some(Command::Check(args)) = cli.command else {
            panic!("not check");
        };
        assert_eq!(args.idle, Some(Duration::from_secs(3)));
        assert_eq!(args.format, Format::Json);
        assert_eq!(args.fail_on.severity(), Severity::Warning);
        assert!(
            Cli::try_parse_from(["budget-top", "check", "--input", "x", "--idle", "3s"]).is_err()
        );
    }
}

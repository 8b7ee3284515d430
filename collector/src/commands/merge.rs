//! `budget-top merge A.json B.json ...`: the JSON reports of several instances (the shards
//! behind a Collector's trace-ID routing) merged into the report one instance would have
//! written had it received everything (`CONVENTIONS.md` section 6): counts exact, percentiles
//! within the sketches' stated error, the findings list capped again at `--max-findings`.

use std::io::{IsTerminal as _, Write as _};
use std::path::Path;

use anyhow::Context as _;
use deadline_budget::analysis::Report;

use crate::cli::{FailOn, Format, MergeArgs};
use crate::report::{Context, html as report_html, json as report_json, text as report_text};
use crate::store::Store;

/// Reads every report, merges them, prints the merged report in `--format` (and writes
/// `--html`); returns the exit status as `check` does. An unreadable report is an error (exit
/// 2) that names the file.
pub fn run(args: &MergeArgs, max_findings: usize) -> anyhow::Result<u8> {
    let reports = args
        .reports
        .iter()
        .map(|path| read(path))
        .collect::<anyhow::Result<Vec<Report>>>()?;
    let report = Report::merge(&reports, max_findings);
    let context = Context {
        links: args.links.trace_url.as_ref(),
        ..Context::default()
    };
    let out = match args.format {
        Format::Json => report_json::render(&report, &context, Default::default())?,
        Format::Text => {
            let color = std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none();
            report_text::of_report(&report, &context, color)
        }
    };
    let mut stdout = std::io::stdout().lock();
    stdout
        .write_all(out.as_bytes())
        .and_then(|()| stdout.flush())
        .context("cannot write the report to stdout")?;
    let fail = FailOn::threshold(&args.fail_on);
    if let Some(path) = &args.html {
        // The reports carry no spans: the page has the figures and findings, no waterfalls.
        let page = report_html::render(&Store::new(1), &report, &context, fail);
        std::fs::write(path, page)
            .with_context(|| format!("cannot write the HTML report to {}", path.display()))?;
    }
    let empty = report.summary.traces == 0;
    if empty {
        crate::stderr_line!("warning: the reports hold no chain; the merged report covers nothing");
    }
    Ok(u8::from(
        report.fails(fail) || (empty && args.fail_on.contains(&FailOn::Empty)),
    ))
}

/// One report, as `check --format json` wrote it.
fn read(path: &Path) -> anyhow::Result<Report> {
    let file = std::fs::File::open(path)
        .with_context(|| format!("cannot open the report {}", path.display()))?;
    let reader = std::io::BufReader::new(file);
    serde_json::from_reader(reader).with_context(|| {
        format!(
            "{} is not a budget-top JSON report (check --format json)",
            path.display()
        )
    })
}

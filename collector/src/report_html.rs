//! `check --html FILE`: the report as one self-contained HTML page, for the people who were not
//! at the terminal (the pull request whose gate failed, the incident review, the workshop's
//! hand-out).
//!
//! In: the analysed [`Store`] and the [`Report`] that `check` prints from it, the ingest counts
//! when it listened, and `--fail-on`. Out: one string of HTML with everything inline (styles,
//! the waterfalls as SVG, a short script that only sorts the tables) under a
//! Content-Security-Policy that lets nothing load from anywhere: it reads offline, attached to a
//! CI run, and cannot call out. Without the script every word and number is still there.
//!
//! The page draws from the analysis only, as the screen's waterfall does: each row's findings,
//! `dead_ms` and `late_ms`, the findings' numbers, the edges' aggregates. It judges nothing
//! itself, so a mark never disagrees with the finding beside it. Every string a span sent goes
//! through [`span_text::for_report`](crate::span_text::for_report) (control, bidirectional and zero-width characters out, long
//! values cut) and is then escaped: a span named `<script>` is text.
//!
//! The page stays small whatever the input: it draws at most [`CHAINS_PER_KIND`] chains per
//! finding kind, [`ROWS_PER_CHAIN`] rows per chain and [`ATTRIBUTE_BYTES_PER_SPAN`] of
//! attributes per span, stops drawing once the chains take [`CHAIN_BYTES`], and lists
//! at most [`TABLE_ROWS`] edges and services. The page says so where it applies.

use std::fmt::{self, Display, Write as _};
use std::sync::Arc;

use deadline_budget::analysis::{
    BudgetSource, Chain, ChainAnalysis, ChainOutcome, Distribution, EdgeAggregate, Finding,
    FindingKind, Outcome, Report, Row, Severity, Span, SpanKind, TraceId,
};
use foldhash::{HashMap, HashMapExt as _};
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value::Value};

use crate::ingest::IngestCounts;
use crate::legend::{self, MARKS, MarkRole};
use crate::services::{ServiceStats, service_stats};
use crate::span_text::for_report;
use crate::store::Store;

/// Chains drawn for each finding kind: the worst ones.
pub const CHAINS_PER_KIND: usize = 3;
/// Rows drawn of one chain (rows with findings or work for nobody first, with the rows above
/// them).
pub const ROWS_PER_CHAIN: usize = 40;
/// Bytes of attributes shown for one span, escaped.
pub const ATTRIBUTE_BYTES_PER_SPAN: usize = 2048;
/// Once the chains on the page (their summaries, findings and waterfalls) take this many bytes,
/// the rest are named, not drawn. With the fixed parts and the two tables at their caps, the
/// page stays under 2 MB whatever spans it shows.
pub const CHAIN_BYTES: usize = 1_000_000;
/// Rows of the edges table and of the services table.
pub const TABLE_ROWS: usize = 200;
/// Findings listed under one chain.
pub const FINDINGS_PER_CHAIN: usize = 12;
/// Findings explained in one row's detail.
const FINDINGS_PER_ROW: usize = 4;
/// Characters of a service name in the tables (a span's strings elsewhere keep 200).
const TABLE_NAME_CHARS: usize = 80;

/// Width of a waterfall's timeline, in CSS pixels.
const TIMELINE_PX: f64 = 600.0;
/// Height of a waterfall row's drawing.
const ROW_PX: u32 = 18;
/// Deepest indentation of a row's label.
const MAX_INDENT: u32 = 12;

/// The script that sorts the tables (a click on a column head); the only script on the page,
/// allowed by its hash in the Content-Security-Policy. It marks the page `data-sortable` when it
/// ran, so a test can tell that the policy let it.
const SORT_SCRIPT: &str = r#"(function () {
  document.documentElement.dataset.sortable = "on";
  for (const table of document.querySelectorAll("table.sortable")) {
    const heads = table.tHead.rows[0].cells;
    for (let i = 0; i < heads.length; i++) {
      const th = heads[i];
      const button = document.createElement("button");
      button.type = "button";
      button.textContent = th.textContent;
      th.textContent = "";
      th.appendChild(button);
      button.addEventListener("click", function () {
        const up = th.getAttribute("aria-sort") !== "ascending";
        for (const h of heads) h.removeAttribute("aria-sort");
        th.setAttribute("aria-sort", up ? "ascending" : "descending");
        const key = function (row) {
          const cell = row.cells[i];
          return cell.dataset.v === undefined ? cell.textContent : Number(cell.dataset.v);
        };
        const body = table.tBodies[0];
        const rows = Array.from(body.rows);
        rows.sort(function (a, b) {
          const x = key(a), y = key(b);
          const c = typeof x === "number" && typeof y === "number" ? x - y : String(x).localeCompare(String(y));
          return up ? c : -c;
        });
        for (const row of rows) body.appendChild(row);
      });
    }
  }
})();"#;

/// `sha256-` and the base64 SHA-256 of [`SORT_SCRIPT`] (a unit test checks it).
const SORT_SCRIPT_HASH: &str = "sha256-hevUlbZxLIV9qEpd4jJ4T6K/AxB3I06Rf6CEO4uRLRs=";

/// Renders the page. `report` is what `store` reported (`Store::report`, which analysed every
/// chain); `ingest` the receivers' counts when `check` listened.
pub fn render(
    store: &Store,
    report: &Report,
    ingest: Option<&IngestCounts>,
    fail_on: Severity,
) -> String {
    let mut page = Page {
        out: String::with_capacity(256 * 1024),
        store,
        drawn: HashMap::new(),
        chain_bytes: 0,
        article_start: 0,
    };
    page.head(report, fail_on);
    page.gate(report, fail_on);
    page.summary(report, ingest);
    page.contents(report);
    page.legend();
    page.findings(report);
    page.edges();
    page.services();
    page.foot();
    page.out
}

struct Page<'a> {
    out: String,
    store: &'a Store,
    /// Chains drawn so far, with the kind they were drawn under.
    drawn: HashMap<TraceId, FindingKind>,
    /// Bytes the chains written before the current one take.
    chain_bytes: usize,
    /// Where the chain being written starts in `out`.
    article_start: usize,
}

/// Text for the page: escaped for an element or a quoted attribute.
struct Esc<'a>(&'a str);

impl Display for Esc<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut rest = self.0;
        while let Some(i) = rest.find(['&', '<', '>', '"', '\'']) {
            f.write_str(&rest[..i])?;
            f.write_str(match rest.as_bytes()[i] {
                b'&' => "&amp;",
                b'<' => "&lt;",
                b'>' => "&gt;",
                b'"' => "&quot;",
                _ => "&#39;",
            })?;
            rest = &rest[i + 1..];
        }
        f.write_str(rest)
    }
}

/// A string a span sent: cleaned as the text report cleans it, then escaped.
struct SpanText<'a>(&'a str);

impl Display for SpanText<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        Esc(&for_report(self.0)).fmt(f)
    }
}

/// A service name for a table: cleaned, cut shorter than elsewhere, escaped.
struct TableName<'a>(&'a str);

impl Display for TableName<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let clean = for_report(self.0);
        match clean.char_indices().nth(TABLE_NAME_CHARS) {
            Some((cut, _)) => write!(f, "{}…", Esc(&clean[..cut])),
            None => Esc(&clean).fmt(f),
        }
    }
}

/// A count with thousands separators: `12,345`.
fn count(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// A signed number with thousands separators: `-1,254`.
fn grouped(v: i64) -> String {
    let sign = if v < 0 { "-" } else { "" };
    format!("{sign}{}", count(v.unsigned_abs()))
}

/// Milliseconds with separators: `1,254 ms`, `-40 ms`.
fn ms(v: i64) -> String {
    format!("{} ms", grouped(v))
}

/// Milliseconds as the screen's axis shows them: `850ms`, `12.5s`, `3m20s`.
fn short_ms(v: i64) -> String {
    let a = v.unsigned_abs();
    let sign = if v < 0 { "-" } else { "" };
    if a < 10_000 {
        format!("{v}ms")
    } else if a < 100_000 {
        format!("{sign}{}.{}s", a / 1000, (a % 1000) / 100)
    } else {
        format!("{sign}{}m{:02}s", a / 60_000, (a % 60_000) / 1000)
    }
}

fn opt_ms(v: Option<i64>) -> String {
    v.map(ms).unwrap_or_else(|| "-".into())
}

/// A sortable cell's value: the number, or a value below every number when there is none.
fn sort_value(v: Option<i64>) -> i64 {
    v.unwrap_or(i64::MIN)
}

fn severity_glyph(s: Severity) -> &'static str {
    match s {
        Severity::Error => "✖",
        Severity::Warning => "▲",
        Severity::Info => "●",
    }
}

fn plural(n: u64, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{} {noun}s", count(n))
    }
}

/// The screen's compact milliseconds for the numbers column: plain digits unless large.
fn column_ms(v: i64) -> String {
    if v.abs() < 100_000 {
        v.to_string()
    } else {
        short_ms(v)
    }
}

impl Page<'_> {
    fn head(&mut self, report: &Report, fail_on: Severity) {
        let verdict = if report.fails(fail_on) {
            "failed, exit status 1"
        } else {
            "passed, exit status 0"
        };
        let _ = write!(
            self.out,
            r#"<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; script-src '{SORT_SCRIPT_HASH}'; base-uri 'none'; form-action 'none'">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="generator" content="budget-top {version}">
<title>budget-top check: {verdict}</title>
<style>{CSS}"#,
            version = env!("CARGO_PKG_VERSION"),
        );
        for depth in 1..=MAX_INDENT {
            let _ = write!(self.out, ".d{depth}{{padding-left:{depth}ch}}");
        }
        self.out.push_str("</style>\n</head>\n<body>\n");
        // The patterns every waterfall fills with: work for nobody is cross-hatched and queue
        // wait hatched, so neither needs its colour to be told apart from work.
        self.out.push_str(
            r##"<svg class="defs" aria-hidden="true" focusable="false"><defs>
<pattern id="p-queue" width="5" height="5" patternUnits="userSpaceOnUse" patternTransform="rotate(45)"><rect width="5" height="5" fill="#fefcbf"/><rect width="2" height="5" fill="#b7791f"/></pattern>
<pattern id="p-late" width="5" height="5" patternUnits="userSpaceOnUse"><rect width="5" height="5" fill="#c53030"/><path d="M0 0L5 5M5 0L0 5" stroke="#fff" stroke-width="1"/></pattern>
</defs></svg>
"##,
        );
    }

    /// What the gate decided, first.
    fn gate(&mut self, report: &Report, fail_on: Severity) {
        let failed = report.fails(fail_on);
        let reaching = report
            .findings
            .iter()
            .filter(|f| f.severity >= fail_on)
            .count() as u64;
        let below = report.findings.len() as u64 - reaching;
        let _ = write!(
            self.out,
            r#"<header class="gate {class}">
<h1>budget-top check</h1>
<p class="verdict" id="verdict"><span class="badge">{badge}</span> exit status <span id="exit-status">{status}</span>: "#,
            class = if failed { "fail" } else { "pass" },
            badge = if failed { "✖ FAILED" } else { "✔ PASSED" },
            status = u8::from(failed),
        );
        if failed {
            let verb = if reaching == 1 { "reaches" } else { "reach" };
            let _ = write!(
                self.out,
                "{} {verb} <code>--fail-on {fail_on}</code>",
                plural(reaching, "finding"),
            );
        } else {
            let _ = write!(
                self.out,
                "no finding reaches <code>--fail-on {fail_on}</code>"
            );
            if below > 0 {
                let _ = write!(self.out, " ({} below it)", plural(below, "finding"));
            }
        }
        self.out.push_str(".</p>\n</header>\n");
    }

    fn summary(&mut self, report: &Report, ingest: Option<&IngestCounts>) {
        let s = &report.summary;
        self.out
            .push_str("<section id=\"summary\">\n<h2>Summary</h2>\n<dl class=\"summary\">\n");
        let item = |out: &mut String, id: &str, term: &str, value: String| {
            let _ = writeln!(
                out,
                r#"<div><dt>{term}</dt><dd id="s-{id}">{value}</dd></div>"#
            );
        };
        item(&mut self.out, "chains", "chains", count(s.traces));
        item(&mut self.out, "spans", "spans", count(s.spans));
        item(&mut self.out, "hops", "hops", count(s.hops));
        item(
            &mut self.out,
            "findings",
            "findings",
            format!(
                r#"<span class="sev-error">✖ <span id="s-error">{}</span> error</span> · <span class="sev-warning">▲ <span id="s-warning">{}</span> warning</span> · <span class="sev-info">● <span id="s-info">{}</span> info</span>"#,
                count(s.findings.error),
                count(s.findings.warning),
                count(s.findings.info)
            ),
        );
        item(
            &mut self.out,
            "wasted",
            "work done for nobody",
            format!(
                r#"<span id="s-wasted-ms" data-v="{}">{}</span> ms"#,
                s.wasted_ms,
                grouped(s.wasted_ms)
            ),
        );
        let outcomes: Vec<String> = ChainOutcome::ALL
            .into_iter()
            .filter(|&o| s.outcomes.get(o) > 0)
            .map(|o| {
                format!(
                    r#"<span id="s-outcome-{o}">{}</span> {o}"#,
                    count(s.outcomes.get(o))
                )
            })
            .collect();
        item(
            &mut self.out,
            "outcomes",
            "chains by outcome",
            if outcomes.is_empty() {
                "none".into()
            } else {
                outcomes.join(", ")
            },
        );
        let c = &s.coverage;
        item(
            &mut self.out,
            "coverage",
            "budget known",
            format!(
                "on {} of {} hops",
                count(c.hops_with_budget),
                count(c.hops_with_budget + c.hops_without_budget)
            ),
        );
        if let Some(i) = ingest {
            item(
                &mut self.out,
                "received",
                "received",
                format!(
                    "{} in {}",
                    plural(i.spans_accepted, "span"),
                    plural(i.requests_accepted, "request")
                ),
            );
            item(
                &mut self.out,
                "refused",
                "refused under load",
                format!(
                    "{} requests ({} spans counted; {} refused before reading)",
                    count(i.requests_refused),
                    count(i.spans_refused),
                    count(i.requests_refused_unread)
                ),
            );
            item(
                &mut self.out,
                "rejected",
                "rejected as invalid",
                format!(
                    "{} spans, {} requests",
                    count(i.spans_rejected),
                    count(i.requests_rejected)
                ),
            );
        }
        self.out.push_str("</dl>\n");
        if let Some(warning) = c.warning() {
            let _ = writeln!(
                self.out,
                r#"<p class="warning" id="coverage-warning">▲ warning: {}</p>"#,
                SpanText(&warning)
            );
        }
        let counters = self.store.counters();
        if counters.chains_evicted > 0 || counters.spans_over_limit > 0 {
            let _ = writeln!(
                self.out,
                r#"<p class="warning">▲ warning: {} chain(s) ({} spans) evicted and {} span(s) not kept to stay under --max-spans; the report covers the rest</p>"#,
                count(counters.chains_evicted),
                count(counters.spans_evicted),
                count(counters.spans_over_limit)
            );
        }
        self.out.push_str("</section>\n");
    }

    fn contents(&mut self, report: &Report) {
        self.out
            .push_str("<nav aria-label=\"contents\"><ul class=\"contents\">\n");
        let mut counts = [0u64; FindingKind::COUNT];
        for f in &report.findings {
            counts[f.kind as usize] += 1;
        }
        for kind in FindingKind::ALL {
            let n = counts[kind as usize];
            if n > 0 {
                let _ = writeln!(
                    self.out,
                    r##"<li class="sev-{sev}"><a href="#k-{kind}">{glyph} {kind}</a> {n}</li>"##,
                    sev = kind.severity(),
                    glyph = severity_glyph(kind.severity()),
                    n = count(n),
                );
            }
        }
        self.out.push_str(
            "<li><a href=\"#edges\">edges</a></li>\n<li><a href=\"#services\">services</a></li>\n<li><a href=\"#legend\">how to read a waterfall</a></li>\n</ul></nav>\n",
        );
    }

    fn legend(&mut self) {
        self.out.push_str(
            "<section id=\"legend\">\n<h2>How to read a waterfall</h2>\n<p>One row per hop (a service handling the request) and per call, indented under its caller, on a time axis from the chain's start. Every mark has its own shape, not only its colour; open a row for its span's budget facts, attributes and findings.</p>\n<ul class=\"legend\">\n",
        );
        for mark in MARKS {
            let _ = writeln!(
                self.out,
                r#"<li><svg class="sample" width="60" height="{ROW_PX}" aria-hidden="true">{}</svg> <code>{}</code> {}</li>"#,
                legend_sample(mark.glyph, mark.role),
                Esc(mark.glyph),
                Esc(mark.text)
            );
        }
        let _ = writeln!(
            self.out,
            r#"<li><span class="g sev-error">✖</span> error · <span class="g sev-warning">▲</span> warning · <span class="g sev-info">●</span> info: the worst finding on the row</li>"#
        );
        let _ = writeln!(
            self.out,
            "</ul>\n<p><b>The figures beside each row</b>: {}</p>\n</section>",
            Esc(legend::ROW_FIGURES)
        );
    }

    fn findings(&mut self, report: &Report) {
        self.out
            .push_str("<section id=\"findings\">\n<h2>Findings by kind</h2>\n");
        let _ = writeln!(
            self.out,
            r#"<p class="caps" id="caps">For each kind, the {CHAINS_PER_KIND} worst chains are drawn: the most work for nobody first (the finding's wasted ms), then chains whose user got no answer, then the chain's wasted ms, then the most findings of the kind. A chain shows at most {ROWS_PER_CHAIN} rows (those with findings or work for nobody first, with the rows above them) and at most {} KiB of attributes per span; once the chains on the page take {} KB, the rest are named, not drawn. The edges and services tables show at most {TABLE_ROWS} rows each.</p>"#,
            ATTRIBUTE_BYTES_PER_SPAN / 1024,
            CHAIN_BYTES / 1000,
        );
        let per_kind = rank(self.store, report);
        if report.findings.is_empty() {
            self.out.push_str(
                "<p id=\"no-findings\">No findings: every hop kept within the budget it was given; nothing was reset, dropped or wasted.</p>\n",
            );
            if report.summary.coverage.is_blind() {
                self.out.push_str("<p>Most hops carried no budget, so that says little: see the warning above.</p>\n");
            }
            // A picture even so: the longest chain, as an example of what healthy looks like.
            let longest = self
                .store
                .chains()
                .max_by_key(|c| (c.summary.duration_ms, std::cmp::Reverse(c.trace_id)))
                .map(|c| c.trace_id);
            if let Some(trace) = longest {
                self.out
                    .push_str("<h3>The longest chain, as an example</h3>\n");
                self.chain(trace, None, &[]);
            }
        }
        for (kind, ranked) in per_kind {
            let chains = ranked.len() as u64;
            let total: u64 = ranked.iter().map(|c| u64::from(c.count)).sum();
            let sev = kind.severity();
            let _ = write!(
                self.out,
                r#"<section class="kind" id="k-{kind}">
<h3><span class="sev-{sev}">{glyph} {sev}</span> {kind}: {} in {}</h3>
<p class="meaning">{}</p>
"#,
                plural(total, "finding"),
                plural(chains, "chain"),
                Esc(legend::meaning(kind)),
                glyph = severity_glyph(sev),
            );
            if ranked.len() > CHAINS_PER_KIND {
                let _ = writeln!(
                    self.out,
                    "<p>The {CHAINS_PER_KIND} worst of {} chains:</p>",
                    count(chains)
                );
            }
            for c in ranked.iter().take(CHAINS_PER_KIND) {
                let findings: Vec<&Finding> = report_findings(report, c.trace, kind);
                self.chain(c.trace, Some(kind), &findings);
            }
            self.out.push_str("</section>\n");
        }
        self.out.push_str("</section>\n");
    }

    /// One chain: its summary line, its findings of `kind`, and its waterfall (or a link to
    /// where it was drawn, or a note when the page's cap stops drawing).
    fn chain(&mut self, trace: TraceId, kind: Option<FindingKind>, findings: &[&Finding]) {
        let (Some(analysis), Some(chain)) = (self.store.analysis(trace), self.store.chain(trace))
        else {
            return;
        };
        if self.chain_bytes >= CHAIN_BYTES {
            let _ = writeln!(
                self.out,
                r#"<p class="cut">Chain <code>{trace}</code>: not drawn, the chains on this page already take {} KB (the cap).</p>"#,
                CHAIN_BYTES / 1000
            );
            return;
        }
        self.article_start = self.out.len();
        let s = &analysis.summary;
        let _ = write!(
            self.out,
            r#"<article class="chain" id="{anchor}">
<h4>{} {}</h4>
<p class="chain-meta">budget {}{} · used {} · {} · outcome <b class="outcome-{outcome}">{outcome}</b> · {} for nobody · trace <code>{trace}</code></p>
"#,
            SpanText(&s.root_service),
            SpanText(&s.root_name),
            opt_ms(s.edge_budget_ms),
            match s.edge_budget_source {
                Some(BudgetSource::Default) => " (its own default)",
                _ => "",
            },
            ms(s.duration_ms),
            plural(u64::from(s.hops), "hop"),
            ms(s.wasted_ms),
            anchor = match kind {
                Some(k) if !self.drawn.contains_key(&trace) => format!("t-{trace}-{k}"),
                Some(k) => format!("t-{trace}-{k}-again"),
                None => format!("t-{trace}"),
            },
            outcome = s.outcome,
        );
        if !findings.is_empty() {
            self.out.push_str("<ul class=\"chain-findings\">\n");
            let mut listed = 0;
            for f in findings.iter().take(FINDINGS_PER_CHAIN) {
                if self.over_cap() {
                    break;
                }
                self.finding_item(f);
                listed += 1;
            }
            if findings.len() > listed {
                let _ = writeln!(
                    self.out,
                    "<li>and {} more of this kind in this chain</li>",
                    count((findings.len() - listed) as u64)
                );
            }
            self.out.push_str("</ul>\n");
        }
        if let Some(first) = self.drawn.get(&trace) {
            let _ = writeln!(
                self.out,
                r##"<p class="again">Its waterfall is drawn above, under <a href="#t-{trace}-{first}">{first}</a>.</p>"##
            );
        } else {
            self.waterfall(&analysis, chain, kind);
            if let Some(k) = kind {
                self.drawn.insert(trace, k);
            }
        }
        self.out.push_str("</article>\n");
        self.chain_bytes += self.out.len() - self.article_start;
    }

    /// Whether the chains, with the one being written, have reached [`CHAIN_BYTES`].
    fn over_cap(&self) -> bool {
        self.chain_bytes + (self.out.len() - self.article_start) >= CHAIN_BYTES
    }

    fn finding_item(&mut self, f: &Finding) {
        let _ = write!(
            self.out,
            r#"<li class="sev-{sev}"><span class="g">{glyph}</span> <b>{kind}</b> at {service} <q>{span}</q>: {message}"#,
            sev = f.severity,
            glyph = severity_glyph(f.severity),
            kind = f.kind,
            service = SpanText(&f.service),
            span = SpanText(&f.span_name),
            message = SpanText(&f.message),
        );
        if let Some(w) = f.wasted_ms.filter(|w| *w > 0) {
            let _ = write!(
                self.out,
                " <span class=\"late-text\">({} wasted)</span>",
                ms(w)
            );
        }
        self.out.push_str("</li>\n");
    }

    fn waterfall(&mut self, a: &ChainAnalysis, chain: &Chain, kind: Option<FindingKind>) {
        let spans: Vec<Option<Span>> = a.rows.iter().map(|r| chain.span(r.span as usize)).collect();
        let g = Geometry::of(a, &spans);
        let edge_deadline = a.rows.iter().zip(&spans).find_map(|(_, span)| {
            let span = span.as_ref().filter(|s| s.kind.is_hop())?;
            Some(a.summary.offset_ms(span) + span.budget.budget_ms()?)
        });
        let _ = write!(
            self.out,
            r#"<div class="wf">
<div class="wf-axis" aria-hidden="true"><span></span><span></span><span>HOP / CALL</span><span class="num">BUDGET ms</span><svg class="axis" width="{w}" height="{ROW_PX}">"#,
            w = TIMELINE_PX,
        );
        g.axis(&mut self.out);
        self.out.push_str("</svg></div>\n");
        let rows = chosen_rows(a, kind, ROWS_PER_CHAIN);
        let mut next = 0usize;
        let mut drawn = 0usize;
        for &i in &rows {
            if self.over_cap() {
                break;
            }
            if i > next {
                gap(&mut self.out, i - next);
            }
            next = i + 1;
            if let (Some(row), Some(Some(span))) = (a.rows.get(i), spans.get(i)) {
                self.row(a, row, span, &g, edge_deadline);
                drawn += 1;
            }
        }
        if a.rows.len() > next {
            gap(&mut self.out, a.rows.len() - next);
        }
        if drawn < a.rows.len() {
            let why = if drawn < rows.len() {
                format!("the page's {} KB for chains is used up", CHAIN_BYTES / 1000)
            } else {
                format!("at most {ROWS_PER_CHAIN} a chain")
            };
            let _ = writeln!(
                self.out,
                r#"<p class="cut">{} of {} rows drawn ({why}).</p>"#,
                count(drawn as u64),
                count(a.rows.len() as u64)
            );
        }
        self.out.push_str("</div>\n");
    }

    fn row(
        &mut self,
        a: &ChainAnalysis,
        row: &Row,
        span: &Span,
        g: &Geometry,
        edge_deadline: Option<i64>,
    ) {
        let on_row: Vec<&Finding> = a.findings_on(span.span_id).collect();
        let reset = on_row
            .iter()
            .find(|f| f.kind == FindingKind::BudgetReset)
            .copied();
        let start = a.summary.offset_ms(span);
        let end = start + span.duration_ms().max(0);
        let label = if span.kind.is_call() {
            format!("→ {}", for_report(&span.name))
        } else {
            format!("{} {}", for_report(&span.service), for_report(&span.name))
        };
        let (numbers, numbers_late) = numbers(span, row, reset);
        let worst = row.worst();
        let _ = write!(
            self.out,
            r#"<details class="row"><summary><span class="g{gclass}"{gtitle}>{glyph}</span><span class="lbl {lclass} d{depth}" title="{label}">{label}</span><span class="num{nclass}">{numbers}</span><svg class="bar" width="{w}" height="{ROW_PX}" role="img"><title>{label}: {description}</title>"#,
            gclass = worst.map(|s| format!(" sev-{s}")).unwrap_or_default(),
            gtitle = worst.map(|s| format!(" title=\"{s}\"")).unwrap_or_default(),
            glyph = worst.map(severity_glyph).unwrap_or(""),
            lclass = if span.kind.is_call() {
                "call"
            } else if span.kind.is_hop() {
                "hop"
            } else {
                "internal"
            },
            depth = row.depth.min(MAX_INDENT),
            label = Esc(&label),
            nclass = if numbers_late { " late-text" } else { "" },
            numbers = Esc(&numbers),
            w = TIMELINE_PX,
            description = Esc(&describe(span, row, reset, start, end)),
        );
        if let Some(d) = edge_deadline {
            let x = g.x(d);
            if d <= g.horizon_ms {
                let _ = write!(
                    self.out,
                    r#"<line class="m-edge" x1="{x:.1}" x2="{x:.1}" y1="0" y2="{ROW_PX}"/>"#
                );
            }
        }
        bar(&mut self.out, g, row, span, reset, start, end);
        self.out.push_str("</svg></summary>\n");
        self.detail(a, row, span, &on_row, start);
        self.out.push_str("</details>\n");
    }

    /// A row's detail, shown when it is opened: the span, its budget facts, its attributes as
    /// received, and its findings explained.
    fn detail(
        &mut self,
        a: &ChainAnalysis,
        row: &Row,
        span: &Span,
        on_row: &[&Finding],
        start: i64,
    ) {
        let kv = |out: &mut String, k: &str, v: &str| {
            let _ = writeln!(out, "<tr><th>{}</th><td>{}</td></tr>", Esc(k), Esc(v));
        };
        self.out
            .push_str("<div class=\"detail\"><table class=\"kv\"><tbody>\n");
        kv(&mut self.out, "kind", kind_word(span.kind));
        kv(&mut self.out, "span id", &span.span_id.to_string());
        kv(
            &mut self.out,
            "parent span id",
            &span
                .parent_span_id
                .map(|p| p.to_string())
                .unwrap_or_else(|| "-".into()),
        );
        kv(
            &mut self.out,
            "start (from chain start)",
            &format!("+{}", ms(start)),
        );
        kv(&mut self.out, "duration", &ms(span.duration_ms()));
        kv(&mut self.out, "status", &format!("{:?}", span.status));
        if row.dead_ms > 0 {
            kv(
                &mut self.out,
                "dead work",
                &format!(
                    "{}: done after everyone above had stopped waiting",
                    ms(i64::from(row.dead_ms))
                ),
            );
        }
        self.out.push_str(
            "<tr class=\"sub\"><th colspan=\"2\">budget facts, as the analysis read them</th></tr>\n",
        );
        for (k, v) in legend::facts(span) {
            let _ = writeln!(
                self.out,
                "<tr><th>{}</th><td>{}</td></tr>",
                Esc(k),
                SpanText(&v)
            );
        }
        if let Some(attributes) = self.store.attributes(a.trace_id, span.span_id) {
            self.out.push_str(
                "<tr class=\"sub\"><th colspan=\"2\">attributes, as received</th></tr>\n",
            );
            attribute_rows(&mut self.out, &attributes);
        }
        // Values cut, attributes not kept, or all dropped for the store's byte budget.
        if let Some(note) = self.store.attribute_note(a.trace_id, span.span_id) {
            let _ = writeln!(
                self.out,
                "<tr><td colspan=\"2\" class=\"cut\">{}</td></tr>",
                Esc(&note)
            );
        }
        if !on_row.is_empty() {
            self.out
                .push_str("<tr class=\"sub\"><th colspan=\"2\">findings</th></tr>\n");
        }
        for f in on_row.iter().take(FINDINGS_PER_ROW) {
            let _ = writeln!(
                self.out,
                r#"<tr class="sev-{sev}"><th>{glyph} {kind}</th><td>{message}<br><small>{meaning}</small></td></tr>"#,
                sev = f.severity,
                glyph = severity_glyph(f.severity),
                kind = f.kind,
                message = SpanText(&f.message),
                meaning = Esc(legend::meaning(f.kind)),
            );
        }
        self.out.push_str("</tbody></table></div>");
    }

    fn edges(&mut self) {
        let mut rows = self.store.edges();
        // The screen's order: most error findings, then most dead work, then most calls.
        let errors = |e: &EdgeAggregate| -> u64 {
            e.findings
                .iter()
                .filter(|(k, _)| k.severity() == Severity::Error)
                .map(|(_, n)| n)
                .sum()
        };
        rows.sort_by(|a, b| {
            errors(b)
                .cmp(&errors(a))
                .then(b.wasted_ms.cmp(&a.wasted_ms))
                .then(b.calls.cmp(&a.calls))
                .then((&a.caller, &a.callee).cmp(&(&b.caller, &b.callee)))
        });
        self.out.push_str(
            "<section id=\"edges\">\n<h2>Edges: caller → callee</h2>\n<table class=\"data sortable\" id=\"edges-table\"><thead><tr><th>CALLER → CALLEE</th><th>CALLS</th><th>RESETS</th><th>DROPS</th><th>LATE</th><th>WARN</th><th>LAT p50</th><th>LAT p99</th><th>TIMEOUT</th><th>RCV p50</th><th>FWD p50</th><th>WASTED</th></tr></thead><tbody>\n",
        );
        for e in rows.iter().take(TABLE_ROWS) {
            let n = |k| e.findings.get(k);
            let late = n(FindingKind::RanAfterExpiry) + n(FindingKind::OrphanedWork);
            let warn: u64 = e
                .findings
                .iter()
                .filter(|(k, _)| k.severity() == Severity::Warning)
                .map(|(_, n)| n)
                .sum();
            let _ = write!(
                self.out,
                "<tr><td class=\"t\">{} → {}</td>",
                TableName(&e.caller),
                TableName(&e.callee)
            );
            for (v, flagged) in [
                (e.calls, false),
                (n(FindingKind::BudgetReset), true),
                (n(FindingKind::BudgetDropped), true),
                (late, true),
                (warn, true),
            ] {
                count_cell(&mut self.out, v, flagged);
            }
            ms_cell(&mut self.out, e.latency.p50());
            ms_cell(&mut self.out, e.latency.p99());
            let (timeout, value) = match e.timeout() {
                None => ("·".to_string(), None),
                Some((t, inferred)) => {
                    let mut text = format!("{}{}", if inferred { "~" } else { "" }, ms(t));
                    if n(FindingKind::TimeoutInverted) > 0 {
                        text.push_str(" ▲ inverted");
                    } else if e.oversized().is_some() {
                        text.push_str(" ● oversized");
                    }
                    (text, Some(t))
                }
            };
            let _ = write!(
                self.out,
                "<td data-v=\"{}\">{}</td>",
                sort_value(value),
                Esc(&timeout)
            );
            ms_cell(&mut self.out, e.received.p50());
            ms_cell(&mut self.out, e.forwarded.p50());
            let _ = writeln!(
                self.out,
                "<td data-v=\"{}\"{}>{}</td></tr>",
                e.wasted_ms,
                if e.wasted_ms > 0 {
                    " class=\"late-text\""
                } else {
                    ""
                },
                if e.wasted_ms > 0 {
                    ms(e.wasted_ms)
                } else {
                    "·".into()
                }
            );
        }
        self.out.push_str("</tbody></table>\n");
        if rows.is_empty() {
            self.out.push_str("<p>No calls seen.</p>\n");
        }
        if rows.len() > TABLE_ROWS {
            let _ = writeln!(
                self.out,
                "<p class=\"cut\">The {TABLE_ROWS} first of {} edges, in the order above.</p>",
                count(rows.len() as u64)
            );
        }
        self.out.push_str(
            "<p class=\"note\">RESETS forwarded more than remained · DROPS forwarded none · LATE work after the deadline or after the caller gave up · WARN warnings · LAT the call's duration · TIMEOUT declared, ~ inferred from calls that got no answer · RCV budget received · FWD budget forwarded · WASTED dead work in the callee and below it. A click on a column head sorts.</p>\n</section>\n",
        );
    }

    fn services(&mut self) {
        // Rates over the whole run: from the first chain's start to the last one's end.
        let (from, to) = self.store.chains().fold((u64::MAX, 0u64), |(a, b), c| {
            (
                a.min(c.summary.start_unix_nano),
                b.max(c.summary.end_unix_nano),
            )
        });
        let window = if from < to { from..to + 1 } else { 0..0 };
        let seconds = (window.end - window.start) as f64 / 1e9;
        let rows = service_stats(self.store, window);
        self.out.push_str(
            "<section id=\"services\">\n<h2>Services</h2>\n<table class=\"data sortable\" id=\"services-table\"><thead><tr><th>SERVICE</th><th>HOPS</th><th>λ /s</th><th>W</th><th>L = λW</th><th>QUEUE p50</th><th>QUEUE p99</th><th>DEAD WORK</th><th>DEAD SHARE</th></tr></thead><tbody>\n",
        );
        for (name, s) in rows.iter().take(TABLE_ROWS) {
            service_row(&mut self.out, name, s);
        }
        self.out.push_str("</tbody></table>\n");
        if rows.len() > TABLE_ROWS {
            let _ = writeln!(
                self.out,
                "<p class=\"cut\">The {TABLE_ROWS} first of {} services, the largest dead-work share first.</p>",
                count(rows.len() as u64)
            );
        }
        let _ = writeln!(
            self.out,
            "<p class=\"note\">λ arrivals/s and W mean time in service over the whole run ({seconds:.1} s, first span to last); L = λ×W requests in flight (Little's law); DEAD WORK work done for callers who had given up, and its share of the service's work.</p>\n</section>"
        );
    }

    fn foot(&mut self) {
        let _ = write!(
            self.out,
            "<footer><p>Written by <code>budget-top check</code> {}: the analysis of CONVENTIONS.md, the same as the text and JSON reports.</p></footer>\n<script>{SORT_SCRIPT}</script>\n</body>\n</html>\n",
            env!("CARGO_PKG_VERSION")
        );
    }
}

fn gap(out: &mut String, n: usize) {
    let _ = writeln!(
        out,
        "<div class=\"gap\">⋯ {} not drawn</div>",
        plural(n as u64, "row")
    );
}

fn kind_word(kind: SpanKind) -> &'static str {
    match kind {
        SpanKind::Internal => "internal",
        SpanKind::Server => "server (a hop)",
        SpanKind::Client => "client (a call)",
        SpanKind::Producer => "producer (a call)",
        SpanKind::Consumer => "consumer (a hop)",
    }
}

fn count_cell(out: &mut String, v: u64, flagged: bool) {
    let class = if flagged && v > 0 {
        " class=\"late-text\""
    } else {
        ""
    };
    let text = if flagged && v == 0 {
        "·".into()
    } else {
        count(v)
    };
    let _ = write!(out, "<td data-v=\"{v}\"{class}>{text}</td>");
}

fn ms_cell(out: &mut String, v: Option<i64>) {
    let _ = write!(out, "<td data-v=\"{}\">{}</td>", sort_value(v), opt_ms(v));
}

fn service_row(out: &mut String, name: &Arc<str>, s: &ServiceStats) {
    let (lambda, w, l) = s.littles_law();
    let dead = s.dead_share();
    let filled = (dead * 20.0).round() as usize;
    let _ = write!(
        out,
        "<tr><td class=\"t\">{}</td><td data-v=\"{}\">{}</td><td data-v=\"{lambda:.3}\">{lambda:.1}</td><td data-v=\"{w:.1}\">{} ms</td><td data-v=\"{l:.3}\">{l:.1}</td>",
        TableName(name),
        s.hops,
        count(s.hops),
        w.round() as i64,
    );
    percentile_cell(out, &s.queue_wait, 0.5);
    percentile_cell(out, &s.queue_wait, 0.99);
    let _ = writeln!(
        out,
        "<td data-v=\"{}\">{}</td><td data-v=\"{dead:.4}\"{}><span class=\"share\" aria-hidden=\"true\">{}{}</span> {:.0}%</td></tr>",
        s.wasted_ms,
        ms(s.wasted_ms),
        if dead > 0.0 {
            " class=\"late-text\""
        } else {
            ""
        },
        "▓".repeat(filled.min(20)),
        "░".repeat(20 - filled.min(20)),
        dead * 100.0,
    );
}

fn percentile_cell(out: &mut String, d: &Distribution, q: f64) {
    ms_cell(out, d.percentile(q));
}

/// The report's findings of `kind` about chain `trace` (the chain's own and the edges').
fn report_findings(report: &Report, trace: TraceId, kind: FindingKind) -> Vec<&Finding> {
    report
        .findings
        .iter()
        .filter(|f| f.trace_id == trace && f.kind == kind)
        .collect()
}

/// How bad one chain is for one finding kind.
#[derive(Clone, Copy, Debug)]
struct Ranked {
    trace: TraceId,
    /// The largest wasted ms among its findings of the kind.
    wasted: i64,
    /// Its findings of the kind.
    count: u32,
    /// Whether its user got no answer they could use.
    failed: bool,
    /// The chain's wasted ms.
    chain_wasted: i64,
}

/// For each kind with findings, in the contract's order, every chain with a finding of it,
/// worst first.
fn rank(store: &Store, report: &Report) -> Vec<(FindingKind, Vec<Ranked>)> {
    let mut per_kind: Vec<HashMap<TraceId, Ranked>> =
        (0..FindingKind::COUNT).map(|_| HashMap::new()).collect();
    for f in &report.findings {
        let Some(by_trace) = per_kind.get_mut(f.kind as usize) else {
            continue;
        };
        let r = by_trace.entry(f.trace_id).or_insert(Ranked {
            trace: f.trace_id,
            wasted: 0,
            count: 0,
            failed: false,
            chain_wasted: 0,
        });
        r.wasted = r.wasted.max(f.wasted_ms.unwrap_or(0));
        r.count = r.count.saturating_add(1);
    }
    let mut out = Vec::new();
    for (kind, by_trace) in FindingKind::ALL.into_iter().zip(per_kind) {
        if by_trace.is_empty() {
            continue;
        }
        let mut ranked: Vec<Ranked> = by_trace
            .into_values()
            .map(|mut r| {
                if let Some(a) = store.analysis(r.trace) {
                    r.failed = a.summary.outcome.failed();
                    r.chain_wasted = a.summary.wasted_ms;
                }
                r
            })
            .collect();
        ranked.sort_unstable_by(|a, b| {
            b.wasted
                .cmp(&a.wasted)
                .then(b.failed.cmp(&a.failed))
                .then(b.chain_wasted.cmp(&a.chain_wasted))
                .then(b.count.cmp(&a.count))
                .then(a.trace.cmp(&b.trace))
        });
        out.push((kind, ranked));
    }
    out
}

/// The rows of a chain to draw, in order: all of them when they fit; otherwise rows with
/// findings of `kind`, then other rows with findings or work for nobody, each with as many of
/// the rows above it as fit (so it is drawn in its context), then the first rows, up to `cap`.
fn chosen_rows(a: &ChainAnalysis, kind: Option<FindingKind>, cap: usize) -> Vec<usize> {
    let n = a.rows.len();
    if n <= cap {
        return (0..n).collect();
    }
    let mut keep = vec![false; n];
    let mut kept = 0usize;
    let passes: [&dyn Fn(&Row) -> bool; 2] = [
        &|r: &Row| kind.is_some_and(|k| r.findings.contains(k)),
        &|r: &Row| !r.findings.is_empty() || r.late_ms > 0 || r.dead_ms > 0,
    ];
    for wanted in passes {
        for i in 0..n {
            if kept >= cap {
                break;
            }
            if keep[i] || !wanted(&a.rows[i]) {
                continue;
            }
            // The row, then the rows above it, nearest first; each step keeps one more row, so
            // the walk ends within the cap.
            let mut at = Some(i);
            while let Some(j) = at {
                if keep[j] || kept >= cap {
                    break;
                }
                keep[j] = true;
                kept += 1;
                at = a.rows[j].parent_row.map(|p| p as usize).filter(|&p| p < n);
            }
        }
    }
    for k in keep.iter_mut() {
        if kept >= cap {
            break;
        }
        if !*k {
            *k = true;
            kept += 1;
        }
    }
    (0..n).filter(|&i| keep[i]).collect()
}

/// The numbers column, as the screen writes it (`rcv 938 q120`, `fwd 3000>938`, `fwd ✕ none`),
/// and whether it shows a broken budget.
fn numbers(span: &Span, row: &Row, reset: Option<&Finding>) -> (String, bool) {
    let b = &span.budget;
    if span.kind.is_hop() {
        let text = match (b.source, b.budget_ms()) {
            (Some(src), _) if !src.has_budget() => src.as_str().to_string(),
            (Some(BudgetSource::Default), Some(v)) => format!("own {}", column_ms(v)),
            // The carrier, when it is not our own header, as the screen's wide waterfall shows it.
            (source, Some(v)) => match source.map(legend::carrier_tag) {
                Some(tag) if !tag.is_empty() => format!("rcv {} {tag}", column_ms(v)),
                _ => format!("rcv {}", column_ms(v)),
            },
            (_, None) => "none".to_string(),
        };
        match b.queue_wait_ms {
            Some(q) if q > 0 => (format!("{text} q{}", column_ms(q)), false),
            _ => (text, false),
        }
    } else if span.kind.is_call() {
        let dropped = row.findings.contains(FindingKind::BudgetDropped);
        match (reset, b.forwarded_ms) {
            _ if b.outcome == Some(Outcome::Refused) => ("refused".into(), false),
            (Some(f), _) => (
                format!(
                    "fwd {}>{}",
                    f.forwarded_ms.map(column_ms).unwrap_or_default(),
                    f.remaining_ms.map(column_ms).unwrap_or_default()
                ),
                true,
            ),
            (None, Some(f)) => (format!("fwd {}", column_ms(f)), false),
            (None, None) if dropped => ("fwd ✕ none".into(), true),
            (None, None) => (String::new(), false),
        }
    } else {
        (String::new(), false)
    }
}

/// The row's drawing in words: its hover text and accessible name.
fn describe(span: &Span, row: &Row, reset: Option<&Finding>, start: i64, end: i64) -> String {
    let b = &span.budget;
    let mut parts = vec![format!("from +{} to +{}", ms(start), ms(end))];
    if span.kind.is_hop() {
        match (b.source, b.budget_ms()) {
            (Some(src), _) if !src.has_budget() => {
                parts.push(format!("no budget ({})", src.as_str()))
            }
            (Some(BudgetSource::Default), Some(v)) => {
                parts.push(format!("its own budget of {}", ms(v)))
            }
            (_, Some(v)) => parts.push(format!("received a budget of {}", ms(v))),
            (_, None) => parts.push("no budget".into()),
        }
        if let Some(q) = b.queue_wait_ms.filter(|q| *q > 0) {
            parts.push(format!("waited {} in the queue", ms(q)));
        }
        if row.findings.contains(FindingKind::ShedExpired) {
            parts.push("shed as it left the queue: expired".into());
        } else if row.findings.contains(FindingKind::ShedFull) {
            parts.push("shed: the queue was full".into());
        }
    } else if span.kind.is_call() {
        if b.outcome == Some(Outcome::Refused) {
            parts.push("refused: no budget left to call".into());
        } else if let Some(f) = reset {
            parts.push(format!(
                "forwarded {} with only {} left",
                opt_ms(f.forwarded_ms),
                opt_ms(f.remaining_ms)
            ));
        } else if let Some(f) = b.forwarded_ms {
            parts.push(format!("forwarded {}", ms(f)));
        } else if row.findings.contains(FindingKind::BudgetDropped) {
            parts.push("forwarded no budget".into());
        }
    }
    if row.late_ms > 0 {
        parts.push(format!(
            "the last {} of it for nobody",
            ms(i64::from(row.late_ms))
        ));
    }
    let kinds: Vec<String> = row
        .findings
        .iter()
        .map(|k| format!("{k} ({})", k.severity()))
        .collect();
    if !kinds.is_empty() {
        parts.push(kinds.join(", "));
    }
    parts.join("; ")
}

/// A waterfall's time axis.
struct Geometry {
    horizon_ms: i64,
}

impl Geometry {
    /// The screen's horizon: the chain, and every deadline and forwarded budget, but at most
    /// four times the chain (a huge reset would squeeze the real work into a sliver).
    fn of(a: &ChainAnalysis, spans: &[Option<Span>]) -> Geometry {
        let dur = a.summary.duration_ms.max(1);
        let mut far = dur;
        for s in spans.iter().flatten() {
            let start = a.summary.offset_ms(s);
            if s.kind.is_hop()
                && let Some(b) = s.budget.budget_ms()
            {
                far = far.max(start.saturating_add(b));
            }
            if s.kind.is_call()
                && let Some(f) = s.budget.forwarded_ms
            {
                far = far.max(start.saturating_add(f));
            }
        }
        Geometry {
            horizon_ms: far.min(dur.saturating_mul(4)).max(1),
        }
    }

    /// The x of a time, clamped to the timeline.
    fn x(&self, at_ms: i64) -> f64 {
        at_ms.clamp(0, self.horizon_ms) as f64 * TIMELINE_PX / self.horizon_ms as f64
    }

    fn axis(&self, out: &mut String) {
        let step = nice_step(self.horizon_ms, 8);
        let mut t = 0;
        // Bounded: the step puts about eight ticks on the axis.
        for _ in 0..64 {
            if t > self.horizon_ms {
                break;
            }
            let x = self.x(t);
            // A label near the end of the axis ends at its tick instead of running off.
            let (tx, anchor) = if x > TIMELINE_PX - 40.0 {
                (x - 2.0, " text-anchor=\"end\"")
            } else {
                (x + 2.0, "")
            };
            let _ = write!(
                out,
                r#"<line x1="{x:.1}" x2="{x:.1}" y1="12" y2="{ROW_PX}"/><text x="{tx:.1}" y="10"{anchor}>{label}</text>"#,
                label = short_ms(t),
            );
            t = t.saturating_add(step);
        }
    }
}

/// A round tick step (1, 2, 5 × 10^n ms) that puts about `ticks` ticks on the axis.
fn nice_step(horizon_ms: i64, ticks: i64) -> i64 {
    let raw = (horizon_ms / ticks.max(1)).max(1);
    let mut p: i64 = 1;
    while p <= raw / 10 {
        p *= 10;
    }
    for m in [1, 2, 5, 10] {
        if p.saturating_mul(m) >= raw {
            return p.saturating_mul(m);
        }
    }
    p.saturating_mul(10)
}

/// Draws one row's marks, as the screen does: a hop's budget up to its deadline, queue wait,
/// work and the part of it done for nobody (the row's `late_ms`), a shed; a call's bar, the
/// budget it forwarded (past what remained when it was a reset), a dropped budget, a refusal.
fn bar(
    out: &mut String,
    g: &Geometry,
    row: &Row,
    span: &Span,
    reset: Option<&Finding>,
    s: i64,
    e: i64,
) {
    let b = &span.budget;
    let mid = f64::from(ROW_PX) / 2.0;
    let late_from = e - i64::from(row.late_ms).min(e - s);
    let rect = |out: &mut String, class: &str, from: i64, to: i64, y: f64, h: f64| {
        let (x0, x1) = (g.x(from), g.x(to));
        let _ = write!(
            out,
            r#"<rect class="{class}" x="{x0:.1}" y="{y:.1}" width="{:.1}" height="{h:.1}"/>"#,
            (x1 - x0).max(1.0)
        );
    };
    let line = |out: &mut String, class: &str, from: i64, to: i64| {
        if to > from {
            let _ = write!(
                out,
                r#"<line class="{class}" x1="{:.1}" x2="{:.1}" y1="{mid}" y2="{mid}"/>"#,
                g.x(from),
                g.x(to)
            );
        }
    };
    let glyph = |out: &mut String, class: &str, at: i64, text: &str| {
        let _ = write!(
            out,
            r#"<text class="m-glyph {class}" x="{:.1}" y="14">{text}</text>"#,
            (g.x(at) - 4.0).max(0.0)
        );
    };
    if span.kind.is_hop() {
        let deadline = b.budget_ms().map(|v| s.saturating_add(v));
        if let Some(d) = deadline {
            line(out, "m-budget", s, d);
        }
        let q = b.queue_wait_ms.unwrap_or(0).clamp(0, e - s);
        if q > 0 {
            rect(out, "m-queue", s, s + q, 3.0, 12.0);
        }
        let shed = if row.findings.contains(FindingKind::ShedExpired) {
            // Dropped as it left the queue: marked there, and no work drawn.
            Some(s + q)
        } else if row.findings.contains(FindingKind::ShedFull) {
            Some(s)
        } else {
            None
        };
        if shed.is_none() {
            let work_from = s + q;
            if row.late_ms > 0 && late_from > work_from {
                rect(out, "m-work", work_from, late_from, 3.0, 12.0);
                rect(out, "m-late", late_from, e, 3.0, 12.0);
            } else if row.late_ms > 0 {
                rect(out, "m-late", work_from, e, 3.0, 12.0);
            } else {
                rect(out, "m-work", work_from, e, 3.0, 12.0);
            }
        }
        if let Some(d) = deadline.filter(|d| *d <= g.horizon_ms) {
            let x = g.x(d);
            let _ = write!(
                out,
                r#"<rect class="m-deadline" x="{:.1}" y="1" width="2.5" height="{}"/>"#,
                (x - 1.25).max(0.0),
                ROW_PX - 2
            );
        }
        if let Some(at) = shed {
            glyph(out, "queue", at, "⊘");
        }
    } else if span.kind.is_call() {
        if let Some(f) = b.forwarded_ms {
            match reset.and_then(|r| r.remaining_ms) {
                Some(r) => {
                    line(out, "m-fwd", e, s + r);
                    line(out, "m-fwd over", (s + r).max(e), s + f);
                    if s + r <= g.horizon_ms {
                        rect(
                            out,
                            "m-remaining",
                            s + r,
                            s + r,
                            1.0,
                            f64::from(ROW_PX) - 2.0,
                        );
                    }
                }
                None => line(out, "m-fwd", e, s + f),
            }
        }
        rect(out, "m-call", s, e, 6.0, 6.0);
        if row.late_ms > 0 {
            rect(out, "m-late", late_from, e, 5.0, 8.0);
        }
        if row.findings.contains(FindingKind::BudgetDropped) {
            glyph(out, "late", s, "✕");
        }
        if b.outcome == Some(Outcome::Refused) {
            glyph(out, "dim", s, "⊘");
        }
    } else {
        rect(out, "m-internal", s, e, 8.0, 2.0);
        if row.late_ms > 0 {
            rect(out, "m-late", late_from, e, 7.0, 4.0);
        }
    }
}

/// The legend's drawing of one mark, in the waterfall's own shapes.
fn legend_sample(glyph: &str, role: MarkRole) -> &'static str {
    match (glyph, role) {
        ("╌┃", _) => {
            r#"<line class="m-budget" x1="2" x2="50" y1="9" y2="9"/><rect class="m-deadline" x="50" y="1" width="2.5" height="16"/>"#
        }
        ("░", _) => r#"<rect class="m-queue" x="2" y="3" width="56" height="12"/>"#,
        ("█", _) => r#"<rect class="m-work" x="2" y="3" width="56" height="12"/>"#,
        ("▓", _) => r#"<rect class="m-late" x="2" y="3" width="56" height="12"/>"#,
        ("━", _) => r#"<rect class="m-call" x="2" y="6" width="56" height="6"/>"#,
        ("┄", _) => {
            r#"<line class="m-fwd" x1="2" x2="30" y1="9" y2="9"/><line class="m-fwd over" x1="30" x2="58" y1="9" y2="9"/>"#
        }
        ("│", _) => r#"<rect class="m-remaining" x="28" y="1" width="1" height="16"/>"#,
        ("✕", _) => r#"<text class="m-glyph late" x="24" y="14">✕</text>"#,
        ("⊘", _) => r#"<text class="m-glyph queue" x="24" y="14">⊘</text>"#,
        (_, MarkRole::Dim) => r#"<line class="m-edge" x1="30" x2="30" y1="0" y2="18"/>"#,
        _ => "",
    }
}

/// A span's attributes as rows of the detail table, within [`ATTRIBUTE_BYTES_PER_SPAN`].
fn attribute_rows(out: &mut String, attributes: &[KeyValue]) {
    let start = out.len();
    for (i, kv) in attributes.iter().enumerate() {
        if out.len() - start >= ATTRIBUTE_BYTES_PER_SPAN {
            let _ = writeln!(
                out,
                "<tr><td colspan=\"2\" class=\"cut\">{} more not shown ({} KiB of attributes a span)</td></tr>",
                plural((attributes.len() - i) as u64, "attribute"),
                ATTRIBUTE_BYTES_PER_SPAN / 1024
            );
            return;
        }
        let mut value = String::new();
        any_value(&mut value, kv.value.as_ref(), 0);
        let _ = writeln!(
            out,
            "<tr><th>{}</th><td>{}</td></tr>",
            SpanText(&kv.key),
            SpanText(&value)
        );
    }
}

/// An attribute value as text, bounded: three levels deep, sixteen items a list, and no more
/// than the 200 characters [`clean`] keeps anyway.
fn any_value(out: &mut String, v: Option<&AnyValue>, depth: u32) {
    const ITEMS: usize = 16;
    const LONGEST: usize = 400;
    if out.len() > LONGEST {
        return;
    }
    match v.and_then(|v| v.value.as_ref()) {
        None => {}
        Some(Value::StringValue(s)) => {
            let room = LONGEST.saturating_sub(out.len());
            let mut cut = s.len().min(room);
            while !s.is_char_boundary(cut) {
                cut -= 1;
            }
            out.push_str(&s[..cut]);
        }
        Some(Value::BoolValue(b)) => {
            let _ = write!(out, "{b}");
        }
        Some(Value::IntValue(i)) => {
            let _ = write!(out, "{i}");
        }
        Some(Value::DoubleValue(d)) => {
            let _ = write!(out, "{d}");
        }
        Some(Value::BytesValue(b)) => {
            let _ = write!(out, "{} bytes", b.len());
        }
        Some(Value::ArrayValue(_) | Value::KvlistValue(_)) if depth >= 3 => out.push('…'),
        Some(Value::ArrayValue(a)) => {
            out.push('[');
            for (i, item) in a.values.iter().take(ITEMS).enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                any_value(out, Some(item), depth + 1);
            }
            if a.values.len() > ITEMS {
                out.push_str(", …");
            }
            out.push(']');
        }
        Some(Value::KvlistValue(l)) => {
            out.push('{');
            for (i, kv) in l.values.iter().take(ITEMS).enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                let _ = write!(out, "{}=", kv.key.chars().take(64).collect::<String>());
                any_value(out, kv.value.as_ref(), depth + 1);
            }
            if l.values.len() > ITEMS {
                out.push_str(", …");
            }
            out.push('}');
        }
        #[allow(unreachable_patterns)]
        Some(_) => out.push('?'),
    }
}

const CSS: &str = r#"
:root{--budget:#2b6cb0;--queue:#b7791f;--work:#2f855a;--late:#c53030;--call:#805ad5;--dim:#718096;--line:#e2e8f0}
body{font:14px/1.45 system-ui,"DejaVu Sans",sans-serif;margin:0 auto;max-width:1240px;padding:1em 1.5em 3em;color:#1a202c;background:#fff}
code,.num,.mono,table.data td,.axis text{font-family:ui-monospace,"DejaVu Sans Mono",monospace}
h1{font-size:1.6em;margin:.1em 0}
h2{font-size:1.25em;border-bottom:1px solid var(--line);padding-bottom:.2em;margin-top:1.6em}
h3{font-size:1.1em;margin:1.4em 0 .3em}
h4{font-size:1em;margin:.2em 0}
svg.defs{position:absolute;width:0;height:0;overflow:hidden}
.gate{border-left:6px solid;padding:.5em 1em;margin:0 0 1em}
.gate.fail{border-color:var(--late);background:#fff5f5}
.gate.pass{border-color:var(--work);background:#f0fff4}
.verdict{font-size:1.1em;margin:.3em 0}
.badge{font-weight:700}
.gate.fail .badge{color:var(--late)}
.gate.pass .badge{color:var(--work)}
dl.summary{display:grid;grid-template-columns:repeat(auto-fill,minmax(15em,1fr));gap:.5em 1.5em;margin:.5em 0}
dt{color:var(--dim);font-size:.8em;text-transform:uppercase;letter-spacing:.04em}
dd{margin:0;font-weight:600}
.warning{border-left:4px solid var(--queue);background:#fffff0;padding:.3em .8em}
.sev-error{color:var(--late)}
.sev-warning{color:#975a16}
.sev-info{color:#2c7a7b}
.late-text{color:var(--late);font-weight:700}
ul.contents{list-style:none;padding:0;display:flex;flex-wrap:wrap;gap:.3em 1.2em}
ul.legend{list-style:none;padding:0;columns:2 28em}
ul.legend li{margin:.15em 0}
ul.legend svg{vertical-align:middle}
.caps,.note,.cut,.again{color:#4a5568;font-size:.9em}
.meaning{font-style:italic}
article.chain{margin:1em 0 1.6em}
.chain-meta{margin:.1em 0 .4em;color:#4a5568}
ul.chain-findings{margin:.3em 0 .5em;padding-left:1.2em}
ul.chain-findings li{color:#1a202c}
ul.chain-findings .g{font-weight:700}
li.sev-error .g{color:var(--late)}
li.sev-warning .g{color:#975a16}
li.sev-info .g{color:#2c7a7b}
.wf{font-size:13px;border:1px solid var(--line);border-radius:4px;padding:.2em 0;overflow-x:auto}
.wf summary,.wf-axis{display:grid;grid-template-columns:1em 1.2em 24em 8.5em 600px;align-items:center;column-gap:.4em;min-height:20px;padding:0 .4em;list-style:none;cursor:pointer}
.wf-axis{cursor:default;color:var(--dim);font-size:12px}
.wf summary::-webkit-details-marker{display:none}
.wf summary::before{content:"▸";color:var(--dim)}
.wf details[open]>summary::before{content:"▾"}
.wf summary:hover,.wf details[open]>summary{background:#edf2f7}
.g{font-weight:700;text-align:center}
.lbl{overflow:hidden;text-overflow:ellipsis;white-space:nowrap}
.lbl.hop{font-weight:600}
.lbl.call{color:#553c9a}
.lbl.internal{color:#4a5568}
.num{text-align:right;white-space:nowrap}
.gap{color:var(--dim);padding:0 0 0 3.5em;font-style:italic}
.detail{margin:.2em 0 .6em 3em}
table.kv{border-collapse:collapse;font-size:12.5px}
table.kv th{text-align:left;font-weight:400;color:#4a5568;padding:.05em 1.2em .05em 0;vertical-align:top;white-space:nowrap}
table.kv td{padding:.05em 0;word-break:break-all}
table.kv tr.sub th{font-weight:700;color:#1a202c;padding-top:.4em}
svg.bar{display:block;overflow:hidden}
.axis line{stroke:#cbd5e0}
.axis text{fill:var(--dim);font-size:10px}
.m-budget{stroke:var(--budget);stroke-width:2;stroke-dasharray:6 3}
.m-deadline{fill:var(--budget)}
.m-queue{fill:url(#p-queue);stroke:var(--queue);stroke-width:.5}
.m-work{fill:var(--work)}
.m-late{fill:url(#p-late)}
.m-call{fill:var(--call)}
.m-fwd{stroke:var(--budget);stroke-width:2;stroke-dasharray:2 3}
.m-fwd.over{stroke:var(--late);stroke-width:3}
.m-remaining{fill:#1a202c}
.m-edge{stroke:#4a5568;stroke-width:1;stroke-dasharray:1 2}
.m-internal{fill:var(--dim)}
.m-glyph{font-size:13px;font-weight:700}
.m-glyph.late{fill:var(--late)}
.m-glyph.queue{fill:var(--queue)}
.m-glyph.dim{fill:#4a5568}
table.data{border-collapse:collapse;width:100%;font-size:12.5px}
table.data th,table.data td{padding:.2em .6em;border-bottom:1px solid var(--line);text-align:right;white-space:nowrap}
table.data th:first-child,table.data td.t{text-align:left}
table.data td.t{font-family:system-ui,"DejaVu Sans",sans-serif;white-space:normal}
table.data th button{font:inherit;font-weight:700;border:0;background:none;cursor:pointer;padding:0;color:inherit}
table.data th[aria-sort=ascending] button::after{content:" ▲"}
table.data th[aria-sort=descending] button::after{content:" ▼"}
.share{letter-spacing:-1px;font-size:.8em}
footer{margin-top:2em;color:var(--dim);font-size:.85em}
"#;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaping_leaves_no_markup() {
        assert_eq!(
            Esc(r#"<script>alert("x") & 'y'</script>"#).to_string(),
            "&lt;script&gt;alert(&quot;x&quot;) &amp; &#39;y&#39;&lt;/script&gt;"
        );
        assert_eq!(SpanText("a\u{202e}<b>\u{200b}").to_string(), "a&lt;b&gt;");
    }

    #[test]
    fn the_policy_allows_exactly_the_sort_script() {
        use base64::Engine as _;
        use sha2::Digest as _;
        let digest = sha2::Sha256::digest(SORT_SCRIPT.as_bytes());
        let expected = format!(
            "sha256-{}",
            base64::engine::general_purpose::STANDARD.encode(digest)
        );
        assert_eq!(SORT_SCRIPT_HASH, expected);
    }

    /// A chain `depth` hops deep (a call between each two), every budget honoured except the
    /// last call's, which forwards 3000 ms with 100 ms left.
    fn deep_chain(depth: u64) -> ChainAnalysis {
        use deadline_budget::analysis::{BudgetFacts, SpanId, SpanStatus};
        let trace = TraceId([7; 16]);
        let mut chain = Chain::new(trace);
        let ms = 1_000_000u64;
        let t0 = 1_764_374_400_000 * ms;
        // Hops at even positions, the calls between them at odd ones; a hop last.
        let n = depth * 2 - 1;
        for i in 0..n {
            let hop = i % 2 == 0;
            let mut budget = BudgetFacts::default();
            if hop {
                budget.source = Some(BudgetSource::XBudgetMs);
                budget.received_ms = Some(match i {
                    0 => 10_000,
                    _ if i + 1 == n => 3000,
                    _ => 4000,
                });
            } else {
                let last = i + 2 == n;
                budget.remaining_ms = Some(if last { 100 } else { 4000 });
                budget.forwarded_ms = Some(if last { 3000 } else { 4000 });
            }
            chain.insert(Span {
                trace_id: trace,
                span_id: SpanId((i + 1).to_be_bytes()),
                parent_span_id: (i > 0).then(|| SpanId(i.to_be_bytes())),
                service: Arc::from(format!("s{}", i / 2)),
                name: Arc::from("work"),
                kind: if hop {
                    SpanKind::Server
                } else {
                    SpanKind::Client
                },
                start_unix_nano: t0 + i * ms,
                end_unix_nano: t0 + (1000 - i) * ms,
                status: SpanStatus::Unset,
                budget,
            });
        }
        chain.analyse(&deadline_budget::analysis::Options::default())
    }

    #[test]
    fn a_finding_deep_in_a_huge_chain_is_drawn_with_the_rows_above_it() {
        let a = deep_chain(60);
        let reset = a
            .rows
            .iter()
            .position(|r| r.findings.contains(FindingKind::BudgetReset))
            .expect("the last call is a reset");
        assert!(reset > ROWS_PER_CHAIN, "{reset}");
        let rows = chosen_rows(&a, Some(FindingKind::BudgetReset), ROWS_PER_CHAIN);
        assert_eq!(rows.len(), ROWS_PER_CHAIN);
        assert!(rows.contains(&reset), "{rows:?}");
        // Its parent (the hop that made the call) is drawn too.
        let parent = a.rows[reset].parent_row.expect("a call has a hop above it") as usize;
        assert!(rows.contains(&parent), "{rows:?}");
        assert!(rows.windows(2).all(|w| w[0] < w[1]), "in order: {rows:?}");
        // A chain that fits is drawn whole.
        let small = deep_chain(5);
        assert_eq!(
            chosen_rows(&small, None, ROWS_PER_CHAIN),
            (0..small.rows.len()).collect::<Vec<_>>()
        );
    }

    #[test]
    fn axis_steps_are_round() {
        assert_eq!(nice_step(1000, 8), 200);
        assert_eq!(nice_step(1613, 8), 500);
        assert_eq!(nice_step(0, 8), 1);
        assert_eq!(nice_step(i64::MAX, 8), 2_000_000_000_000_000_000);
        assert_eq!(nice_step(i64::MAX, 1), i64::MAX);
    }
}

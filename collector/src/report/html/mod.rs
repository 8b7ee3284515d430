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
//! at most [`TABLE_ROWS`] edges and services, and a map of at most 50 boxes. The page says so
//! where it applies.

use std::fmt::{self, Display, Write as _};

use deadline_budget::analysis::{
    BudgetSource, ChainOutcome, Finding, FindingKind, Report, Severity, TraceId,
};
use foldhash::{HashMap, HashMapExt as _};

use super::Context;
use crate::span_text::for_report;
use crate::store::Store;
use crate::view_model::format::{
    count, counted, grouped, ms_grouped, opt_ms_grouped, severity_glyph,
};
use crate::view_model::legend::{self, MARKS};

mod assets;
mod map;
mod rank;
mod row_detail;
mod tables;
mod waterfall;

use assets::{CSS, SORT_SCRIPT, SORT_SCRIPT_HASH};
use rank::{rank, report_findings};
use waterfall::{MAX_INDENT, ROW_PX, legend_sample};

/// Chains drawn for each finding kind: the worst ones.
pub const CHAINS_PER_KIND: usize = crate::store::WORST_CHAINS_PER_KIND;
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

/// Renders the page. `report` is what `store` reported (`Store::report`, which analysed every
/// chain); `context` the receivers' counts when `check` listened, or what Jaeger answered, and
/// the link from each chain to its trace (on its heading and on each of its findings).
pub fn render(store: &Store, report: &Report, context: &Context<'_>, fail_on: Severity) -> String {
    let mut page = Page {
        out: String::with_capacity(256 * 1024),
        store,
        drawn: HashMap::new(),
        chain_bytes: 0,
        article_start: 0,
        links: context.links,
    };
    page.head(report, fail_on);
    page.gate(report, fail_on);
    page.summary(report, context);
    page.contents(report);
    page.map();
    page.legend();
    page.findings(report);
    page.edges();
    page.advice();
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
    /// The link from a chain to its trace.
    links: Option<&'a crate::view_model::trace_url::TraceUrl>,
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

/// A sortable cell's value: the number, or a value below every number when there is none.
fn sort_value(v: Option<i64>) -> i64 {
    v.unwrap_or(i64::MIN)
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
<pattern id="p-nobody" width="6" height="6" patternUnits="userSpaceOnUse"><rect width="6" height="6" fill="#fff5f5"/><path d="M0 0L6 6M6 0L0 6" stroke="#feb2b2" stroke-width="1"/></pattern>
<pattern id="p-waits" width="4" height="4" patternUnits="userSpaceOnUse"><rect width="4" height="4" fill="#fff"/><circle cx="2" cy="2" r="0.9" fill="#feb2b2"/></pattern>
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
                counted(reaching, "finding"),
            );
        } else {
            let _ = write!(
                self.out,
                "no finding reaches <code>--fail-on {fail_on}</code>"
            );
            if below > 0 {
                let _ = write!(self.out, " ({} below it)", counted(below, "finding"));
            }
        }
        self.out.push_str(".</p>\n</header>\n");
    }

    fn summary(&mut self, report: &Report, context: &Context<'_>) {
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
            [
                (Severity::Error, s.findings.error),
                (Severity::Warning, s.findings.warning),
                (Severity::Info, s.findings.info),
            ]
            .map(|(sev, n)| {
                format!(
                    r#"<span class="sev-{sev}">{} <span id="s-{sev}">{}</span> {sev}</span>"#,
                    severity_glyph(sev),
                    count(n)
                )
            })
            .join(" · "),
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
        if let Some(source) = context.source {
            let line = source.line();
            let line = crate::span_text::for_screen(&line);
            item(&mut self.out, "source", "read from", Esc(&line).to_string());
        }
        if let Some(i) = context.ingest {
            item(
                &mut self.out,
                "received",
                "received",
                format!(
                    "{} in {}",
                    counted(i.spans_accepted, "span"),
                    counted(i.requests_accepted, "request")
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
                r#"<p class="warning" id="coverage-warning">{} warning: {}</p>"#,
                severity_glyph(Severity::Warning),
                SpanText(&warning)
            );
        }
        let counters = self.store.counters();
        if counters.chains_evicted > 0 || counters.spans_over_limit > 0 {
            let _ = writeln!(
                self.out,
                r#"<p class="warning">{} warning: {} chain(s) ({} spans) evicted and {} span(s) not kept to stay under --max-spans; the report covers the rest</p>"#,
                severity_glyph(Severity::Warning),
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
            "<li><a href=\"#map\">map</a></li>\n<li><a href=\"#edges\">edges</a></li>\n<li><a href=\"#advice\">advice</a></li>\n<li><a href=\"#services\">services</a></li>\n<li><a href=\"#legend\">how to read a waterfall</a></li>\n</ul></nav>\n",
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
        let severities = [Severity::Error, Severity::Warning, Severity::Info].map(|sev| {
            format!(
                r#"<span class="g sev-{sev}">{}</span> {sev}"#,
                severity_glyph(sev)
            )
        });
        let _ = writeln!(
            self.out,
            "<li>{}: the worst finding on the row</li>",
            severities.join(" · ")
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
        if let Some(note) = crate::report::text::omitted_note(report) {
            let _ = writeln!(self.out, "<p class=\"caps\" id=\"omitted\">{note}.</p>");
        }
        let per_kind = rank(self.store, report);
        if crate::report::text::none_found(report) {
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
                counted(total, "finding"),
                counted(chains, "chain"),
                Esc(kind.meaning()),
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
<h4>{} {}{link}</h4>
<p class="chain-meta">budget {}{} · used {} · {} · outcome <b class="outcome-{outcome}">{outcome}</b> · {} for nobody · trace <code>{trace}</code></p>
"#,
            SpanText(&s.root_service),
            SpanText(&s.root_name),
            opt_ms_grouped(s.edge_budget_ms),
            match s.edge_budget_source {
                Some(BudgetSource::Default) => " (its own default)",
                _ => "",
            },
            ms_grouped(s.duration_ms),
            counted(u64::from(s.hops), "hop"),
            ms_grouped(s.wasted_ms),
            link = self.trace_link(trace, "open the trace"),
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
                ms_grouped(w)
            );
        }
        let link = self.trace_link(f.trace_id, "trace");
        self.out.push_str(&link);
        self.out.push_str("</li>\n");
    }

    /// ` <a class="trace-link" href="…">text</a>`: the link to `trace` (the template's text and
    /// the hex id, escaped), or nothing without `--trace-url`.
    fn trace_link(&self, trace: TraceId, text: &str) -> String {
        match self.links {
            Some(links) if trace != TraceId::default() => format!(
                r#" <a class="trace-link" href="{}" rel="noopener noreferrer" target="_blank">{text} ↗</a>"#,
                Esc(&links.link(trace))
            ),
            _ => String::new(),
        }
    }

    fn foot(&mut self) {
        let _ = write!(
            self.out,
            "<footer><p>Written by <code>budget-top check</code> {}: the analysis of CONVENTIONS.md, the same as the text and JSON reports.</p></footer>\n<script>{SORT_SCRIPT}</script>\n</body>\n</html>\n",
            env!("CARGO_PKG_VERSION")
        );
    }
}

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
}

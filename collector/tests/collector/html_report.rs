//! `check --html FILE`: the page a CI run attaches, read back the way a person would see it.
//!
//! The demo scenarios' pages are rendered in headless Chromium (Debian's `chromium`, which
//! `.ci/tools` installs when missing) and checked from the rendered DOM; a screenshot of each is
//! kept under `target/tmp/html_report/`. Hostile span strings must come out as text, and the page
//! must stay small whatever the input.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use budget_top::batch::RawAttributes;
use budget_top::report::html::{self as report_html, ROWS_PER_CHAIN, TABLE_ROWS};
use budget_top::store::Store;
use deadline_budget::analysis::{
    BudgetFacts, BudgetSource, Severity, Span, SpanId, SpanKind, SpanStatus, TraceId,
};
use deadline_budget::semconv as k;
use serde_json::Value as Json;

use crate::support::{CLIENT, SERVER, check_html, json_line, request, run, scratch, span, string};

/// Chromium's binary: found on the PATH, else installed by the project's `.ci/tools`. `None`,
/// said loudly, only when it is absent and cannot be installed.
pub fn chromium() -> Option<PathBuf> {
    static FOUND: OnceLock<Option<PathBuf>> = OnceLock::new();
    FOUND
        .get_or_init(|| {
            if let Some(path) = on_path("chromium") {
                return Some(path);
            }
            let tools = Path::new(env!("CARGO_MANIFEST_DIR")).join("../.ci/tools");
            eprintln!("chromium is missing: installing it with {}", tools.display());
            let installed = Command::new(&tools)
                .arg("chromium")
                .stdin(Stdio::null())
                .status()
                .is_ok_and(|s| s.success());
            let found = on_path("chromium");
            if !installed || found.is_none() {
                eprintln!(
                    "\n*** SKIPPED: chromium is not installed and `.ci/tools chromium` could not install it; the HTML report's rendering is NOT tested ***\n"
                );
            }
            found
        })
        .clone()
}

fn on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|p| p.is_file())
}

/// Runs headless Chromium on `page` with `args` (a fresh profile in `dir`), at most a minute;
/// returns its stdout.
#[track_caller]
fn headless(chromium: &Path, dir: &Path, name: &str, args: &[String], page: &Path) -> String {
    let profile = dir.join(format!("profile-{name}"));
    let _ = std::fs::remove_dir_all(&profile);
    let stdout = dir.join(format!("{name}.stdout"));
    let mut child = Command::new(chromium)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(args)
        .arg(format!("file://{}", page.canonicalize().unwrap().display()))
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&stdout).unwrap())
        .stderr(Stdio::null())
        .spawn()
        .expect("chromium starts");
    let started = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            assert!(status.success(), "chromium {args:?}: {status}");
            break;
        }
        if started.elapsed() > Duration::from_secs(60) {
            child.kill().unwrap();
            let _ = child.wait();
            let _ = std::fs::remove_dir_all(&profile);
            panic!("chromium {args:?} still running after 60 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    // A profile is tens of megabytes: the shared disk gets it back.
    let _ = std::fs::remove_dir_all(&profile);
    std::fs::read_to_string(stdout).unwrap()
}

/// The rendered DOM of `page`, and a screenshot of it at `shot`.
#[track_caller]
pub fn render(chromium: &Path, dir: &Path, page: &Path, shot: &Path) -> String {
    let dom = headless(chromium, dir, "dom", &["--dump-dom".into()], page);
    headless(
        chromium,
        dir,
        "screenshot",
        &[
            format!("--screenshot={}", shot.display()),
            "--window-size=1280,1500".into(),
        ],
        page,
    );
    let png = std::fs::read(shot).expect("the screenshot was written");
    assert!(
        png.starts_with(b"\x89PNG") && png.len() > 10_000,
        "{shot:?}"
    );
    dom
}

/// The text of the element with `id` in `dom` (up to its first tag).
#[track_caller]
fn text_of<'a>(dom: &'a str, id: &str) -> &'a str {
    let open = format!("id=\"{id}\"");
    let at = dom
        .find(&open)
        .unwrap_or_else(|| panic!("no element with {open}"));
    let rest = &dom[at..];
    let start = rest.find('>').unwrap() + 1;
    let end = rest[start..].find('<').unwrap() + start;
    &rest[start..end]
}

fn number(text: &str) -> i64 {
    text.replace(',', "").trim().parse().unwrap_or_else(|e| {
        panic!("{text:?} is not a number: {e}");
    })
}

/// Every `href` on the page stays on it, and nothing is loaded from anywhere.
#[track_caller]
fn assert_self_contained(html: &str) {
    assert!(
        html.contains("<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none';")
    );
    for (at, _) in html.match_indices("href=\"") {
        assert!(
            html[at + 6..].starts_with('#'),
            "a link off the page: {}",
            &html[at..at + 60]
        );
    }
    for tag in [
        "src=\"", "<link", "<iframe", "<object", "<embed", "<img", "url(http", "@import",
    ] {
        assert!(!html.contains(tag), "the page loads something: {tag}");
    }
}

/// `budget-top demo --scenario SCENARIO --check --html`, then the page in Chromium: the summary
/// it shows is the JSON report's, the waterfalls are drawn, and `expect` reads in the DOM.
fn demo_page(scenario: &str, expect: &[&str]) {
    let Some(chromium) = chromium() else { return };
    let dir = scratch(&format!("html_report/{scenario}"));
    let page = dir.join(format!("{scenario}.html"));
    let out = run(&[
        "demo",
        "--scenario",
        scenario,
        "--check",
        "--for",
        "4s",
        "--time-scale",
        "0.5",
        "--format",
        "json",
        "--html",
        page.to_str().unwrap(),
    ]);
    let report = out.json();
    let html = std::fs::read_to_string(&page).expect("the page was written");
    assert_self_contained(&html);
    let shot = dir.join(format!("{scenario}.png"));
    let dom = render(&chromium, &dir, &page, &shot);
    eprintln!("screenshot: {}", shot.display());

    // The sort script ran: the policy let exactly it.
    assert!(
        dom.contains("data-sortable=\"on\""),
        "the sort script did not run"
    );
    // The gate's decision and the numbers behind it are the JSON report's.
    assert_eq!(
        Some(number(text_of(&dom, "exit-status")) as i32),
        out.code,
        "{}",
        out.stderr
    );
    let verdict = if out.code == Some(1) {
        "✖ FAILED"
    } else {
        "✔ PASSED"
    };
    assert!(
        dom.contains(&format!("<span class=\"badge\">{verdict}</span>")),
        "the page does not say {verdict}"
    );
    let summary = &report["summary"];
    for (id, value) in [
        ("s-chains", &summary["traces"]),
        ("s-spans", &summary["spans"]),
        ("s-hops", &summary["hops"]),
        ("s-error", &summary["findings"]["error"]),
        ("s-warning", &summary["findings"]["warning"]),
        ("s-info", &summary["findings"]["info"]),
        ("s-wasted-ms", &summary["wasted_ms"]),
    ] {
        assert_eq!(
            Json::from(number(text_of(&dom, id))),
            *value,
            "{id} on the page"
        );
    }
    for (outcome, n) in summary["outcomes"].as_object().unwrap() {
        if n.as_u64().unwrap() > 0 {
            assert_eq!(
                Json::from(number(text_of(&dom, &format!("s-outcome-{outcome}")))),
                *n,
                "{outcome}"
            );
        }
    }
    // Every finding kind of the report has its section, with its chains drawn as waterfalls.
    let kinds: std::collections::BTreeSet<&str> = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["kind"].as_str().unwrap())
        .collect();
    assert!(!kinds.is_empty(), "{}", out.stdout);
    for kind in &kinds {
        assert!(
            dom.contains(&format!("id=\"k-{kind}\"")),
            "no section for {kind}"
        );
    }
    let bars = dom.matches("<svg class=\"bar\"").count();
    assert!(bars >= 4, "{bars} waterfall rows drawn");
    assert_eq!(bars, dom.matches("<details class=\"row\"").count());
    assert!(dom.contains("<rect class=\"m-work\""), "no work drawn");
    for text in expect {
        assert!(dom.contains(text), "{text:?} is not on the page");
    }
    assert_map_links_to_rows(&dom);
}

/// The map's section of `dom`.
#[track_caller]
fn map_of(dom: &str) -> &str {
    let map = &dom[dom.find("<section id=\"map\">").expect("a map section")..];
    &map[..map.find("</section>").unwrap()]
}

/// Every box and edge of the page's map links to a row of its table (or the table's section),
/// and the row a box links to names its service, the row an edge links to its two services.
#[track_caller]
fn assert_map_links_to_rows(dom: &str) {
    let map = map_of(dom);
    let mut links = 0;
    for (at, _) in map.match_indices("<a href=\"#") {
        let rest = &map[at + 10..];
        let target = &rest[..rest.find('"').unwrap()];
        let item = &rest[..rest.find("</a>").unwrap()];
        links += 1;
        if target == "edges" || target == "services" {
            continue;
        }
        let open = format!("<tr id=\"{target}\">");
        let row = &dom[dom.find(&open).unwrap_or_else(|| panic!("no row {target}"))..];
        let row = &row[..row.find("</tr>").unwrap()];
        if target.starts_with("edge-") {
            // The edge's title names its caller and callee, as its row does.
            let title = &item[item.find("<title>").unwrap() + 7..item.find(':').unwrap()];
            let (caller, callee) = title.split_once(" → ").unwrap();
            for name in [caller, callee] {
                let name = name.trim_end_matches('…');
                assert!(row.contains(name), "{target}: {title} vs {row}");
            }
        } else {
            let name = &item[item.find("class=\"l0\"").unwrap()..];
            let name = &name[name.find('>').unwrap() + 1..name.find("</text>").unwrap()];
            let name = name.trim_end_matches('…');
            assert!(row.contains(name), "{target}: {name} vs {row}");
        }
    }
    assert!(links >= 2, "{map}");
}

#[test]
fn fixed_timeout_page_shows_the_reset_in_chromium() {
    demo_page(
        "fixed-timeout",
        &[
            // The finding in words, its mark in the numbers column, and its drawing.
            "forwarded 1500 ms with only",
            "fwd 1500&gt;",
            "<line class=\"m-fwd over\"",
            "<rect class=\"m-late\"",
            // The advice, one sentence per edge.
            "<section id=\"advice\">",
            "bff → orders: ",
            // The map: the four services, the reset marked on bff → orders, the services
            // below it hatched.
            "<svg class=\"map\"",
            ">gateway</text>",
            ">inventory</text>",
            "<title>bff → orders: ✖ ",
            "class=\"mb nobody\"",
        ],
    );
}

#[test]
fn burst_page_shows_the_sheds_in_chromium() {
    demo_page(
        "burst",
        &[
            "rejected with 503: the queue was full",
            "<rect class=\"m-queue\"",
            "⊘</text>",
        ],
    );
}

/// A chain whose every name and attribute tries to be markup, script or a bidi trick.
fn hostile_chain() -> String {
    let evil_service = "<script>document.body.dataset.pwned='service'</script>";
    let evil_name = "<img src=x onerror=\"document.body.dataset.pwned='name'\">";
    json_line(&request(vec![
        (
            evil_service,
            vec![
                span(
                    9,
                    1,
                    0,
                    "invoice\u{202e}fdp.exe\u{202c} GET /order",
                    SERVER,
                    0,
                    900,
                    vec![
                        string(k::SOURCE, "default"),
                        crate::support::int(k::DEFAULT_MS, 1000),
                        string(
                            "\"><script>document.body.dataset.pwned='key'</script>",
                            "</td></tr></table></details><script>document.body.dataset.pwned='value'</script>",
                        ),
                        string("user\u{200b}.id", "a\u{2066}b\u{feff}c"),
                        string("huge", &"<b>x</b>".repeat(5000)),
                    ],
                ),
                span(
                    9,
                    2,
                    1,
                    evil_name,
                    CLIENT,
                    10,
                    400,
                    vec![
                        crate::support::int(k::REMAINING_MS, 700),
                        crate::support::int(k::FORWARDED_MS, 3000),
                        crate::support::int(k::TIMEOUT_MS, 3000),
                    ],
                ),
            ],
        ),
        (
            "or\u{200b}ders",
            vec![span(
                9,
                3,
                2,
                "GET /<style>body{display:none}</style>",
                SERVER,
                20,
                1500,
                vec![
                    crate::support::int(k::RECEIVED_MS, 3000),
                    string(k::SOURCE, "x-budget-ms"),
                ],
            )],
        ),
    ]))
}

#[test]
fn hostile_span_strings_render_as_text() {
    let dir = scratch("html_report/hostile");
    let input = dir.join("hostile.jsonl");
    std::fs::write(&input, hostile_chain() + "\n").unwrap();
    let page = dir.join("hostile.html");
    let out = check_html(&input, &page, &[]);
    assert_eq!(out.code, Some(1), "{}", out.stderr);
    let html = std::fs::read_to_string(&page).unwrap();
    assert_self_contained(&html);
    // One script (the page's own), one style sheet, no image; the hostile strings are text.
    assert_eq!(html.matches("<script").count(), 1);
    assert_eq!(html.matches("<style").count(), 1);
    for text in [
        "&lt;script&gt;document.body.dataset.pwned=&#39;service&#39;&lt;/script&gt;",
        "&lt;img src=x onerror=&quot;document.body.dataset.pwned=&#39;name&#39;&quot;&gt;",
        "&lt;/td&gt;&lt;/tr&gt;&lt;/table&gt;&lt;/details&gt;&lt;script&gt;",
        "GET /&lt;style&gt;body{display:none}&lt;/style&gt;",
        // The bidi override and the zero-width characters are gone, their text kept in order.
        "invoicefdp.exe GET /order",
        "orders",
        "<th>user.id</th><td>abc</td>",
    ] {
        assert!(html.contains(text), "{text:?} missing from the page");
    }
    for hidden in ['\u{202e}', '\u{202c}', '\u{200b}', '\u{2066}', '\u{feff}'] {
        assert!(!html.contains(hidden), "{hidden:?} reached the page");
    }
    // A value is cut, not copied whole: the page stays small.
    assert!(html.len() < 200_000, "{} bytes", html.len());

    let Some(chromium) = chromium() else { return };
    let shot = dir.join("hostile.png");
    let dom = render(&chromium, &dir, &page, &shot);
    // No injected script ran and no injected element exists; the page's own script did run.
    assert!(!dom.contains("data-pwned"), "an injected script ran");
    assert!(dom.contains("data-sortable=\"on\""));
    assert_eq!(dom.matches("<script").count(), 1);
    assert!(!dom.contains("<img"));
    assert!(dom.contains("&lt;script&gt;document.body.dataset.pwned='service'&lt;/script&gt;"));
    assert!(dom.contains("&lt;img src=x onerror=\"document.body.dataset.pwned='name'\"&gt;"));
    // The reset is still found and drawn, under the escaped names.
    assert!(dom.contains("id=\"k-budget_reset\""));
    assert!(dom.contains("fwd 3000&gt;700"));
    // On the map too: the names are text, the links go to their rows.
    let map = map_of(&dom);
    assert!(map.contains(">&lt;script&gt;document.…</text>"), "{map}");
    assert!(!map.contains("<script"), "{map}");
    assert_map_links_to_rows(&dom);
}

/// `spans` of a chain `t` that is `depth` hops deep, every call a reset, each hop of its own
/// service (so the chains together have thousands of edges and services), every name long and
/// full of characters that escaping makes longer.
fn big_chain(t: u64, depth: u64) -> Vec<Span> {
    let ms = 1_000_000u64;
    let t0 = 1_764_374_400_000 * ms + t * 10 * ms;
    let trace = {
        let mut b = [0xcd; 16];
        b[8..].copy_from_slice(&t.to_be_bytes());
        TraceId(b)
    };
    let long = "\"<&>'".repeat(60);
    (0..depth * 2 - 1)
        .map(|i| {
            let hop = i % 2 == 0;
            let mut budget = BudgetFacts::default();
            if hop {
                budget.source = Some(BudgetSource::XBudgetMs);
                budget.received_ms = Some(3000);
            } else {
                budget.remaining_ms = Some(100);
                budget.forwarded_ms = Some(3000);
            }
            Span {
                trace_id: trace,
                span_id: SpanId((i + 1).to_be_bytes()),
                parent_span_id: (i > 0).then(|| SpanId(i.to_be_bytes())),
                service: Arc::from(format!("{long}-{t}-{}", i / 2)),
                name: Arc::from(format!("{long} {i}")),
                kind: if hop {
                    SpanKind::Server
                } else {
                    SpanKind::Client
                },
                start_unix_nano: t0 + i * ms,
                end_unix_nano: t0 + (2000 - i) * ms,
                status: SpanStatus::Unset,
                budget,
            }
        })
        .collect()
}

#[test]
fn the_page_stays_small_whatever_the_input() {
    let attributes: Vec<_> = (0..64)
        .map(|i| string(&format!("attribute.{i}"), &"<>&\"".repeat(100)))
        .collect();
    // Every span's attributes held (16 KiB each, 370 MiB in all, past the default budget), so
    // the page's own cut is what shows.
    let mut store = Store::new(1_000_000).with_attribute_budget(usize::MAX);
    for t in 0..400 {
        let spans = big_chain(t, 30);
        let kept = spans
            .iter()
            .map(|_| RawAttributes::from_key_values(&attributes))
            .collect();
        store.insert_batch(crate::support::batch(spans, kept));
    }
    let report = store.report();
    // More findings than --max-findings lists: the counts are exact, the list is capped.
    let s = &report.summary;
    assert!(s.findings.total() > 10_000, "{:?}", s.findings);
    assert_eq!(report.findings.len() as u64, s.findings_listed);
    assert!(s.findings_omitted > 0);
    let started = Instant::now();
    let page = report_html::render(&store, &report, &Default::default(), Severity::Error);
    eprintln!(
        "{} chains, {} findings: {} bytes in {:?} (debug build)",
        report.summary.traces,
        report.findings.len(),
        page.len(),
        started.elapsed()
    );
    // Kept for a look: target/tmp/html_report/big/big.html.
    std::fs::write(scratch("html_report/big").join("big.html"), &page).unwrap();
    assert!(page.len() < 2_000_000, "{} bytes", page.len());
    // It says what it left out, and left it out.
    assert!(page.contains(&format!(
        "of 59 rows drawn (at most {ROWS_PER_CHAIN} a chain)"
    )));
    assert!(page.contains(&format!("The {TABLE_ROWS} first of")));
    assert!(page.contains("more not shown (2 KiB of attributes a span)"));
    let edges = &page[page.find("id=\"edges-table\"").unwrap()..];
    let edges = &edges[..edges.find("</table>").unwrap()];
    assert_eq!(edges.matches("<tr").count(), TABLE_ROWS + 1);
    assert_eq!(page.matches("<script").count(), 1);
    // The map: at most 50 boxes, and it says what it folded.
    let map = map_of(&page);
    assert_eq!(map.matches("class=\"map-box\"").count(), 50);
    assert!(map.contains("id=\"map-folded\""), "{}", &map[..2000]);
    assert!(map.contains("quieter ones are folded into <b>other</b>"));
}

/// The advice section (`CONVENTIONS.md` section 4, "Advice"): one sentence per edge, the
/// timeout to set once an edge has 100 answered calls, how many more it needs before.
#[test]
fn the_page_advises_a_timeout_per_edge() {
    let named = |spans: Vec<Span>| -> Vec<Span> {
        spans
            .into_iter()
            .enumerate()
            .map(|(i, mut s)| {
                s.service = Arc::from(if i < 2 { "orders" } else { "inventory" });
                s
            })
            .collect()
    };
    let mut store = Store::new(1000);
    for t in 0..99 {
        store.insert_spans(named(big_chain(t, 2)));
    }
    let report = store.report();
    let page = report_html::render(&store, &report, &Default::default(), Severity::Warning);
    assert!(page.contains("<li><a href=\"#advice\">advice</a></li>"));
    let advice = &page[page
        .find("<section id=\"advice\">")
        .expect("an advice section")..];
    let advice = &advice[..advice.find("</section>").unwrap()];
    assert!(
        advice.contains(
            "<li>orders → inventory: no timeout, 99 answered call(s): advice after 1 more</li>"
        ),
        "{advice}"
    );
    // The 100th call: each took 1,998 ms, the callee received 3,000 ms.
    store.insert_spans(named(big_chain(99, 2)));
    let report = store.report();
    assert_eq!(report.edges[0].advice.timeout_ms, Some(2000));
    let page = report_html::render(&store, &report, &Default::default(), Severity::Warning);
    assert!(
        page.contains("<li>orders → inventory: no timeout, p99.9 1,998 ms over 100 calls: time out at min(remaining, 2,000 ms)</li>"),
        "{}",
        &page[page.find("<section id=\"advice\">").unwrap()..]
    );
}

#[test]
fn a_page_without_findings_says_so_and_still_draws_a_chain() {
    let mut store = Store::new(1000);
    // One healthy chain: the budget shrinks hop by hop, nobody works late.
    let mut spans = big_chain(1, 3);
    for s in &mut spans {
        if s.kind.is_call() {
            s.budget.remaining_ms = Some(2900);
            s.budget.forwarded_ms = Some(2800);
        } else if s.parent_span_id.is_some() {
            s.budget.received_ms = Some(2800);
        }
    }
    store.insert_spans(spans);
    let report = store.report();
    assert!(report.findings.is_empty(), "{:?}", report.findings);
    let page = report_html::render(&store, &report, &Default::default(), Severity::Warning);
    assert!(page.contains("✔ PASSED</span> exit status <span id=\"exit-status\">0</span>"));
    assert!(page.contains("no finding reaches <code>--fail-on warning</code>"));
    assert!(page.contains("id=\"no-findings\""));
    assert!(page.contains("The longest chain, as an example"));
    assert_eq!(page.matches("<details class=\"row\"").count(), 5);
}

#[test]
fn a_listening_check_writes_the_page_with_what_it_received() {
    use prost::Message as _;
    let dir = scratch("html_report/listening");
    let page = dir.join("listening.html");
    let check =
        crate::support::listen(&["check", "--idle", "1s", "--html", page.to_str().unwrap()]);
    let runtime = crate::support::runtime();
    runtime.block_on(async {
        let response = reqwest::Client::new()
            .post(format!("http://{}/v1/traces", check.http))
            .header("content-type", "application/x-protobuf")
            .body(crate::support::reset_chain(1).encode_to_vec())
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
    });
    let finished = check.wait(Duration::from_secs(30));
    assert_eq!(finished.code, Some(1), "{finished:?}");
    let html = std::fs::read_to_string(&page).expect("the page was written");
    // The receivers' counts, the reset drawn, and the spans' attributes as they came.
    assert_eq!(text_of(&html, "s-received"), "5 spans in 1 request");
    assert!(html.contains("id=\"k-budget_reset\""));
    assert!(html.contains("<svg class=\"bar\""));
    assert!(html.contains("attributes, as received"));
    assert!(html.contains(&format!("<th>{}</th><td>3000</td>", k::FORWARDED_MS)));
}

use deadline_budget::analysis::{EdgeSample, ServiceTotals, TraceId};

use super::*;

const S: u64 = 1_000_000_000;

/// Calls: caller, callee, how many, and (forwarded, remaining) when a budget is forwarded.
type Calls<'a> = [(&'a str, &'a str, u64, Option<(i64, i64)>)];

/// Totals over 10 s: each service with `hops` hops of 100 ms (`dead` of them dead), and calls.
fn totals(services: &[(&str, u64, i64)], calls: &Calls<'_>) -> Totals {
    let mut t = Totals::new();
    for &(name, hops, dead) in services {
        t.services.insert(
            Arc::from(name),
            ServiceTotals {
                hops,
                work_ms: hops as i64 * 100,
                wasted_ms: dead,
                ..ServiceTotals::default()
            },
        );
    }
    for &(caller, callee, n, budget) in calls {
        for _ in 0..n {
            let mut findings = None;
            if let Some((fwd, left)) = budget
                && fwd > left
            {
                let mut k = KindCounts::default();
                k.bump(FindingKind::BudgetReset);
                findings = Some(Box::new(k));
            }
            t.edges.add_sample(
                TraceId::default(),
                &EdgeSample {
                    caller: Arc::from(caller),
                    callee: Arc::from(callee),
                    received_ms: None,
                    forwarded_ms: budget.map(|b| b.0),
                    findings,
                    wasted_ms: if budget.is_some_and(|(f, l)| f > l) {
                        62
                    } else {
                        0
                    },
                    latency_ms: Some(40),
                    timeout_ms: budget.map(|b| b.0),
                    unanswered_ms: None,
                    call: None,
                    wait_slack: None,
                    attempt: None,
                    caller_budget_ms: None,
                    untraced: budget.is_none() && !services.iter().any(|s| s.0 == callee),
                    answered_for_nobody: false,
                    root_left: None,
                    remaining_ms: budget.map(|b| b.1),
                },
            );
        }
    }
    t.traffic = Some((0, 10 * S));
    t
}

fn fixed_timeout() -> Totals {
    totals(
        &[
            ("gateway", 20, 0),
            ("bff", 20, 0),
            ("orders", 20, 600),
            ("inventory", 20, 1250),
        ],
        &[
            ("gateway", "bff", 20, Some((968, 990))),
            ("bff", "orders", 20, Some((3000, 938))),
            ("orders", "inventory", 20, Some((2937, 2990))),
        ],
    )
}

/// An edge where a few calls reset among many that forwarded what remained: its medians are
/// the fine calls', so the label gives the budget forwarded, the reset's mark beside it.
#[test]
fn an_edge_with_a_few_resets_reads_its_median_budget_not_a_reset() {
    let t = totals(
        &[("gateway", 20, 0), ("bff", 20, 120)],
        &[
            ("gateway", "bff", 18, Some((968, 990))),
            ("gateway", "bff", 2, Some((3000, 938))),
        ],
    );
    let map = ServiceMap::of_totals(&t);
    let edge = map
        .edge_between(
            map.box_named("gateway").unwrap(),
            map.box_named("bff").unwrap(),
        )
        .unwrap();
    assert_eq!(map.edges[edge].glyph(), Some("✖"));
    let label = map.label(edge, 200);
    assert!(
        label.contains("fwd 9"),
        "the median forwarded, ~968: {label}"
    );
    assert!(
        !label.contains('>'),
        "no reset read from the medians: {label}"
    );
}

#[test]
fn a_reset_edge_reads_fwd_over_what_remained_and_shortens_to_fit() {
    let map = ServiceMap::of_totals(&fixed_timeout());
    let names: Vec<&str> = map.boxes.iter().map(|b| &*b.name).collect();
    assert_eq!(names, ["bff", "gateway", "inventory", "orders"]);
    let layers: Vec<usize> = ["gateway", "bff", "orders", "inventory"]
        .iter()
        .map(|n| map.layout.spots[map.box_named(n).unwrap()].layer)
        .collect();
    assert_eq!(
        layers,
        [0, 1, 2, 3],
        "roots on the left, callees to the right"
    );
    let reset = map
        .edge_between(
            map.box_named("bff").unwrap(),
            map.box_named("orders").unwrap(),
        )
        .unwrap();
    let e = &map.edges[reset];
    assert_eq!(e.glyph(), Some("✖"));
    assert_eq!(
        e.labels[0],
        "✖ 2.0/s · fwd 3000>938 · timeout 3000ms · wasted 124ms/s"
    );
    assert_eq!(map.label(reset, 200), e.labels[0]);
    assert_eq!(map.label(reset, 26), "✖ fwd 3000>938 waste 124/s");
    assert_eq!(map.label(reset, 10), "✖ 3000>938");
    assert_eq!(map.label(reset, 3), "✖");
    assert_eq!(map.worst_edge(), Some(reset));
    assert_eq!(e.row, (Arc::from("bff"), Arc::from("orders")));
    // A healthy edge: no glyph, its budget forwarded.
    let ok = map
        .edge_between(
            map.box_named("gateway").unwrap(),
            map.box_named("bff").unwrap(),
        )
        .unwrap();
    assert_eq!(map.edges[ok].worst, None);
    assert_eq!(map.label(ok, 10), "fwd 968");
    // The boxes' words, and who works for nobody.
    let inventory = &map.boxes[map.box_named("inventory").unwrap()];
    assert_eq!(
        inventory.lines(),
        ["inventory", "λ 2.0/s", "dead 62%"].map(String::from)
    );
    assert!(inventory.works_for_nobody());
    assert!(!map.boxes[map.box_named("gateway").unwrap()].works_for_nobody());
}

#[test]
fn sixty_services_fold_into_fifty_boxes_the_busiest_kept() {
    let names: Vec<String> = (0..60).map(|i| format!("svc-{i:02}")).collect();
    let services: Vec<(&str, u64, i64)> = names
        .iter()
        .enumerate()
        .map(|(i, n)| (n.as_str(), 100 + i as u64, 0))
        .collect();
    let calls: Vec<_> = (1..60)
        .map(|i| {
            (
                names[(i - 1) / 3].as_str(),
                names[i].as_str(),
                3,
                Some((500, 600)),
            )
        })
        .collect();
    let map = ServiceMap::of_totals(&totals(&services, &calls));
    assert_eq!(map.boxes.len(), MAX_BOXES);
    assert_eq!(map.services, 60);
    assert_eq!(map.folded, 11);
    let other = map.boxes.last().unwrap();
    assert_eq!(&*other.name, OTHER);
    assert_eq!(other.shown, "other (11)");
    // The least busy fold: svc-00 .. svc-10.
    for (i, name) in names.iter().enumerate() {
        let folded = map.box_named(name) == Some(MAX_BOXES - 1);
        assert_eq!(folded, i < 11, "{name}");
    }
    // Every call is on an edge between the boxes, none lost.
    assert_eq!(map.edges.iter().map(|e| e.calls).sum::<u64>(), 59 * 3);
    assert!(
        map.edges
            .iter()
            .all(|e| e.from < map.boxes.len() && e.to < map.boxes.len())
    );
}

#[test]
fn an_untraced_callee_is_a_leaf_drawn_apart() {
    let map = ServiceMap::of_totals(&totals(
        &[("app", 10, 0), ("api", 10, 0)],
        &[
            ("app", "api", 10, Some((900, 950))),
            ("app", "postgresql", 10, None),
        ],
    ));
    let db = &map.boxes[map.box_named("postgresql").unwrap()];
    assert!(db.untraced);
    assert_eq!(db.row, None, "no Services row");
    assert_eq!(db.lines()[2], "untraced");
    let spot = |n: &str| map.layout.spots[map.box_named(n).unwrap()];
    assert_eq!(spot("postgresql").layer, spot("api").layer);
    assert!(spot("postgresql").y > spot("api").y, "below the traced");
    let e = map
        .edge_between(
            map.box_named("app").unwrap(),
            map.box_named("postgresql").unwrap(),
        )
        .unwrap();
    assert_eq!(map.label(e, 12), "no budget");
}

#[test]
fn short_of_room_a_broken_budget_stays_and_a_fine_one_gives_way_to_the_waste() {
    let mut fine = EdgeAggregate::default();
    fine.forwarded.add(2939);
    fine.remaining.add(2990);
    let ok = Broken {
        reset: false,
        dropped: false,
    };
    let forms = labels(None, 2.0, &fine, ok, 625.0);
    assert_eq!(forms.last().map(String::as_str), Some(""));
    let at = |form: &str| forms.iter().position(|f| f == form);
    assert!(
        at("waste 625/s") < at("fwd 2939"),
        "the waste first: {forms:?}"
    );
    let mut reset = EdgeAggregate::default();
    reset.forwarded.add(3000);
    reset.remaining.add(938);
    let broken = Broken {
        reset: true,
        dropped: false,
    };
    let forms = labels(Some(Severity::Error), 2.0, &reset, broken, 625.0);
    for form in [
        "✖ fwd 3000>938 waste 625/s",
        "✖ fwd 3000>938",
        "✖ 3000>938",
        "✖",
    ] {
        assert!(forms.contains(&form.to_string()), "{form}: {forms:?}");
    }
    // Every form is shorter than the one before it.
    for w in forms.windows(2) {
        assert!(unicode_width(&w[1]) < unicode_width(&w[0]), "{forms:?}");
    }
    let at = |form: &str| forms.iter().position(|f| f == form);
    assert!(
        at("✖ 3000>938").is_some() && at("✖ waste 625/s").is_none(),
        "{forms:?}"
    );
}

/// fixed-timeout as the round-4 rules count it: inventory works for nobody (hatched `▓`),
/// orders only waits on it then (`▒`: its time held for nobody, no dead work of its own), and
/// a service that does both is said to work for nobody, once.
#[test]
fn a_box_that_only_waits_for_nobody_is_marked_apart_from_one_that_works() {
    let mut t = fixed_timeout();
    let mut set = |name: &str, dead: i64, held: i64| {
        let s = t.services.get_mut(name).unwrap();
        s.wasted_ms = dead;
        s.held_ms = held;
    };
    set("orders", 0, 1250);
    set("inventory", 1250, 0);
    set("bff", 600, 1250);
    let map = ServiceMap::of_totals(&t);
    let b = |name: &str| &map.boxes[map.box_named(name).unwrap()];
    assert!(b("inventory").works_for_nobody() && !b("inventory").waits_for_nobody());
    assert!(b("orders").waits_for_nobody() && !b("orders").works_for_nobody());
    assert_eq!(b("orders").lines()[2], "dead 0%");
    assert!(b("bff").works_for_nobody() && !b("bff").waits_for_nobody());
    assert!(!b("gateway").works_for_nobody() && !b("gateway").waits_for_nobody());
}

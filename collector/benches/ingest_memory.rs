//! Memory of the store, measured (not a criterion bench): resident memory with `MAX_SPANS`
//! spans held (default 1,000,000, as `--max-spans 1000000`), in bytes per span, and whether it
//! stays flat while a flood at full speed keeps evicting (retention reached).
//!
//! Spans are `budget-demo load`'s requests (chains of 4 hops, ~10 attributes a span), decoded by
//! the receivers' own `decode_protobuf` and analysed as the screen does (every chain a span
//! joined, each round), in this process, so the figure is the store's and not a socket's.
//!
//! `cargo bench -p budget-top --bench ingest_memory`
//! knobs: `MAX_SPANS` (1000000), `FLOOD_SECS` (300: the 5-minute flood; less for a
//! quick look), `KEEP_ATTRIBUTES=1` (keep raw attributes, as the screen does).
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod support;
use support::{env, filtered_out, mib, rss};

use std::time::{Duration, Instant};

use budget_demo::otlp_load::Template;
use budget_top::batch::Batch;
use budget_top::ingest::decode::decode_protobuf;
use budget_top::ingest::decode::interner::Interner;
use budget_top::store::Store;

fn main() {
    if filtered_out("ingest_memory") {
        return;
    }
    let max_spans: usize = env("MAX_SPANS", 1_000_000);
    let flood = Duration::from_secs(env("FLOOD_SECS", 300));
    let keep_attributes = env("KEEP_ATTRIBUTES", 0u8) == 1;
    eprintln!(
        "sizes: Span {} B as decoded (a chain holds it packed), Row {} B, BudgetFacts {} B",
        size_of::<deadline_budget::analysis::Span>(),
        size_of::<deadline_budget::analysis::Row>(),
        size_of::<deadline_budget::analysis::BudgetFacts>()
    );

    let template = Template::new(512, 4);
    let mut interner = Interner::default();
    let mut store = Store::new(max_spans);
    let mut n: u32 = 0;
    let mut feed = |store: &mut Store| {
        n += 1;
        let request = template.request(n);
        let decoded = decode_protobuf(&request, &mut interner, keep_attributes).unwrap();
        store.insert_batch(Batch {
            spans: decoded.spans,
            attributes: decoded.attributes,
            raw: None,
            received: None,
        });
        store.analyse_dirty();
    };

    let base = rss();
    while (store.counters().spans_held as usize) + (template.spans() as usize) <= max_spans {
        feed(&mut store);
    }
    let held = store.counters().spans_held;
    let full = rss();
    println!(
        "held {held} spans (raw attributes kept: {keep_attributes}): RSS {:.1} MiB, {:.0} bytes per span held ({:.1} MiB before the first span)",
        mib(full),
        (full - base) as f64 / held as f64,
        mib(base)
    );
    if keep_attributes {
        // The popup's detail must be there for every span listed, not only for the newest.
        println!(
            "raw attributes: {:.1} MiB counted against --max-attribute-bytes; chains whose attributes were dropped: {}",
            mib(store.counters().attribute_bytes),
            store.counters().attribute_chains_dropped
        );
    }

    if flood.is_zero() {
        return;
    }
    let started = Instant::now();
    let mut next_sample = started;
    let (mut low, mut high) = (u64::MAX, 0);
    let mut spans_in = 0u64;
    while started.elapsed() < flood {
        feed(&mut store);
        spans_in += template.spans();
        if Instant::now() >= next_sample {
            let now = rss();
            low = low.min(now);
            high = high.max(now);
            next_sample += Duration::from_secs(1);
        }
    }
    let counters = store.counters();
    println!(
        "flood {:.0} s at full speed: {spans_in} more spans ({:.0}/s), {} chains evicted ({} chains' attributes dropped); RSS {:.1}..{:.1} MiB, highest {:+.1}% over the RSS at retention",
        started.elapsed().as_secs_f64(),
        spans_in as f64 / started.elapsed().as_secs_f64(),
        counters.chains_evicted,
        counters.attribute_chains_dropped,
        mib(low),
        mib(high),
        (high as f64 / full as f64 - 1.0) * 100.0
    );
}

//! Exporting one chain from the store to a file: `check --input` on that file finds what the
//! screen found, with the receiver's raw attributes and without them.

use budget_top::chain_export::write_chain;
use budget_top::ingest::decode::decode_request;
use budget_top::ingest::decode::interner::Interner;
use budget_top::store::Store;
use deadline_budget::analysis::TraceId;

use crate::support::{batch, check_json, finding_names, json_line, reset_chain, scratch};

fn store_with(keep_attributes: bool) -> Store {
    let mut store = Store::new(1000);
    for t in [1, 2] {
        let decoded = decode_request(
            &mut reset_chain(t),
            &mut Interner::default(),
            keep_attributes,
        );
        store.insert_batch(batch(decoded.spans, decoded.attributes));
    }
    store.analyse_dirty();
    store
}

/// The JSON report of `path`, which holds one `budget_reset`.
fn report_of(path: &std::path::Path) -> serde_json::Value {
    let out = check_json(path);
    assert_eq!(out.code, Some(1), "the reset is an error finding: {out:?}");
    out.json()
}

#[test]
fn an_exported_chain_reads_back_with_the_same_findings() {
    let dir = scratch("export");
    // What the whole recording of trace 1 says, as the reference.
    let original = dir.join("original.jsonl");
    std::fs::write(&original, json_line(&reset_chain(1)) + "\n").unwrap();
    let expected = finding_names(&report_of(&original));
    assert!(!expected.is_empty());

    for keep_attributes in [true, false] {
        let store = store_with(keep_attributes);
        let id = TraceId([1; 16]);
        let chain = store.chain(id).unwrap();
        let path = dir.join(format!("chain-{keep_attributes}.jsonl"));
        let _ = std::fs::remove_file(&path);
        write_chain(&path, chain, |span| store.attributes(id, span)).unwrap();

        let report = report_of(&path);
        // Only the exported chain, whole, with the same findings and numbers.
        assert_eq!(report["summary"]["traces"], 1, "{report}");
        assert_eq!(report["summary"]["spans"], 5, "{report}");
        assert_eq!(
            finding_names(&report),
            expected,
            "keep_attributes={keep_attributes}"
        );
        assert_eq!(
            report["findings"][0]["forwarded_ms"],
            report_of(&original)["findings"][0]["forwarded_ms"]
        );
    }
}

#[test]
fn exporting_appends_one_line_per_chain() {
    let dir = scratch("export-append");
    let path = dir.join("chains.jsonl");
    let _ = std::fs::remove_file(&path);
    let store = store_with(false);
    for t in [1u8, 2] {
        let id = TraceId([t; 16]);
        write_chain(&path, store.chain(id).unwrap(), |s| store.attributes(id, s)).unwrap();
    }
    assert_eq!(std::fs::read_to_string(&path).unwrap().lines().count(), 2);
    assert_eq!(report_of(&path)["summary"]["traces"], 2);
}

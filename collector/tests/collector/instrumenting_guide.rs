//! docs/instrumenting.md quotes the Python, Node.js, Go and Java code the SDK tests run,
//! docs/scale.md the Collector configuration the tier-1 tests run, docs/serve.md the pipeline
//! files of deploy/ (collector/tests/collector/pipeline.rs runs them): every
//! code block after `<!-- file: PATH -->` is that whole file, and every block after
//! `<!-- excerpt: PATH -->` appears in it line for line. So the guides cannot drift from the
//! tested code.

use std::path::Path;

/// (marker kind, path, block text) for every marked block of a guide.
fn marked_blocks(guide: &str) -> Vec<(String, String, String)> {
    let mut blocks = Vec::new();
    let mut lines = guide.lines();
    while let Some(line) = lines.next() {
        let Some(marker) = line
            .strip_prefix("<!-- ")
            .and_then(|l| l.strip_suffix(" -->"))
        else {
            continue;
        };
        let (kind, path) = marker
            .split_once(": ")
            .unwrap_or_else(|| panic!("bad marker {line}"));
        let fence = lines.next().unwrap_or_default();
        assert!(fence.starts_with("```"), "{line} must precede a code block");
        let mut text = String::new();
        for code in lines.by_ref() {
            if code == "```" {
                break;
            }
            text.push_str(code);
            text.push('\n');
        }
        blocks.push((kind.to_string(), path.to_string(), text));
    }
    blocks
}

/// Checks every marked block of `guide` against the file it names; returns the blocks.
#[track_caller]
fn check_quotes(guide: &str) -> Vec<(String, String, String)> {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let text = std::fs::read_to_string(repo.join(guide)).unwrap();
    let blocks = marked_blocks(&text);
    for (kind, path, quoted) in &blocks {
        let file = std::fs::read_to_string(repo.join(path))
            .unwrap_or_else(|e| panic!("{guide} quotes {path}: {e}"));
        match kind.as_str() {
            "file" => assert!(
                quoted == &file,
                "{guide}'s copy of {path} differs from the file"
            ),
            "excerpt" => assert!(
                !quoted.trim().is_empty() && file.contains(quoted.as_str()),
                "{guide} quotes lines that are not in {path}:\n{quoted}"
            ),
            other => panic!("unknown marker kind {other} for {path}"),
        }
    }
    blocks
}

#[test]
fn the_guides_code_is_the_code_the_tests_run() {
    let blocks = check_quotes("docs/instrumenting.md");
    let whole: Vec<&str> = blocks
        .iter()
        .filter(|(kind, _, _)| kind == "file")
        .map(|(_, path, _)| path.as_str())
        .collect();
    assert_eq!(
        whole,
        [
            "collector/tests/python/budget.py",
            "collector/tests/node/budget.js",
            "collector/tests/go/budget/budget.go",
            "collector/tests/java/src/budget/Budget.java"
        ],
        "the guide quotes the four tested contracts whole"
    );
    let excerpts = blocks.iter().filter(|(kind, _, _)| kind == "excerpt");
    assert!(
        excerpts.count() >= 8,
        "the exporter set-up of every language is quoted"
    );
}

#[test]
fn the_scale_guides_collector_config_is_the_tested_one() {
    let blocks = check_quotes("docs/scale.md");
    let paths: Vec<&str> = blocks.iter().map(|(_, path, _)| path.as_str()).collect();
    assert_eq!(paths, ["docs/otelcol-tier1.yaml"]);
}

#[test]
fn the_serve_guides_configurations_are_the_tested_ones() {
    let blocks = check_quotes("docs/serve.md");
    let paths: Vec<(&str, &str)> = blocks
        .iter()
        .map(|(kind, path, _)| (kind.as_str(), path.as_str()))
        .collect();
    assert_eq!(
        paths,
        [
            ("file", "deploy/otelcol.yaml"),
            ("file", "deploy/prometheus.yml"),
            ("file", "deploy/budget-top.rules.yml"),
            ("file", "deploy/otelcol-forward.yaml")
        ],
        "docs/serve.md quotes the Collector, Prometheus and rules files the tests run, whole"
    );
}

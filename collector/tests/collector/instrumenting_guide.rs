//! docs/instrumenting.md quotes the Python and Node.js code the SDK tests run: every code block
//! after `<!-- file: PATH -->` is that whole file, and every block after
//! `<!-- excerpt: PATH -->` appears in it line for line. So the guide cannot drift from the
//! tested code.

use std::path::Path;

/// (marker kind, path, block text) for every marked block of the guide.
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

#[test]
fn the_guides_code_is_the_code_the_tests_run() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let guide = std::fs::read_to_string(repo.join("docs/instrumenting.md")).unwrap();
    let blocks = marked_blocks(&guide);
    let whole: Vec<&str> = blocks
        .iter()
        .filter(|(kind, _, _)| kind == "file")
        .map(|(_, path, _)| path.as_str())
        .collect();
    assert_eq!(
        whole,
        [
            "collector/tests/python/budget.py",
            "collector/tests/node/budget.js"
        ],
        "the guide quotes both tested contracts whole"
    );
    for (kind, path, text) in &blocks {
        let file = std::fs::read_to_string(repo.join(path))
            .unwrap_or_else(|e| panic!("the guide quotes {path}: {e}"));
        match kind.as_str() {
            "file" => assert!(
                text == &file,
                "docs/instrumenting.md's copy of {path} differs from the file"
            ),
            "excerpt" => assert!(
                !text.trim().is_empty() && file.contains(text.as_str()),
                "docs/instrumenting.md quotes lines that are not in {path}:\n{text}"
            ),
            other => panic!("unknown marker kind {other} for {path}"),
        }
    }
    assert!(
        blocks
            .iter()
            .filter(|(kind, _, _)| kind == "excerpt")
            .count()
            >= 4,
        "the exporter set-up of both languages is quoted"
    );
}

//! docs/cli.md against the real `--help` of every command of `budget-top` and `budget-demo`,
//! both ways: every flag a `--help` lists has a row in the table of its command's section
//! (`## `budget-top check``), no row names a flag its command lacks, and no line of the page
//! names a flag that no `--help` has. The subcommands are read from `--help` too, so a new one
//! needs its section. Each failure says which flag, which command and what to add or remove.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;

/// `bin words... --help`, its stdout.
fn help(bin: &str, words: &[String]) -> String {
    let out = Command::new(bin)
        .args(words)
        .arg("--help")
        .output()
        .unwrap();
    assert!(out.status.success(), "{bin} {words:?} --help: {out:?}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The subcommands a `--help` lists under `Commands:`, `help` aside.
fn subcommands(help: &str) -> Vec<String> {
    help.lines()
        .skip_while(|l| l.trim_end() != "Commands:")
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .filter_map(|l| l.split_whitespace().next())
        .filter(|name| *name != "help")
        .map(str::to_string)
        .collect()
}

/// The long flags a `--help` lists (`  -o, --output <FILE>` → `--output`), `--help` and
/// `--version` aside. Option lines are indented at most six spaces; descriptions, more.
fn help_flags(help: &str) -> BTreeSet<String> {
    help.lines()
        .filter_map(|line| {
            let indent = line.len() - line.trim_start().len();
            let rest = line.trim_start();
            let rest = match rest.split_once(", ") {
                Some((short, long)) if short.len() == 2 && short.starts_with('-') => long,
                _ => rest,
            };
            let option = indent <= 6 && rest.starts_with("--");
            option.then(|| flags_in(rest).into_iter().next())?
        })
        .filter(|flag| flag != "--help" && flag != "--version")
        .collect()
}

/// Every `--name` in `text`, in order: two hyphens after a character that is not part of a
/// word or flag, a letter, then letters, digits and hyphens.
fn flags_in(text: &str) -> Vec<String> {
    let bytes = text.as_bytes();
    let word = |b: u8| b.is_ascii_alphanumeric() || b == b'-' || b == b'_';
    let mut found = Vec::new();
    let mut i = 0;
    while i + 2 < bytes.len() {
        let starts = bytes[i] == b'-'
            && bytes[i + 1] == b'-'
            && bytes[i + 2].is_ascii_lowercase()
            && (i == 0 || !word(bytes[i - 1]));
        if starts {
            let end = (i + 2..bytes.len())
                .find(|&j| !word(bytes[j]))
                .unwrap_or(bytes.len());
            found.push(text[i..end].trim_end_matches('-').to_string());
            i = end;
        } else {
            i += 1;
        }
    }
    found
}

/// Every command of `bin` (the bare binary first) with the flags of its `--help`.
fn commands(bin: &str, name: &str) -> BTreeMap<String, BTreeSet<String>> {
    let mut found = BTreeMap::new();
    let mut todo = vec![Vec::<String>::new()];
    while let Some(words) = todo.pop() {
        let text = help(bin, &words);
        for sub in subcommands(&text) {
            todo.push([words.clone(), vec![sub]].concat());
        }
        let command = [vec![name.to_string()], words].concat().join(" ");
        found.insert(command, help_flags(&text));
    }
    found
}

/// A section of docs/cli.md: its command, its first line's number, and its lines.
struct Section {
    command: String,
    line: usize,
    lines: Vec<(usize, String)>,
}

/// The sections headed `## `COMMAND`...`, each to the next `## ` heading.
fn sections(page: &str) -> Vec<Section> {
    let mut found: Vec<Section> = Vec::new();
    let mut inside = false;
    for (number, line) in page.lines().enumerate().map(|(i, l)| (i + 1, l)) {
        if let Some(heading) = line.strip_prefix("## ") {
            inside = false;
            if let Some(command) = heading
                .strip_prefix('`')
                .and_then(|h| h.split_once('`'))
                .map(|(c, _)| c.to_string())
            {
                inside = true;
                found.push(Section {
                    command,
                    line: number,
                    lines: Vec::new(),
                });
            }
        } else if inside && let Some(section) = found.last_mut() {
            section.lines.push((number, line.to_string()));
        }
    }
    found
}

/// The flags named in the first cell of a table row (`| `--grpc ADDR`, `--http ADDR` | ...`).
fn row_flags(line: &str) -> Vec<String> {
    let Some(row) = line.trim().strip_prefix('|') else {
        return Vec::new();
    };
    let mut cell = String::new();
    let mut escaped = false;
    for c in row.chars() {
        if c == '|' && !escaped {
            break;
        }
        escaped = c == '\\';
        cell.push(c);
    }
    flags_in(&cell)
}

#[test]
fn docs_cli_md_has_every_flag_of_every_help_under_its_command_and_no_other() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let page = std::fs::read_to_string(repo.join("docs/cli.md")).unwrap();
    let top = env!("CARGO_BIN_EXE_budget-top");
    let mut commands = commands(top, "budget-top");
    let demo = Path::new(top).with_file_name("budget-demo");
    let with_demo = demo.exists();
    if with_demo {
        commands.extend(self::commands(&demo.to_string_lossy(), "budget-demo"));
    } else {
        eprintln!(
            "{} is not built (cargo test --workspace builds it): budget-demo's commands not checked",
            demo.display()
        );
    }
    let builtin = ["--help".to_string(), "--version".to_string()];
    let known: BTreeSet<&String> = commands.values().flatten().chain(&builtin).collect();
    let sections = sections(&page);
    let mut problems = Vec::new();

    for (command, flags) in &commands {
        let Some(section) = sections.iter().find(|s| &s.command == command) else {
            let flags = flags.iter().cloned().collect::<Vec<_>>().join(", ");
            problems.push(format!(
                "`{command}` has no section in docs/cli.md: add \"## `{command}`\" and a table \
                 row for each of its flags ({})",
                if flags.is_empty() {
                    "it has none"
                } else {
                    &flags
                }
            ));
            continue;
        };
        let rows: BTreeSet<String> = section
            .lines
            .iter()
            .flat_map(|(_, line)| row_flags(line))
            .collect();
        for flag in flags.difference(&rows) {
            problems.push(format!(
                "`{command} {flag}` is in `{command} --help` but has no row in docs/cli.md's \
                 section \"## `{command}`\" (line {}): add a table row whose first cell names \
                 `{flag}`",
                section.line
            ));
        }
        for (number, line) in &section.lines {
            for flag in row_flags(line) {
                if !flags.contains(&flag) {
                    problems.push(format!(
                        "docs/cli.md line {number}: the section \"## `{command}`\" has a row for \
                         `{flag}`, which `{command} --help` lacks: remove the row, or move it to \
                         the section of the command that takes it"
                    ));
                }
            }
        }
    }
    for section in &sections {
        let ours = section.command.starts_with("budget-top") || with_demo;
        if ours && !commands.contains_key(&section.command) {
            problems.push(format!(
                "docs/cli.md line {}: a section for `{}`, which is no command of budget-top or \
                 budget-demo (their --help lists {})",
                section.line,
                section.command,
                commands.keys().cloned().collect::<Vec<_>>().join(", ")
            ));
        }
    }
    if with_demo {
        for (number, line) in page.lines().enumerate().map(|(i, l)| (i + 1, l)) {
            for flag in flags_in(line) {
                if !known.contains(&flag) {
                    problems.push(format!(
                        "docs/cli.md line {number} names `{flag}`, which no --help of budget-top \
                         or budget-demo lists: remove it, or add the flag"
                    ));
                }
            }
        }
    }
    let checked: usize = commands.values().map(BTreeSet::len).sum();
    assert!(
        checked > 60,
        "only {checked} flags found in the --help texts"
    );
    assert!(problems.is_empty(), "\n{}", problems.join("\n"));
}

#[test]
fn flags_are_read_from_help_lines_and_table_rows_alone() {
    let help = "Usage: x [OPTIONS]\n\nCommands:\n  load  Flood it\n  help  Print this\n\n\
                Options:\n  -o, --output <FILE>  Where (see --other)\n      --for <D>\n          \
                --not-an-option starts a description\n          - text: --nor-this\n  -h, --help\n";
    assert_eq!(subcommands(help), ["load"]);
    assert_eq!(
        help_flags(help).into_iter().collect::<Vec<_>>(),
        ["--for", "--output"]
    );
    assert_eq!(
        row_flags("| `--grpc ADDR`, `--http ADDR` | as for `--max-body` |"),
        ["--grpc", "--http"]
    );
    assert_eq!(
        row_flags("| `--format text\\|json`, `--fail-on X` | y |"),
        ["--format", "--fail-on"]
    );
    assert_eq!(
        flags_in("`--for D`, `--format`, a-- b, x--y, --9, `--fail-on error`"),
        ["--for", "--format", "--fail-on"]
    );
}

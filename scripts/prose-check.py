#!/usr/bin/env python3
"""The docs' and the code comments' shape, measured: long sentences, long module docs, links.

- Sentences: in README.md, docs/*.md and demo/README.md (or the files given), every sentence
  of prose, list items and table cells, code blocks and inline code aside (an inline code span
  counts as one word). A sentence ends at `.`, `!` or `?` before a space (not after `e.g.`,
  `i.e.`, `etc.`, `vs.`), or where its paragraph, list item, cell or heading ends.
- Module docs: the `//!` lines of every .rs file of the workspace (target/ aside).
- Links: every relative Markdown link between those files, and its `#anchor`, must resolve
  (anchors as GitHub makes them from headings).

Usage: scripts/prose-check.py [--list] [FILE.md ...]
  --list  print every sentence over 50 words and every module doc over 25 lines
Exit status 1 when a sentence runs over 70 words, more than 10 over 50, a module doc over 25
lines, or a link is broken.
"""

import glob
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LONG, TOO_LONG, LONG_ALLOWED = 50, 70, 10
MODULE_DOC_MAX = 25

ABBREVIATIONS = ("e.g.", "i.e.", "etc.", "vs.", "cf.", "approx.")
INLINE_CODE = re.compile(r"(`+)(.+?)\1")
LINK = re.compile(r"!?\[([^\]]*)\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
SENTENCE_END = re.compile(r"(?<=[.!?])[\"')\]*_]*\s+")


def default_docs():
    docs = ["README.md"] + sorted(glob.glob(os.path.join(ROOT, "docs", "*.md")))
    docs.append("demo/README.md")
    return [os.path.relpath(os.path.join(ROOT, d), ROOT) for d in docs]


def units(text):
    """(line, text) of each paragraph, list item, heading and table cell, code blocks aside."""
    out, current, start, fence = [], [], 0, None

    def flush():
        nonlocal current
        if current:
            out.append((start, " ".join(current)))
        current = []

    for number, line in enumerate(text.split("\n"), 1):
        stripped = line.strip()
        if fence:
            if stripped.startswith(fence):
                fence = None
            continue
        if stripped.startswith("```") or stripped.startswith("~~~"):
            flush()
            fence = stripped[:3]
            continue
        if stripped.startswith(">"):
            stripped = stripped.lstrip("> ").strip()
        if not stripped or stripped.startswith("<!--"):
            flush()
            continue
        if stripped.startswith("|"):
            flush()
            if re.fullmatch(r"[|:\- ]+", stripped):
                continue
            cells = re.split(r"(?<!\\)\|", stripped.strip("|"))
            out.extend((number, cell.strip()) for cell in cells if cell.strip())
            continue
        if stripped.startswith("#"):
            flush()
            out.append((number, stripped.lstrip("#").strip()))
            continue
        if re.match(r"([-*+]|\d+[.)])\s", stripped):
            flush()
            stripped = re.sub(r"^([-*+]|\d+[.)])\s+", "", stripped)
        if not current:
            start = number
        current.append(stripped)
    flush()
    return out


def sentences(unit):
    """The sentences of one unit of prose, each as its list of words."""
    unit = LINK.sub(lambda m: m.group(1), unit)
    unit = INLINE_CODE.sub(" CODE ", unit)
    for abbreviation in ABBREVIATIONS:
        unit = unit.replace(abbreviation, abbreviation.replace(".", ""))
    for sentence in SENTENCE_END.split(unit):
        words = [w for w in sentence.split() if re.search(r"\w", w)]
        if words:
            yield words


def long_sentences(paths):
    found = []
    for path in paths:
        with open(os.path.join(ROOT, path), encoding="utf-8") as f:
            text = f.read()
        for line, unit in units(text):
            for words in sentences(unit):
                if len(words) > LONG:
                    found.append((path, line, len(words), " ".join(words[:12])))
    return found


def module_docs():
    found = []
    for path in glob.glob(os.path.join(ROOT, "**", "*.rs"), recursive=True):
        relative = os.path.relpath(path, ROOT)
        if relative.startswith("target") or "/target/" in relative:
            continue
        with open(path, encoding="utf-8") as f:
            lines = sum(1 for line in f if line.lstrip().startswith("//!"))
        if lines > MODULE_DOC_MAX:
            found.append((relative, lines))
    return sorted(found, key=lambda x: -x[1])


def anchor(heading):
    """GitHub's anchor for a heading: lowercased, punctuation dropped, spaces as hyphens."""
    heading = INLINE_CODE.sub(lambda m: m.group(2), heading)
    heading = LINK.sub(lambda m: m.group(1), heading).strip().lower()
    heading = re.sub(r"[^\w\- ]", "", heading)
    return heading.replace(" ", "-")


def anchors(path):
    seen, out, fence = {}, set(), False
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.lstrip().startswith(("```", "~~~")):
                fence = not fence
            if fence or not line.startswith("#"):
                continue
            base = anchor(line.lstrip("#").strip())
            count = seen.get(base, 0)
            seen[base] = count + 1
            out.add(base if count == 0 else f"{base}-{count}")
    return out


def broken_links(paths):
    broken = []
    for path in paths:
        with open(os.path.join(ROOT, path), encoding="utf-8") as f:
            text = f.read()
        text = re.sub(r"```.*?```", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S)
        for number, line in enumerate(text.split("\n"), 1):
            line = INLINE_CODE.sub("", line)
            for match in LINK.finditer(line):
                target = match.group(2)
                if re.match(r"[a-z]+:", target):
                    continue
                file, _, fragment = target.partition("#")
                resolved = (
                    os.path.normpath(os.path.join(os.path.dirname(path), file))
                    if file
                    else path
                )
                full = os.path.join(ROOT, resolved)
                if not os.path.exists(full):
                    broken.append(f"{path}:{number}: {target}: no file {resolved}")
                elif fragment and (not full.endswith(".md") or fragment not in anchors(full)):
                    broken.append(f"{path}:{number}: {target}: no heading #{fragment} in {resolved}")
    return broken


def main(argv):
    listing = "--list" in argv
    paths = [a for a in argv if not a.startswith("--")] or default_docs()
    found = long_sentences(paths)
    over_long = [s for s in found if s[2] > TOO_LONG]
    docs = module_docs()
    links = broken_links(paths)
    print(f"sentences over {LONG} words: {len(found)} (at most {LONG_ALLOWED}), "
          f"over {TOO_LONG}: {len(over_long)} (none)")
    per_file = {}
    for path, *_ in found:
        per_file[path] = per_file.get(path, 0) + 1
    for path in paths:
        if path in per_file:
            print(f"  {path}: {per_file[path]}")
    print(f"module docs over {MODULE_DOC_MAX} lines: {len(docs)}")
    print(f"broken links: {len(links)}")
    if listing:
        for path, line, count, start in sorted(found, key=lambda s: -s[2]):
            print(f"{path}:{line}: {count} words: {start} ...")
        for path, lines in docs:
            print(f"{path}: {lines} lines of //!")
    for link in links:
        print(link)
    failed = over_long or len(found) > LONG_ALLOWED or docs or links
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

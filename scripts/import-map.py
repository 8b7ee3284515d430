#!/usr/bin/env python3
"""The workspace's import map, and the circles in it.

Reads the modules of src/, collector/src/ and demo/src/ (one module per file, plus inline
`mod NAME { ... }` blocks folded into their file), and draws an edge A -> B when A names B:
`use crate::...`, `use super::...`, `use self::...`, a path written in code (`crate::x::f()`,
`super::Y`), or a child module named by its parent (`child::f()`, `pub use child::X`). Test code
is left out: `#[cfg(test)] mod ...` (inline or in its own file) and files named tests.rs.

A module's edge to its own ancestor (`use super::X` in a file whose mod.rs declares it) is
left out of the circles counted: a room's mod.rs reaching into its files while they reach back
for the room's shared types is the usual Rust shape, not a knot between rooms (--all lists those
"room circles" apart). Every other edge counts, a room's mod.rs re-exporting its files included,
so `carrier -> analysis (re-export of model's type) -> model -> carrier` is found.
Checked against the tree before issue 25: it finds the issue's five circles and the demo's.

Usage: scripts/import-map.py [--edges] [--all]
  --edges  print every edge with the line that makes it
  --all    also list the room circles
Exit status 1 when a circle between rooms is found.
"""

import os
import re
import sys
from collections import defaultdict

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CRATES = [
    # (crate label, source folder, root files)
    ("deadline_budget", "src", ["lib.rs"]),
    ("budget_top", "collector/src", ["lib.rs"]),
    ("budget_top::main", "collector/src", ["main.rs"]),
    ("budget_demo", "demo/src", ["lib.rs"]),
    ("budget_demo::main", "demo/src", ["main.rs"]),
]

MOD_RE = re.compile(
    r"^[ \t]*((?:#\[[^\]]*\][ \t]*\n?[ \t]*)*)(?:pub(?:\([^)]*\))?[ \t]+)?mod[ \t]+([A-Za-z_][A-Za-z0-9_]*)[ \t]*(;|\{)",
    re.M,
)


def strip_comments_and_strings(text):
    """Blank out comments, string and char literals, keeping offsets and newlines."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if text.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif text.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == "r" and re.match(r'r#*"', text[i:i + 10]) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            m = re.match(r'r(#*)"', text[i:])
            close = '"' + m.group(1)
            j = text.find(close, i + len(m.group(0)))
            j = n if j < 0 else j + len(close)
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            j += 1
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == "'":
            # char literal ('a', '\n', '\u{..}') or a lifetime ('a)
            m = re.match(r"'(\\u\{[0-9a-fA-F]+\}|\\.|[^\\'])'", text[i:])
            if m:
                out.append(" " * len(m.group(0)))
                i += len(m.group(0))
            else:
                out.append(c)
                i += 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def matching_brace(text, open_at):
    depth = 0
    for j in range(open_at, len(text)):
        if text[j] == "{":
            depth += 1
        elif text[j] == "}":
            depth -= 1
            if depth == 0:
                return j
    return len(text)


class Module:
    def __init__(self, crate, path, file):
        self.crate, self.path, self.file = crate, path, file
        self.children = {}  # name -> Module
        self.is_test = False

    @property
    def key(self):
        return (self.crate, tuple(self.path))

    def label(self):
        return self.crate + ("::" + "::".join(self.path) if self.path else "")


def file_for(folder, parent_dir, name):
    for cand in (os.path.join(parent_dir, name + ".rs"), os.path.join(parent_dir, name, "mod.rs")):
        if os.path.exists(os.path.join(ROOT, folder, cand)):
            return cand
    return None


def load_crate(crate, folder, root_file, modules, texts):
    """Walk the module tree from root_file; texts maps module key -> [(file, text spans)]."""

    def walk(mod, rel_file, text, region, dir_for_children):
        # region: (start, end) of the text that belongs to this module
        start, end = region
        body = text[start:end]
        own = [(start, end)]
        for m in MOD_RE.finditer(body):
            attrs, name, kind = m.group(1) or "", m.group(2), m.group(3)
            is_test = "cfg(test)" in attrs or name == "tests"
            child = Module(crate, mod.path + [name], None)
            child.is_test = mod.is_test or is_test
            mod.children[name] = child
            modules[child.key] = child
            if kind == "{":
                ob = start + m.end() - 1
                cb = matching_brace(text, ob)
                own = [(a, b) for (a, b) in own for (a, b) in split(a, b, ob, cb + 1)]
                child.file = rel_file
                walk(child, rel_file, text, (ob + 1, cb), os.path.join(dir_for_children, name))
            else:
                f = file_for(folder, dir_for_children, name)
                if f is None:
                    continue
                child.file = f
                ctext = strip_comments_and_strings(open(os.path.join(ROOT, folder, f), encoding="utf-8").read())
                if os.path.basename(f) == "tests.rs":
                    child.is_test = True
                cdir = os.path.dirname(f) if f.endswith("mod.rs") else os.path.join(os.path.dirname(f), name)
                walk(child, f, ctext, (0, len(ctext)), cdir)
        texts[mod.key] = (rel_file, text, own)

    def split(a, b, ob, cb):
        parts = []
        if a < ob:
            parts.append((a, min(b, ob)))
        if cb < b:
            parts.append((max(a, cb), b))
        return parts if (ob < b and cb > a) else [(a, b)]

    path = os.path.join(ROOT, folder, root_file)
    if not os.path.exists(path):
        return
    root = Module(crate, [], root_file)
    modules[root.key] = root
    text = strip_comments_and_strings(open(path, encoding="utf-8").read())
    walk(root, root_file, text, (0, len(text)), "")


def expand_use(tree):
    """`a::{b, c::{d, e}}` -> ['a::b', 'a::c::d', 'a::c::e']"""
    tree = re.sub(r"\s+", "", tree)

    def parse(s):
        # returns list of paths for s (which may contain top-level commas)
        out, depth, cur = [], 0, ""
        items = []
        for ch in s:
            if ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
            if ch == "," and depth == 0:
                items.append(cur)
                cur = ""
            else:
                cur += ch
        if cur:
            items.append(cur)
        for it in items:
            if "{" in it:
                i = it.index("{")
                prefix = it[:i]
                inner = it[i + 1:it.rindex("}")]
                for p in parse(inner):
                    out.append(prefix + p)
            else:
                out.append(it)
        return out

    return parse(tree)


USE_RE = re.compile(r"\buse\s+((?:crate|super|self)\b[^;]*);")
PATH_RE = re.compile(r"(?<![A-Za-z0-9_:])((?:crate|super|self)(?:\s*::\s*(?:[A-Za-z_][A-Za-z0-9_]*|super))+)")


def resolve(modules, mod, segs):
    """Resolve a path's segments from mod to the deepest module it names."""
    cur = list(mod.path)
    i = 0
    if segs and segs[0] == "crate":
        cur, i = [], 1
    elif segs and segs[0] == "self":
        i = 1
    while i < len(segs) and segs[i] == "super":
        cur = cur[:-1]
        i += 1
    if i == 0:
        # a bare first segment: a child module of mod
        if segs[0] not in mod.children:
            return None
    while i < len(segs):
        nxt = cur + [segs[i]]
        if (mod.crate, tuple(nxt)) in modules:
            cur = nxt
            i += 1
        else:
            break
    return modules.get((mod.crate, tuple(cur)))


def main():
    show_edges = "--edges" in sys.argv
    show_all = "--all" in sys.argv
    modules, texts = {}, {}
    for crate, folder, roots in CRATES:
        for r in roots:
            load_crate(crate, folder, r, modules, texts)

    edges = defaultdict(list)  # (a, b) -> [where]
    for key, (rel_file, text, regions) in texts.items():
        mod = modules[key]
        if mod.is_test:
            continue
        for a, b in regions:
            body = text[a:b]
            line0 = text.count("\n", 0, a) + 1
            found = []
            for m in USE_RE.finditer(body):
                for p in expand_use(m.group(1)):
                    found.append((m.start(), p))
            for m in PATH_RE.finditer(body):
                found.append((m.start(), m.group(1)))
            # a child named by its parent: `child::...` (not after another path segment)
            for name in mod.children:
                for m in re.finditer(r"(?<![A-Za-z0-9_:])" + name + r"\s*::", body):
                    found.append((m.start(), name + "::x"))
            for at, p in found:
                segs = [s for s in re.split(r"\s*::\s*", p.strip()) if s]
                if not segs:
                    continue
                target = resolve(modules, mod, segs)
                if target is None or target.key == mod.key or target.is_test:
                    continue
                line = line0 + body.count("\n", 0, at)
                where = "%s:%d" % (rel_file, line)
                if where not in edges[(mod.key, target.key)]:
                    edges[(mod.key, target.key)].append(where)

    def to_ancestor(a, b):
        # a file reaching back to its own room (`use super::X` in a file its mod.rs declares)
        return a[0] == b[0] and a[1][: len(b[1])] == b[1]

    full = defaultdict(set)
    between_rooms = defaultdict(set)
    for a, b in edges:
        full[a].add(b)
        if not to_ancestor(a, b):
            between_rooms[a].add(b)

    sys.setrecursionlimit(10000)
    between = circles(between_rooms)
    in_between = {k for c in between for k in c}
    rooms = [c for c in circles(full) if not set(c) <= in_between]

    def lab(k):
        return modules[k].label()

    def describe(comp, graph):
        members = set(comp)
        lines = ["  " + " , ".join(sorted(lab(k) for k in comp))]
        for a in sorted(comp, key=lab):
            for b in sorted(graph[a] & members, key=lab):
                lines.append("    %s -> %s   (%s)" % (lab(a), lab(b), ", ".join(edges[(a, b)][:3])))
        return "\n".join(lines)

    if show_edges:
        for (a, b), where in sorted(edges.items(), key=lambda e: (lab(e[0][0]), lab(e[0][1]))):
            print("%s -> %s   (%s)" % (lab(a), lab(b), ", ".join(where)))
        print()

    print("modules: %d, edges: %d" % (sum(1 for m in modules.values() if not m.is_test), len(edges)))
    print("circles between rooms (a file's edges back to its own room left out): %d" % len(between))
    for c in between:
        print(describe(c, between_rooms))
    print("room circles (a mod.rs and its own files, edges to and from it kept): %d" % len(rooms))
    if show_all:
        for c in rooms:
            print(describe(c, full))
    return 1 if between else 0


def circles(graph):
    """Tarjan's strongly connected components of more than one module."""
    index, low, on, stack, sccs, counter = {}, {}, set(), [], [], [0]

    def strong(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                sccs.append(comp)

    for v in list(graph):
        if v not in index:
            strong(v)
    return sccs


if __name__ == "__main__":
    sys.exit(main())

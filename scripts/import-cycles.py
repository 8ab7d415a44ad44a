#!/usr/bin/env python3
"""Finds import circles between the source files of each crate.

For every crate root under crates/*/src (lib.rs, main.rs, src/bin/*.rs) it
walks the `mod` declarations to the files of that crate, reads every path
that starts with `crate::`, `$crate::`, `super::` or `self::` (in `use`
trees, expanded, and in code), resolves it to the file of the longest
module prefix it names, and prints each strongly connected component of
more than one file (Tarjan's algorithm) of that file graph. Comments and
string literals are skipped; test code counts like any other code.

A circle listed in scripts/import-cycles.known (one circle a line: its
files, relative to the repository, separated by spaces; `#` comments) is
printed as known and tolerated, so that the list only shrinks: any other
circle, including a known one that gained a file, makes the exit status 1.
A known circle that is gone is reported, to be taken off the list.

Usage: scripts/import-cycles.py [REPO_ROOT]
"""

import os
import re
import sys

IDENT = r"[A-Za-z_][A-Za-z0-9_]*"


def strip(text):
    """The source without comments, string and char literals (kept as blanks,
    so that lines and positions stay)."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            depth, i = 1, i + 2
            while i < n and depth:
                if text.startswith("/*", i):
                    depth, i = depth + 1, i + 2
                elif text.startswith("*/", i):
                    depth, i = depth - 1, i + 2
                else:
                    i += 1
            out.append(" ")
        elif c in "rb" and re.match(r'(br|r|b)?#*"', text[i:i + 6]) and (
            i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")
        ):
            m = re.match(r'(br|r|b)?(#*)"', text[i:])
            raw = m.group(1) in ("r", "br")
            hashes = m.group(2)
            i += m.end()
            if raw:
                end = text.find('"' + hashes, i)
                i = n if end < 0 else end + 1 + len(hashes)
            else:
                while i < n and text[i] != '"':
                    i += 2 if text[i] == "\\" else 1
                i += 1
            out.append('""')
        elif c == '"':
            i += 1
            while i < n and text[i] != '"':
                i += 2 if text[i] == "\\" else 1
            i += 1
            out.append('""')
        elif c == "'":
            m = re.match(r"'(\\(x[0-9a-fA-F]{2}|u\{[0-9a-fA-F]+\}|.)|[^\\'])'", text[i:])
            if m:
                i += m.end()
                out.append("' '")
            else:  # a lifetime or a label
                out.append(c)
                i += 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def use_paths(tree, prefix=()):
    """Expands a `use` tree (`a::{b, c::d as e, f::*}`) to its paths."""
    tree = tree.strip()
    paths = []
    depth, start, parts = 0, 0, []
    for k, ch in enumerate(tree):
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(tree[start:k])
            start = k + 1
    parts.append(tree[start:])
    for part in parts:
        part = part.strip()
        if not part:
            continue
        brace = part.find("{")
        if brace >= 0:
            head = [s for s in part[:brace].split("::") if s.strip()]
            inner = part[brace + 1:part.rfind("}")]
            paths += use_paths(inner, prefix + tuple(s.strip() for s in head))
        else:
            part = re.sub(r"\s+as\s+\S+$", "", part)
            segs = tuple(s.strip() for s in part.split("::") if s.strip())
            paths.append(prefix + segs)
    return paths


class File:
    def __init__(self, path, module):
        self.path = path
        self.module = module  # tuple of segments from the crate root
        self.code = strip(open(path, encoding="utf-8").read())
        # The inline modules: (start, end, names) spans.
        self.inline = []
        for m in re.finditer(r"\bmod\s+(" + IDENT + r")\s*\{", self.code):
            end = self.block_end(m.end() - 1)
            self.inline.append((m.start(), end, m.group(1)))

    def block_end(self, open_at):
        depth = 0
        for k in range(open_at, len(self.code)):
            if self.code[k] == "{":
                depth += 1
            elif self.code[k] == "}":
                depth -= 1
                if depth == 0:
                    return k
        return len(self.code)

    def module_at(self, pos):
        """The module path in effect at `pos` (the file's, plus inline mods)."""
        inner = [(s, name) for s, e, name in self.inline if s < pos < e]
        return self.module + tuple(name for _, name in sorted(inner))

    def declared(self):
        """`mod x;` declarations: (name, #[path] or None, module at them)."""
        for m in re.finditer(
            r"(#\[path\s*=\s*\"\"\]\s*)?(?:pub(?:\([^)]*\))?\s+)?mod\s+(" + IDENT + r")\s*;",
            self.code,
        ):
            yield m.group(2), m.start()

    def paths(self):
        """Every (module-relative path, module at it) the file names."""
        code = self.code
        for m in re.finditer(r"\buse\s+([^;]*);", code):
            for p in use_paths(m.group(1)):
                yield p, self.module_at(m.start())
        for m in re.finditer(
            r"(?<![A-Za-z0-9_:])(\$?crate|super|self)((?:\s*::\s*" + IDENT + r")+)", code
        ):
            if code[max(0, m.start() - 4):m.start()].strip().endswith("use"):
                continue
            segs = (m.group(1),) + tuple(
                s.strip() for s in m.group(2).split("::") if s.strip()
            )
            yield segs, self.module_at(m.start())
        # Paths from a module in scope (a child, or one a `use` brought in):
        # resolved by `resolve` only when the first segment is a child.
        for m in re.finditer(r"(?<![A-Za-z0-9_:$])(" + IDENT + r")((?:\s*::\s*" + IDENT + r")+)", code):
            if m.group(1) in ("crate", "super", "self"):
                continue
            if code[max(0, m.start() - 4):m.start()].strip().endswith("use"):
                continue
            segs = (m.group(1),) + tuple(
                s.strip() for s in m.group(2).split("::") if s.strip()
            )
            yield segs, self.module_at(m.start())


def path_attrs(raw_text):
    """`#[path = "x"] mod name;` pairs, read from the raw text."""
    return {
        m.group(2): m.group(1)
        for m in re.finditer(
            r'#\[path\s*=\s*"([^"]+)"\]\s*(?:#\[[^\]]*\]\s*)*(?:pub(?:\([^)]*\))?\s+)?mod\s+('
            + IDENT
            + r")\s*;",
            raw_text,
        )
    }


def crate_files(root):
    """module path -> File, walking the `mod` declarations from `root`."""
    files = {}
    todo = [(root, ())]
    while todo:
        path, module = todo.pop()
        if module in files or not os.path.exists(path):
            continue
        f = File(path, module)
        files[module] = f
        attrs = path_attrs(open(path, encoding="utf-8").read())
        base = os.path.dirname(path)
        stem = os.path.splitext(os.path.basename(path))[0]
        own_dir = base if module == () or stem == "mod" else os.path.join(base, stem)
        for name, pos in f.declared():
            inner = f.module_at(pos)[len(module):]
            if name in attrs:
                target = os.path.normpath(os.path.join(base, attrs[name]))
                todo.append((target, module + inner + (name,)))
                continue
            d = os.path.join(own_dir, *inner)
            for cand in (os.path.join(d, name + ".rs"), os.path.join(d, name, "mod.rs")):
                if os.path.exists(cand):
                    todo.append((cand, module + inner + (name,)))
                    break
    return files


def resolve(segs, here, modules):
    """The file module a path names (the longest known prefix), or None."""
    head, rest = segs[0], list(segs[1:])
    if head in ("crate", "$crate"):
        base = ()
    elif head == "self":
        base = here
    elif head == "super":
        base = here[:-1]
        while rest and rest[0] == "super":
            base, rest = base[:-1], rest[1:]
        while rest and rest[0] == "self":
            rest = rest[1:]
    elif here + (head,) in modules:  # a child module, named as in scope
        base, rest = here + (head,), rest
    else:
        return None
    full = tuple(base) + tuple(rest)
    for k in range(len(full), -1, -1):
        if full[:k] in modules:
            return full[:k]
    return None


def tarjan(graph):
    index, low, on, stack, out = {}, {}, set(), [], []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
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
            out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def main():
    repo = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..")
    repo = os.path.abspath(repo)
    crates_dir = os.path.join(repo, "crates")
    known_file = os.path.join(repo, "scripts", "import-cycles.known")
    known = set()
    if os.path.exists(known_file):
        for line in open(known_file, encoding="utf-8"):
            line = line.split("#", 1)[0].split()
            if line:
                known.add(frozenset(line))
    found, tolerated, seen = 0, 0, set()
    for crate in sorted(os.listdir(crates_dir)):
        src = os.path.join(crates_dir, crate, "src")
        roots = [os.path.join(src, r) for r in ("lib.rs", "main.rs")]
        bins = os.path.join(src, "bin")
        if os.path.isdir(bins):
            roots += [os.path.join(bins, b) for b in sorted(os.listdir(bins)) if b.endswith(".rs")]
        for root in roots:
            if not os.path.exists(root):
                continue
            files = crate_files(root)
            graph = {m: set() for m in files}
            why = {}
            for m, f in files.items():
                for segs, here in f.paths():
                    t = resolve(segs, here, files)
                    # A module is inside its ancestors: naming them is
                    # not an import circle.
                    if t is not None and t != m[: len(t)]:
                        graph[m].add(t)
                        why.setdefault((m, t), "::".join(segs))
            for comp in tarjan(graph):
                if len(comp) < 2:
                    continue
                names = [os.path.relpath(files[m].path, repo) for m in comp]
                if frozenset(names) in known:
                    seen.add(frozenset(names))
                    tolerated += 1
                    label = "known circle"
                else:
                    found += 1
                    label = "circle"
                print(f"{crate} ({os.path.basename(root)}): {len(comp)} files in a {label}:")
                for name in sorted(names):
                    print(f"    {name}")
                for a in comp if label == "circle" else ():
                    for b in sorted(graph[a] & set(comp)):
                        print(f"      {'::'.join(a) or 'crate'} -> {'::'.join(b) or 'crate'}"
                              f"  ({why[(a, b)]})")
    for gone in sorted(sorted(k) for k in known - seen):
        print(f"no longer a circle (take it off {os.path.relpath(known_file, repo)}):")
        print("    " + " ".join(gone))
    print(f"{found} new import circle(s), {tolerated} known")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Extracts WMI schema facts for the wmi_schema check of csi-proxy-host.

Reads the generated Go structs of github.com/microsoft/wmi (one per WMI
class: properties in the struct, methods with their parameters in the
comments and signatures) from a git checkout or mirror of that repository
and prints a compact fact file: for every class the product names (the
"MSFT_*", "Win32_*" and "CIM_*" string literals of
crates/csi-proxy-host/src/wmi_schema/names.rs) and every ancestor of it,
its properties (name, CIM type) and its methods with their parameters
(direction, name, CIM type), once per Windows Server version.

Usage:
  python3 scripts/wmi-schema-facts.py GIT_DIR [COMMIT] \
      > crates/csi-proxy-host/src/wmi_schema/published.txt

Only the Python 3 standard library and git are needed.
"""

import os
import re
import subprocess
import sys

# The Windows Server versions the facts are taken from (the directories
# of the repository), and the namespaces the product uses.
VERSIONS = ["server2019", "server23h2"]
NAMESPACES = [
    "root/microsoft/windows/storage",
    "root/microsoft/windows/smb",
    "root/cimv2",
]
NAMES_RS = os.path.join(
    os.path.dirname(os.path.abspath(__file__)),
    "..", "crates", "csi-proxy-host", "src", "wmi_schema", "names.rs",
)

# Go types of the generated structs and comments -> CIM types.
SCALARS = {
    "string": "string",
    "bool": "boolean",
    "byte": "uint8",
    "uint8": "uint8",
    "uint16": "uint16",
    "uint32": "uint32",
    "uint64": "uint64",
    "int8": "sint8",
    "int16": "sint16",
    "int32": "sint32",
    "int64": "sint64",
    "float32": "real32",
    "float64": "real64",
}


def git(gitdir, *args):
    return subprocess.run(
        ["git", "-C", gitdir, *args], check=True, capture_output=True, text=True
    ).stdout


class Package:
    """One Go package: the classes of one namespace of one version."""

    def __init__(self, gitdir, commit, directory):
        self.gitdir, self.commit, self.dir = gitdir, commit, directory
        listing = git(gitdir, "ls-tree", "--name-only", commit, directory + "/")
        self.files = {
            os.path.basename(p)[:-3]
            for p in listing.split()
            if p.endswith(".go") and "/" not in p[len(directory) + 1:]
        }
        self.cache = {}

    def source(self, name):
        if name not in self.cache:
            self.cache[name] = (
                git(self.gitdir, "show", f"{self.commit}:{self.dir}/{name}.go")
                if name in self.files
                else None
            )
        return self.cache[name]

    def enum_base(self, name):
        """The underlying Go type of an enum type `type X int`, else None."""
        src = self.source(name)
        if src is None:
            return None
        m = re.search(r"^type\s+" + re.escape(name) + r"\s+(\w+)\s*$", src, re.M)
        return m.group(1) if m else None

    def cim_type(self, go):
        go = go.strip()
        array = ""
        if go.startswith("[]"):
            go, array = go[2:].strip(), "[]"
        if go.endswith("[]"):
            go, array = go[:-2].strip(), "[]"
        if go in SCALARS:
            return SCALARS[go] + array
        if self.enum_base(go):
            # A value map: an integer whose width the Go file does not keep.
            return "enum" + array
        return "object:" + go + array


def parse_class(pkg, name):
    """(parent or None, [(prop, type)], [(method, [(dir, param, type)])])."""
    src = pkg.source(name)
    if src is None:
        return None
    m = re.search(r"^type\s+" + re.escape(name) + r"\s+struct\s*\{(.*?)^\}", src, re.M | re.S)
    if not m:
        return None
    parent, props = None, []
    for line in m.group(1).splitlines():
        line = line.strip()
        if not line or line.startswith("//"):
            continue
        if line.startswith("*"):
            base = line[1:]
            parent = None if base.startswith("cim.") else base
            continue
        field, gotype = line.split(None, 1)
        props.append((field, pkg.cim_type(gotype)))
    methods = []
    lines = src.splitlines()
    head = re.compile(r"^func \(instance \*" + re.escape(name) + r"\) (\w+)\(")
    for i, line in enumerate(lines):
        h = head.match(line)
        if not h or h.group(1).startswith(("SetProperty", "GetProperty")):
            continue
        # Parameter types: the <param> comments right above the function.
        types = {}
        j = i - 1
        while j >= 0 and (lines[j].startswith("// <param") or lines[j].strip() == ""):
            p = re.match(r'// <param name="(\w+)" type="([^"]*)">', lines[j])
            if p:
                types[p.group(1)] = pkg.cim_type(p.group(2))
            j -= 1
        # Directions: the /* IN */ ... annotations of the signature.
        sig = []
        k = i
        while True:
            sig.append(lines[k])
            if re.search(r"\)\s*\(result|\)\s*\(err|\)\s*\{\s*$", lines[k]):
                break
            k += 1
        dirs = {}
        for d, pname in re.findall(r"/\*\s*([A-Z /]+?)\s*\*/\s*(\w+)", "\n".join(sig)):
            dirs[pname] = {"IN": "in", "OPTIONAL IN": "in", "OUT": "out", "IN/OUT": "inout"}[d]
        params = []
        for pname in sorted(types):
            direction = dirs.get(pname, "out" if pname == "ReturnValue" else None)
            if direction is None:
                raise SystemExit(f"{pkg.dir}/{name}.{h.group(1)}: no direction for {pname}")
            params.append((direction, pname, types[pname]))
        methods.append((h.group(1), params))
    return parent, props, methods


def wanted_classes():
    with open(NAMES_RS, encoding="utf-8") as f:
        return sorted(set(re.findall(r'"((?:MSFT|Win32|CIM)_\w+)"', f.read())))


def main():
    if len(sys.argv) not in (2, 3):
        raise SystemExit(__doc__)
    gitdir = sys.argv[1]
    commit = git(gitdir, "rev-parse", sys.argv[2] if len(sys.argv) == 3 else "HEAD").strip()
    wanted = wanted_classes()
    out = [
        "# WMI schema facts for the wmi_schema check (csi-proxy-host).",
        "# Source: https://github.com/microsoft/wmi commit " + commit + ",",
        "#   the generated Go structs under <version>/<namespace>/<Class>.go.",
        "# Regenerate: python3 scripts/wmi-schema-facts.py <git dir of microsoft/wmi> [commit]",
        "#   > crates/csi-proxy-host/src/wmi_schema/published.txt",
        "# Lines: version V | class NAMESPACE NAME [PARENT] | prop NAME TYPE |",
        "#   method NAME | in/out/inout NAME TYPE (for the method above).",
        "# Types: CIM names; enum = a value-mapped integer; object:C = an",
        "#   embedded object or reference of class C; [] = an array.",
    ]
    for version in VERSIONS:
        out.append("version " + version)
        for ns in NAMESPACES:
            pkg = Package(gitdir, commit, f"{version}/{ns}")
            todo, done = [c for c in wanted if c in pkg.files], set()
            while todo:
                name = todo.pop(0)
                if name in done:
                    continue
                done.add(name)
                parsed = parse_class(pkg, name)
                if parsed is None:
                    continue
                parent, props, methods = parsed
                out.append(f"class {ns} {name}" + (f" {parent}" if parent else ""))
                out.extend(f"prop {p} {t}" for p, t in props)
                for mname, params in methods:
                    out.append("method " + mname)
                    out.extend(f"{d} {p} {t}" for d, p, t in params)
                if parent:
                    todo.append(parent)
    sys.stdout.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()

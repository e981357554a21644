#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Every crate built into tools/ustack must be usable in a GPL-2.0 program.

Reads `cargo metadata` (the resolved graph: normal and build dependencies, not
dev-dependencies, for this target) and evaluates each crate's SPDX expression: an OR needs
one acceptable side, an AND both. Prints one line per crate; exits 1 if any is not
acceptable or has no license field.
"""
import json
import re
import subprocess
import sys

# Licenses whose code may be combined into a GPL-2.0 binary (the FSF's list of
# GPLv2-compatible licenses). Apache-2.0 is not: its patent terms are compatible with
# GPLv3 only, so an "MIT OR Apache-2.0" crate is taken under MIT. MPL-2.0 and CDDL-1.0
# (inferno, the flame graph crate) are not accepted either.
ACCEPTED = {
    "MIT", "MIT-0", "BSD-2-Clause", "BSD-3-Clause", "ISC", "Zlib", "0BSD", "Unlicense",
    "CC0-1.0", "Unicode-DFS-2016", "Unicode-3.0", "BSL-1.0",
    "LGPL-2.1", "LGPL-2.1-only", "LGPL-2.1-or-later", "GPL-2.0", "GPL-2.0-only",
    "GPL-2.0-or-later",
}


def tokens(expr):
    return re.findall(r"\(|\)|[A-Za-z0-9.+-]+", expr.replace("/", " OR "))


def parse(toks):
    """expr := term (OR term)*; term := atom (AND atom)*; atom := ID [WITH ID] | (expr)"""
    def atom():
        t = toks.pop(0)
        if t == "(":
            v = expr()
            toks.pop(0)
            return v
        if toks and toks[0] == "WITH":
            toks.pop(0)
            toks.pop(0)
        return t in ACCEPTED

    def term():
        v = atom()
        while toks and toks[0] == "AND":
            toks.pop(0)
            v = atom() and v
        return v

    def expr():
        v = term()
        while toks and toks[0] == "OR":
            toks.pop(0)
            v = term() or v
        return v

    return expr()


# The evaluator on known expressions, checked on every run.
VECTORS = {
    "MIT": True, "CDDL-1.0": False, "Apache-2.0": False, "MIT OR Apache-2.0": True,
    "Apache-2.0 / MIT": True, "(MIT OR Apache-2.0) AND Unicode-3.0": True,
    "MIT AND CDDL-1.0": False, "Apache-2.0 WITH LLVM-exception OR MIT": True,
    "Apache-2.0 WITH LLVM-exception": False, "MPL-2.0": False,
}


def main(manifest):
    for expr, want in VECTORS.items():
        assert parse(tokens(expr)) == want, f"license evaluator wrong on {expr!r}"
    meta = json.loads(subprocess.run(
        ["cargo", "metadata", "--format-version", "1", "--locked", "--manifest-path", manifest,
         "--filter-platform", "x86_64-unknown-linux-gnu"],
        check=True, capture_output=True, text=True).stdout)
    pkgs = {p["id"]: p for p in meta["packages"]}
    nodes = {n["id"]: n for n in meta["resolve"]["nodes"]}
    root = meta["resolve"]["root"]
    seen, todo = set(), [root]
    while todo:
        i = todo.pop()
        if i in seen:
            continue
        seen.add(i)
        for d in nodes[i]["deps"]:
            if any(k["kind"] in (None, "build") for k in d["dep_kinds"]):
                todo.append(d["pkg"])
    bad = 0
    for i in sorted(seen, key=lambda i: pkgs[i]["name"]):
        p = pkgs[i]
        lic = p.get("license")
        ok = bool(lic) and parse(tokens(lic))
        bad += not ok
        print(f"{'ok' if ok else 'NOT OK'}  {p['name']} {p['version']}: {lic or 'no license field'}")
    print(f"licenses: {len(seen)} crates, {bad} not usable in a GPL-2.0 program")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "tools/ustack/Cargo.toml"))

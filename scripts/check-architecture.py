#!/usr/bin/env python3
"""Check servelab's architecture: crates depend only on crates of lower layers, and no crate
has an import circle between its modules. Exits 1 and names each violation.

    python3 scripts/check-architecture.py

The layers are the pipeline of docs/architecture.md. Module circles are found from the
`crate::` and `super::` paths in each crate's non-test source (a module that names another
module imports it).
"""
import json
import re
import subprocess
import sys
from pathlib import Path

# Lower layers first. A crate may depend on crates of strictly lower layers only.
LAYERS = [
    ["servelab-timer", "servelab-load"],
    ["servelab-records"],
    ["servelab-workload", "servelab-metrics", "servelab-engine"],
    ["servelab-client", "servelab-sim", "servelab-outputs", "servelab-plan"],
    ["servelab-exchange"],
    ["servelab-store", "servelab-bench", "servelab-predict"],
    ["servelab-sweep", "servelab-lab", "servelab-scale"],
    ["servelab-compare", "servelab-settings"],
    ["servelab"],
]
LAYER = {name: i for i, names in enumerate(LAYERS) for name in names}


def crate_graph():
    meta = json.loads(
        subprocess.run(
            ["cargo", "metadata", "--format-version", "1", "--no-deps", "--offline"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    )
    out = {}
    for p in meta["packages"]:
        deps = [d["name"] for d in p["dependencies"] if d["name"].startswith("servelab") and d["kind"] is None]
        out[p["name"]] = (Path(p["manifest_path"]).parent, deps)
    return out


def strip_tests(text):
    """Source without its `#[cfg(test)]` module (the tests may use anything) and without
    comments (a doc link is not an import)."""
    m = re.search(r"^#\[cfg\(test\)\]\s*\n\s*mod tests", text, re.M)
    text = text[: m.start()] if m else text
    return re.sub(r"//[^\n]*", "", text)


def module_of(src_dir, path):
    rel = path.relative_to(src_dir).with_suffix("")
    parts = rel.parts
    if parts[-1] in ("lib", "main", "mod"):
        parts = parts[:-1]
    return parts[0] if parts else None


def module_circles(src_dir):
    files = sorted(src_dir.rglob("*.rs"))
    modules = {module_of(src_dir, f) for f in files} - {None}
    edges = {m: set() for m in modules}
    for f in files:
        m = module_of(src_dir, f)
        if m is None:
            continue
        text = strip_tests(f.read_text())
        names = set(re.findall(r"\bcrate::(\w+)", text))
        for group in re.findall(r"\bcrate::\{([^}]*)\}", text):
            names |= {n.strip().split("::")[0] for n in group.split(",")}
        if f.parent == src_dir:
            names |= set(re.findall(r"\bsuper::(\w+)", text))
        for n in names:
            if n in modules and n != m:
                edges[m].add(n)
    return [c for c in sccs(edges) if len(c) > 1]


def sccs(edges):
    """Strongly connected components (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
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

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def main():
    problems = []
    graph = crate_graph()
    for name, (_, deps) in sorted(graph.items()):
        if name not in LAYER:
            problems.append(f"{name}: not in any layer of scripts/check-architecture.py")
            continue
        for d in deps:
            if LAYER.get(d, 99) >= LAYER[name]:
                problems.append(f"{name} depends on {d}, which is not below it in the pipeline")
    for name, (root, _) in sorted(graph.items()):
        src = root / "src"
        for c in module_circles(src):
            problems.append(f"{name}: import circle between modules {', '.join(c)}")
    for p in problems:
        print(p)
    crates = len(graph)
    if problems:
        print(f"{len(problems)} architecture problems in {crates} crates")
        return 1
    print(f"architecture ok: {crates} crates, dependencies only downward, no module circles")
    return 0


if __name__ == "__main__":
    sys.exit(main())

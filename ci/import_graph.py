"""The package's import graph, read from the code's imports (every ``import`` statement, at any depth).

Usage: ``python ci/import_graph.py [--check | --layers]`` from the repository root. Prints one
``module -> imported module`` line per edge between the package's own modules
(``jfa_verify.*``: the folders jfa_verify/, kernels/, oracles/ and fuzz/ under
their installed names). ``--check`` exits 1, naming what is wrong, when the graph
has a cycle, when a framework module imports a kernel module (``jfa_verify.kernels.*``:
the framework finds kernels through entry points only), or when any module
imports a folder by its repository name (``kernels``, ``oracles``, ``fuzz``), or when a module
imports one of a higher layer (``LAYERS``: the layer order a reader sees in ``jfa_verify/``'s folders).
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from setup import FOLDERS  # noqa: E402  (installed name -> folder: the one home of the package layout)

sys.path.pop(0)
REPO_NAMES = ("kernels", "oracles", "fuzz")
# The layers, lowest first: a module may import its own layer and those below it, never one above.
# ``jfa_verify`` itself (the public names, imported lazily) and its public ``strategies`` and ``pytest_plugin``
# are placed by what they import; kernels stand on top (they use the framework; it never imports them).
LAYERS = (
    ("jfa_verify", "jfa_verify.core"),                      # contract, dtypes, errors, exits, device
    ("jfa_verify.protocol",),                               # the kernel protocol and registry
    ("jfa_verify.scheduling",),                             # tile schedules, plans and their invariants
    ("jfa_verify.cases", "jfa_verify.strategies"),          # cases, the input-space model, strategies
    ("jfa_verify.judge", "jfa_verify.oracles"),             # references, budgets, comparison, localization
    ("jfa_verify.run",),                                    # one case run, isolation, the loop, reports
    ("jfa_verify.checks",),                                 # relations, calls, determinism, perf, suites
    ("jfa_verify.fuzz",),                                   # campaigns, mutation testing
    ("jfa_verify.workflows",),                              # gate, matrix, bisect, calibration
    ("jfa_verify.cli", "jfa_verify.pytest_plugin"),         # the command line and the pytest plugin
    ("jfa_verify.kernels",),                                # kernels and peers under test
)


def layer_of(module: str) -> int | None:
    """The index in ``LAYERS`` of the longest prefix naming ``module`` or a package above it (None: none)."""
    best, rank = -1, None
    for i, prefixes in enumerate(LAYERS):
        for p in prefixes:
            inside = module == p or (p != "jfa_verify" and module.startswith(p + "."))  # the root: itself only
            if inside and len(p) > best:
                best, rank = len(p), i
    return rank


def modules() -> dict[str, Path]:
    out = {}
    for package, folder in FOLDERS.items():
        for f in sorted((ROOT / folder).rglob("*.py")):
            rel = f.relative_to(ROOT / folder).with_suffix("").parts
            name = ".".join((package, *rel))
            out[name[: -len(".__init__")] if name.endswith(".__init__") else name] = f
    return out


def edges(mods: dict[str, Path]) -> tuple[set[tuple[str, str]], list[str]]:
    """``(edges, repo-name imports)``; an import of ``a.b.c`` counts as an edge to the deepest module known."""
    def resolve(name: str):
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name or None

    found, bad = set(), []
    for name, path in mods.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join(parts + ([base] if base else []))
                targets = [base] + [f"{base}.{a.name}" for a in node.names]
            else:
                continue
            for t in targets:
                if t.split(".")[0] in REPO_NAMES:
                    bad.append(f"{path.relative_to(ROOT)}:{node.lineno}: imports {t!r} by its repository name")
                r = resolve(t)
                if r and r != name and not name.startswith(r + "."):  # a module's own package is not an edge
                    found.add((name, r))
    return found, bad


def cycles(graph: set[tuple[str, str]]) -> list[list[str]]:
    """Every elementary cycle's nodes, found by depth-first search (one list per strongly connected part)."""
    succ: dict[str, list[str]] = {}
    for a, b in graph:
        succ.setdefault(a, []).append(b)
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in succ.get(v, []):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            part = []
            while True:
                w = stack.pop()
                on.discard(w)
                part.append(w)
                if w == v:
                    break
            if len(part) > 1:
                out.append(sorted(part))

    sys.setrecursionlimit(10000)
    for v in sorted(succ):
        if v not in index:
            visit(v)
    return out


def problems() -> list[str]:
    mods = modules()
    graph, bad = edges(mods)
    out = list(bad)
    out += [f"import cycle: {' <-> '.join(c)}" for c in cycles(graph)]
    out += [f"framework module {a} imports kernel module {b} by name" for a, b in sorted(graph)
            if b.startswith("jfa_verify.kernels") and not a.startswith("jfa_verify.kernels")]
    for a, b in sorted(graph):
        la, lb = layer_of(a), layer_of(b)
        if la is None or lb is None:
            out.append(f"module {a if la is None else b} is in no layer (ci/import_graph.py LAYERS)")
        elif lb > la:
            out.append(f"layer order: {a} ({LAYERS[la][0]}) imports {b} ({LAYERS[lb][0]}), a higher layer")
    return out


def main() -> int:
    mods = modules()
    graph, _ = edges(mods)
    if "--layers" in sys.argv:
        for i, prefixes in enumerate(LAYERS):
            members = sorted(m for m in mods if layer_of(m) == i)
            print(f"{i} {', '.join(prefixes)}: {len(members)} modules")
        return 0
    if "--check" not in sys.argv:
        for a, b in sorted(graph):
            print(f"{a} -> {b}")
        print(f"{len(mods)} modules, {len(graph)} edges")
        return 0
    found = problems()
    for p in found:
        print(p)
    print(f"{len(mods)} modules, {len(graph)} edges: {'OK' if not found else f'{len(found)} problem(s)'}")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())

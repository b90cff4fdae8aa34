"""The package's import graph, read from the code's imports (every ``import`` statement, at any depth).

Usage: ``python ci/import_graph.py [--check]`` from the repository root. Prints one
``module -> imported module`` line per edge between the package's own modules
(``jfa_verify.*``: the folders jfa_verify/, kernels/, oracles/ and fuzz/ under
their installed names). ``--check`` exits 1, naming what is wrong, when the graph
has a cycle, when a framework module imports a kernel module (``jfa_verify.kernels.*``:
the framework finds kernels through entry points only), or when any module
imports a folder by its repository name (``kernels``, ``oracles``, ``fuzz``).
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# installed name -> folder (pyproject's package-dir)
FOLDERS = {"jfa_verify": "jfa_verify", "jfa_verify.kernels": "kernels", "jfa_verify.oracles": "oracles",
           "jfa_verify.fuzz": "fuzz"}
REPO_NAMES = ("kernels", "oracles", "fuzz")


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
    return out


def main() -> int:
    mods = modules()
    graph, _ = edges(mods)
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

"""The module graph has no circles (issue 27.5): every import counts, a function's lazy one too.

Why: a circle is two modules that cannot be understood, tested or changed one at a time; the lazy
imports that hid them (results <-> explain, adapter <-> audit) now go through a registration
(``results.EXPLAINERS``) and one shared module (``smtdims_jax.frames``).
"""

from __future__ import annotations

import ast
import os
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ((ROOT, "smtdims"), (ROOT / "plugins", "smtdims_jax"), (ROOT / "plugins", "smtdims_pytest"))


def _modules() -> dict[str, Path]:
    out = {}
    for root, pkg in PACKAGES:
        for path in (root / pkg).rglob("*.py"):
            name = ".".join(path.relative_to(root).with_suffix("").parts)
            out[name.removesuffix(".__init__")] = path
    return out


def import_graph() -> dict[str, set[str]]:
    """Module -> the modules of these packages it imports (``from pkg import mod`` is ``pkg.mod``)."""
    mods = _modules()
    graph: dict[str, set[str]] = {m: set() for m in mods}
    for m, path in mods.items():
        package = m.split(".") if path.name == "__init__.py" else m.split(".")[:-1]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                base = package[: len(package) - node.level + 1] if node.level else []
                target = ".".join(base + ([node.module] if node.module else []))
                subs = [f"{target}.{a.name}" for a in node.names if f"{target}.{a.name}" in mods]
                found = subs if len(subs) == len(node.names) else [target, *subs]
            elif isinstance(node, ast.Import):
                found = [a.name for a in node.names]
            else:
                continue
            graph[m] |= {t for t in found if t in mods and t != m}
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on.add(start)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    x = stack.pop()
                    on.discard(x)
                    comp.append(x)
                    if x == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def test_the_checker_sees_a_circle():
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert circles({"a": {"b"}, "b": set()}) == []


def test_the_graph_reads_relative_and_lazy_imports():
    g = import_graph()
    assert "smtdims.reasoner" in g["smtdims.explain"] and "smtdims_jax.frames" in g["smtdims_jax.audit"]
    assert "smtdims_jax" in g["smtdims"]  # install() imports the plugin inside a function: it counts


def test_no_import_circles():
    assert circles(import_graph()) == [], "modules that import each other (directly or through others)"


def test_jax_private_imports_live_in_the_plugin():
    """All ``jax._src`` imports live in plugins/smtdims_jax/ (the brief's rule), never in smtdims/."""
    for path in (ROOT / "smtdims").rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        assert "jax._src" not in text.replace("`jax._src`", ""), os.path.relpath(path, ROOT)

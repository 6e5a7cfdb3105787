"""No import cycles in the ncreel package, and :mod:`ncreel.config.settings` is a leaf.

The graph is read from the source with :mod:`ast`, function-level imports included: a
cycle that a lazy import hides at start-up is still a cycle to whoever changes either
module. ``if TYPE_CHECKING:`` blocks are left out (they never run).
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "workflow" / "ncreel"


def module_names(root: Path = PACKAGE) -> dict[str, Path]:
    """Every module of the package, ``{dotted name: path}`` (packages by their __init__)."""
    names = {}
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        names[".".join(parts)] = path
    return names


def _type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imported(tree: ast.AST, module: str, is_package: bool) -> list[tuple[str, list | None]]:
    """Imports anywhere in ``tree``: ``(module, None)`` for ``import module``,
    ``(module, [names])`` for ``from module import names`` (relative ones resolved)."""
    found = []
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.If) and _type_checking(node):
            stack.extend(node.orelse)
            continue
        if isinstance(node, ast.Import):
            found.extend((alias.name, None) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = module.split(".")
                anchor = anchor[:len(anchor) - node.level + (1 if is_package else 0)]
                base = ".".join([*anchor, base] if base else anchor)
            found.append((base, [alias.name for alias in node.names]))
        stack.extend(ast.iter_child_nodes(node))
    return found


def import_graph(root: Path = PACKAGE) -> dict[str, set[str]]:
    """``{module: modules of the package it imports}``.

    Importing ``a.b.c`` runs ``a/__init__`` and ``a/b/__init__`` first, so an import is an
    edge to the module and to its parent packages, except the importer's own parents
    (which are always imported before it). ``from a.b import name`` where ``name`` is not
    a submodule reads ``a/b/__init__``: an edge to ``a.b`` even from inside ``a.b``.
    """
    names = module_names(root)
    graph = {}
    for name, path in names.items():
        targets = []  # (dotted name, whether its __init__ itself is read)
        tree = ast.parse(path.read_text(), str(path))
        for base, imported in _imported(tree, name, path.name == "__init__.py"):
            if imported is None:
                targets.append((base, False))
                continue
            submodules = [f"{base}.{n}" for n in imported if f"{base}.{n}" in names]
            targets += [(sub, False) for sub in submodules]
            targets.append((base, len(submodules) < len(imported)))
        edges = set()
        for dotted, explicit in targets:
            parts = dotted.split(".")
            for i in range(1, len(parts) + 1):
                target = ".".join(parts[:i])
                own_parent = name.startswith(target + ".")
                if target in names and target != name and (
                        not own_parent or (explicit and i == len(parts))):
                    edges.add(target)
        graph[name] = edges
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan), sorted."""
    index, low, on_stack, stack, found = {}, {}, set(), [], []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10 * len(graph) + 100))
    try:
        for v in sorted(graph):
            if v not in index:
                visit(v)
    finally:
        sys.setrecursionlimit(limit)
    return sorted(found)


def _path_in(graph: dict[str, set[str]], component: list[str]) -> str:
    """One cycle through the component, for the failure message: a -> b -> a."""
    members = set(component)
    start = component[0]
    path, seen = [start], {start}
    while True:
        nxt = sorted(graph[path[-1]] & members)
        back = start in nxt
        if back and len(path) > 1:
            return " -> ".join([*path, start])
        nxt = [n for n in nxt if n not in seen] or [start]
        if nxt == [start]:
            return " -> ".join([*path, start])
        path.append(nxt[0])
        seen.add(nxt[0])


def test_graph_sees_a_cycle(tmp_path):
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("from pkg.sub import rows\n")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "rows.py").write_text("from pkg import settings\n")
    (pkg / "settings.py").write_text("def f():\n    from pkg.sub.rows import X\n")
    (pkg / "sub" / "back.py").write_text("def f():\n    from pkg.sub import VALUE\n")
    (pkg / "sub" / "__init__.py").write_text("from pkg.sub.back import f\nVALUE = 1\n")
    (pkg / "leaf.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import pkg.settings\n")
    graph = import_graph(pkg)
    assert graph["pkg.leaf"] == set()
    assert cycles(graph) == [["pkg.settings", "pkg.sub.rows"], ["pkg.sub", "pkg.sub.back"]]


#: Cycles known and not yet broken, each with what breaks it (none now).
KNOWN: list[list[str]] = []


def test_no_import_cycles():
    graph = import_graph()
    assert len(graph) > 40, sorted(graph)
    found = [c for c in cycles(graph) if c not in KNOWN]
    assert not found, "import cycles:\n" + "\n".join(_path_in(graph, c) for c in found)


def test_settings_is_a_leaf():
    """Login-node tools read settings and calibration without the scientific stack."""
    assert import_graph()["ncreel.config.settings"] <= {
        "ncreel", "ncreel.core", "ncreel.core.errors", "ncreel.core.io"}


#: The package's folders, lowest first: each may import only itself and those before it.
LAYERS = ["core", "config", "pg", "input", "cells", "region", "run", "cluster", "render",
          "report", "jobs"]
#: What the package's top level holds: its entry points (and the package itself).
ENTRY_POINTS = {"ncreel", "ncreel.__main__", "ncreel.cli", "ncreel.sample"}


def layer(module: str) -> int:
    """Rank of a module's folder in :data:`LAYERS`; entry points rank above all."""
    if module in ENTRY_POINTS:
        return len(LAYERS)
    return LAYERS.index(module.split(".")[1])


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    """Imports from a folder to one later in :data:`LAYERS` (``ncreel`` itself excepted)."""
    return [f"{a} -> {b}" for a in sorted(graph) for b in sorted(graph[a])
            if b != "ncreel" and layer(b) > layer(a)]


def test_layers_see_a_wrong_way_import():
    graph = {"ncreel.input.source": {"ncreel.render.frame", "ncreel.core.errors"},
             "ncreel.render.frame": {"ncreel.input.source"}, "ncreel.core.errors": set()}
    assert upward_imports(graph) == ["ncreel.input.source -> ncreel.render.frame"]


def test_folders_import_only_lower_folders():
    """Reading inputs never imports the cells, rendering, the cluster code... (LAYERS)."""
    graph = import_graph()
    assert not upward_imports(graph), "\n".join(upward_imports(graph))


def test_top_level_holds_entry_points_and_folders_only():
    top = {p.stem for p in PACKAGE.glob("*.py")}
    assert top == {"__init__", "__main__", "cli", "sample"}
    folders = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()}
    assert folders == set(LAYERS)
    for name in folders:  # each opens with a docstring of its concern
        tree = ast.parse((PACKAGE / name / "__init__.py").read_text())
        assert ast.get_docstring(tree), name


def test_no_two_modules_share_a_name():
    """Nor a module and a workflow script (``process_shard`` was both)."""
    stems = [p.stem for p in PACKAGE.rglob("*.py") if p.stem != "__init__"]
    stems += [p.stem for p in (PACKAGE.parent / "scripts").glob("*.py")]
    assert sorted(s for s in set(stems) if stems.count(s) > 1) == []


@pytest.mark.parametrize("module", ["ncreel.config.settings", "ncreel.cells",
                                    "ncreel.input.source", "ncreel.input.cfaxes",
                                    "ncreel.input.timeaxis", "ncreel.input.mesh",
                                    "ncreel.region.restrict", "ncreel.jobs.runconfig"])
def test_imports_alone(module):
    """Each module imports first in a fresh interpreter (what a lazy cycle breaks)."""
    subprocess.run([sys.executable, "-c", f"import {module}"], check=True,
                   cwd=PACKAGE.parent)

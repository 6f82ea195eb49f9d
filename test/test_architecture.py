"""The shape of the package (docs/architecture.md): the core groups import only downwards, nothing in the core
imports a node or a command-line tool, and a core module longer than ~400 lines says why in its docstring."""

from __future__ import annotations

import ast
import importlib.util
import os

from test.ros_helpers import REPO_ROOT

_spec = importlib.util.spec_from_file_location("import_graph", os.path.join(REPO_ROOT, "tools", "import_graph.py"))
import_graph = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(import_graph)

# what each part may import (the layers of docs/architecture.md); anything else is a violation. The shared leaves
# of the core (input checks, bounded YAML, short excerpts in errors, numerical rank) import only each other.
LEAVES = {"core.validation", "core.numerics", "core.excerpt", "core.limited_yaml"}
GROUPS = {"core.robot", "core.switching", "core.estop", "core.projection", "core.reactions"}
ALLOWED = {
    **{leaf: LEAVES - {leaf} for leaf in LEAVES},
    "core.robot": LEAVES,
    "core.switching": LEAVES | {"core.robot"},
    "core.reactions": LEAVES | {"core.robot"},
    "core.projection": LEAVES | {"core.robot", "core.switching"},
    "core.estop": LEAVES | {"core.robot", "core.switching"},
    "nodes": LEAVES | GROUPS,
    "cli": LEAVES | GROUPS | {"nodes"},
}


def test_every_part_imports_only_the_layers_below_it():
    edges = import_graph.part_edges()
    parts = {import_graph.part_of(m) for m in import_graph.modules()} - {None, "core"}
    assert parts <= set(ALLOWED), f"parts without a layer in ALLOWED: {parts - set(ALLOWED)}"
    bad = {p: sorted(t - ALLOWED[p]) for p, t in edges.items() if t - ALLOWED[p]}
    assert not bad, f"imports against the layering: {bad}"


def test_docs_architecture_shows_the_current_graph():
    with open(os.path.join(REPO_ROOT, "docs", "architecture.md"), encoding="utf-8") as fh:
        assert import_graph.table() in fh.read(), "docs/architecture.md: re-run python tools/import_graph.py"


def test_long_core_modules_state_why_they_are_long():
    too_long = []
    for module, path in import_graph.modules().items():
        if not module.startswith("vtm_dynamics.core"):
            continue
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
        if text.count("\n") > 420 and "Size:" not in (ast.get_docstring(ast.parse(text)) or ""):
            too_long.append(module)
    assert not too_long, f"core modules over ~400 lines without a 'Size:' reason in their docstring: {too_long}"

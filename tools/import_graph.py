#!/usr/bin/env python3
"""The import graph of the vtm_dynamics package at the level of its parts: the core groups (``core.robot``,
``core.switching``, ...), the shared core leaves (``core.validation``, ``core.numerics``), ``nodes`` and ``cli``.
Prints a Markdown table (``python tools/import_graph.py``), read by ``docs/architecture.md`` and checked by
``test/test_architecture.py``. Only imports of the package itself count (``from vtm_dynamics... import``), also
those inside functions.
"""

from __future__ import annotations

import ast
import os
import sys
from collections import defaultdict

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = os.path.join(ROOT, "vtm_dynamics")


def part_of(module: str) -> str | None:
    """'core.estop' for vtm_dynamics.core.estop.*, 'nodes' for vtm_dynamics.nodes.*, ...; None outside."""
    parts = module.split(".")
    if parts[0] != "vtm_dynamics" or len(parts) < 2:
        return None
    if parts[1] == "core":
        return "core" if len(parts) == 2 else f"core.{parts[2]}"
    return parts[1]


def modules() -> dict[str, str]:
    """{dotted module name: path} of every module of the package."""
    out = {}
    for dirpath, _, files in os.walk(PACKAGE):
        for name in files:
            if name.endswith(".py"):
                path = os.path.join(dirpath, name)
                dotted = os.path.relpath(path, ROOT)[:-3].replace(os.sep, ".")
                out[dotted[: -len(".__init__")] if dotted.endswith(".__init__") else dotted] = path
    return out


def module_edges() -> dict[str, set[str]]:
    """{module: {imported package modules}}; ``from vtm_dynamics.core import estop`` counts as core.estop."""
    known = modules()
    edges: dict[str, set[str]] = defaultdict(set)
    for module, path in known.items():
        with open(path, encoding="utf-8") as fh:
            tree = ast.parse(fh.read())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0 and \
                    node.module.startswith("vtm_dynamics"):
                for alias in node.names:
                    sub = f"{node.module}.{alias.name}"
                    edges[module].add(sub if sub in known else node.module)
            elif isinstance(node, ast.Import):
                edges[module].update(a.name for a in node.names if a.name.startswith("vtm_dynamics"))
    return edges


def part_edges() -> dict[str, set[str]]:
    out: dict[str, set[str]] = defaultdict(set)
    for module, targets in module_edges().items():
        a = part_of(module)
        for t in targets:
            b = part_of(t)
            if a and b and a != b and b != "core":
                out[a].add(b)
    return out


def table() -> str:
    edges = part_edges()
    parts = sorted({part_of(m) for m in modules()} - {None, "core"})
    lines = ["| part | imports |", "|---|---|"]
    lines += [f"| `{p}` | {', '.join(f'`{t}`' for t in sorted(edges.get(p, ()))) or '-'} |" for p in parts]
    return "\n".join(lines)


if __name__ == "__main__":
    print(table())
    sys.exit(0)

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
GROUPS = {"core.robot", "core.switching", "core.estop", "core.projection", "core.reactions", "core.stopping",
          "core.stopsafe"}
ALLOWED = {
    **{leaf: LEAVES - {leaf} for leaf in LEAVES},
    "core.robot": LEAVES,
    "core.switching": LEAVES | {"core.robot"},
    "core.reactions": LEAVES | {"core.robot", "core.projection"},  # KKT/Aghili reaction runs compare formulations
    "core.projection": LEAVES | {"core.robot", "core.switching"},
    "core.estop": LEAVES | {"core.robot", "core.switching"},
    "core.stopping": LEAVES | {"core.robot", "core.switching", "core.estop"},
    "core.stopsafe": LEAVES | {"core.robot", "core.switching", "core.estop", "core.stopping"},  # stop-safe motion
    "recordings": LEAVES | GROUPS,  # rosbag2 files and the stops in them: not physics, not ROS
    "nodes": LEAVES | GROUPS | {"recordings"},
    "scaleout": LEAVES | GROUPS,  # the distributed engine's side: above the core, beside the nodes
    "cli": LEAVES | GROUPS | {"nodes", "recordings", "scaleout"},
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


def test_importing_a_node_or_tool_module_changes_nothing_in_the_process():
    import subprocess

    from test.ros_helpers import python_executable, ros_subprocess_env

    names = sorted(m for m in import_graph.modules() if m.startswith(("vtm_dynamics.nodes.", "vtm_dynamics.cli.")))
    code = ("import os, sys, importlib; env = dict(os.environ); switch = sys.getswitchinterval(); "
            f"[importlib.import_module(m) for m in {names!r}]; "
            "changed = sorted(k for k in set(env) | set(os.environ) if env.get(k) != os.environ.get(k)); "
            "print(changed, sys.getswitchinterval() == switch)")
    out = subprocess.run([python_executable(), "-c", code], capture_output=True, text=True, timeout=120,
                         env=ros_subprocess_env(), cwd=REPO_ROOT)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "[] True", out.stdout

"""The shape of the package (docs/architecture.md), checked on every module: the parts import only the layers under
them, no module imports another in a circle (imports inside functions included), no private name is imported
from another module, long modules and functions say why with a size the code has, the tests mirror the package,
and docs/architecture.md is what tools/import_graph.py generates from the code."""

from __future__ import annotations

import importlib.util
import os
import sys

from test.ros_helpers import REPO_ROOT

_spec = importlib.util.spec_from_file_location("import_graph", os.path.join(REPO_ROOT, "tools", "import_graph.py"))
import_graph = importlib.util.module_from_spec(_spec)
sys.modules["import_graph"] = import_graph  # its dataclasses look their module up
_spec.loader.exec_module(import_graph)
module_sizes = import_graph.load_tool("module_sizes")

# what each part may import (the layers of docs/architecture.md); anything else is a violation. The shared leaves
# of the core (input checks, bounded YAML, short excerpts in errors, numerical rank, package data, bounded file
# reading) import only each other.
LEAVES = {"core.validation", "core.numerics", "core.excerpt", "core.limited_yaml", "core.package_data",
          "core.bounded_file"}
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
    "views": LEAVES | GROUPS,  # presentation (3-D views of core results): above the core, never imported by it
    "nodes": LEAVES | GROUPS | {"recordings", "views"},
    "scaleout": LEAVES | GROUPS,  # the distributed engine's side: above the core, beside the nodes
    "cli": LEAVES | GROUPS | {"nodes", "recordings", "scaleout", "views"},
}
# test directories that mirror no package directory: repository-wide rules (test/ itself), fuzzing across the
# parsers and nodes, and the interface package vtm_msgs
CROSS_CUTTING_TEST_DIRS = {".", "fuzz", "msgs"}
# what a core test may not import, directly or through the test helpers it imports: the core runs without ROS, so
# its specification does too
ROS_MODULES = ("rclpy", "rcl_interfaces", "builtin_interfaces", "vtm_dynamics.nodes")


def _all_python_files() -> list[str]:
    return [f for top in ("vtm_dynamics", "test", "tools", "bench")
            for f in import_graph.python_files(os.path.join(REPO_ROOT, top))]


# ------------------------------------------------------------------------------------------------------ imports
def test_every_part_imports_only_the_layers_below_it():
    edges = import_graph.part_edges()
    parts = {import_graph.part_of(m) for m in import_graph.modules()} - {None, "core"}
    assert parts <= set(ALLOWED), f"parts without a layer in ALLOWED: {parts - set(ALLOWED)}"
    bad = {p: sorted(t - ALLOWED[p]) for p, t in edges.items() if t - ALLOWED[p]}
    assert not bad, f"imports against the layering: {bad}"


def test_no_module_imports_another_in_a_circle():
    found = import_graph.cycles()
    assert not found, "import cycles (imports inside functions included): " + "; ".join(
        " <-> ".join(m.removeprefix("vtm_dynamics.") for m in c) for c in found)


def test_the_cycle_check_sees_imports_inside_functions_and_relative_ones(tmp_path):
    package = tmp_path / "vtm_dynamics" / "demo"
    package.mkdir(parents=True)
    (package / "a.py").write_text("def f():\n    from vtm_dynamics.demo import b\n", encoding="utf-8")
    (package / "b.py").write_text("from . import a\n", encoding="utf-8")
    a, b = import_graph.imports_of(str(package / "a.py")), import_graph.imports_of(str(package / "b.py"))
    assert [(i.module, i.name, i.in_function) for i in a] == [("vtm_dynamics.demo", "b", True)]
    assert [(i.module, i.name, i.in_function) for i in b] == [("vtm_dynamics.demo", "a", False)]
    assert import_graph.cycles({"x.a": {"x.b"}, "x.b": {"x.c"}, "x.c": {"x.a"}, "x.d": {"x.a"}}) == [
        ["x.a", "x.b", "x.c"]]


def test_no_private_name_is_imported_from_another_module():
    found = import_graph.private_imports(_all_python_files())
    assert not found, "private names used across modules (make them public where shared, or move them):\n" + \
        "\n".join(found)


# ------------------------------------------------------------------------------------------------------ sizes
def test_long_modules_and_functions_say_why_with_a_size_the_code_has():
    found = module_sizes.problems()
    assert not found, "\n".join(found)


def test_a_size_reason_the_code_contradicts_fails(tmp_path):
    package = tmp_path / "vtm_dynamics"
    package.mkdir()
    body = "\n".join(f"x{i} = {i}" for i in range(module_sizes.MODULE_LINES)) + "\n"
    (package / "long_without.py").write_text('"""A long module."""\n' + body, encoding="utf-8")
    (package / "long_stale.py").write_text('"""A long module.\n\nSize: about 200 lines: stale."""\n' + body,
                                           encoding="utf-8")
    (package / "long_vague.py").write_text('"""A long module.\n\nSize: one module because."""\n' + body,
                                           encoding="utf-8")
    (package / "long_true.py").write_text(f'"""A long module.\n\nSize: about {module_sizes.MODULE_LINES} lines: '
                                          'one table."""\n' + body, encoding="utf-8")
    long_function = "def f():\n    \"\"\"Doc.\"\"\"\n" + "\n".join(
        f"    y{i} = {i}" for i in range(module_sizes.FUNCTION_LINES + 1)) + "\n"
    (package / "functions.py").write_text('"""Functions."""\n' + long_function, encoding="utf-8")
    found = sorted(p.split(" (")[0] for p in module_sizes.problems(str(package)))
    assert found == ["function vtm_dynamics.functions.f", "module vtm_dynamics.long_stale",
                     "module vtm_dynamics.long_vague", "module vtm_dynamics.long_without"], found


# ------------------------------------------------------------------------------------------------------ tests
def _package_dirs() -> dict[str, set[str]]:
    """{directory relative to vtm_dynamics/: names of its modules and subpackages}."""
    out = {}
    top = os.path.join(REPO_ROOT, "vtm_dynamics")
    for dirpath, dirnames, files in os.walk(top):
        dirnames[:] = [d for d in dirnames if not d.startswith(("__", "."))]
        out[os.path.relpath(dirpath, top)] = {f[:-3] for f in files if f.endswith(".py") and f != "__init__.py"} \
            | set(dirnames)
    return out


def _names(test_name: str, members: set[str]) -> bool:
    return any(test_name == m or test_name.startswith(m + "_") for m in members)


def _helper_path(module: str, importer: str) -> str | None:
    """The file of a test helper a test imports: ``test.x.y``, or a module beside it or in bench/ (on sys.path
    through test/core/conftest.py)."""
    candidates = [os.path.join(REPO_ROOT, *module.split(".")) + ".py"] if module.startswith("test.") else [
        os.path.join(os.path.dirname(importer), module + ".py"), os.path.join(REPO_ROOT, "bench", module + ".py")]
    return next((c for c in candidates if os.path.isfile(c)), None)


def _imported_modules(path: str, seen: set[str]) -> set[str]:
    """Modules a test file imports, with those of the test helpers it imports, transitively."""
    if path in seen:
        return set()
    seen.add(path)
    out = set()
    for imp in import_graph.imports_of(path):
        out.add(f"{imp.module}.{imp.name}" if imp.name else imp.module)
        if not imp.module.startswith("vtm_dynamics"):
            helper = _helper_path(imp.module, path)
            if helper is not None:
                out |= _imported_modules(helper, seen)
    return out


def test_tests_mirror_the_package():
    """test/<dir>/ holds the specification of vtm_dynamics/<dir>/: every test directory but the cross-cutting ones
    mirrors a package directory, a test module named after a module of another directory lives there, and a test
    of the core needs no ROS (no rclpy, no ROS message package, no node), directly or through its helpers."""
    packages = _package_dirs()
    test_root = os.path.join(REPO_ROOT, "test")
    problems = []
    for path in import_graph.python_files(test_root):
        name = os.path.basename(path)
        if not name.startswith("test_"):
            continue
        directory = os.path.relpath(os.path.dirname(path), test_root)
        if directory.split(os.sep)[0] in CROSS_CUTTING_TEST_DIRS - {"."} or directory == ".":
            continue
        rel = os.path.relpath(path, REPO_ROOT)
        own = packages.get(directory)
        if own is None:
            problems.append(f"{rel}: test/{directory} mirrors no vtm_dynamics/{directory}")
            continue
        subject = name[len("test_"):-3]
        own_names = own | {os.path.basename(directory)}
        elsewhere = sorted(d for d, members in packages.items() if d != directory and _names(subject, members))
        if not _names(subject, own_names) and elsewhere:
            problems.append(f"{rel}: named after a module of vtm_dynamics/{elsewhere[0]}, none of its own directory: "
                            f"move it to test/{elsewhere[0]}, or name it after what it specifies")
        if directory.split(os.sep)[0] == "core":
            conftests = [os.path.join(test_root, *directory.split(os.sep)[:k], "conftest.py")
                         for k in range(1, len(directory.split(os.sep)) + 1)]
            imported = set().union(*(_imported_modules(p, set()) for p in [path, *conftests] if os.path.isfile(p)))
            ros = sorted(m for m in imported if m.startswith(ROS_MODULES) or m.split(".")[0].endswith("_msgs"))
            if ros:
                problems.append(f"{rel}: a core test that needs ROS ({', '.join(ros[:3])})")
    assert not problems, "\n".join(problems)


# ------------------------------------------------------------------------------------------------------ the docs
def test_docs_architecture_is_generated_from_the_code():
    with open(import_graph.DOC, encoding="utf-8") as fh:
        text = fh.read()
    assert import_graph.BEGIN in text and import_graph.with_generated(text) == text, \
        "docs/architecture.md is not current: run python tools/import_graph.py"


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

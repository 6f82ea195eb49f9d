"""The suite passes at any speed: no test reads the clock when its module is imported.

A stamp taken at import (a module constant, a decorator argument such as Hypothesis' ``@example``, a default
argument) is as old as the time the suite needs to reach the test that uses it: on a slow or loaded machine a
message "stamped 1,000 s in the future" is in the past by then. Two checks keep it so:
- every test module's import-time code is read (its AST) for clock calls;
- the fuzz tests' explicit examples run under a plugin (``test/clock_shift.py``) that moves the clock 2,000 s
  between collection and the run, with the nodes under test reading the real clock.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys

from test.ros_helpers import REPO_ROOT, ros_subprocess_env

TEST_DIR = os.path.join(REPO_ROOT, "test")
# calls that read the wall clock or a monotonic clock
CLOCK_CALLS = {("time", "time"), ("time", "time_ns"), ("time", "monotonic"), ("time", "monotonic_ns"),
               ("datetime", "now"), ("datetime", "utcnow"), ("datetime", "today"), ("date", "today")}


def _clock_call(node: ast.AST) -> bool:
    if not isinstance(node, ast.Call):
        return False
    f = node.func
    if isinstance(f, ast.Attribute):
        owner = f.value.attr if isinstance(f.value, ast.Attribute) else getattr(f.value, "id", None)
        return (owner, f.attr) in CLOCK_CALLS
    return isinstance(f, ast.Name) and f.id in {"time", "time_ns", "monotonic"}  # from time import time


def import_time_nodes(tree: ast.Module):
    """The nodes Python evaluates when the module is imported: module and class bodies, decorators, default
    arguments, annotations of signatures; never the bodies of functions or lambdas."""
    stack = list(tree.body)
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            stack.extend(node.decorator_list)
            stack.extend(d for d in node.args.defaults + node.args.kw_defaults if d is not None)
            continue
        if isinstance(node, ast.Lambda):
            stack.extend(d for d in node.args.defaults + node.args.kw_defaults if d is not None)
            continue
        if isinstance(node, ast.ClassDef):
            stack.extend(node.decorator_list + node.bases + node.body)
            continue
        yield node
        stack.extend(ast.iter_child_nodes(node))


def clock_reads_at_import(source: str) -> list[int]:
    """Line numbers of clock calls that run when ``source`` is imported."""
    return sorted(n.lineno for n in import_time_nodes(ast.parse(source)) if _clock_call(n))


def test_the_detector_sees_module_constants_decorators_and_defaults_but_not_function_bodies():
    source = ("import time\nfrom datetime import datetime\nNOW = int(time.time())\n"
              "@example(stamp=time.time() + 1000)\ndef test_a(x=datetime.now()):\n    t = time.time()\n"
              "class K:\n    T0 = time.monotonic()\n    def f(self):\n        return time.time()\n"
              "g = lambda: time.time()\n")
    assert clock_reads_at_import(source) == [3, 4, 5, 8]


def test_no_test_module_reads_the_clock_at_import():
    found = []
    for folder, _dirs, files in os.walk(TEST_DIR):
        for name in files:
            if name.endswith(".py"):
                path = os.path.join(folder, name)
                with open(path, encoding="utf-8") as fh:
                    lines = clock_reads_at_import(fh.read())
                found += [f"{os.path.relpath(path, REPO_ROOT)}:{line}" for line in lines]
    assert not found, f"clock read at import (take stamps when the test runs): {found}"


def test_the_fuzz_examples_pass_with_the_clock_moved_2000_s_between_collection_and_run():
    env = ros_subprocess_env()
    env.update(HYPOTHESIS_PROFILE="explicit", VTM_CLOCK_SHIFT_S="2000")
    targets = ["test/fuzz/test_fuzz_estop_predictor.py::test_joint_states",
               "test/fuzz/test_fuzz_estop_predictor.py::test_events",
               "test/fuzz/test_fuzz_projection_controller.py::test_inputs_and_control_cycle"]
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "test.clock_shift",
                          *targets], cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    assert "3 passed" in run.stdout, run.stdout[-2000:]

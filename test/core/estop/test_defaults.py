"""The defaults of a prediction have one home, core/estop/defaults.py: no module types the category-1 deceleration,
the envelope band, the integration step, the horizon or the category again (as a parameter or field default, a
command-line option's default or a node parameter's default), and the core's input types carry those values."""

from __future__ import annotations

import ast
import os

from core_testdata import REPO as REPO_ROOT
from vtm_dynamics.core.estop import CategoryOne, StopSettings, defaults
from vtm_dynamics.core.estop.envelope import EnvelopeSpec

# a deceleration typed as a number; the envelope's band typed as a range (a scale factor of 1 is no band)
FIELDS = {"deceleration": (int, float), "category1_deceleration": (int, float), "torque_factor": tuple,
          "delay_factor": tuple}
OPTIONS = {"--decel", "--torque-factor", "--delay-factor", "--step"}
NODE_PARAMETERS = {"category1_deceleration", "integration_step", "horizon", "stop_category",
                   "stopping_envelope_torque_min", "stopping_envelope_torque_max", "stopping_envelope_delay_min",
                   "stopping_envelope_delay_max"}
HOME = os.path.join("vtm_dynamics", "core", "estop", "defaults.py")


def _literal(node: ast.AST | None) -> bool:
    """A number, or a tuple or list of numbers, typed in place."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, (int, float)) and not isinstance(node.value, bool)
    return isinstance(node, (ast.Tuple, ast.List)) and bool(node.elts) and all(_literal(e) for e in node.elts)


def _typed(name: str, node: ast.AST | None) -> bool:
    """Whether ``node`` types the shared default of the field or parameter ``name``."""
    kind = FIELDS.get(name)
    if kind is None or not _literal(node):
        return False
    return isinstance(node, (ast.Tuple, ast.List)) if kind is tuple else isinstance(node, ast.Constant)


def typed_defaults(path: str) -> list[str]:
    """Where the file at ``path`` types one of the shared defaults as a literal."""
    with open(path, encoding="utf-8") as fh:
        tree = ast.parse(fh.read(), path)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            args = node.args.args + node.args.kwonlyargs
            values = [None] * (len(node.args.args) - len(node.args.defaults)) + node.args.defaults + \
                node.args.kw_defaults
            found += [f"{node.lineno}: parameter {a.arg}" for a, v in zip(args, values) if _typed(a.arg, v)]
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and \
                _typed(node.target.id, node.value):
            found.append(f"{node.lineno}: field {node.target.id}")
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
            name = node.args[0].value
            callee = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            if callee == "add_argument" and name in OPTIONS:
                found += [f"{node.lineno}: option {name}" for k in node.keywords if k.arg == "default" and
                          _literal(k.value)]
            if callee == "ParameterSpec" and name in NODE_PARAMETERS and len(node.args) > 1 and _literal(node.args[1]):
                found.append(f"{node.lineno}: node parameter {name}")
    return found


def test_no_module_types_a_shared_default_again():
    found = []
    for dirpath, _, files in os.walk(os.path.join(REPO_ROOT, "vtm_dynamics")):
        for f in sorted(files):
            path = os.path.join(dirpath, f)
            rel = os.path.relpath(path, REPO_ROOT)
            if f.endswith(".py") and rel != HOME:
                found += [f"{rel}:{where}" for where in typed_defaults(path)]
    assert not found, "defaults typed outside core/estop/defaults.py:\n" + "\n".join(found)


def test_the_scan_finds_a_typed_default(tmp_path):
    source = ('def predict(deceleration: float = 3.0, *, torque_factor=(0.9, 1.1), decel_name=3.0): ...\n'
              'def scaled(torque_factor: float = 1.0): ...\n'
              'class Spec:\n    delay_factor: tuple = (1.0, 1.5)\n'
              'ap.add_argument("--decel", type=float, default=3.0)\n'
              'P.ParameterSpec("horizon", 5.0, "text")\n'
              'P.ParameterSpec("horizon", HORIZON, "text")\n')
    (tmp_path / "m.py").write_text(source, encoding="utf-8")
    assert typed_defaults(str(tmp_path / "m.py")) == [
        "1: parameter deceleration", "1: parameter torque_factor", "4: field delay_factor", "5: option --decel",
        "6: node parameter horizon"]


def test_the_core_input_types_carry_the_defaults():
    assert CategoryOne().deceleration == defaults.CATEGORY1_DECELERATION
    assert (StopSettings().step, StopSettings().t_max) == (defaults.INTEGRATION_STEP, defaults.HORIZON)
    spec = EnvelopeSpec()
    assert (spec.torque_factor, spec.delay_factor) == (defaults.ENVELOPE_TORQUE_FACTOR, defaults.ENVELOPE_DELAY_FACTOR)

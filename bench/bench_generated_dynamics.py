"""Benchmark of a route the engine does not take yet: M(q) and h(q, v) as straight-line code generated from
Pinocchio's own algorithms (CRBA and RNEA traced with CasADi's symbolic scalar) and compiled by Numba, against
Pinocchio's ``crba`` + ``nonLinearEffects`` called from Python as the engine calls them today (issue 28: the batch
target of 3,000 UR5 stops per second per core is out of reach while these two calls alone cost ~1.4 us x ~270
evaluations per stop).

The generator is ``casadi_kin_dyn`` (PyPI ``cmeel-casadi-kin-dyn``), which wraps Pinocchio 2.6 compiled for CasADi's
SX scalar. It pins that Pinocchio, which cannot live beside the project's Pinocchio 4 in one environment, so it runs
in an interpreter of its own, given with ``--generator-python``; make one with

    python3.11 -m venv /tmp/generator && /tmp/generator/bin/pip install cmeel-casadi-kin-dyn

Without it the benchmark says so and exits 2. The generated code is checked against Pinocchio 4 at random states
(the largest relative difference of M and h is printed), then timed three ways (medians of 5 runs):
inside compiled code (as a compiled step loop would call it), called from Python, and Pinocchio's two calls.
The last lines project the per-stop cost of M and h from the engine's own evaluation counts on the bench states.

Run: python bench/bench_generated_dynamics.py --generator-python /tmp/generator/bin/python [--states 5]
"""

from __future__ import annotations

import argparse
import glob
import importlib.util
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import pinocchio as pin

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

from bench_estop import moving_states  # noqa: E402
from vtm_dynamics.cli.predict import ROBOTS, default_brakes_path, load_robot  # noqa: E402
from vtm_dynamics.core.estop import predict_stop  # noqa: E402
from vtm_dynamics.core.estop.brakes import brakes_from_config  # noqa: E402
from vtm_dynamics.core.robot.model import example_robot_urdf  # noqa: E402

UR5 = "ur_description/urdf/ur5_robot.urdf"

# run by the generator's interpreter: URDF path in argv[1]; prints a Python module defining mh(q, v, M, h)
GENERATOR = r'''
import sys
import casadi as cs
import casadi_kin_dyn.casadi_kin_dyn as ckd

kd = ckd.CasadiKinDyn(open(sys.argv[1]).read())
nq, nv = kd.nq(), kd.nv()
q, v = cs.SX.sym("q", nq), cs.SX.sym("v", nv)
f = cs.Function("mh", [q, v], [cs.densify(kd.crba()(q)), cs.densify(kd.rnea()(q, v, cs.SX.zeros(nv)))])
infix = {cs.OP_ADD: "+", cs.OP_SUB: "-", cs.OP_MUL: "*", cs.OP_DIV: "/"}
calls = {cs.OP_SIN: "math.sin", cs.OP_COS: "math.cos", cs.OP_SQRT: "math.sqrt"}
out = ["import math", "", "", f"def mh(q, v, M, h):  # {f.n_instructions()} instructions, nv = {nv}"]
for k in range(f.n_instructions()):
    op, a, r = f.instruction_id(k), f.instruction_input(k), f.instruction_output(k)
    if op == cs.OP_INPUT:
        out.append(f"    w{r[0]} = {'qv'[a[0]]}[{a[1]}]")
    elif op == cs.OP_OUTPUT:
        out.append(f"    M[{r[1] % nv}, {r[1] // nv}] = w{a[0]}" if r[0] == 0 else f"    h[{r[1]}] = w{a[0]}")
    elif op == cs.OP_CONST:
        out.append(f"    w{r[0]} = {float(f.instruction_constant(k))!r}")
    elif op in infix:
        out.append(f"    w{r[0]} = w{a[0]} {infix[op]} w{a[1]}")
    elif op in calls:
        out.append(f"    w{r[0]} = {calls[op]}(w{a[0]})")
    elif op == cs.OP_NEG:
        out.append(f"    w{r[0]} = -w{a[0]}")
    elif op == cs.OP_SQ:
        out.append(f"    w{r[0]} = w{a[0]} * w{a[0]}")
    elif op == cs.OP_TWICE:
        out.append(f"    w{r[0]} = 2.0 * w{a[0]}")
    else:
        sys.exit(f"operation {op} is not translated")
print("\n".join(out))
'''


def generated_module(python: str, urdf: str, folder: str):
    """The generated M/h module for ``urdf``, made by the generator interpreter ``python``."""
    purelib = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True).stdout.strip()
    env = dict(os.environ)
    libs = glob.glob(os.path.join(purelib, "cmeel.prefix", "lib"))  # CasADi's libraries, not on the loader path
    env["LD_LIBRARY_PATH"] = os.pathsep.join(libs + [env.get("LD_LIBRARY_PATH", "")])
    out = subprocess.run([python, "-c", GENERATOR, urdf], capture_output=True, text=True, env=env, timeout=600)
    if out.returncode != 0:
        raise SystemExit(f"the generator failed: {out.stderr.strip()[-2000:]}")
    path = os.path.join(folder, "generated_mh.py")
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(out.stdout)
    spec = importlib.util.spec_from_file_location("generated_mh", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module, out.stdout.count("\n    w")


def _median(f, number: int) -> float:
    runs = []
    for _ in range(5):
        start = time.perf_counter()
        f(number)
        runs.append((time.perf_counter() - start) / number)
    return statistics.median(runs)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--generator-python", help="an interpreter with casadi_kin_dyn (module docstring)")
    ap.add_argument("--states", type=int, default=5, help="bench states whose evaluation counts are projected")
    ap.add_argument("--calls", type=int, default=200_000)
    args = ap.parse_args()
    if not args.generator_python:
        print("needs --generator-python: an interpreter with casadi_kin_dyn, made with\n"
              "  python3.11 -m venv /tmp/generator && /tmp/generator/bin/pip install cmeel-casadi-kin-dyn")
        return 2
    import numba

    urdf = example_robot_urdf(UR5)
    with tempfile.TemporaryDirectory() as folder:
        start = time.perf_counter()
        module, lines = generated_module(args.generator_python, urdf, folder)
        t_generate = time.perf_counter() - start
        mh = numba.njit(module.mh)
        model = pin.buildModelFromUrdf(urdf)
        data = model.createData()
        nv = model.nv
        M, h = np.zeros((nv, nv)), np.zeros(nv)
        rng = np.random.default_rng(28)
        start = time.perf_counter()
        mh(np.zeros(nv), np.zeros(nv), M, h)
        t_compile = time.perf_counter() - start
        worst_m = worst_h = 0.0
        for _ in range(1000):
            q, v = rng.uniform(-np.pi, np.pi, nv), rng.uniform(-3.0, 3.0, nv)
            mh(q, v, M, h)
            Mp = pin.crba(model, data, q)
            Mp = np.triu(Mp) + np.triu(Mp, 1).T
            hp = pin.nonLinearEffects(model, data, q, v)
            worst_m = max(worst_m, float(np.abs(M - Mp).max() / np.abs(Mp).max()))
            worst_h = max(worst_h, float(np.abs(h - hp).max() / np.abs(hp).max()))

        @numba.njit
        def in_compiled_loop(q, v, M, h, n):
            total = 0.0
            for k in range(n):
                q[0] = 1e-9 * k  # a new state each call
                mh(q, v, M, h)
                total += M[0, 0] + h[0]
            return total

        in_compiled_loop(q, v, M, h, 2)
        t_inside = _median(lambda n: in_compiled_loop(q, v, M, h, n), args.calls)

        def from_python(n):
            for _ in range(n):
                mh(q, v, M, h)

        def pinocchio_calls(n, crba=pin.crba, nle=pin.nonLinearEffects):
            for _ in range(n):
                crba(model, data, q)
                nle(model, data, q, v)

        t_python = _median(from_python, args.calls // 4)
        t_pin = _median(pinocchio_calls, args.calls // 4)

    _, robot, _ = load_robot("ur5")
    brakes = brakes_from_config(robot, default_brakes_path("ur5"))
    tcp = ROBOTS["ur5"].tcp_frame
    evals = [predict_stop(robot, brakes, q0, v0, tcp_frame=tcp).n_evaluations
             for q0, v0 in moving_states(robot, args.states, seed=1)]  # bench_estop.py's UR5 states
    n_eval = statistics.median(evals)

    print("M(q) and h(q, v) of the UR5: generated from Pinocchio's algorithms, compiled, against Pinocchio's calls\n")
    print(f"generated: {lines} assignments in {t_generate:.1f} s; Numba compile {t_compile:.1f} s")
    print(f"agreement with Pinocchio {pin.__version__} over 1000 random states: max relative difference "
          f"M {worst_m:.1e}, h {worst_h:.1e}")
    print(f"per evaluation: generated inside compiled code {1e6 * t_inside:.3f} us, generated called from Python "
          f"{1e6 * t_python:.3f} us, Pinocchio crba + nonLinearEffects from Python {1e6 * t_pin:.3f} us "
          f"({t_pin / t_inside:.1f}x the compiled one)")
    print(f"per stop ({args.states} bench states, median {n_eval:.0f} evaluations): M and h cost "
          f"{1e6 * n_eval * t_pin:.0f} us with Pinocchio's calls, {1e6 * n_eval * t_inside:.0f} us generated and "
          f"compiled; the batch target's whole stop is {1e6 / 3000:.0f} us")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

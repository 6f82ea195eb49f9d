"""Benchmark of a route the engine does not take yet: M(q) and h(q, v) as straight-line code generated from a
symbolic trace of the rigid-body algorithms (CRBA and RNEA with CasADi's symbolic scalar SX) and compiled by Numba,
against Pinocchio's ``crba`` + ``nonLinearEffects`` called from Python as the engine calls them today (issue 28: the
batch target of 3,000 UR5 stops per second per core is out of reach while these two calls alone cost ~1.4 us x
~270 evaluations per stop).

Two generators, chosen with ``--generator``:

* ``casadi_kin_dyn`` (default; PyPI ``cmeel-casadi-kin-dyn``) wraps Pinocchio 2.6 compiled for SX. It pins that
  Pinocchio, which cannot live beside the project's Pinocchio 4 in one environment, so it runs in an interpreter of
  its own, given with ``--generator-python``; make one with

      python3.11 -m venv generator && generator/bin/pip install cmeel-casadi-kin-dyn

  The link inertias are folded into constants as it traces: one generated function per payload.
* ``adam`` (PyPI ``adam-robotics``, CasADi backend; its ``casadi`` extra brings ``liecasadi``, which the backend
  imports) implements CRBA and RNEA itself for a floating base; the fixed-base M and h are the joint blocks at an
  identity base pose with zero base velocity (the base rows are traced away). It installs beside Pinocchio 4, so
  ``--generator-python`` may be left out when the running interpreter has it; in an environment of its own:

      python3.11 -m venv adamenv && adamenv/bin/pip install "adam-robotics[casadi]"

  It also generates ``mh_payload(q, v, p, M, h)``, where the payload carried at the robot's payload frame (a body
  fixed to it) stays an input: p = (m, m c, I_o) [kg, kg m, kg m^2] are its ten inertial parameters in that
  frame (c the centre of mass, I_o = I_c + m (|c|^2 1 - c c^T) the rotational inertia about the frame origin,
  entries xx, xy, xz, yy, yz, zz), in which the spatial inertia is linear (Featherstone 2008, Rigid Body Dynamics
  Algorithms, ch. 2), so one compiled function serves every payload. The parameters are added to ADAM's spatial
  inertia of that frame's link, an internal of adam-robotics 0.5 (checked against the project's ``with_payload``
  below). Joint axes must have unit length (ADAM uses them as written, Pinocchio normalises them), and joints must
  be revolute or prismatic (a continuous joint has two coordinates in Pinocchio, one in ADAM).

Without a usable generator the benchmark says so and exits 2. The generated code is checked against Pinocchio 4
at random states (the largest relative difference of M and h is printed; for ``mh_payload`` at random payloads
against Pinocchio with the payload attached by :func:`with_payload`), then timed (medians of 5 runs): inside
compiled code (as a compiled step loop would call it), called from Python, and Pinocchio's two calls. The last
lines project the per-stop cost of M and h from the engine's own evaluation counts on the bench states.

Run: python bench/bench_generated_dynamics.py --generator-python generator/bin/python [--states 5]
     python bench/bench_generated_dynamics.py --generator adam [--generator-python adamenv/bin/python]
"""

from __future__ import annotations

import argparse
import glob
import importlib.util
import os
import re
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
from vtm_dynamics.core.estop.payload import with_payload  # noqa: E402
from vtm_dynamics.core.robot.model import RobotModel, example_robot_urdf  # noqa: E402

UR5 = "ur_description/urdf/ur5_robot.urdf"

# both generators: straight-line Python for a CasADi Function whose inputs are named by ``names`` and whose outputs
# are the dense nv x nv M and the nv-vector h
TRANSLATOR = r'''
import sys
import casadi as cs


def translate(f, name, names, nv):
    infix = {cs.OP_ADD: "+", cs.OP_SUB: "-", cs.OP_MUL: "*", cs.OP_DIV: "/"}
    calls = {cs.OP_SIN: "math.sin", cs.OP_COS: "math.cos", cs.OP_SQRT: "math.sqrt"}
    out = [f"def {name}({', '.join(names)}, M, h):  # {f.n_instructions()} instructions, nv = {nv}"]
    for k in range(f.n_instructions()):
        op, a, r = f.instruction_id(k), f.instruction_input(k), f.instruction_output(k)
        if op == cs.OP_INPUT:
            out.append(f"    w{r[0]} = {names[a[0]]}[{a[1]}]")
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
    return out
'''

# run by the generator's interpreter: URDF path in argv[1]; prints a Python module defining mh(q, v, M, h)
GENERATOR = TRANSLATOR + r'''
import casadi_kin_dyn.casadi_kin_dyn as ckd

kd = ckd.CasadiKinDyn(open(sys.argv[1]).read())
nq, nv = kd.nq(), kd.nv()
q, v = cs.SX.sym("q", nq), cs.SX.sym("v", nv)
f = cs.Function("mh", [q, v], [cs.densify(kd.crba()(q)), cs.densify(kd.rnea()(q, v, cs.SX.zeros(nv)))])
print("\n".join(["import math", "", ""] + translate(f, "mh", "qv", nv)))
'''

# run by an interpreter with adam-robotics: argv = URDF path, payload frame, gravity x y z [m/s^2], joint names in
# Pinocchio's order; prints a Python module defining mh(q, v, M, h) and mh_payload(q, v, p, M, h)
ADAM_GENERATOR = TRANSLATOR + r'''
import math
import numpy as np
import urdf_parser_py.urdf as urdf_parser
from adam.casadi import KinDynComputations
from adam.casadi.casadi_like import CasadiLike
from adam.core.constants import Representations

path, frame, gravity, joints = sys.argv[1], sys.argv[2], [float(g) for g in sys.argv[3:6]], sys.argv[6:]
described = {j.name: j for j in urdf_parser.URDF.from_xml_string(open(path, "rb").read()).joints}
for name in joints:
    joint = described[name]
    if joint.type not in ("revolute", "prismatic"):  # continuous: Pinocchio's q is (cos, sin), ADAM's the angle
        sys.exit(f"joint {name}: type {joint.type} has no matching coordinates in ADAM and Pinocchio")
    if abs(math.sqrt(sum(a * a for a in joint.axis)) - 1.0) > 1e-9:
        sys.exit(f"joint {name}: axis {joint.axis} is not of unit length (ADAM does not normalise it)")
kd = KinDynComputations(path, joints, gravity=np.array(gravity + [0.0, 0.0, 0.0]))
kd.set_frame_velocity_representation(Representations.BODY_FIXED_REPRESENTATION)
nv = kd.NDoF
q, v, p = cs.SX.sym("q", nv), cs.SX.sym("v", nv), cs.SX.sym("p", 10)


def traced(inputs):
    base, still = cs.SX.eye(4), cs.SX.zeros(6)
    M = kd.mass_matrix(base, q)[6:, 6:]
    h = kd.bias_force(base, q, still, v)[6:]
    return cs.Function("mh", inputs, [cs.densify(M), cs.densify(h)], {"cse": True})


bare = traced([q, v])
first = cs.skew(p[1:4])  # spatial inertia at the frame origin, [linear; angular] as ADAM orders it
about_origin = cs.vertcat(cs.horzcat(p[4], p[5], p[6]), cs.horzcat(p[5], p[7], p[8]), cs.horzcat(p[6], p[8], p[9]))
payload = cs.vertcat(cs.horzcat(p[0] * cs.SX.eye(3), first.T), cs.horzcat(first, about_origin))
algorithms = kd.rbdalgos
node = algorithms.model.tree.get_idx_from_name(frame)
algorithms._spatial_inertias[node] = CasadiLike(algorithms._spatial_inertias[node].array + payload)
loaded = traced([q, v, p])
print("\n".join(["import math", "", ""] + translate(bare, "mh", "qv", nv) + ["", ""]
                + translate(loaded, "mh_payload", "qvp", nv)))
'''

ADAM_VENV = '  python3.11 -m venv adamenv && adamenv/bin/pip install "adam-robotics[casadi]"'


def generated_module(python: str, source: str, arguments: list[str], folder: str):
    """The generated M/h module made by the generator script ``source`` run by the interpreter ``python``."""
    purelib = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True).stdout.strip()
    env = dict(os.environ)
    libs = glob.glob(os.path.join(purelib, "cmeel.prefix", "lib"))  # CasADi's libraries, not on the loader path
    env["LD_LIBRARY_PATH"] = os.pathsep.join(libs + [env.get("LD_LIBRARY_PATH", "")])
    out = subprocess.run([python, "-c", source, *arguments], capture_output=True, text=True, env=env, timeout=600)
    if out.returncode != 0:
        raise SystemExit(f"the generator failed: {out.stderr.strip()[-2000:]}")
    path = os.path.join(folder, "generated_mh.py")
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(out.stdout)
    spec = importlib.util.spec_from_file_location("generated_mh", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    counts = {m.group(1): int(m.group(2)) for m in re.finditer(r"def (\w+)\(.*# (\d+) instructions", out.stdout)}
    return module, counts


def has_adam(python: str) -> bool:
    """Whether ``python`` can import adam-robotics' CasADi backend."""
    return subprocess.run([python, "-c", "import adam.casadi"], capture_output=True).returncode == 0


def payload_parameters(mass: float, com: np.ndarray, inertia: np.ndarray) -> np.ndarray:
    """The ten inertial parameters (m, m c, I_o: xx xy xz yy yz zz) of a body of ``mass`` [kg] whose centre of
    mass is ``com`` [m] and rotational inertia about it ``inertia`` [kg m^2], both in the frame it is fixed to;
    I_o = I_c + m (|c|^2 1 - c c^T) is the parallel-axis theorem."""
    about_origin = inertia + mass * (float(com @ com) * np.eye(3) - np.outer(com, com))
    return np.r_[mass, mass * com, about_origin[0, 0], about_origin[0, 1], about_origin[0, 2],
                 about_origin[1, 1], about_origin[1, 2], about_origin[2, 2]]


def _median(f, number: int) -> float:
    runs = []
    for _ in range(5):
        start = time.perf_counter()
        f(number)
        runs.append((time.perf_counter() - start) / number)
    return statistics.median(runs)


def _relative(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.abs(a - b).max() / np.abs(b).max())


def _pinocchio_mh(robot: RobotModel, q: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    M = pin.crba(robot.model, robot.data, q)
    return np.triu(M) + np.triu(M, 1).T, pin.nonLinearEffects(robot.model, robot.data, q, v)


def payload_agreement(mh_payload, robot: RobotModel, frame: str, n: int, rng) -> tuple[float, float]:
    """Largest relative differences of M and h between ``mh_payload`` and Pinocchio with the payload attached by
    :func:`with_payload`, over ``n`` random states and payloads (0-10 kg, centre of mass within 0.2 m of the
    frame origin on each axis, random positive definite inertia)."""
    nv = robot.model.nv
    M, h = np.zeros((nv, nv)), np.zeros(nv)
    worst_m = worst_h = 0.0
    for _ in range(n):
        mass, com = rng.uniform(0.0, 10.0), rng.uniform(-0.2, 0.2, 3)
        spread = rng.normal(size=(3, 3))
        inertia = 0.02 * spread @ spread.T
        q, v = rng.uniform(-np.pi, np.pi, nv), rng.uniform(-3.0, 3.0, nv)
        mh_payload(q, v, payload_parameters(mass, com, inertia), M, h)
        Mp, hp = _pinocchio_mh(with_payload(robot, mass, frame, com, inertia), q, v)
        worst_m, worst_h = max(worst_m, _relative(M, Mp)), max(worst_h, _relative(h, hp))
    return worst_m, worst_h


def compiled_loop(f, payload: bool):
    """A compiled loop making ``n`` calls of the compiled ``f`` at a new state each call (as a compiled step loop
    would call it); ``payload``: ``f`` takes the payload parameters after q and v."""
    import numba

    if payload:
        @numba.njit
        def loop_payload(q, v, p, M, h, n):
            total = 0.0
            for k in range(n):
                q[0] = 1e-9 * k
                f(q, v, p, M, h)
                total += M[0, 0] + h[0]
            return total
        return loop_payload

    @numba.njit
    def loop(q, v, M, h, n):
        total = 0.0
        for k in range(n):
            q[0] = 1e-9 * k
            f(q, v, M, h)
            total += M[0, 0] + h[0]
        return total
    return loop


def generator_call(args, robot: RobotModel, urdf: str, frame: str) -> tuple[str, str, list[str]] | None:
    """(interpreter, script, its arguments) of the chosen generator, or None (printed why) when it is missing."""
    if args.generator == "casadi_kin_dyn":
        if not args.generator_python:
            print("needs --generator-python: an interpreter with casadi_kin_dyn, made with\n"
                  "  python3.11 -m venv generator && generator/bin/pip install cmeel-casadi-kin-dyn")
            return None
        return args.generator_python, GENERATOR, [urdf]
    python = args.generator_python or sys.executable
    if not has_adam(python):
        print(f"--generator adam: {python} cannot import adam-robotics' CasADi backend (adam.casadi); make an "
              f"interpreter with it and pass it as --generator-python:\n{ADAM_VENV}")
        return None
    gravity = [repr(float(g)) for g in robot.model.gravity.linear]
    return python, ADAM_GENERATOR, [urdf, frame, *gravity, *robot.model.names[1:]]


def measure(args, robot: RobotModel, frame: str, generator: tuple[str, str, list[str]]) -> dict[str, float]:
    """Generates, compiles, checks and times M and h (module docstring); the figures by name."""
    import numba

    model, data, nv = robot.model, robot.data, robot.model.nv
    out: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as folder:
        start = time.perf_counter()
        module, counts = generated_module(*generator, folder)
        out["generate"] = time.perf_counter() - start
        out.update({f"instructions {name}": n for name, n in counts.items()})
        mh = numba.njit(module.mh)
        M, h = np.zeros((nv, nv)), np.zeros(nv)
        rng = np.random.default_rng(28)
        start = time.perf_counter()
        mh(np.zeros(nv), np.zeros(nv), M, h)
        out["compile"] = time.perf_counter() - start
        out["M"] = out["h"] = 0.0
        for _ in range(1000):
            q, v = rng.uniform(-np.pi, np.pi, nv), rng.uniform(-3.0, 3.0, nv)
            mh(q, v, M, h)
            Mp, hp = _pinocchio_mh(robot, q, v)
            out["M"], out["h"] = max(out["M"], _relative(M, Mp)), max(out["h"], _relative(h, hp))
        loop = compiled_loop(mh, payload=False)
        loop(q, v, M, h, 2)
        out["inside"] = _median(lambda n: loop(q, v, M, h, n), args.calls)

        if hasattr(module, "mh_payload"):
            mh_payload = numba.njit(module.mh_payload)
            p = payload_parameters(5.0, np.array([0.0, 0.0, 0.05]), np.diag([0.01, 0.01, 0.005]))
            start = time.perf_counter()
            mh_payload(q, v, p, M, h)
            out["compile payload"] = time.perf_counter() - start
            out["M payload"], out["h payload"] = payload_agreement(mh_payload, robot, frame, 1000, rng)
            loop_payload = compiled_loop(mh_payload, payload=True)
            loop_payload(q, v, p, M, h, 2)
            out["inside payload"] = _median(lambda n: loop_payload(q, v, p, M, h, n), args.calls)

        def from_python(n):
            for _ in range(n):
                mh(q, v, M, h)

        def pinocchio_calls(n, crba=pin.crba, nle=pin.nonLinearEffects):
            for _ in range(n):
                crba(model, data, q)
                nle(model, data, q, v)

        out["python"] = _median(from_python, args.calls // 4)
        out["pinocchio"] = _median(pinocchio_calls, args.calls // 4)
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--generator", choices=("casadi_kin_dyn", "adam"), default="casadi_kin_dyn")
    ap.add_argument("--generator-python", help="an interpreter with the generator (module docstring); for adam "
                                               "the running one by default")
    ap.add_argument("--states", type=int, default=5, help="bench states whose evaluation counts are projected")
    ap.add_argument("--calls", type=int, default=200_000)
    args = ap.parse_args()
    urdf = example_robot_urdf(UR5)
    robot = RobotModel.from_urdf_file(urdf)
    frame = ROBOTS["ur5"].payload_frame
    generator = generator_call(args, robot, urdf, frame)
    if generator is None:
        return 2
    r = measure(args, robot, frame, generator)

    _, ur5, _ = load_robot("ur5")
    brakes = brakes_from_config(ur5, default_brakes_path("ur5"))
    tcp = ROBOTS["ur5"].tcp_frame
    evals = [predict_stop(ur5, brakes, q0, v0, tcp_frame=tcp).n_evaluations
             for q0, v0 in moving_states(ur5, args.states, seed=1)]  # bench_estop.py's UR5 states
    n_eval = statistics.median(evals)

    print(f"M(q) and h(q, v) of the UR5: generated by {args.generator}, compiled, against Pinocchio's calls\n")
    print(f"generated: {r['instructions mh']:.0f} instructions in {r['generate']:.1f} s; Numba compile "
          f"{r['compile']:.1f} s")
    print(f"agreement with Pinocchio {pin.__version__} over 1000 random states: max relative difference "
          f"M {r['M']:.1e}, h {r['h']:.1e}")
    if "inside payload" in r:
        print(f"with the payload at {frame} as an input: {r['instructions mh_payload']:.0f} instructions, Numba "
              f"compile {r['compile payload']:.1f} s; over 1000 random states and payloads against with_payload: "
              f"M {r['M payload']:.1e}, h {r['h payload']:.1e}; inside compiled code "
              f"{1e6 * r['inside payload']:.3f} us")
    print(f"per evaluation: generated inside compiled code {1e6 * r['inside']:.3f} us, generated called from "
          f"Python {1e6 * r['python']:.3f} us, Pinocchio crba + nonLinearEffects from Python "
          f"{1e6 * r['pinocchio']:.3f} us ({r['pinocchio'] / r['inside']:.1f}x the compiled one)")
    print(f"per stop ({args.states} bench states, median {n_eval:.0f} evaluations): M and h cost "
          f"{1e6 * n_eval * r['pinocchio']:.0f} us with Pinocchio's calls, {1e6 * n_eval * r['inside']:.0f} us "
          f"generated and compiled; the batch target's whole stop is {1e6 / 3000:.0f} us")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

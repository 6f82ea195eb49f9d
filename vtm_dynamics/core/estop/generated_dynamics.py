"""M(q) and h(q, v) of a fixed-base robot as generated, compiled code, the six Runge-Kutta stages of the E-stop
engine's step in one compiled call, and with them the engine's whole event loop (:mod:`.compiled_driver`, whose
text each generated module includes), for batches of stop predictions.

What is computed: the joint-space mass matrix M(q) [kg m^2, kg m, kg] and the bias forces h(q, v) = C(q, v) v + g(q)
[N m, N] of Mueller 2026, eq. (3) (M dv/dt + h = tau + brake torques), the same quantities as Pinocchio's ``crba``
(with the model's armature on the diagonal) and ``nonLinearEffects``. They come from Featherstone's composite-rigid-
body algorithm and recursive Newton-Euler algorithm (R. Featherstone, Rigid Body Dynamics Algorithms, 2008, Secs.
6.2 and 5.3) traced symbolically with CasADi SX by adam-robotics (ADAM, ``KinDynComputations.mass_matrix`` and
``bias_force`` with a fixed base), then written out as straight-line Python (one assignment per CasADi instruction)
and compiled by Numba.

Inertias are inputs, not constants: the ten inertial parameters of every moving body (mass m [kg], first moment
m c [kg m], rotational inertia about the joint frame's origin [kg m^2] in Pinocchio's order xx, xy, yy, xz, yz, zz)
are read from Pinocchio's ``model.inertias[j]`` (expressed in joint j's frame, which is the URDF child link's frame)
at every stop, so a payload attached by :func:`vtm_dynamics.core.estop.payload.with_payload`, or any other change of
a body's inertia, is honoured. Links fixed to a moving link get zero inertia in the trace, since Pinocchio has merged
them into that joint's inertia.

The generated source is cached on disk (:func:`cache_directory`; ``VTM_GENERATED_CACHE=off``: a private temporary
directory per process), named by the sha256 of everything it depends on (:func:`cache_key`: the generator's versions
and source, the URDF text, the joint order, gravity, and the source of the compiled step kernels it calls, since
Numba's own cache does not notice changes in functions of other modules), written to a temporary name and renamed.
Numba caches its machine code beside it (``cache=True``). The cache is used only if no other user can write to it
(:mod:`vtm_dynamics.core.estop.generated_cache`: it holds code that is executed).

Anything that goes wrong (adam-robotics missing, ``VTM_GENERATED_DYNAMICS=off``, a model it does not cover:
continuous joints, axes not of unit length, mimic joints, a floating base; a trace, translation or compile error)
gives None from :func:`generated_stages`; the caller then uses Pinocchio, and :func:`unavailable_reason` says why.
Units: SI.
"""

from __future__ import annotations

import hashlib
import importlib.util
import math
import os
import sys
import tempfile
import threading
from dataclasses import dataclass
from typing import Callable

import defusedxml.ElementTree as ET
import numpy as np

from vtm_dynamics.core.estop.compiled_driver import DRIVE_SIGNATURE, module_text
from vtm_dynamics.core.estop.generated_cache import entry_text, read_entry, safe_directory, write_entry
from vtm_dynamics.core.robot.model import RobotModel

ENV_SWITCH = "VTM_GENERATED_DYNAMICS"  # "off": never generate (Pinocchio everywhere)
ENV_CACHE = "VTM_GENERATED_CACHE"  # a directory, or "off" (no disk cache shared between processes)
FORMAT = 4  # bump when the layout of a generated module changes
PARAMETERS = 10  # inertial parameters per body
AGREEMENT = 1e-9  # largest relative difference from Pinocchio's M and h accepted when a model's code is set up
# the compiled kernels the generated stage function calls (their source is part of the cache key)
_KERNELS = ("compiled_steps.py", "compiled_dynamics.py", "compiled_decision.py", "compiled_events.py",
            "compiled_driver.py", "runge_kutta.py")
_SUPPORTED_JOINTS = ("revolute", "prismatic")

_lock = threading.Lock()
_loaded: dict[str, object] = {}  # cache key -> the loaded module (or the reason it could not be made)
_reasons: dict[int, str] = {}
_private_dir: str | None = None


@dataclass(frozen=True)
class GeneratedStages:
    """The compiled six stages of one Runge-Kutta step for one robot: ``run(X, Z)`` evaluates M and h at each stage
    state and calls :func:`vtm_dynamics.core.estop.compiled_steps.stage` (returns False if a free block of M is not
    positive definite); ``load_inertias()`` refreshes the body parameters from the robot's current inertias."""

    robot: RobotModel
    stages: Callable
    mh: Callable  # (q, v, p, armature, M, h)
    mh_at: Callable  # (X, p, armature, M, h): at the state in rows QS, VST of the engine's table X
    drive: Callable  # the engine's event loop compiled with these stages (:mod:`.compiled_driver`)
    parameters: np.ndarray  # (nv * 10,) inertial parameters of the moving bodies
    armature: np.ndarray  # (nv,) [kg m^2 or kg] added to the diagonal of M, as Pinocchio's crba does
    M: np.ndarray
    h: np.ndarray
    key: str

    def load_inertias(self) -> None:
        """Copy the robot's current body inertias and armature into the inputs of the generated code."""
        self.parameters[:] = body_parameters(self.robot)
        self.armature[:] = self.robot.model.armature

    def prepare_loop(self) -> None:
        """Compile the event loop now (or load it from the cache) instead of in the first stop: about 15 s the first
        time on a machine; :func:`generated_stages` leaves it to the first batch (a check of M and h needs none)."""
        self.drive.compile(DRIVE_SIGNATURE)

    def run(self, X: np.ndarray, Z: np.ndarray) -> bool:
        return self.stages(X, Z, self.parameters, self.armature, self.M, self.h)

    def evaluate(self, q: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(M, h) at (q [rad or m], v [rad/s or m/s]) (fresh arrays)."""
        M, h = np.zeros_like(self.M), np.zeros_like(self.h)
        self.mh(np.ascontiguousarray(q, dtype=float), np.ascontiguousarray(v, dtype=float), self.parameters,
                self.armature, M, h)
        return M, h


def body_parameters(robot: RobotModel) -> np.ndarray:
    """The ten inertial parameters of each moving body (module docstring), joint after joint, flat (nv * 10,)."""
    # (one tolist of the inertias: indexing them one by one costs half as much again, at every stop of a batch)
    inertias = robot.model.inertias.tolist()[1:robot.model.njoints]
    return np.concatenate([inertia.toDynamicParameters() for inertia in inertias])


def unavailable_reason(robot: RobotModel) -> str | None:
    """Why the last :func:`generated_stages` call for ``robot`` gave None (None: it did not, or was not called)."""
    return _reasons.get(id(robot))


def cache_directory() -> str | None:
    """Where generated modules are kept: ``$VTM_GENERATED_CACHE``, else ``$XDG_CACHE_HOME/vtm_dynamics/generated``,
    else ``~/.cache/vtm_dynamics/generated``; None when ``VTM_GENERATED_CACHE=off``."""
    explicit = os.environ.get(ENV_CACHE, "").strip()
    if explicit:
        return None if explicit.lower() == "off" else os.path.abspath(explicit)
    xdg = os.environ.get("XDG_CACHE_HOME", "").strip()
    base = xdg if os.path.isabs(xdg) else os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "vtm_dynamics", "generated")


def model_problem(robot: RobotModel) -> str | None:
    """Why ``robot`` cannot have generated dynamics (None: it can): every joint must be a URDF revolute or
    prismatic joint with a unit axis and no mimic, on a fixed base, one coordinate per velocity."""
    model = robot.model
    if not robot.urdf_text:
        return "the model has no URDF text"
    if model.nq != model.nv or model.njoints - 1 != model.nv:
        return "a joint whose configuration is not one coordinate (continuous, floating, spherical or planar)"
    try:
        root = ET.fromstring(robot.urdf_text)
    except Exception as err:  # noqa: BLE001 - ParseError, or defusedxml's refusals
        return f"the URDF does not parse: {err}"
    joints = {j.get("name"): j for j in root.findall("joint")}  # not those of <transmission>
    for name in list(model.names)[1:]:
        joint = joints.get(name)
        if joint is None:
            return f"joint {name}: not in the URDF"
        if joint.get("type") not in _SUPPORTED_JOINTS:
            return f"joint {name}: type {joint.get('type')} (only revolute and prismatic joints are generated)"
        axis = joint.find("axis")
        xyz = [1.0, 0.0, 0.0] if axis is None else [float(x) for x in axis.get("xyz", "1 0 0").split()]
        if abs(math.sqrt(sum(a * a for a in xyz)) - 1.0) > 1e-12:
            return f"joint {name}: axis {xyz} is not of unit length"
    moving = set(list(model.names)[1:])
    for name, joint in joints.items():
        mimic = joint.find("mimic")
        if mimic is not None and (name in moving or mimic.get("joint") in moving):
            return f"joint {name}: a mimic joint of a moving joint"
    return None


def _pinocchio_disagreement(robot: RobotModel, generated: "GeneratedStages") -> float:
    """The largest relative difference of M and h between the generated code and Pinocchio at three seeded
    states (a guard against any mismatch of conventions, e.g. a reduced model locked away from zero)."""
    import pinocchio as pin

    model, data = robot.model, robot.data
    rng = np.random.default_rng(28)
    lo = np.maximum(model.lowerPositionLimit, -math.pi)
    hi = np.minimum(model.upperPositionLimit, math.pi)
    worst = 0.0
    for _ in range(3):
        q, v = rng.uniform(lo, hi), rng.uniform(-2.0, 2.0, robot.nv)
        M, h = generated.evaluate(q, v)
        Mp = pin.crba(model, data, q)
        Mp = np.triu(Mp) + np.triu(Mp, 1).T
        hp = pin.nonLinearEffects(model, data, q, v)
        worst = max(worst, float(np.abs(M - Mp).max() / max(np.abs(Mp).max(), 1e-300)),
                    float(np.abs(h - hp).max() / max(np.abs(hp).max(), 1e-300)))
    return worst if worst == worst else math.inf


def _generator_versions() -> str:
    import adam
    import casadi
    import numba
    try:
        import liecasadi
        lie = getattr(liecasadi, "__version__", "?")
    except ImportError:
        lie = "-"
    return f"adam {getattr(adam, '__version__', '?')} casadi {casadi.__version__} liecasadi {lie} numba " \
           f"{numba.__version__} python {sys.version_info[:3]}"


def cache_key(robot: RobotModel, versions: str) -> str:
    """sha256 of what the generated module depends on (module docstring)."""
    digest = hashlib.sha256()
    here = os.path.dirname(os.path.abspath(__file__))
    kernels = os.path.join(os.path.dirname(here), "estop")
    parts = [f"format {FORMAT}", versions, robot.urdf_text, "\n".join(list(robot.model.names)[1:]),
             repr([float(g) for g in robot.model.gravity.linear])]
    with open(os.path.abspath(__file__), "rb") as fh:
        parts.append(fh.read().decode("utf-8", "replace"))
    for name in _KERNELS:
        with open(os.path.join(kernels, name), "rb") as fh:
            parts.append(fh.read().decode("utf-8", "replace"))
    for part in parts:
        data = part.encode("utf-8")
        digest.update(len(data).to_bytes(8, "little"))
        digest.update(data)
    return digest.hexdigest()


# ------------------------------------------------------------------------------------------------------ tracing
def _traced_function(robot: RobotModel):
    """A CasADi Function (q, v, p) -> (M without armature, h) traced by ADAM from the robot's URDF."""
    import casadi as cs
    from adam.casadi import KinDynComputations
    from adam.casadi.casadi_like import CasadiLike
    from adam.core.constants import Representations

    names = list(robot.model.names)[1:]
    gravity = np.r_[np.asarray(robot.model.gravity.linear, dtype=float), 0.0, 0.0, 0.0]
    kd = KinDynComputations(robot.urdf_text, names, gravity=gravity)
    kd.set_frame_velocity_representation(Representations.BODY_FIXED_REPRESENTATION)
    nv = kd.NDoF
    if nv != len(names):
        raise ValueError(f"ADAM found {nv} joints, Pinocchio {len(names)}")
    q, v = cs.SX.sym("q", nv), cs.SX.sym("v", nv)
    p = cs.SX.sym("p", nv * PARAMETERS)
    algorithms = kd.rbdalgos
    seen = set()
    for node in range(len(algorithms._spatial_inertias)):
        joint = algorithms._joints_per_node[node]
        index = None if joint is None else joint.idx
        if index is None:  # the root and links fixed to another link: merged into a joint's inertia by Pinocchio
            algorithms._spatial_inertias[node] = CasadiLike(cs.SX.zeros(6, 6))
            if joint is not None:  # a joint held at zero (fixed, or not among the moving ones: ADAM 0.5 gives such
                # a prismatic joint a 12 x 1 motion subspace, which breaks its CRBA); it contributes no motion
                algorithms._motion_subspaces[node] = CasadiLike(cs.SX.zeros(6, 1))
            continue
        index = int(index)
        if index in seen or not 0 <= index < nv:
            raise ValueError(f"ADAM's joint index {index} is not one of {nv} moving joints")
        seen.add(index)
        b = p[PARAMETERS * index:PARAMETERS * (index + 1)]
        # Pinocchio's dynamic parameters: m, m c (3), I about the origin: xx, xy, yy, xz, yz, zz; ADAM's spatial
        # inertia is ordered [linear; angular]: [[m 1, (m c)x^T], [(m c)x, I_o]]
        first = cs.skew(b[1:4])
        about = cs.vertcat(cs.horzcat(b[4], b[5], b[7]), cs.horzcat(b[5], b[6], b[8]), cs.horzcat(b[7], b[8], b[9]))
        algorithms._spatial_inertias[node] = CasadiLike(cs.vertcat(
            cs.horzcat(b[0] * cs.SX.eye(3), first.T), cs.horzcat(first, about)))
    if len(seen) != nv:
        raise ValueError("not every moving joint has a body in ADAM's tree")
    base, still = cs.SX.eye(4), cs.SX.zeros(6)
    M = kd.mass_matrix(base, q)[6:, 6:]
    h = kd.bias_force(base, q, still, v)[6:]
    return cs.Function("mh", [q, v, p], [cs.densify(M), cs.densify(h)], {"cse": True}), nv


def _translated(f, nv: int) -> list[str]:
    """Straight-line Python of the CasADi SX Function ``f`` (inputs q, v, p; outputs dense M column-major, h), with q
    and v read from the rows QS and VST of the engine's state table X (fixed rows: a view of a row handed to the
    function cost a sixth of an evaluation)."""
    import casadi as cs

    infix = {cs.OP_ADD: "+", cs.OP_SUB: "-", cs.OP_MUL: "*", cs.OP_DIV: "/"}
    calls = {cs.OP_SIN: "math.sin", cs.OP_COS: "math.cos", cs.OP_SQRT: "math.sqrt"}
    names = ("X[QS, {}]", "X[VST, {}]", "p[{}]")
    out = [f"def mh_bare(X, p, M, h):  # {f.n_instructions()} instructions, nv = {nv}"]
    for k in range(f.n_instructions()):
        op, a, r = f.instruction_id(k), f.instruction_input(k), f.instruction_output(k)
        if op == cs.OP_INPUT:
            out.append(f"    w{r[0]} = {names[a[0]].format(a[1])}")
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
            raise ValueError(f"CasADi operation {op} is not translated")
    return out


_TAIL = '''

@jit
def mh_at(X, p, armature, M, h):
    mh_bare(X, p, M, h)
    for i in range(h.shape[0]):
        M[i, i] += armature[i]


@jit
def mh(q, v, p, armature, M, h):
    X = np.zeros((VST + 1, q.shape[0]))
    X[QS] = q
    X[VST] = v
    mh_at(X, p, armature, M, h)


@jit
def stages(X, Z, p, armature, M, h):
    for s in range(1, 7):
        mh_at(X, p, armature, M, h)
        if not stage(X, Z, M, h, s):
            return False
    return True
'''


def generated_source(robot: RobotModel, key: str) -> tuple[str, int]:
    """The text of the generated module for ``robot`` (:func:`.generated_cache.entry_text`: its first and last
    lines name the key, the second is the sha256 of the code) and its instruction count."""
    f, nv = _traced_function(robot)
    head = ["import math", "", "import numba", "import numpy as np", "",
            "from vtm_dynamics.core.estop.compiled_steps import QS, VST, stage", "",
            'jit = numba.njit(cache=True, nogil=True, error_model="numpy")', "", "", "@jit"]
    body = _translated(f, nv)
    return entry_text(key, "\n".join(head + body) + "\n" + _TAIL + "\n\n" + module_text()), f.n_instructions()


# ------------------------------------------------------------------------------------------------------ the cache
def _directory() -> str:
    global _private_dir
    folder = cache_directory()
    if folder is None:
        if _private_dir is None:
            _private_dir = tempfile.mkdtemp(prefix="vtm_generated_")
        folder = _private_dir
    return safe_directory(folder)


def module_path(robot: RobotModel, key: str) -> str:
    """The path of the generated module for ``key``: made (and written atomically) unless a valid entry exists;
    raises :class:`.generated_cache.UnsafeCacheError` if the cache could be written by another user."""
    folder = _directory()
    path = os.path.join(folder, f"mh_{key[:32]}.py")
    if read_entry(path, key):
        return path
    text, _ = generated_source(robot, key)
    write_entry(folder, path, text)
    return path


def _load(path: str, key: str):
    name = f"vtm_generated_mh_{key[:32]}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # Numba's cache finds the functions' module by name
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module


def generated_stages(robot: RobotModel) -> GeneratedStages | None:
    """The compiled stages for ``robot`` (module docstring), or None with the reason kept for
    :func:`unavailable_reason`. Generation and compilation happen once per process and cache key."""
    reason = None
    module = None
    try:
        if os.environ.get(ENV_SWITCH, "").strip().lower() == "off":
            reason = f"{ENV_SWITCH}=off"
        else:
            reason = model_problem(robot)
        if reason is None:
            try:
                versions = _generator_versions()
            except ImportError as err:
                reason = f"adam-robotics (CasADi backend) is not installed: {err}"
        if reason is None:
            key = cache_key(robot, versions)
            with _lock:
                found = _loaded.get(key)
                if found is None:
                    try:
                        found = _load(module_path(robot, key), key)
                        found.stages.compile("(float64[:, ::1], float64[::1], float64[::1], float64[::1], "
                                             "float64[:, ::1], float64[::1])")
                        found.mh.compile("(float64[::1], float64[::1], float64[::1], float64[::1], "
                                         "float64[:, ::1], float64[::1])")
                        found.mh_at.compile("(float64[:, ::1], float64[::1], float64[::1], float64[:, ::1], "
                                            "float64[::1])")
                    except Exception as err:  # noqa: BLE001 - any failure falls back to Pinocchio, with its reason
                        found = f"generation failed: {type(err).__name__}: {str(err).splitlines()[0][:300]}"
                    _loaded[key] = found
            if isinstance(found, str):
                reason = found
            else:
                module = found
    except Exception as err:  # noqa: BLE001
        reason = f"generation failed: {type(err).__name__}: {err}"
    if module is None:
        _reasons[id(robot)] = reason
        return None
    _reasons.pop(id(robot), None)
    nv = robot.nv
    out = GeneratedStages(robot, module.stages, module.mh, module.mh_at, module.drive, np.zeros(nv * PARAMETERS), np.zeros(nv),
                          np.zeros((nv, nv)), np.zeros(nv), key)
    out.load_inertias()
    worst = _pinocchio_disagreement(robot, out)
    if not worst <= AGREEMENT:
        _reasons[id(robot)] = f"the generated M and h differ from Pinocchio's by {worst:.1e} (relative)"
        return None
    return out

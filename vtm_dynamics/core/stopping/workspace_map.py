"""Workspace stopping map: the TCP stopping distance and stopping time of many sampled states, chunk by chunk.

A state is a configuration q inside the joint limits (sampled uniformly, optionally with the TCP inside a Cartesian
cell box, or a point of a grid over the joint ranges: ``grid`` points per joint, one point = the range's middle), a
velocity v = s x (w * v_max) with w a random direction in joint space scaled so its largest entry is +-1 (so the
most loaded joint runs at the speed fraction s of its limit), a payload [kg] (one of the given levels, a point mass
at the payload frame) and the envelope's brake-torque and engage-delay factors (uniform in their ranges: the
map samples the tolerances too). Each state is one :func:`vtm_dynamics.core.estop.predict_stop`, a chunk one
batch of them (:mod:`vtm_dynamics.core.estop.batch`; Müller 2026, eq. (3) with brakes, eq. (22) at abrupt locks).

Reproducibility: chunk k draws its states from ``numpy.random.default_rng([seed, k])`` alone, so a chunk's rows
depend only on (inputs, k), never on which worker ran it, how many there are or in which order chunks finished.
Rows carry every input that produced them. Units: rad, rad/s, m, s, kg.

``within_limits`` is false for a state whose predicted stop carries a joint past its position limit
(:mod:`vtm_dynamics.core.estop.limit_crossings`: the dynamics have no end stops): its distance and time are not a
stop the robot can make, and the summary counts it like a state that did not stop (:mod:`.map_summary`).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Sequence

import numpy as np

from vtm_dynamics.core.estop import CategoryOne, StopInputError
from vtm_dynamics.core.estop.batch import BatchStopError, StopBatch, predict_stops
from vtm_dynamics.core.estop.brakes import BrakeSet
from vtm_dynamics.core.estop.generated_dynamics import generated_stages, unavailable_reason
from vtm_dynamics.core.estop.payload import with_payload
from vtm_dynamics.core.estop.inputs import torque_limits_from_text
from vtm_dynamics.core.estop.defaults import (
    CATEGORY, CATEGORY1_DECELERATION, CATEGORY1_TORQUE_LIMITS, ENVELOPE_DELAY_FACTOR, ENVELOPE_TORQUE_FACTOR, MAX_ENVELOPE_FACTOR, MAX_PAYLOAD,
    PAYLOAD,
)
from vtm_dynamics.core.robot.model import RobotModel
from vtm_dynamics.core.stopping.map_summary import MapSummary, passes_of, summarize_passes

MAX_STATES = 100_000_000  # a map larger than this is a typo, not a plan
MAX_CHUNK = 100_000
BOX_TRIES_PER_STATE = 2000  # rejection sampling into the cell box gives up after this many draws per state


class MapInputError(StopInputError):
    """A map request that cannot run (one line naming the field)."""


class ChunkFailure(RuntimeError):
    """A state of a chunk could not be predicted: ``chunk``, ``state``, its ``q`` / ``v`` and the ``reason``."""

    def __init__(self, chunk: int, state: int, q: Sequence[float], v: Sequence[float], reason: str) -> None:
        self.chunk, self.state, self.reason = chunk, state, reason
        self.q = tuple(float(x) for x in q)
        self.v = tuple(float(x) for x in v)
        super().__init__(f"chunk {chunk}, state {state}: {reason} (q={_fmt(self.q)}, v={_fmt(self.v)})")

    def __reduce__(self):  # survives pickling between processes
        return (ChunkFailure, (self.chunk, self.state, self.q, self.v, self.reason))


def _fmt(x: Sequence[float]) -> str:
    return "[" + ", ".join(f"{float(a):.6g}" for a in x) + "]"


@dataclass(frozen=True)
class MapSpec:
    """What to sample: ``n_states`` in chunks of ``chunk_size`` with ``seed``; joint ranges ``q_low``/``q_high``
    [rad] (None: the model's limits, clipped to +-pi about 0 for unbounded joints); ``cell_box`` ((xmin, ymin,
    zmin), (xmax, ymax, zmax)) [m] in the world frame for the TCP at the state (None: anywhere); ``speed_fraction``
    (min, max) of ``max_speeds`` [rad/s] per joint (None: the model's velocity limits); ``payloads`` [kg] levels;
    envelope ``torque_factor`` / ``delay_factor`` ranges; stop ``category`` (and the category-1 ramp's
    ``category1_deceleration`` [rad/s^2] and the drives' ``category1_torque_limits`` [N m]: None, "urdf" or one per
    joint, ``CategoryOne.torque_limits``); ``tcp_frame`` whose distance is mapped, ``payload_frame``. ``states``:
    explicit (q, v) pairs instead of sampled ones (e.g. logged states; payload and factors are still sampled);
    ``grid``: points per joint of a grid of configurations over the joint ranges (state k is the k-th point in
    C order; ``n_states`` must equal the product; velocities, payloads and factors are still sampled)."""

    n_states: int
    tcp_frame: str
    payload_frame: str
    chunk_size: int = 250
    seed: int = 0
    q_low: tuple[float, ...] | None = None
    q_high: tuple[float, ...] | None = None
    cell_box: tuple[tuple[float, float, float], tuple[float, float, float]] | None = None
    speed_fraction: tuple[float, float] = (0.1, 1.0)
    max_speeds: tuple[float, ...] | None = None
    payloads: tuple[float, ...] = (PAYLOAD,)
    torque_factor: tuple[float, float] = ENVELOPE_TORQUE_FACTOR
    delay_factor: tuple[float, float] = ENVELOPE_DELAY_FACTOR
    category: int = CATEGORY
    category1_deceleration: float = CATEGORY1_DECELERATION
    category1_torque_limits: str | tuple[float, ...] | None = CATEGORY1_TORQUE_LIMITS
    states: tuple[tuple[tuple[float, ...], tuple[float, ...]], ...] | None = field(default=None)
    grid: tuple[int, ...] | None = None

    @property
    def n_chunks(self) -> int:
        return -(-self.n_states // self.chunk_size)

    def category_one(self) -> CategoryOne:
        """The category-1 ramp of every stop of the map."""
        return CategoryOne(deceleration=self.category1_deceleration, torque_limits=self.category1_torque_limits)

    def as_dict(self) -> dict:
        """Plain JSON-ready dict of every input (for the run's manifest and its hash)."""
        return asdict(self)


@dataclass(frozen=True)
class StateBatch:
    """The states of one chunk: ``index`` (global state numbers), ``q``, ``v``, ``speed_fraction``, ``payload``,
    ``torque_factor``, ``delay_factor``, ``tcp_start`` (n x 3 [m])."""

    chunk: int
    index: np.ndarray
    q: np.ndarray
    v: np.ndarray
    speed_fraction: np.ndarray
    payload: np.ndarray
    torque_factor: np.ndarray
    delay_factor: np.ndarray
    tcp_start: np.ndarray


# ------------------------------------------------------------------------------------------------ checks
def _pair(x: Sequence[float], name: str, lo: float, hi: float) -> tuple[float, float]:
    try:
        a, b = (float(y) for y in x)
    except (TypeError, ValueError):
        raise MapInputError(f"{name}: expected (min, max)") from None
    if not (math.isfinite(a) and math.isfinite(b) and lo <= a <= b <= hi):
        raise MapInputError(f"{name}: expected {lo} <= min <= max <= {hi}, got ({a}, {b})")
    return a, b


def joint_ranges(robot: RobotModel, spec: MapSpec) -> tuple[np.ndarray, np.ndarray]:
    """(low, high) [rad] of the sampled configurations, checked against the model's limits."""
    lo = np.array(robot.model.lowerPositionLimit, dtype=float)
    hi = np.array(robot.model.upperPositionLimit, dtype=float)
    unbounded = ~(np.isfinite(lo) & np.isfinite(hi) & (hi > lo))
    lo[unbounded], hi[unbounded] = -math.pi, math.pi
    lo, hi = np.maximum(lo, -4 * math.pi), np.minimum(hi, 4 * math.pi)
    if robot.nq != robot.nv:
        raise MapInputError("robot: maps need joints with one position per velocity (revolute/prismatic)")
    for name, given, ref in (("q_low", spec.q_low, lo), ("q_high", spec.q_high, hi)):
        if given is None:
            continue
        arr = np.asarray(given, dtype=float)
        if arr.shape != (robot.nq,) or not np.all(np.isfinite(arr)):
            raise MapInputError(f"{name}: expected {robot.nq} finite angles [rad]")
        for k, j in enumerate(robot.joints):
            if (name == "q_low" and arr[k] < ref[k] - 1e-9) or (name == "q_high" and arr[k] > ref[k] + 1e-9):
                raise MapInputError(f"{name}[{j.name}]: {arr[k]:.6g} outside the joint limits "
                                    f"[{lo[k]:.6g}, {hi[k]:.6g}]")
        if name == "q_low":
            lo = arr
        else:
            hi = arr
    bad = np.nonzero(lo > hi)[0]
    if bad.size:
        raise MapInputError(f"q_low[{robot.joint_names[bad[0]]}]: above q_high")
    return lo, hi


def speed_limits(robot: RobotModel, spec: MapSpec) -> np.ndarray:
    """Maximum joint speeds [rad/s] (100 % speed), checked against the model's velocity limits."""
    limit = np.asarray(robot.model.velocityLimit, dtype=float)
    if spec.max_speeds is None:
        if not np.all(np.isfinite(limit) & (limit > 0)):
            raise MapInputError("max_speeds: the model has no velocity limit for every joint; give max_speeds")
        return limit.copy()
    arr = np.asarray(spec.max_speeds, dtype=float)
    if arr.shape != (robot.nv,) or not np.all(np.isfinite(arr) & (arr > 0)):
        raise MapInputError(f"max_speeds: expected {robot.nv} positive speeds [rad/s]")
    for k, name in enumerate(robot.joint_names):
        if np.isfinite(limit[k]) and limit[k] > 0 and arr[k] > limit[k] * (1 + 1e-9):
            raise MapInputError(f"max_speeds[{name}]: {arr[k]:.6g} rad/s is above the velocity limit "
                                f"{limit[k]:.6g} rad/s")
    return arr


def reach_sphere(robot: RobotModel, frame: str) -> tuple[np.ndarray, float]:
    """(centre [m], radius [m]) of a sphere that holds ``frame`` in every configuration: centred on the first
    joint's origin, radius the sum of the fixed distances between consecutive joint origins down to the frame."""
    import pinocchio as pin

    m, d = robot.model, robot.data
    fid = robot.frame_id(frame)
    q = robot.neutral()
    pin.forwardKinematics(m, d, q)
    pin.updateFramePlacements(m, d)
    chain = []
    jid = m.frames[fid].parentJoint
    while jid > 0:
        chain.append(jid)
        jid = m.parents[jid]
    chain.reverse()
    if not chain:
        return d.oMf[fid].translation.copy(), 0.0
    radius = 0.0
    for a, b in zip(chain[:-1], chain[1:]):
        radius += float(np.linalg.norm(m.jointPlacements[b].translation))
    radius += float(np.linalg.norm(m.frames[fid].placement.translation))
    return d.oMi[chain[0]].translation.copy(), radius


def check_map_spec(robot: RobotModel, spec: MapSpec) -> None:
    """Raise a one-line :class:`MapInputError` naming the field for a map that cannot run."""
    for name in ("n_states", "chunk_size", "seed"):
        value = getattr(spec, name)
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
            raise MapInputError(f"{name}: expected an integer, got {value!r}")
    if not 1 <= spec.n_states <= MAX_STATES:
        raise MapInputError(f"n_states: expected 1..{MAX_STATES}, got {spec.n_states}")
    if not 1 <= spec.chunk_size <= MAX_CHUNK:
        raise MapInputError(f"chunk_size: expected 1..{MAX_CHUNK}, got {spec.chunk_size}")
    if spec.seed < 0:
        raise MapInputError(f"seed: must be >= 0, got {spec.seed}")
    robot.frame_id(spec.tcp_frame)
    robot.frame_id(spec.payload_frame)
    joint_ranges(robot, spec)
    speed_limits(robot, spec)
    _pair(spec.speed_fraction, "speed_fraction", 0.0, 1.0)
    _pair(spec.torque_factor, "torque_factor", 0.0, MAX_ENVELOPE_FACTOR)
    _pair(spec.delay_factor, "delay_factor", 0.0, MAX_ENVELOPE_FACTOR)
    if not spec.payloads or any(not (math.isfinite(m) and 0 <= m <= MAX_PAYLOAD) for m in spec.payloads):
        raise MapInputError(f"payloads: expected masses 0 .. {MAX_PAYLOAD:g} kg, got {list(spec.payloads)}")
    if spec.category not in (0, 1):
        raise MapInputError(f"category: 0 or 1, got {spec.category}")
    if not (math.isfinite(spec.category1_deceleration) and spec.category1_deceleration > 0):
        raise MapInputError(f"category1_deceleration: must be positive, got {spec.category1_deceleration}")
    limits = spec.category1_torque_limits
    if limits is not None:
        try:  # the command lines' check, on the spec's values
            torque_limits_from_text(limits if isinstance(limits, str) else [repr(float(x)) for x in limits])
        except (StopInputError, TypeError, ValueError) as err:
            raise MapInputError(f"category1_{str(err).split(': ', 1)[0]}: {str(err).split(': ', 1)[-1]}") from None
        if not isinstance(limits, str) and len(limits) != robot.nv:
            raise MapInputError(f"category1_torque_limits: {len(limits)} values for {robot.nv} joints")
    if spec.states is not None and len(spec.states) != spec.n_states:
        raise MapInputError(f"states: {len(spec.states)} given for n_states {spec.n_states}")
    if spec.grid is not None:
        g = spec.grid
        if len(g) != robot.nq or any(isinstance(x, bool) or not isinstance(x, (int, np.integer)) or x < 1 for x in g):
            raise MapInputError(f"grid: expected {robot.nq} point counts >= 1, got {list(g)}")
        if int(np.prod([int(x) for x in g], dtype=object)) != spec.n_states:
            raise MapInputError(f"grid: {' x '.join(map(str, g))} points, but n_states is {spec.n_states}")
        if spec.cell_box is not None or spec.states is not None:
            raise MapInputError("grid: not together with cell_box or states (the grid is the configurations)")
    if spec.cell_box is not None:
        try:
            box = np.asarray(spec.cell_box, dtype=float)
        except (TypeError, ValueError):
            box = np.zeros(0)
        if box.shape != (2, 3) or not np.all(np.isfinite(box)) or np.any(box[0] >= box[1]):
            raise MapInputError("cell_box: expected (xmin, ymin, zmin) < (xmax, ymax, zmax) [m]")
        centre, radius = reach_sphere(robot, spec.tcp_frame)
        nearest = np.clip(centre, box[0], box[1])
        gap = float(np.linalg.norm(nearest - centre))
        if gap > radius:
            raise MapInputError(f"cell_box: outside the reach of {robot.name!r} (its nearest point is {gap:.3f} m "
                                f"from the first joint, the reach is {radius:.3f} m)")


# ------------------------------------------------------------------------------------------------ sampling
def _tcp(robot: RobotModel, q: np.ndarray, fid: int) -> np.ndarray:
    import pinocchio as pin

    pin.framesForwardKinematics(robot.model, robot.data, q)
    return robot.data.oMf[fid].translation.copy()


def _velocities(rng: np.random.Generator, n: int, nv: int, spec: MapSpec,
                vmax: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(v, s): random joint-space directions scaled so the most loaded joint runs at the speed fraction s."""
    w = rng.standard_normal((n, nv))
    w /= np.maximum(np.max(np.abs(w), axis=1, keepdims=True), 1e-300)
    s = rng.uniform(*spec.speed_fraction, size=n)
    return s[:, None] * w * vmax[None, :], s


def chunk_states(robot: RobotModel, spec: MapSpec, chunk: int) -> StateBatch:
    """The states of ``chunk`` (module docstring); raises :class:`MapInputError` when the cell box cannot be hit."""
    if not 0 <= chunk < spec.n_chunks:
        raise MapInputError(f"chunk: expected 0..{spec.n_chunks - 1}, got {chunk}")
    start = chunk * spec.chunk_size
    n = min(spec.chunk_size, spec.n_states - start)
    rng = np.random.default_rng([spec.seed, chunk])
    fid = robot.frame_id(spec.tcp_frame)
    lo, hi = joint_ranges(robot, spec)
    vmax = speed_limits(robot, spec)
    if spec.states is not None:
        rows = spec.states[start:start + n]
        q = np.array([r[0] for r in rows], dtype=float).reshape(n, -1)
        v = np.array([r[1] for r in rows], dtype=float).reshape(n, -1)
        s = np.max(np.abs(v) / vmax, axis=1) if v.shape[1] == robot.nv else np.full(n, np.nan)
    elif spec.grid is not None:
        axes = [np.linspace(lo[i], hi[i], g) if g > 1 else np.array([0.5 * (lo[i] + hi[i])])
                for i, g in enumerate(spec.grid)]
        cells = np.unravel_index(np.arange(start, start + n), tuple(spec.grid))
        q = np.stack([axes[i][cells[i]] for i in range(robot.nq)], axis=1)
        v, s = _velocities(rng, n, robot.nv, spec, vmax)
    else:
        box = None if spec.cell_box is None else np.asarray(spec.cell_box, dtype=float)
        qs = []
        tries = 0
        while len(qs) < n:
            cand = lo + (hi - lo) * rng.random(robot.nq)
            tries += 1
            if box is not None:
                if tries > BOX_TRIES_PER_STATE * n:
                    raise MapInputError(f"cell_box: no configuration within the joint limits put {spec.tcp_frame} "
                                        f"inside the box in {tries - 1} draws (box outside the reachable space?)")
                p = _tcp(robot, cand, fid)
                if np.any(p < box[0]) or np.any(p > box[1]):
                    continue
            qs.append(cand)
        q = np.array(qs)
        v, s = _velocities(rng, n, robot.nv, spec, vmax)
    payload = np.asarray(spec.payloads, dtype=float)[rng.integers(0, len(spec.payloads), size=n)]
    tf = rng.uniform(*spec.torque_factor, size=n)
    df = rng.uniform(*spec.delay_factor, size=n)
    tcp = np.full((n, 3), np.nan)
    for k in range(n):
        if q.shape[1] == robot.nq and np.all(np.isfinite(q[k])):
            tcp[k] = _tcp(robot, q[k], fid)
    return StateBatch(chunk, np.arange(start, start + n, dtype=np.int64), q, v, s, payload, tf, df, tcp)


# ------------------------------------------------------------------------------------------------ evaluation
RESULT_COLUMNS = ("stop_time_s", "tcp_straight_distance_m", "tcp_path_length_m", "max_stopping_angle_rad", "stopped",
                  "within_limits")


def evaluate_chunk(robot: RobotModel, brakes: BrakeSet, spec: MapSpec, chunk: int,
                   models: dict[float, RobotModel] | None = None,
                   stops: StopBatch | None = None) -> dict[str, np.ndarray]:
    """Predict every state of ``chunk`` in one batch (:func:`vtm_dynamics.core.estop.batch.predict_stops`);
    columns (inputs, then results) keyed by name. ``robot`` carries no payload; ``models`` caches the payload
    variants between calls and ``stops`` the batch set-up (one each per thread). Raises :class:`ChunkFailure`
    naming the first state that could not be predicted."""
    batch = chunk_states(robot, spec, chunk)
    models = {} if models is None else models
    models.setdefault(0.0, robot.copy())
    if stops is None or stops.robot is not robot or stops.brakes is not brakes:
        # a map is the large batch the generated M and h pay off in (core.estop.batch): about 2.5x the rate, results
        # equal to rounding; a model they do not cover uses Pinocchio
        stops = StopBatch(robot, brakes, spec.payload_frame, models, generated=True)
    n = len(batch.index)
    out = {k: np.empty(n) for k in RESULT_COLUMNS}
    out["stopped"] = np.zeros(n, dtype=bool)
    out["within_limits"] = np.zeros(n, dtype=bool)
    c1 = spec.category_one() if spec.category == 1 else None
    try:
        predictions = predict_stops(robot, brakes, batch.q, batch.v, payloads=batch.payload,
                                    torque_factors=batch.torque_factor, delay_factors=batch.delay_factor,
                                    category=spec.category, category_one=c1, tcp_frame=spec.tcp_frame, batch=stops)
    except BatchStopError as err:  # any failure of a state is reported with its input
        k = err.index
        raise ChunkFailure(chunk, int(batch.index[k]), batch.q[k], batch.v[k], err.reason) from None
    turns = np.array([not j.prismatic for j in robot.joints])  # a prismatic joint's travel is in m, not rad
    for k, p in enumerate(predictions):
        out["stop_time_s"][k] = p.stop_time if p.stopped else math.inf
        out["tcp_straight_distance_m"][k] = p.tcp_straight_distance
        out["tcp_path_length_m"][k] = p.tcp_path_length
        out["max_stopping_angle_rad"][k] = float(np.max(np.abs(p.stopping_angles[turns]))) if turns.any() \
            else math.nan
        out["stopped"][k] = p.stopped
        out["within_limits"][k] = not p.limit_crossings
    cols: dict[str, np.ndarray] = {"state": batch.index, "chunk": np.full(n, chunk, dtype=np.int64)}
    for i, name in enumerate(robot.joint_names):
        cols[f"q_{name}"] = batch.q[:, i].copy()
    for i, name in enumerate(robot.joint_names):
        cols[f"v_{name}"] = batch.v[:, i].copy()
    cols.update({"speed_fraction": batch.speed_fraction, "payload_kg": batch.payload,
                 "torque_factor": batch.torque_factor, "delay_factor": batch.delay_factor,
                 "tcp_x_m": batch.tcp_start[:, 0].copy(), "tcp_y_m": batch.tcp_start[:, 1].copy(),
                 "tcp_z_m": batch.tcp_start[:, 2].copy()})
    cols.update(out)
    return cols


def dynamics_used(robot: RobotModel, spec: MapSpec) -> str:
    """Which M(q) and h(q, v) the map's stops use, as :func:`evaluate_chunk` sets them up in this process:
    "generated" (:mod:`vtm_dynamics.core.estop.generated_dynamics`), or "Pinocchio (why)" for the first payload
    level that cannot have generated code. ``robot`` carries no payload."""
    for m in spec.payloads:
        model = robot.copy() if m == 0.0 else with_payload(robot, float(m), spec.payload_frame)
        if generated_stages(model) is None:
            return f"Pinocchio ({unavailable_reason(model)})"
    return "generated"


def prepared_dynamics(robot: RobotModel, spec: MapSpec) -> str:
    """:func:`dynamics_used`, with the generated code and its compiled event loop made now (into the cache that
    local workers then load, instead of each making it: about 20 s the first time on a machine)."""
    used = dynamics_used(robot, spec)
    if used == "generated":
        generated_stages(robot.copy()).prepare_loop()
    return used


def summarize(columns: dict[str, np.ndarray]) -> MapSummary:
    """Worst cases and distribution of a map's rows held in memory (:func:`.map_summary.summarize_passes`, which
    reduces a map of any size a block at a time, says how a state that did not stop counts)."""
    if np.asarray(columns["tcp_straight_distance_m"]).size == 0:
        raise MapInputError("map: no rows to summarize")
    return summarize_passes(passes_of(columns))

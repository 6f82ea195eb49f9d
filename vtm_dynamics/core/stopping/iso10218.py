"""ISO 10218-1 style stopping data: stop categories 0 and 1, the three joints with the greatest displacement, at
33 / 66 / 100 % of maximum speed x extension x payload, under a stated test motion per joint.

ISO 10218-1 (Annex B of the 2011 edition) asks robot makers for the stopping time and distance of the axes with the
greatest displacement; vendors publish them as charts (distance and time against speed, one curve per extension or
payload). The standard does not fix the test motion, so every choice below is a stated assumption, recorded in the
result (:class:`StoppingTestSpec`) and printed in the report:

* Greatest displacement: the joints whose axis lies farthest from the payload frame in the 100 %-extension pose
  (the TCP moves |axis x r| metres per radian of the joint), the three largest, in model order.
* Test motion of joint i (as in :mod:`vtm_dynamics.core.estop.calibration`): joint i alone at speed fraction x its
  maximum speed, through the test pose, moving the way gravity pulls (the longer stop; +1 without gravity torque),
  the other joints at rest and either held rigid (``hold_others``: a lock at t = 0, as the UR5 calibration
  assumed) or braked like the tested joint (true category 0: their brakes engage after their delay and they may
  slide under the load; during a category-1 ramp the drives hold them at rest either way), the payload a point
  mass at the payload frame.
* Extension e: the robot's extension is the distance of the payload frame from the axis of ``extension_joint``
  (the base axis); e is the 100 % pose with joint i's "fold" joint (e.g. the elbow; for the elbow test the elbow's
  own start angle) turned by the smallest angle within its limits (the positive direction on a tie) that brings
  the payload frame to e x the 100 % extension.
* The band: the same point at every corner of the envelope's brake-torque and delay factors
  (:func:`vtm_dynamics.core.estop.envelope.envelope_samples`), min and max of angle and time.

Each point is one batch of :func:`vtm_dynamics.core.estop.predict_stop` over its band (:mod:`.estop.batch`;
Müller 2026, eq. (3) with joint-lock rows, the category-1 ramp, eq. (22) for the locks at t = 0).
Units: rad, rad/s, rad/s^2, s, kg, m.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np
import scipy.optimize

from vtm_dynamics.core.estop import CategoryOne, LockEvent, StopInputError, StopPrediction
from vtm_dynamics.core.estop.batch import BatchStopError, StopBatch, predict_stops
from vtm_dynamics.core.estop.brakes import BrakeSet
from vtm_dynamics.core.estop.defaults import (
    CATEGORY1_DECELERATION, CATEGORY1_TORQUE_LIMITS, ENVELOPE_DELAY_FACTOR, ENVELOPE_TORQUE_FACTOR,
)
from vtm_dynamics.core.estop.envelope import EnvelopeSpec, envelope_samples
from vtm_dynamics.core.estop.inputs import torque_limits_from_text
from vtm_dynamics.core.robot.model import RobotModel

LEVELS = (0.33, 0.66, 1.0)


@dataclass(frozen=True)
class StoppingTestSpec:
    """The stated test: ``joints`` under test, ``fold_joints`` (one per tested joint: the joint turned to reduce
    the extension), ``max_speeds`` [rad/s] per tested joint (100 % speed), ``max_payload`` [kg] at
    ``payload_frame``, ``base_pose`` [rad] (100 % extension), ``extension_joint`` (the axis extension is measured
    from; None: the first tested joint), ``categories``, the three level lists (fractions),
    ``category1_deceleration`` [rad/s^2] (ramp of the tested joint) and the drives' ``category1_torque_limits``
    [N m] (None, "urdf" or one per joint: ``CategoryOne.torque_limits``), the band's ``torque_factor`` and
    ``delay_factor`` ranges, ``hold_others`` (the other joints locked at t = 0, else braked), and ``tcp_frame``, the
    frame whose stopping distance is reported (None: ``payload_frame``; the payload and the extension stay at
    ``payload_frame``, the robot's flange, wherever the distance is measured)."""

    joints: tuple[str, ...]
    fold_joints: tuple[str, ...]
    max_speeds: tuple[float, ...]
    max_payload: float
    payload_frame: str
    base_pose: tuple[float, ...]
    extension_joint: str | None = None
    categories: tuple[int, ...] = (0, 1)
    speed_levels: tuple[float, ...] = LEVELS
    extension_levels: tuple[float, ...] = LEVELS
    payload_levels: tuple[float, ...] = LEVELS
    category1_deceleration: float = CATEGORY1_DECELERATION
    category1_torque_limits: str | tuple[float, ...] | None = CATEGORY1_TORQUE_LIMITS
    torque_factor: tuple[float, float] = ENVELOPE_TORQUE_FACTOR
    delay_factor: tuple[float, float] = ENVELOPE_DELAY_FACTOR
    hold_others: bool = True
    tcp_frame: str | None = None

    @property
    def distance_frame(self) -> str:
        """The frame whose stopping distance is reported: ``tcp_frame``, else ``payload_frame``."""
        return self.tcp_frame or self.payload_frame


@dataclass(frozen=True)
class StoppingPoint:
    """One cell of the matrix and its prediction: the levels (fractions), the joint ``speed`` [rad/s] and
    ``payload`` [kg] they mean, ``direction`` (+1/-1), the test pose ``q_test`` [rad] and its ``reach`` [m]
    (the extension: payload frame to the extension axis) and ``extension_actual`` (reach / 100 % reach: above the
    level where folding cannot reach it); nominal stopping ``angle`` [rad] (the largest |q(t) - q(0)| of the tested
    joint from the stop command until it rests: a joint that swings past and back counts its farthest point, not its
    net displacement) and ``time`` [s] of the tested joint, the band ``angle_min``/``angle_max``/``time_min``/
    ``time_max`` over the envelope corners (the same measures), and ``stopped`` (every case came to rest within the
    horizon); ``tcp_distance`` [m], the largest straight distance of the spec's ``distance_frame`` from its position at the stop
    command until rest (nominal; the start-to-rest distance where the path does not turn back), and
    ``tcp_distance_max`` [m], its largest over the band; ``limit_crossings``: the joints a stop of the band (nominal
    first, then the corners) carries past their position limits (:mod:`vtm_dynamics.core.estop.limit_crossings`;
    the dynamics have no end stops), one line each, () when none: then the angle, time and TCP distance of this
    point are not a stop the robot can make (``valid`` false)."""

    category: int
    joint: str
    speed_fraction: float
    extension_fraction: float
    payload_fraction: float
    speed: float
    payload: float
    direction: float
    q_test: tuple[float, ...]
    reach: float
    extension_actual: float
    angle: float
    time: float
    angle_min: float
    angle_max: float
    time_min: float
    time_max: float
    stopped: bool
    tcp_distance: float = math.nan
    tcp_distance_max: float = math.nan
    limit_crossings: tuple[str, ...] = ()

    @property
    def valid(self) -> bool:
        """Every case of the band came to rest within the horizon and within the joint limits."""
        return self.stopped and not self.limit_crossings


POINT_UNITS = {  # the unit of each field of StoppingPoint ("fraction": of the 100 % value; "-": none)
    "category": "-", "joint": "-", "speed_fraction": "fraction", "extension_fraction": "fraction",
    "payload_fraction": "fraction", "speed": "rad/s", "payload": "kg", "direction": "-", "q_test": "rad",
    "reach": "m", "extension_actual": "fraction", "angle": "rad", "time": "s", "angle_min": "rad", "angle_max": "rad",
    "time_min": "s", "time_max": "s", "stopped": "-", "tcp_distance": "m", "tcp_distance_max": "m",
    "limit_crossings": "-",
}


def _axis_distance(robot: RobotModel, q: np.ndarray, joint: str, frame: str) -> float:
    """Distance [m] of ``frame``'s origin from the axis line of the revolute ``joint`` at ``q``: the speed of the
    frame's origin per unit rate of that joint alone (column of the frame Jacobian, world-aligned)."""
    j = robot.joint(joint)
    jac = robot.frame_jacobian(q, frame, "local_world_aligned")
    angular = float(np.linalg.norm(jac[3:, j.idx_v])) if j.nv == 1 else 0.0
    if abs(angular - 1.0) > 1e-9:
        raise StopInputError(f"joints.{joint}: ISO stopping data needs a revolute joint moving {frame}")
    return float(np.linalg.norm(jac[:3, j.idx_v]))


def greatest_displacement_joints(robot: RobotModel, q: Sequence[float], frame: str, count: int = 3) -> tuple[str, ...]:
    """The ``count`` revolute joints whose axis is farthest from ``frame`` at ``q`` (model order)."""
    qa = np.asarray(q, dtype=float)
    scored = []
    for j in robot.joints:
        try:
            scored.append((_axis_distance(robot, qa, j.name, frame), j.idx_v, j.name))
        except StopInputError:
            continue
    if len(scored) < count:
        raise StopInputError(f"joints: the robot has fewer than {count} revolute joints")
    top = sorted(scored, key=lambda s: (-s[0], s[1]))[:count]
    return tuple(name for _, _, name in sorted(top, key=lambda s: s[1]))


def extension_pose(robot: RobotModel, base_pose: Sequence[float], joint: str, fold: str, frame: str,
                   fraction: float, strict: bool = True) -> tuple[np.ndarray, float]:
    """(pose [rad], extension [m]): ``base_pose`` with ``fold`` turned by the smallest angle within its limits that
    puts ``frame`` at ``fraction`` x its base-pose distance from the axis of ``joint`` (module docstring). When no
    angle reaches it (lateral offsets keep the frame away from the axis, as on the UR3), ``strict`` raises; else
    the fold goes to the angle of least extension and the extension returned is the one reached."""
    q0 = np.asarray(base_pose, dtype=float)
    full = _axis_distance(robot, q0, joint, frame)
    if fraction >= 1.0:
        return q0, full
    target = fraction * full
    k = robot.joint(fold).idx_q
    lo, hi = float(robot.model.lowerPositionLimit[k]), float(robot.model.upperPositionLimit[k])
    lo, hi = max(lo, q0[k] - math.pi), min(hi, q0[k] + math.pi)

    def resid(theta: float) -> float:
        q = q0.copy()
        q[k] = theta
        return _axis_distance(robot, q, joint, frame) - target

    best = None
    for end in (hi, lo):
        grid = np.linspace(q0[k], end, 361)
        vals = [resid(t) for t in grid]
        for a, b, fa, fb in zip(grid[:-1], grid[1:], vals[:-1], vals[1:]):
            if fa > 0 >= fb:
                t = scipy.optimize.brentq(resid, a, b, xtol=1e-12) if fb < 0 else b
                if best is None or abs(t - q0[k]) < abs(best - q0[k]) - 1e-12:
                    best = t
                break
    if best is None:
        if strict:
            raise StopInputError(f"extension: turning {fold} within its limits cannot bring {frame} to "
                                 f"{fraction:.0%} of its distance from {joint}")
        grid = np.linspace(lo, hi, 721)
        t0 = grid[int(np.argmin([resid(t) for t in grid]))]
        step = grid[1] - grid[0]
        best = float(scipy.optimize.minimize_scalar(resid, bounds=(max(lo, t0 - step), min(hi, t0 + step)),
                                                    method="bounded", options={"xatol": 1e-10}).x)
    q = q0.copy()
    q[k] = best
    return q, resid(best) + target


def gravity_direction(robot: RobotModel, q: np.ndarray, joint: str) -> float:
    """+1 or -1: the sense of ``joint`` in which gravity does not oppose the motion (+1 without gravity torque)."""
    g = float(robot.gravity_torques(q)[robot.joint(joint).idx_v])
    return 1.0 if g <= 1e-9 else -1.0


def largest_excursion(robot: RobotModel, stop: StopPrediction, joint_index: int) -> float:
    """The largest |q_i(t) - q_i(0)| [rad] of the joint with velocity index ``joint_index`` over the predicted time
    series of ``stop``: a joint that swings past and comes back
    before it rests travelled this far, not just its net displacement q_final - q_0."""
    q0 = stop.q[0]
    return max(abs(float(robot.difference(q0, qk)[joint_index])) for qk in stop.q)


def largest_tcp_distance(stop: StopPrediction) -> float:
    """The largest straight distance [m] of the TCP from its position at the stop command over the predicted time
    series of ``stop`` (nan without a TCP frame): at least the start-to-rest distance, and where the path turns back
    the farthest the TCP got."""
    if stop.tcp_positions is None:
        return math.nan
    path = np.asarray(stop.tcp_positions, dtype=float)
    return float(np.max(np.linalg.norm(path - path[0], axis=1)))


def check_spec(robot: RobotModel, spec: StoppingTestSpec) -> None:
    """One-line ``StopInputError`` for a spec this robot cannot run (names the field)."""
    if not (len(spec.joints) == len(spec.fold_joints) == len(spec.max_speeds)) or not spec.joints:
        raise StopInputError("joints: joints, fold_joints and max_speeds need one entry per tested joint")
    for name in (*spec.joints, *spec.fold_joints, *([spec.extension_joint] if spec.extension_joint else [])):
        if name not in robot.joint_names:
            raise StopInputError(f"joints.{name}: not a joint of {robot.name!r}")
    vmax = robot.model.velocityLimit
    for name, speed in zip(spec.joints, spec.max_speeds):
        limit = float(vmax[robot.joint(name).idx_v])
        if not (math.isfinite(speed) and speed > 0):
            raise StopInputError(f"max_speeds.{name}: must be a positive speed, got {speed}")
        if limit > 0 and speed > limit * (1 + 1e-9):
            raise StopInputError(f"max_speeds.{name}: {speed:.4g} rad/s is above the model's velocity limit "
                                 f"{limit:.4g} rad/s")
    for field in ("speed_levels", "extension_levels", "payload_levels"):
        levels = getattr(spec, field)
        if not levels or any(not (0 < x <= 1) for x in levels):
            raise StopInputError(f"{field}: fractions in (0, 1] expected, got {list(levels)}")
    if not (math.isfinite(spec.max_payload) and spec.max_payload >= 0):
        raise StopInputError(f"max_payload: must be finite and >= 0, got {spec.max_payload}")
    if set(spec.categories) - {0, 1} or not spec.categories:
        raise StopInputError(f"categories: 0 and/or 1 expected, got {list(spec.categories)}")
    if not (spec.category1_deceleration > 0 and math.isfinite(spec.category1_deceleration)):
        raise StopInputError(f"category1_deceleration: must be positive, got {spec.category1_deceleration}")
    limits = spec.category1_torque_limits
    if limits is not None:  # the command lines' check, on the spec's values; their count is the ramp's check
        torque_limits_from_text(limits if isinstance(limits, str) else [repr(float(x)) for x in limits])


def stopping_points(
    robot: RobotModel, brakes: BrakeSet, spec: StoppingTestSpec,
    progress: Callable[[int, int], None] | None = None,
) -> tuple[StoppingPoint, ...]:
    """Predict every cell of the matrix (categories x joints x speed x extension x payload) with its band.
    ``robot`` is the robot WITHOUT payload; ``progress(done, total)`` after each cell."""
    check_spec(robot, spec)
    cells = list(itertools.product(spec.categories, range(len(spec.joints)), spec.extension_levels,
                                   spec.payload_levels, spec.speed_levels))
    models: dict[float, RobotModel] = {}
    batch = StopBatch(robot, brakes, spec.payload_frame, models)  # payload models and scaled brakes built once
    band = envelope_samples(EnvelopeSpec(torque_factor=spec.torque_factor, delay_factor=spec.delay_factor))
    poses: dict[tuple[int, float], tuple[np.ndarray, float]] = {}
    full: dict[int, float] = {}
    out = []
    for n, (cat, j, ext, pay, spd) in enumerate(cells):
        joint = spec.joints[j]
        mass = pay * spec.max_payload
        model = batch.model(mass)
        if (j, ext) not in poses:
            poses[(j, ext)] = extension_pose(robot, spec.base_pose, spec.extension_joint or spec.joints[0],
                                             spec.fold_joints[j], spec.payload_frame, ext, strict=False)
            full[j] = poses[(j, 1.0)][1] if (j, 1.0) in poses else extension_pose(
                robot, spec.base_pose, spec.extension_joint or spec.joints[0], spec.fold_joints[j],
                spec.payload_frame, 1.0)[1]
        q, reach = poses[(j, ext)]
        i = model.joint(joint).idx_v
        direction = gravity_direction(model, q, joint)
        v = np.zeros(model.nv)
        v[i] = direction * spd * spec.max_speeds[j]
        others = [name for name in model.joint_names if name != joint]
        locks = [LockEvent(0.0, others)] if spec.hold_others else []
        c1 = CategoryOne(deceleration=spec.category1_deceleration,
                         torque_limits=spec.category1_torque_limits) if cat == 1 else None
        try:
            band_stops = predict_stops(robot, brakes, [q] * len(band), [v] * len(band),
                                       payloads=[mass] * len(band), torque_factors=[tf for tf, _, _ in band],
                                       delay_factors=[df for _, df, _ in band], category=cat, category_one=c1,
                                       lock_events=locks, tcp_frame=spec.distance_frame, batch=batch)
        except BatchStopError as err:
            raise err.__cause__ if isinstance(err.__cause__, StopInputError) else err
        angles = [largest_excursion(model, p, i) for p in band_stops]
        times = [float(p.joint_stop_times[i]) if p.stopped else math.inf for p in band_stops]
        stopped = all(p.stopped for p in band_stops)
        tcp = [largest_tcp_distance(p) for p in band_stops]
        out.append(StoppingPoint(
            category=cat, joint=joint, speed_fraction=spd, extension_fraction=ext, payload_fraction=pay,
            speed=spd * spec.max_speeds[j], payload=mass, direction=direction, q_test=tuple(float(x) for x in q),
            reach=reach, extension_actual=reach / full[j] if full[j] > 0 else 1.0, angle=angles[0], time=times[0],
            angle_min=min(angles), angle_max=max(angles),
            time_min=min(times), time_max=max(times), stopped=stopped,
            tcp_distance=tcp[0], tcp_distance_max=max(tcp),
            limit_crossings=next((tuple(p.limit_crossings) for p in band_stops if p.limit_crossings), ()),
        ))
        if progress is not None:
            progress(n + 1, len(cells))
    return tuple(out)

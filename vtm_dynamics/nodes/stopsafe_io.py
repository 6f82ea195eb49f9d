"""Messages of the stop-safe parts of ``estop_predictor`` and the values the core takes: ``CheckTrajectory`` requests
into a :class:`~vtm_dynamics.core.stopsafe.trajectory.PlannedTrajectory`, a
:class:`~vtm_dynamics.core.stopsafe.scene.Scene` and the sampling; the check's result into the response; the
core's :class:`~vtm_dynamics.core.stopsafe.separation.SeparationDistance` into a ``SeparationDistance`` message.
No node, no physics.

A request is data: every size is checked against its cap BEFORE anything is allocated for it (points, joints,
obstacles, primitive dimensions; the predicted stops of a fixed sample period), every number for finiteness and
range, and the first problem is one ``ValueError`` line naming the request field (``trajectory.points[3].positions``,
``obstacles[2].dimensions[1]``, ``sample_period``) and, for a cap, the parameter that sets it. A failed answer
carries no numbers that could be read as a result: empty arrays, NaN, ``first_unsafe`` = ``NOT_CHECKED``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np
from geometry_msgs.msg import Point
from vtm_msgs.msg import SeparationDistance
from vtm_msgs.srv import CheckTrajectory

from vtm_dynamics.core.stopsafe.results import SpeedScaling, TrajectoryCheck
from vtm_dynamics.core.stopsafe.sampling import MAX_RATE, MAX_SAMPLES, SamplingSpec
from vtm_dynamics.core.stopsafe.scene import DIMENSIONS, MAX_NAME_CHARS, PRIMITIVE_TYPES, Scene, scene_from_mapping
from vtm_dynamics.core.stopsafe.trajectory import (
    MAX_JOINTS, PlannedTrajectory, check_limits, model_order, planned_trajectory,
)

NAN = math.nan


@dataclass(frozen=True)
class CheckLimits:
    """Caps of one request (``stopsafe_parameters``): ``max_points``, ``max_obstacles``, ``max_dimension`` [m],
    ``max_stops`` (predicted stops over the whole answer), the sampling ``tolerance`` [m] and ``deadline`` [s]."""

    max_points: int
    max_obstacles: int
    max_dimension: float
    max_stops: int
    tolerance: float
    deadline: float

    @staticmethod
    def of(p: Mapping[str, Any]) -> "CheckLimits":
        return CheckLimits(p["check_max_points"], p["check_max_obstacles"], p["check_max_dimension"],
                           p["check_max_stops"], p["check_tolerance"], p["check_deadline"])


def _finite(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


# ------------------------------------------------------------------------------------------------ trajectory
def trajectory_of(msg: Any, limits: CheckLimits) -> PlannedTrajectory:
    """The planned trajectory of a ``trajectory_msgs/JointTrajectory`` (module docstring)."""
    names = msg.joint_names
    if not 1 <= len(names) <= MAX_JOINTS:
        raise ValueError(f"trajectory.joint_names: expected 1..{MAX_JOINTS} names, got {len(names)}")
    points = msg.points
    if not 2 <= len(points) <= limits.max_points:
        raise ValueError(f"trajectory.points: expected 2..{limits.max_points} points (check_max_points), got "
                         f"{len(points)}")
    J = len(names)
    first = points[0]
    has = {f: len(getattr(first, f)) > 0 for f in ("velocities", "accelerations")}
    for k, pt in enumerate(points):
        for f in ("positions", "velocities", "accelerations"):
            n = len(getattr(pt, f))
            if f == "positions" and n != J or f != "positions" and n != (J if has[f] else 0):
                want = J if f == "positions" or has[f] else 0
                raise ValueError(f"trajectory.points[{k}].{f}: expected {want} values (as the first point and "
                                 f"{J} joint_names), got {n}")
        if pt.time_from_start.nanosec >= 1_000_000_000:
            raise ValueError(f"trajectory.points[{k}].time_from_start.nanosec: must be below 1e9")
    t = [pt.time_from_start.sec + 1e-9 * pt.time_from_start.nanosec for pt in points]
    arrays = {f: np.array([np.asarray(getattr(pt, f), dtype=float) for pt in points]) if f == "positions" or has[f]
              else None for f in ("positions", "velocities", "accelerations")}
    try:
        return planned_trajectory(list(names), t, arrays["positions"], arrays["velocities"], arrays["accelerations"],
                                  max_points=limits.max_points)
    except ValueError as err:
        raise ValueError(f"trajectory.{err}") from None


def check_against(robot: Any, trajectory: PlannedTrajectory) -> None:
    """The trajectory names every movable joint of ``robot`` and stays within its position and velocity limits
    (the core's exact check); ``ValueError`` naming the ``trajectory`` field otherwise."""
    try:
        check_limits(robot, trajectory, model_order(robot, trajectory))
    except ValueError as err:
        raise ValueError(f"trajectory.{err}") from None


# ------------------------------------------------------------------------------------------------ scene
def _pose(pose: Any, where: str) -> dict:
    p, o = pose.position, pose.orientation
    xyz, xyzw = [p.x, p.y, p.z], [o.x, o.y, o.z, o.w]
    if not all(_finite(v) for v in xyz + xyzw) or any(abs(v) > 1000.0 for v in xyz):
        raise ValueError(f"{where}: expected finite coordinates within 1000 m and a finite quaternion")
    norm = math.sqrt(sum(v * v for v in xyzw))
    if abs(norm - 1.0) > 1e-3:
        raise ValueError(f"{where}.orientation: not a unit quaternion (norm {norm:.6g})")
    return {"position": xyz, "orientation": xyzw}


def scene_of(request: Any, limits: CheckLimits) -> Scene:
    """The scene of a ``CheckTrajectory`` request: its primitives with their poses and names, the floor, the
    self-collision flag (module docstring)."""
    obstacles, poses, names = request.obstacles, request.obstacle_poses, request.obstacle_names
    n = len(obstacles)
    if n > limits.max_obstacles:
        raise ValueError(f"obstacles: {n} obstacles, more than {limits.max_obstacles} (check_max_obstacles)")
    if len(poses) != n:
        raise ValueError(f"obstacle_poses: {len(poses)} poses for {n} obstacles (one each)")
    if len(names) not in (0, n):
        raise ValueError(f"obstacle_names: {len(names)} names for {n} obstacles (one each, or none)")
    if request.has_floor and not (_finite(request.floor_height) and abs(request.floor_height) <= 1000.0):
        raise ValueError(f"floor_height: expected a finite height within 1000 m, got {request.floor_height}")
    if n == 0 and not request.has_floor and not request.self_collision:
        raise ValueError("obstacles: empty scene (no obstacle, no floor, self_collision false): nothing to check")
    items = []
    for k, (prim, pose) in enumerate(zip(obstacles, poses)):
        where = f"obstacles[{k}]"
        kind = PRIMITIVE_TYPES.get(prim.type)
        if kind is None:
            raise ValueError(f"{where}.type: SolidPrimitive type {prim.type} is not supported (1 box, 2 sphere, "
                             "3 cylinder, 4 cone)")
        dims = prim.dimensions
        if len(dims) != DIMENSIONS[kind]:
            raise ValueError(f"{where}.dimensions: a {kind} needs {DIMENSIONS[kind]} values, got {len(dims)}")
        for i, d in enumerate(dims):
            if not (_finite(d) and 0 < d <= limits.max_dimension):
                raise ValueError(f"{where}.dimensions[{i}]: expected 0 < d <= {limits.max_dimension:g} m "
                                 f"(check_max_dimension), got {d:.6g}")
        name = names[k] if names else f"obstacle_{k}"
        if not 0 < len(name) <= MAX_NAME_CHARS:
            raise ValueError(f"obstacle_names[{k}]: expected 1..{MAX_NAME_CHARS} characters, got {len(name)}")
        items.append({"name": name, "primitive": {"type": kind, "dimensions": [float(d) for d in dims]},
                      "pose": _pose(pose, f"obstacle_poses[{k}]")})
    if len(set(it["name"] for it in items)) != len(items):
        raise ValueError("obstacle_names: a name is used twice")
    data = {"obstacles": items, "self_collision": bool(request.self_collision)}
    if request.has_floor:
        data["floor"] = {"height": float(request.floor_height)}
    return scene_from_mapping(data)


# ------------------------------------------------------------------------------------------------ options
def categories_of(request: Any, default: int) -> tuple[int, ...]:
    """The stop categories of a request (empty: the node's ``default``)."""
    cats = tuple(int(c) for c in request.stop_categories)
    if not cats:
        return (int(default),)
    if len(cats) > 2 or any(c not in (0, 1) for c in cats) or len(set(cats)) != len(cats):
        raise ValueError(f"stop_categories: expected 0 and/or 1 (at most once each), got {list(cats[:4])}")
    return cats


def sampling_of(request: Any, trajectory: PlannedTrajectory, cases: int, limits: CheckLimits) -> SamplingSpec:
    """The E-stop instants: every ``sample_period`` [s] (its stops counted against ``check_max_stops`` before
    anything is predicted), or 0: refined to ``check_tolerance`` within the stops the cap allows."""
    period = request.sample_period
    if not (_finite(period) and period >= 0):
        raise ValueError(f"sample_period: expected 0 (refined) or a positive period [s], got {period}")
    cap = max(2, min(limits.max_stops // max(cases, 1), MAX_SAMPLES))
    if period != 0 and period < 1.0 / MAX_RATE:
        raise ValueError(f"sample_period: at least {1.0 / MAX_RATE:g} s, got {period:.6g}")
    spec = SamplingSpec(rate=1.0 / period if period else None, tolerance=limits.tolerance, max_samples=cap)
    rate = spec.rate if spec.rate is not None else spec.initial_rate
    n = int(math.ceil(trajectory.duration * rate - 1e-9)) + 1  # the first instants (core: uniform_instants)
    if trajectory.interpolation == "linear":
        n += 2 * max(trajectory.n_points - 2, 0)
    if n * cases > limits.max_stops:
        every = f"every {period:.6g} s" if period else f"at the first {rate:g} Hz of the refinement"
        raise ValueError(f"sample_period: {trajectory.duration:.6g} s {every} is {n} E-stop instants x {cases} "
                         f"cases, more than check_max_stops {limits.max_stops} predicted stops")
    return spec


# ------------------------------------------------------------------------------------------------ response
def refuse_check(response: Any, reason: str) -> Any:
    """``response`` as a failure with ``reason``: no numbers that could be read as a result."""
    response.success, response.message, response.safe = False, reason, False
    for f in ("cases", "time", "stop_time", "tcp_distance", "min_clearance", "certified_clearance", "link",
              "obstacle", "sample_safe"):
        setattr(response, f, [])
    response.first_unsafe = CheckTrajectory.Response.NOT_CHECKED
    response.max_sampling_bound = response.speed_scaling = NAN
    response.speed_scaling_rechecked = False
    return response


def _floats(values: Sequence[float]) -> list[float]:
    return [float(v) for v in values]


def fill_check(response: Any, result: TrajectoryCheck, scaling: SpeedScaling | None, cases: Sequence[str],
               predicted: int) -> Any:
    """The per-instant arrays and the summary of a completed check (and search) into ``response``."""
    s = result.samples
    response.cases = list(cases)
    response.time = _floats(x.time for x in s)
    response.stop_time = _floats(x.stop_time for x in s)
    response.tcp_distance = _floats(x.tcp_distance for x in s)
    response.min_clearance = _floats(x.clearance for x in s)
    response.certified_clearance = _floats(x.certified_clearance for x in s)
    response.link = [str(x.pair[0]) for x in s]
    response.obstacle = [str(x.pair[1]) for x in s]
    response.sample_safe = [bool(x.safe) for x in s]
    response.first_unsafe = int(result.first_unsafe.index) if result.first_unsafe is not None \
        else CheckTrajectory.Response.NONE_UNSAFE
    response.safe = bool(result.safe)
    response.max_sampling_bound = float(result.max_sampling_bound)
    response.predicted_stops = int(predicted)
    response.speed_scaling = NAN if scaling is None else float(scaling.scaling)
    response.speed_scaling_rechecked = bool(scaling is not None and scaling.recheck is not None
                                            and scaling.recheck.safe)
    return response


# ------------------------------------------------------------------------------------------------ separation
def separation_message(value: Any, reason: str, *, stamp: Any, frame: str, model_name: str, model_hash: str,
                       category: int, person_age: float) -> SeparationDistance:
    """The message of a core ``SeparationDistance`` (None, or a ``reason``: ``success=false``, terms NaN)."""
    msg = SeparationDistance()
    msg.header.stamp, msg.header.frame_id = stamp, frame
    msg.model_name, msg.model_hash, msg.stop_category = model_name, model_hash, category
    msg.person_age = float(person_age)
    terms = ("s_p", "s_h", "s_r", "s_s", "c", "z_d", "z_r", "t_r", "t_s", "v_h", "v_r", "separation", "margin")
    if value is None or reason:
        msg.success, msg.message = False, reason or "no value"
        for f in terms:
            setattr(msg, f, NAN)
        msg.closest_point = Point(x=NAN, y=NAN, z=NAN)
        msg.person = Point(x=NAN, y=NAN, z=NAN)
        return msg
    msg.success, msg.message = True, "ok"
    for f in terms:
        setattr(msg, f, float(getattr(value, {"s_p": "S_p", "s_h": "S_h", "s_r": "S_r", "s_s": "S_s", "c": "C",
                                              "z_d": "Z_d", "z_r": "Z_r", "t_r": "T_r", "t_s": "T_s"}.get(f, f))))
    msg.link, msg.safe, msg.worst_case = value.link, bool(value.safe), value.case
    msg.closest_point = Point(x=float(value.closest_point[0]), y=float(value.closest_point[1]),
                              z=float(value.closest_point[2]))
    msg.person = Point(x=float(value.person[0]), y=float(value.person[1]), z=float(value.person[2]))
    return msg

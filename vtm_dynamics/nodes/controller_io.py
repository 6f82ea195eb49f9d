"""Message conversion and output limits of the ``projection_controller`` node. No physics and no executor here.

* The robot's limits as the URDF states them (read from the Pinocchio model the core built): position and velocity
  limits for checking desired trajectories, effort limits for saturating commands.
* ``trajectory_msgs/JointTrajectory`` -> :class:`~vtm_dynamics.core.projection.desired_trajectory.PiecewiseTrajectory`,
  refused as a whole when it breaks a limit or a cap (the reason names field, point and joint).
* Effort commands (``std_msgs/Float64MultiArray``) saturated to [-limit, +limit] per entry, the predicted constraint
  forces (``vtm_msgs/JointReactions``) and the ``/diagnostics`` status.

Units: SI (rad, m, s, N m, N).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any, Callable, Mapping, Sequence

import numpy as np
from rclpy.serialization import deserialize_message
from std_msgs.msg import Float64MultiArray, MultiArrayDimension
from trajectory_msgs.msg import JointTrajectory
from vtm_msgs.msg import JointReactions

from vtm_dynamics.core.excerpt import excerpt
from vtm_dynamics.core.reactions.held_uniqueness import held_joint_uniqueness
from vtm_dynamics.core.projection.task_coordinates import TASK_SINGULAR
from vtm_dynamics.core.robot.model import RobotModel
from vtm_dynamics.nodes.diagnostics import ERROR, WARN
from vtm_dynamics.nodes.work_queue import collector_paused
from vtm_dynamics.nodes.params import ParameterError
from vtm_dynamics.nodes.trajectory_cdr import TrajectoryArrays, UnsupportedEncoding, read_joint_trajectory
from vtm_dynamics.core.projection.desired_trajectory import (
    NO_LIMIT,
    PiecewiseTrajectory,
    TrajectoryError,
    TrajectoryLimits,
    check_limits,
)

#: Names shown in one log line or error text at most (a message can name any number of joints).
_SHOWN = 8


def shown(names: Sequence[str]) -> str:
    """At most a few names for a one-line text, each cut to a short excerpt, with the count of the rest."""
    names = list(names)
    head = ", ".join(excerpt(n) for n in names[:_SHOWN])
    return f"[{head}{f', ... {len(names) - _SHOWN} more' if len(names) > _SHOWN else ''}]"


# ------------------------------------------------------------------------------------------------ joint limits
def with_caps(limits: TrajectoryLimits, max_points: int, max_duration: float) -> TrajectoryLimits:
    return replace(limits, max_points=int(max_points), max_duration=float(max_duration))


@dataclass(frozen=True, eq=False)
class EffortLimits:
    """The largest effort [N m revolute, N prismatic] that may be commanded per entry of the command message.

    ``names``: commanded joints in command order; ``limits`` > 0; ``sources``: where each limit comes from
    ("urdf", "default_effort_limit" or "override").
    """

    names: tuple[str, ...]
    units: tuple[str, ...]
    limits: np.ndarray
    sources: tuple[str, ...]

    def text(self) -> str:
        """``joint=limit`` pairs for /diagnostics."""
        return ",".join(f"{n}={float(x)!r}" for n, x in zip(self.names, self.limits))


def integral_limits(robot: RobotModel, command_joints: Sequence[str], effort: EffortLimits) -> np.ndarray:
    """Bound [N m, N] per velocity coordinate of the force loop's integral term (anti-windup of the core
    controller): a commanded joint's effort limit; a passive coordinate (no actuator, but the constraint force acts
    on it) takes the largest effort limit of the commanded joints."""
    out = np.full(robot.nv, float(np.max(effort.limits)) if len(effort.limits) else 0.0)
    out[robot.v_indices(list(command_joints))] = effort.limits
    return out


def parse_effort_overrides(entries: Sequence[str]) -> dict[str, float]:
    """``["elbow_joint=50.0", ...]`` -> {joint: limit}; raises :class:`ParameterError` naming the parameter."""
    out: dict[str, float] = {}
    for entry in entries:
        name, sep, value = str(entry).partition("=")
        name = name.strip()
        if not sep or not name:
            raise ParameterError(f"effort_limit_overrides: {entry!r} is not JOINT=LIMIT")
        try:
            limit = float(value)
        except ValueError:
            raise ParameterError(f"effort_limit_overrides: {entry!r}: the limit is not a number") from None
        if not (math.isfinite(limit) and limit > 0.0):
            raise ParameterError(f"effort_limit_overrides: {entry!r}: the limit must be a finite number > 0")
        if name in out:
            raise ParameterError(f"effort_limit_overrides: {name} given twice")
        out[name] = limit
    return out


def effort_limits(robot: RobotModel, command_joints: Sequence[str], default_effort_limit: float,
                  overrides: Mapping[str, float]) -> EffortLimits:
    """Effort limits of the commanded joints: the URDF limit, or ``default_effort_limit`` (> 0) for a joint whose
    URDF gives none (missing, infinite or 0), lowered by ``overrides``. Raises :class:`ParameterError` when a
    commanded joint has no limit and no default is set, or an override names another joint or would raise it."""
    names = tuple(command_joints)
    index = {n: i for i, n in enumerate(names)}
    unknown = [n for n in overrides if n not in index]
    if unknown:
        raise ParameterError(f"effort_limit_overrides: {shown(unknown)} not commanded joints (joints: "
                             f"{shown(names)})")
    limits = np.empty(len(names))
    units, sources, missing = [], [], []
    for i, name in enumerate(names):
        j = robot.joint(name)
        unit = "N" if j.prismatic else "N m"
        urdf = float(robot.model.effortLimit[j.idx_v])
        if 0.0 < urdf < NO_LIMIT:
            limit, source = urdf, "urdf"
        elif default_effort_limit > 0.0:
            limit, source = float(default_effort_limit), "default_effort_limit"
        else:
            missing.append(name)
            limit, source = math.inf, ""
        if name in overrides:
            if overrides[name] > limit:
                raise ParameterError(f"effort_limit_overrides: {name}={overrides[name]:g} {unit} would raise the "
                                     f"limit {limit:g} {unit} (overrides can only lower it)")
            limit, source = overrides[name], "override"
        limits[i] = limit
        units.append(unit)
        sources.append(source)
    missing = [n for n in missing if n not in overrides]
    if missing:
        raise ParameterError(f"default_effort_limit: commanded joints {shown(missing)} have no effort limit in the "
                             f"URDF (missing or 0); set default_effort_limit > 0 or give them a limit")
    return EffortLimits(names, tuple(units), limits, tuple(sources))


# ------------------------------------------------------------------------------------------------ trajectories
def trajectory_message_bytes_ok(size: int, max_bytes: int) -> str | None:
    """Reason to refuse a serialized trajectory of ``size`` bytes before converting it, or None."""
    if size > max_bytes:
        return f"message: {size} bytes, more than max_trajectory_bytes {max_bytes}"
    return None


def read_trajectory(raw: bytes, limits: TrajectoryLimits, pause: Callable[[], None] | None = None) -> TrajectoryArrays:
    """The arrays of a serialized JointTrajectory (see ``trajectory_cdr``); refuses more points than
    ``limits.max_points`` and more names than the model has joints before reading them. ``pause`` is called
    every few hundred points (a worker thread lets the others run)."""
    try:
        return read_joint_trajectory(raw, limits.max_points, len(limits.names), pause)
    except UnsupportedEncoding:
        with collector_paused():  # the middleware's deserializer builds one Python object per point
            msg = deserialize_message(raw, JointTrajectory)
            if len(msg.points) > limits.max_points:
                raise TrajectoryError(f"points: {len(msg.points)} points, more than max_trajectory_points "
                                      f"{limits.max_points}") from None
            return TrajectoryArrays.from_message(msg)


def trajectory_from_message(msg: JointTrajectory, limits: TrajectoryLimits) -> PiecewiseTrajectory:
    """:func:`trajectory_from_arrays` of a deserialized message object."""
    return trajectory_from_arrays(TrajectoryArrays.from_message(msg), limits)


def trajectory_from_arrays(arr: TrajectoryArrays, limits: TrajectoryLimits) -> PiecewiseTrajectory:
    """A :class:`PiecewiseTrajectory` in the joint order of ``limits`` from a non-empty JointTrajectory.

    Every joint of ``limits.names`` must be named once in ``joint_names`` (any order); other names are an error
    (the message is meant for another robot). Per point: ``positions`` as long as ``joint_names``; ``velocities``
    and ``accelerations`` empty or as long as ``joint_names`` (``effort`` is not used). The whole trajectory is
    refused (:class:`TrajectoryError`) when any part breaks :func:`check_limits`. Linear time.
    """
    order = limits.names
    names = arr.joint_names
    column: dict[str, int] = {}
    for c, name in enumerate(names):
        if name in column:
            raise TrajectoryError(f"joint_names: {name!r} repeated")
        column[name] = c
    wanted = set(order)
    unknown = [n for n in names if n not in wanted]
    if unknown:
        raise TrajectoryError(f"joint_names: not joints of the model: {shown(unknown)}")
    missing = [n for n in order if n not in column]
    if missing:
        raise TrajectoryError(f"joint_names: the trajectory must give every model joint; missing {shown(missing)}")
    k, m = arr.n_points, len(names)
    if k == 0:
        raise TrajectoryError("points: the trajectory has no waypoint")
    if k > limits.max_points:
        raise TrajectoryError(f"points: {k} points, more than max_trajectory_points {limits.max_points}")
    counts = arr.counts["positions"]
    bad = np.flatnonzero(counts != m)
    if bad.size:
        i = int(bad[0])
        raise TrajectoryError(f"points[{i}].positions: {counts[i]} values for {m} joints")
    col = np.array([column[n] for n in order])
    pos = arr.rows("positions", m)[:, col]
    derivatives = {}
    for field in ("velocities", "accelerations"):
        counts = arr.counts[field]
        bad = np.flatnonzero((counts != 0) & (counts != m))
        if bad.size:
            i = int(bad[0])
            raise TrajectoryError(f"points[{i}].{field}: {counts[i]} values for {m} joints (must be 0 or {m})")
        values = arr.rows(field, m)[:, col]
        hit = (counts == m)[:, None] & ~np.isfinite(values)
        if hit.any():
            i, j = np.unravel_index(int(np.argmax(hit)), hit.shape)
            raise TrajectoryError(f"points[{i}].{field}[{order[j]}]: {values[i, j]:g} is not finite")
        derivatives[field] = values
    check_limits(arr.times, pos, derivatives["velocities"], limits)
    return PiecewiseTrajectory(arr.times, pos, derivatives["velocities"], derivatives["accelerations"])


# ------------------------------------------------------------------------------------------------ efforts
@dataclass(frozen=True, eq=False)
class Saturation:
    """A command after saturation: ``efforts`` within the limits, ``excess`` = |requested| - limit where the
    request was beyond the limit, else 0 [N m, N]."""

    efforts: np.ndarray
    excess: np.ndarray

    @property
    def saturated(self) -> bool:
        return bool(np.any(self.excess > 0.0))


def saturate(requested: np.ndarray, limits: EffortLimits) -> Saturation:
    """Clip every entry of a finite effort command to [-limit, +limit] (per entry, no rescaling of the rest)."""
    r = np.asarray(requested, dtype=float)
    efforts = np.clip(r, -limits.limits, limits.limits)
    return Saturation(efforts, np.maximum(np.abs(r) - limits.limits, 0.0))


class SaturationWindow:
    """Saturation seen since the last report: per commanded joint the largest excess, and how many cycles."""

    def __init__(self, limits: EffortLimits) -> None:
        self.limits = limits
        self.excess = np.zeros(len(limits.names))
        self.cycles = 0

    def add(self, sat: Saturation) -> None:
        if sat.saturated:
            self.cycles += 1
            np.maximum(self.excess, sat.excess, out=self.excess)

    def take(self) -> tuple[list[str], dict[str, float], int]:
        """(saturated joints, {joint: largest excess}, cycles) since the last call; then starts afresh."""
        hit = np.flatnonzero(self.excess > 0.0)
        names = [self.limits.names[i] for i in hit]
        excess = {self.limits.names[i]: float(self.excess[i]) for i in hit}
        cycles = self.cycles
        self.excess[:] = 0.0
        self.cycles = 0
        return names, excess, cycles

    def describe(self, excess: Mapping[str, float]) -> str:
        units = dict(zip(self.limits.names, self.limits.units))
        limits = dict(zip(self.limits.names, self.limits.limits))
        parts = [f"{n} by {x:.4g} {units[n]} (limit {limits[n]:g})" for n, x in excess.items()]
        return "effort saturated at the limits: " + ", ".join(parts)


def command_message(values: np.ndarray) -> Float64MultiArray:
    """The effort command (JointGroupEffortController convention: one entry per commanded joint, in order)."""
    msg = Float64MultiArray()
    msg.layout.dim = [MultiArrayDimension(label="joints", size=len(values), stride=len(values))]
    msg.data = [float(x) for x in values]
    return msg


def joint_uniqueness(urdf_text: str, joint_names: Sequence[str], locked: Sequence[str], q: np.ndarray) -> list[bool]:
    """Per joint: is its reaction uniquely determined by a rigid-body model with the active constraints (the
    URDF's loop closures and knife edges, the ``locked`` joints held) at ``q``? The core's analysis
    (``core.reactions.held_uniqueness``); a ValueError with one line when it cannot run."""
    verdict = held_joint_uniqueness(urdf_text, np.asarray(q, dtype=float), locked=tuple(locked))
    return [bool(verdict.get(j, True)) for j in joint_names]


def reactions_message(joint_names: Sequence[str], constraint_force: np.ndarray, unique: bool | Sequence[bool],
                      stamp: Any) -> JointReactions:
    """``holding_torques[i] = -F_i`` per model joint (velocity order); ``unique`` per joint or one flag for all."""
    msg = JointReactions()
    msg.header.stamp = stamp
    msg.joint_names = list(joint_names)
    msg.holding_torques = [float(-f) for f in constraint_force]
    flags = [bool(unique)] * len(msg.joint_names) if isinstance(unique, (bool, np.bool_)) else [bool(u) for u in unique]
    msg.uniquely_determined = flags
    msg.method = "projection"
    return msg


def effort_limit_weighting(robot: RobotModel, effort: EffortLimits) -> np.ndarray:
    """W = diag(limit_i^2) over the model's velocities (Aghili Sec. 7.2: W^1/2 = diag(f_max)); joints without a
    commanded limit (passive) weigh 1. The torque then minimizes sum (f_i / limit_i)^2."""
    w = np.ones(robot.nv)
    for name, limit in zip(effort.names, effort.limits):
        w[robot.v_slice(name)] = float(limit) ** 2
    return np.diag(w)


def passive_unmet_text(joint_names: Sequence[str], report: Any) -> str:
    """``joint=value`` [N m, N] of the passive demand the bounded inversion did not meet (see the core's
    ``ControllabilityReport.unmet_force``), one entry per passive joint."""
    unmet = report.unmet_force
    if unmet is None:
        return ""
    return ",".join(f"{joint_names[i]}={float(unmet[i])!r}" for i in report.passive_indices)


#: A cycle whose demanded acceleration has a part the constraints forbid (``forbidden_acceleration``) above this
#: fraction of the demand, and above the floor [rad/s^2, m/s^2], is reported WARN: the desired motion leaves them
#: (a locked joint asked to move, a trajectory off the closures) and that part is not met.
FORBIDDEN_FRACTION, FORBIDDEN_FLOOR = 0.1, 1e-2


def demand_unmet(out: Any, joint_names: Sequence[str]) -> tuple[int, str] | None:
    """(level, reason) of a control cycle whose demand the active constraints keep it from meeting, else None: task
    coordinates that no longer determine the motion (ERROR: ``task_conditioning`` at or below ``TASK_SINGULAR``), or a
    joint-space demand with a part the constraints forbid (WARN, naming the joints; ``FORBIDDEN_FRACTION``)."""
    if out.task_conditioning is not None and not out.task_conditioning > TASK_SINGULAR:
        return ERROR, ("task coordinates do not determine the constrained motion here (their Jacobian on the free "
                       "motions is singular): the task demand is not met")
    forbidden = out.forbidden_acceleration
    if forbidden is None:
        return None
    gap = float(np.linalg.norm(forbidden))
    if not (gap > FORBIDDEN_FLOOR and gap > FORBIDDEN_FRACTION * (gap + float(np.linalg.norm(out.qdd)))):
        return None
    worst = [i for i in np.argsort(-np.abs(forbidden))[:3] if abs(forbidden[i]) > 0.1 * gap]
    named = ", ".join(f"{joint_names[i]} {forbidden[i]:+.3g}" for i in worst)
    return WARN, ("the desired motion leaves the active constraints (locked joints, closures): demand they forbid, "
                  f"not met: {named} (rad/s^2 or m/s^2)")

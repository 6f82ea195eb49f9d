"""A planned joint trajectory with the semantics of ``trajectory_msgs/JointTrajectory`` and its interpolation.

Points carry ``positions`` and optionally ``velocities`` and ``accelerations`` at ``time_from_start``; between two
points the motion is the polynomial that the ros2_control joint trajectory controller uses: linear with positions
only, the cubic Hermite polynomial with positions and velocities, the quintic Hermite polynomial with
accelerations too. Every segment is stored in power-basis coefficients of the normalized time tau = (t - t_k) / h_k
(h_k the segment's duration), so that re-timing the trajectory by a speed scaling s (times / s, velocities x s,
accelerations x s^2, positions unchanged) leaves the coefficients as they are and only divides the durations by s.

The trajectory is the motion a robot would run when the emergency stop fires at any instant of it (Müller 2026,
Sec. 1: planning so that "at any time the system can be stopped"); :mod:`.sampling` picks those instants.
Inputs are by joint name (the message's ``joint_names``); :func:`model_order` maps them to a robot model, and
:func:`check_limits` finds the first place where the interpolated motion leaves the model's position or velocity
limits (exactly: extremes are found at the roots of the derivative polynomials). Units: s, rad (m for prismatic
joints), rad/s, rad/s^2. Errors: :class:`TrajectoryError`, one line naming the field.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np
from scipy.interpolate import PPoly

from vtm_dynamics.core.excerpt import clip
from vtm_dynamics.core.estop.inputs import StopInputError
from vtm_dynamics.core.robot.model import RobotModel

MAX_POINTS = 100_000  # a MoveIt plan has tens to hundreds of points; a 100 Hz stream over 15 minutes is 90,000
MAX_JOINTS = 64
MAX_DURATION = 3600.0  # [s] a trajectory longer than an hour is a log, not a plan
MAX_NAME_CHARS = 256
LIMIT_TOLERANCE = 1e-9  # [rad] [rad/s] slack on the model's limits (values written out with 9+ digits round-trip)


class TrajectoryError(StopInputError):
    """A trajectory that cannot be checked (one line naming the field, e.g. ``trajectory.points[3].positions``)."""


@dataclass(frozen=True)
class PlannedTrajectory:
    """``joint_names`` (J), ``time_from_start`` (N) [s] strictly increasing, ``positions`` (N x J), optional
    ``velocities`` and ``accelerations`` (N x J, None when the points carry none). Build with
    :func:`planned_trajectory` (which checks every field); ``coefficients`` (N-1 x 6 x J, ascending powers of
    tau) and ``interpolation`` (``linear``, ``cubic``, ``quintic``) are derived."""

    joint_names: tuple[str, ...]
    time_from_start: np.ndarray
    positions: np.ndarray
    velocities: np.ndarray | None
    accelerations: np.ndarray | None
    coefficients: np.ndarray = field(repr=False, compare=False)
    interpolation: str = "cubic"

    @property
    def n_points(self) -> int:
        return int(self.time_from_start.size)

    @property
    def start(self) -> float:
        return float(self.time_from_start[0])

    @property
    def end(self) -> float:
        return float(self.time_from_start[-1])

    @property
    def duration(self) -> float:
        return self.end - self.start

    @property
    def durations(self) -> np.ndarray:
        """Segment durations h_k [s] (N-1)."""
        return np.diff(self.time_from_start)

    def segment_of(self, t: np.ndarray) -> np.ndarray:
        """Index of the segment holding each time (the later one at a point; clipped to the trajectory)."""
        k = np.searchsorted(self.time_from_start, np.asarray(t, dtype=float), side="right") - 1
        return np.clip(k, 0, self.n_points - 2)

    def evaluate(self, t: object, derivative: int = 0, side: str = "right") -> np.ndarray:
        """Positions (``derivative`` 0) [rad], velocities (1) [rad/s], accelerations (2), jerks (3) at times ``t``
        [s] (M,) -> (M x J). ``side`` ``left`` evaluates at a point with the segment that ends there (the one-sided
        limit where a linear trajectory's velocity jumps)."""
        t = np.atleast_1d(np.asarray(t, dtype=float))
        tt = self.time_from_start
        if side == "left":
            k = np.clip(np.searchsorted(tt, t, side="left") - 1, 0, self.n_points - 2)
        else:
            k = self.segment_of(t)
        h = np.diff(tt)[k]
        tau = np.clip((t - tt[k]) / h, 0.0, 1.0)
        c = self.coefficients[k]  # (M, 6, J)
        out = np.zeros((t.size, len(self.joint_names)))
        for p in range(derivative, 6):
            factor = math.perm(p, derivative)
            out += factor * c[:, p, :] * (tau ** (p - derivative))[:, None]
        return out / (h ** derivative)[:, None]

    def piecewise(self, derivative: int = 0) -> PPoly:
        """The ``derivative`` as a scipy ``PPoly`` in t (trailing axis: joints), for roots and extremes."""
        h = self.durations
        c = self.coefficients / (h[:, None, None] ** np.arange(6)[None, :, None])  # powers of (t - t_k)
        pp = PPoly(np.ascontiguousarray(c[:, ::-1, :].transpose(1, 0, 2)), self.time_from_start, extrapolate=False)
        return pp.derivative(derivative) if derivative else pp

    def retimed(self, scaling: float) -> "PlannedTrajectory":
        """The same path at ``scaling`` times the speed: times / s (from the first point), velocities x s,
        accelerations x s^2 (the segment polynomials in tau are unchanged)."""
        s = float(scaling)
        if not (math.isfinite(s) and s > 0):
            raise TrajectoryError(f"scaling: must be a positive number, got {scaling!r}")
        t = self.start + (self.time_from_start - self.start) / s
        return PlannedTrajectory(
            self.joint_names, t, self.positions,
            None if self.velocities is None else self.velocities * s,
            None if self.accelerations is None else self.accelerations * (s * s),
            self.coefficients, self.interpolation)

    def retimed_per_segment(self, scalings: Sequence[float]) -> "PlannedTrajectory":
        """Segment k run at ``scalings[k]`` (its duration / s_k); the velocity (acceleration) at a point is scaled
        by the smaller (squared) scaling of the two segments that meet there, so that neither side exceeds its
        scaling. Positions at the points are unchanged; inside a segment whose two end scalings differ the
        polynomial changes with them (the result must be checked again)."""
        s = np.asarray(scalings, dtype=float)
        if s.shape != (self.n_points - 1,) or not np.all(np.isfinite(s) & (s > 0)):
            raise TrajectoryError(f"scalings: expected {self.n_points - 1} positive numbers (one per segment)")
        t = self.start + np.concatenate(([0.0], np.cumsum(self.durations / s)))
        at_point = np.minimum(np.concatenate((s[:1], s)), np.concatenate((s, s[-1:])))
        v = None if self.velocities is None else self.velocities * at_point[:, None]
        a = None if self.accelerations is None else self.accelerations * (at_point ** 2)[:, None]
        return planned_trajectory(self.joint_names, t, self.positions, v, a)

    def as_message_dict(self) -> dict:
        """A ``JointTrajectory``-shaped plain dict (joint_names, points with time_from_start [s]); floats written
        with ``repr`` precision round-trip exactly."""
        points = []
        for k in range(self.n_points):
            p: dict = {"positions": [float(x) for x in self.positions[k]]}
            if self.velocities is not None:
                p["velocities"] = [float(x) for x in self.velocities[k]]
            if self.accelerations is not None:
                p["accelerations"] = [float(x) for x in self.accelerations[k]]
            p["time_from_start"] = float(self.time_from_start[k])
            points.append(p)
        return {"joint_names": list(self.joint_names), "points": points}


def _array(x: object, shape: tuple[int, ...], name: str) -> np.ndarray:
    try:
        a = np.asarray(x, dtype=float)
    except (TypeError, ValueError):
        raise TrajectoryError(f"{name}: expected numbers") from None
    if a.shape != shape:
        raise TrajectoryError(f"{name}: expected shape {shape}, got {a.shape}")
    bad = np.argwhere(~np.isfinite(a))
    if bad.size:
        where = bad[0]
        raise TrajectoryError(f"{name}[{', '.join(str(int(i)) for i in where)}]: not a finite number")
    return a


def segment_coefficients(t: np.ndarray, p: np.ndarray, v: np.ndarray | None, a: np.ndarray | None) -> np.ndarray:
    """Power-basis coefficients in tau (N-1 x 6 x J) of the linear, cubic Hermite or quintic Hermite segments."""
    h = np.diff(t)[:, None]
    p0, p1 = p[:-1], p[1:]
    d = p1 - p0
    c = np.zeros((len(t) - 1, 6, p.shape[1]))
    c[:, 0] = p0
    if v is None:
        c[:, 1] = d
        return c
    v0, v1 = v[:-1] * h, v[1:] * h
    if a is None:
        c[:, 1] = v0
        c[:, 2] = 3.0 * d - 2.0 * v0 - v1
        c[:, 3] = -2.0 * d + v0 + v1
        return c
    a0, a1 = a[:-1] * h * h, a[1:] * h * h
    c[:, 1] = v0
    c[:, 2] = 0.5 * a0
    c[:, 3] = 10.0 * d - 6.0 * v0 - 4.0 * v1 - 1.5 * a0 + 0.5 * a1
    c[:, 4] = -15.0 * d + 8.0 * v0 + 7.0 * v1 + 1.5 * a0 - a1
    c[:, 5] = 6.0 * d - 3.0 * v0 - 3.0 * v1 - 0.5 * a0 + 0.5 * a1
    return c


def planned_trajectory(joint_names: Sequence[str], time_from_start: object, positions: object,
                       velocities: object | None = None, accelerations: object | None = None,
                       *, max_points: int = MAX_POINTS, max_duration: float = MAX_DURATION) -> PlannedTrajectory:
    """A checked :class:`PlannedTrajectory`: 2 <= N <= ``max_points`` points, 1..``MAX_JOINTS`` distinct joint
    names, finite values, ``time_from_start`` strictly increasing from >= 0 over at most ``max_duration`` [s];
    accelerations only together with velocities (JointTrajectory semantics: the controller interpolates with
    what every point carries)."""
    if isinstance(joint_names, str):
        raise TrajectoryError("joint_names: expected a list of names")
    try:
        names = tuple(joint_names)
    except TypeError:
        raise TrajectoryError("joint_names: expected a list of names") from None
    if not 1 <= len(names) <= MAX_JOINTS:
        raise TrajectoryError(f"joint_names: expected 1..{MAX_JOINTS} names, got {len(names)}")
    for k, n in enumerate(names):
        if not isinstance(n, str) or not n or len(n) > MAX_NAME_CHARS:
            raise TrajectoryError(f"joint_names[{k}]: expected a name of 1..{MAX_NAME_CHARS} characters")
    if len(set(names)) != len(names):
        dup = next(n for n in names if names.count(n) > 1)
        raise TrajectoryError(f"joint_names: {clip(dup)!r} appears twice")
    try:
        n_points = len(time_from_start)  # type: ignore[arg-type]
    except TypeError:
        raise TrajectoryError("points: expected a list of points") from None
    if not 2 <= n_points <= max_points:
        raise TrajectoryError(f"points: expected 2..{max_points} points, got {n_points}")
    J = len(names)
    t = _array(time_from_start, (n_points,), "time_from_start")
    p = _array(positions, (n_points, J), "positions")
    v = None if velocities is None else _array(velocities, (n_points, J), "velocities")
    a = None if accelerations is None else _array(accelerations, (n_points, J), "accelerations")
    if a is not None and v is None:
        raise TrajectoryError("accelerations: given without velocities (the controller would interpolate linearly)")
    if t[0] < 0:
        raise TrajectoryError(f"time_from_start[0]: must be >= 0, got {t[0]:.6g}")
    steps = np.diff(t)
    bad = np.flatnonzero(steps <= 0)
    if bad.size:
        k = int(bad[0]) + 1
        raise TrajectoryError(f"time_from_start[{k}]: {t[k]:.9g} s is not after the previous point ({t[k - 1]:.9g} s)")
    if t[-1] - t[0] > max_duration:
        raise TrajectoryError(f"time_from_start: the trajectory lasts {t[-1] - t[0]:.6g} s, more than {max_duration:g} s")
    kind = "linear" if v is None else ("cubic" if a is None else "quintic")
    return PlannedTrajectory(names, t, p, v, a, segment_coefficients(t, p, v, a), kind)


# ------------------------------------------------------------------------------------------------ model order
@dataclass(frozen=True)
class ModelOrder:
    """How a trajectory's joints map to a model: ``index[i]`` is the trajectory column of model joint i."""

    joint_names: tuple[str, ...]
    index: np.ndarray

    def columns(self, x: np.ndarray) -> np.ndarray:
        """Trajectory-ordered values (M x J) in model order (M x nv)."""
        return np.asarray(x)[..., self.index]


def model_order(robot: RobotModel, trajectory: PlannedTrajectory) -> ModelOrder:
    """The column map from ``trajectory.joint_names`` to ``robot``'s movable joints; every movable joint must be in
    the trajectory and every trajectory joint must be a movable joint (one line names the first that is not).
    Only one-DOF joints with one coordinate (revolute, prismatic) are supported."""
    if any(j.nq != 1 or j.nv != 1 for j in robot.joints):
        bad = next(j for j in robot.joints if j.nq != 1 or j.nv != 1)
        raise TrajectoryError(f"robot: joint {bad.name!r} ({bad.kind}) is not a revolute or prismatic joint with one "
                              "coordinate; trajectories need those")
    columns = {n: k for k, n in enumerate(trajectory.joint_names)}
    unknown = [n for n in trajectory.joint_names if n not in robot.joint_names]
    if unknown:
        raise TrajectoryError(f"joint_names: {clip(unknown[0])!r} is not a movable joint of {robot.name!r} "
                              f"(joints: {', '.join(robot.joint_names)})")
    missing = [n for n in robot.joint_names if n not in columns]
    if missing:
        raise TrajectoryError(f"joint_names: joint {missing[0]!r} of {robot.name!r} is missing from the trajectory "
                              "(fix it at a value to leave it out)")
    return ModelOrder(robot.joint_names, np.array([columns[n] for n in robot.joint_names], dtype=int))


@dataclass(frozen=True)
class Extremes:
    """Largest |value| of one derivative per joint and where: ``value`` (J), ``time`` (J) [s]; and the minimum
    and maximum per joint (``low``, ``high``) with their times."""

    value: np.ndarray
    time: np.ndarray
    low: np.ndarray
    low_time: np.ndarray
    high: np.ndarray
    high_time: np.ndarray


def critical_times(trajectory: PlannedTrajectory, derivative: int) -> list[np.ndarray]:
    """Per joint, the sorted times where the ``derivative`` can have an extreme: the points (both one-sided
    values are taken by :func:`extremes`) and the real roots of the next derivative inside the segments."""
    pp = trajectory.piecewise(derivative + 1)
    out = []
    for j in range(len(trajectory.joint_names)):
        one = PPoly(pp.c[:, :, j], pp.x, extrapolate=False)
        roots = one.roots(discontinuity=False, extrapolate=False)
        roots = roots[np.isfinite(roots)]
        out.append(np.unique(np.concatenate((trajectory.time_from_start, roots))))
    return out


def extremes(trajectory: PlannedTrajectory, derivative: int) -> Extremes:
    """Exact extremes of the ``derivative`` (0 positions, 1 velocities, 2 accelerations) over the whole trajectory,
    both one-sided values at the points included."""
    J = len(trajectory.joint_names)
    out = {k: np.zeros(J) for k in ("value", "time", "low", "low_time", "high", "high_time")}
    for j, times in enumerate(critical_times(trajectory, derivative)):
        vals = np.concatenate((trajectory.evaluate(times, derivative)[:, j],
                               trajectory.evaluate(times, derivative, side="left")[:, j]))
        tt = np.concatenate((times, times))
        lo, hi, big = int(np.argmin(vals)), int(np.argmax(vals)), int(np.argmax(np.abs(vals)))
        out["low"][j], out["low_time"][j] = vals[lo], tt[lo]
        out["high"][j], out["high_time"][j] = vals[hi], tt[hi]
        out["value"][j], out["time"][j] = abs(vals[big]), tt[big]
    return Extremes(**out)


def check_limits(robot: RobotModel, trajectory: PlannedTrajectory, order: ModelOrder | None = None) -> None:
    """Raise a one-line :class:`TrajectoryError` where the interpolated trajectory leaves the model's position
    limits or exceeds its velocity limits (where the model has finite positive ones)."""
    order = order or model_order(robot, trajectory)
    lo = np.asarray(robot.model.lowerPositionLimit, dtype=float)
    hi = np.asarray(robot.model.upperPositionLimit, dtype=float)
    vmax = np.asarray(robot.model.velocityLimit, dtype=float)
    pos = extremes(trajectory, 0)
    vel = extremes(trajectory, 1)
    for i, name in enumerate(robot.joint_names):
        c = int(order.index[i])
        if np.isfinite(lo[i]) and np.isfinite(hi[i]) and hi[i] > lo[i]:
            if pos.low[c] < lo[i] - LIMIT_TOLERANCE:
                raise TrajectoryError(f"trajectory: {name} reaches {pos.low[c]:.6g} at t = {pos.low_time[c]:.4f} s, "
                                      f"below its lower limit {lo[i]:.6g}")
            if pos.high[c] > hi[i] + LIMIT_TOLERANCE:
                raise TrajectoryError(f"trajectory: {name} reaches {pos.high[c]:.6g} at t = {pos.high_time[c]:.4f} s, "
                                      f"above its upper limit {hi[i]:.6g}")
        if np.isfinite(vmax[i]) and vmax[i] > 0 and vel.value[c] > vmax[i] * (1 + LIMIT_TOLERANCE):
            raise TrajectoryError(f"trajectory: {name} moves at {vel.value[c]:.6g} /s at t = {vel.time[c]:.4f} s, "
                                  f"above its velocity limit {vmax[i]:.6g} /s")


def velocity_headroom(robot: RobotModel, trajectory: PlannedTrajectory, order: ModelOrder | None = None) -> float:
    """The largest speed scaling that keeps every joint within its velocity limit (inf without limits or motion)."""
    order = order or model_order(robot, trajectory)
    vel = extremes(trajectory, 1).value[order.index]
    vmax = np.asarray(robot.model.velocityLimit, dtype=float)
    ok = np.isfinite(vmax) & (vmax > 0) & (vel > 0)
    return float(np.min(vmax[ok] / vel[ok])) if ok.any() else math.inf

"""Sampling a desired joint trajectory in time: positions, velocities and accelerations between waypoints.

A ``trajectory_msgs/JointTrajectory`` gives waypoints at ``time_from_start``; a controller needs q_d(t), q'_d(t),
q''_d(t) at its own rate. Between two waypoints the interpolant is the lowest-order polynomial that matches what
both waypoints specify (the usual convention of joint trajectory controllers):

* positions, velocities and accelerations at both ends: quintic (C2 across waypoints);
* positions and velocities at both ends: cubic Hermite (C1);
* otherwise: linear in position, constant velocity (the segment slope), zero acceleration.

Before the first waypoint the first point is held, after the last waypoint the last positions are held with zero
velocity and acceleration (``finished`` is then true).

:func:`check_limits` refuses a trajectory that asks more than the robot allows (:class:`TrajectoryLimits`: position
and velocity limits per joint, a cap on the number of points and on the duration), naming the first offending
point and joint; it runs in time linear in the number of points. No physics and no ROS here: the message
conversion is ``vtm_dynamics.nodes.controller_io``.

Units: time [s], positions [rad, m], velocities [rad/s, m/s], accelerations [rad/s^2, m/s^2].
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from vtm_dynamics.core.robot.model import RobotModel

#: Beyond this magnitude a Pinocchio limit means "none" (Pinocchio stores a missing limit as +-inf or DBL_MAX).
NO_LIMIT = 1e300


class TrajectoryError(ValueError):
    """A desired trajectory cannot be used; the message names the offending field."""


@dataclass(frozen=True)
class TrajectorySample:
    """Desired state at one instant, in the trajectory's joint order.

    ``finished`` is true at and after the last waypoint (the last positions are then held).
    """

    positions: np.ndarray
    velocities: np.ndarray
    accelerations: np.ndarray
    finished: bool


class PiecewiseTrajectory:
    """Waypoints (``times`` strictly increasing, >= 0) with optional velocities/accelerations per waypoint.

    ``velocities`` / ``accelerations``: arrays like ``positions`` or None; a waypoint whose row is NaN has no value
    for that derivative (the segments touching it fall back to a lower order).
    """

    def __init__(
        self,
        times: Sequence[float],
        positions: object,
        velocities: object | None = None,
        accelerations: object | None = None,
    ) -> None:
        t = np.asarray(times, dtype=float).reshape(-1)
        p = np.asarray(positions, dtype=float)
        if t.size == 0:
            raise TrajectoryError("points: the trajectory has no waypoint")
        if p.ndim != 2 or p.shape[0] != t.size or p.shape[1] == 0:
            raise TrajectoryError(f"positions: expected {t.size} rows of joint positions, got shape {p.shape}")
        if not np.all(np.isfinite(t)) or np.any(t < 0):
            raise TrajectoryError("time_from_start: times must be finite and >= 0")
        if np.any(np.diff(t) <= 0):
            raise TrajectoryError("time_from_start: times must be strictly increasing")
        if not np.all(np.isfinite(p)):
            raise TrajectoryError("positions: contains non-finite values")
        self.times = t
        self.positions = p
        self.velocities = self._optional(velocities, p.shape, "velocities")
        self.accelerations = self._optional(accelerations, p.shape, "accelerations")
        self.has_velocity = np.all(np.isfinite(self.velocities), axis=1)
        self.has_acceleration = np.all(np.isfinite(self.accelerations), axis=1)
        self._start_slot = False  # see with_start_slot

    @staticmethod
    def _optional(x: object | None, shape: tuple[int, ...], field: str) -> np.ndarray:
        if x is None:
            return np.full(shape, np.nan)
        arr = np.asarray(x, dtype=float)
        if arr.shape != shape:
            raise TrajectoryError(f"{field}: expected shape {shape}, got {arr.shape}")
        partial = np.any(np.isfinite(arr), axis=1) & ~np.all(np.isfinite(arr), axis=1)
        if np.any(partial):
            raise TrajectoryError(f"{field}: waypoint {int(np.flatnonzero(partial)[0])} has non-finite values")
        return arr

    @property
    def n_joints(self) -> int:
        return int(self.positions.shape[1])

    @property
    def duration(self) -> float:
        """Time of the last waypoint [s]."""
        return float(self.times[-1])

    def with_start(self, positions: object, velocities: object | None = None) -> "PiecewiseTrajectory":
        """This trajectory with a waypoint at t = 0 (e.g. the measured state when the trajectory is accepted).

        Only meaningful when the first waypoint lies after t = 0; otherwise the trajectory is returned unchanged.
        """
        new = self.with_start_slot()
        new.set_start(positions, velocities)
        return new

    def with_start_slot(self) -> "PiecewiseTrajectory":
        """A copy with an empty waypoint at t = 0, to be filled by :meth:`set_start` before sampling.

        Splits :meth:`with_start` into the copy of the arrays (O(points), e.g. on a worker thread) and filling in
        the start state (O(joints), e.g. in the control cycle at the moment the trajectory starts). Returns this
        trajectory itself when its first waypoint is at t = 0.
        """
        if self.times[0] <= 0.0:
            return self
        n = self.n_joints
        new = object.__new__(PiecewiseTrajectory)
        new.times = np.concatenate([[0.0], self.times])
        new.positions = np.vstack([np.full((1, n), np.nan), self.positions])
        new.velocities = np.vstack([np.full((1, n), np.nan), self.velocities])
        new.accelerations = np.vstack([np.full((1, n), np.nan), self.accelerations])
        new.has_velocity = np.concatenate([[False], self.has_velocity])
        new.has_acceleration = np.concatenate([[False], self.has_acceleration])
        new._start_slot = True
        return new

    @property
    def awaits_start(self) -> bool:
        """The waypoint at t = 0 of :meth:`with_start_slot` is still to be filled by :meth:`set_start`."""
        return bool(self._start_slot)

    def set_start(self, positions: object, velocities: object | None = None) -> None:
        """Fill the empty waypoint at t = 0 left by :meth:`with_start_slot` with a state [rad, m; rad/s, m/s]
        (with velocities, the start acceleration is zero); nothing to do on a trajectory without that slot."""
        if not self._start_slot:
            return
        n = self.n_joints
        p0 = np.asarray(positions, dtype=float).reshape(n)
        if not np.all(np.isfinite(p0)):
            raise TrajectoryError("positions: the start state is not finite")
        v0 = None if velocities is None else np.asarray(velocities, dtype=float).reshape(n)
        measured = v0 is not None and bool(np.all(np.isfinite(v0)))
        self.positions[0] = p0
        if measured:
            self.velocities[0] = v0
            self.accelerations[0] = 0.0
        self.has_velocity[0] = self.has_acceleration[0] = measured
        self._start_slot = False

    def sample(self, t: float) -> TrajectorySample:
        """Desired positions, velocities, accelerations at time ``t`` [s] after the trajectory start."""
        n = self.n_joints
        zero = np.zeros(n)
        if not math.isfinite(t):
            raise TrajectoryError("t: sample time must be finite")
        if self._start_slot:
            raise TrajectoryError("positions: the start waypoint was never set (set_start)")
        if t < self.times[0]:  # before the first waypoint: hold it
            return TrajectorySample(self.positions[0].copy(), zero, zero.copy(), False)
        if t >= self.times[-1]:
            return TrajectorySample(self.positions[-1].copy(), zero, zero.copy(), True)
        k = int(np.searchsorted(self.times, t, side="right")) - 1
        h = float(self.times[k + 1] - self.times[k])
        s = float(t - self.times[k])
        p0, p1 = self.positions[k], self.positions[k + 1]
        if self.has_velocity[k] and self.has_velocity[k + 1]:
            v0, v1 = self.velocities[k], self.velocities[k + 1]
            if self.has_acceleration[k] and self.has_acceleration[k + 1]:
                coeffs = _quintic(p0, v0, self.accelerations[k], p1, v1, self.accelerations[k + 1], h)
            else:
                coeffs = _cubic(p0, v0, p1, v1, h)
            pos, vel, acc = _evaluate(coeffs, s)
            return TrajectorySample(pos, vel, acc, False)
        slope = (p1 - p0) / h
        return TrajectorySample(p0 + slope * s, slope.copy(), zero, False)


def _cubic(p0: np.ndarray, v0: np.ndarray, p1: np.ndarray, v1: np.ndarray, h: float) -> list[np.ndarray]:
    """Coefficients c_i of p(s) = sum c_i s^i with p, p' matching at s = 0 and s = h (cubic Hermite)."""
    dp = p1 - p0
    return [p0, v0, (3.0 * dp - (2.0 * v0 + v1) * h) / h**2, (-2.0 * dp + (v0 + v1) * h) / h**3]


def _quintic(p0, v0, a0, p1, v1, a1, h: float) -> list[np.ndarray]:
    """Coefficients of the quintic with p, p', p'' matching at s = 0 and s = h.

    With c0..c2 fixed by the start, c3..c5 solve the 3 x 3 end conditions; r0, r1, r2 are what the end position,
    velocity and acceleration still lack after the quadratic part.
    """
    r0 = p1 - p0 - v0 * h - 0.5 * a0 * h**2
    r1 = v1 - v0 - a0 * h
    r2 = a1 - a0
    c3 = (10.0 * r0 - 4.0 * r1 * h + 0.5 * r2 * h**2) / h**3
    c4 = (-15.0 * r0 + 7.0 * r1 * h - r2 * h**2) / h**4
    c5 = (6.0 * r0 - 3.0 * r1 * h + 0.5 * r2 * h**2) / h**5
    return [p0, v0, 0.5 * a0, c3, c4, c5]


def _evaluate(coeffs: list[np.ndarray], s: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    pos = np.zeros_like(coeffs[0], dtype=float)
    vel = np.zeros_like(pos)
    acc = np.zeros_like(pos)
    for i, c in enumerate(coeffs):
        pos = pos + c * s**i
        if i >= 1:
            vel = vel + i * c * s ** (i - 1)
        if i >= 2:
            acc = acc + i * (i - 1) * c * s ** (i - 2)
    return pos, vel, acc


# ---------------------------------------------------------------------------------------------------- limits
@dataclass(frozen=True, eq=False)
class TrajectoryLimits:
    """What a desired trajectory may ask of the robot, one entry per joint in the trajectory's joint order.

    ``lower`` / ``upper``: position limits [rad, m] (-inf / +inf for a joint without, e.g. a continuous joint);
    ``velocity``: speed limits [rad/s, m/s] (inf for a joint without); ``units``: "rad" or "m" per joint (used in
    messages); ``max_points``: most waypoints; ``max_duration``: latest ``time_from_start`` [s].
    """

    names: tuple[str, ...]
    units: tuple[str, ...]
    lower: np.ndarray
    upper: np.ndarray
    velocity: np.ndarray
    max_points: int = 10_000
    max_duration: float = 3600.0

    @staticmethod
    def unlimited(names: Sequence[str], units: Sequence[str] | None = None) -> "TrajectoryLimits":
        n = len(names)
        return TrajectoryLimits(tuple(names), tuple(units or ("rad",) * n), np.full(n, -np.inf), np.full(n, np.inf),
                                np.full(n, np.inf))


def check_limits(times: np.ndarray, positions: np.ndarray, velocities: np.ndarray | None,
                 limits: TrajectoryLimits) -> None:
    """Raise :class:`TrajectoryError` naming the first point and joint that break ``limits``; else return.

    ``times`` (k,), ``positions`` (k, n) and ``velocities`` (k, n; NaN rows where a point gives none) are the
    message's points in order, so index i is ``points[i]``. Checked in this order: the number of points, times
    (finite, >= 0, strictly increasing, not beyond ``max_duration``), positions (finite, inside [lower, upper]),
    velocities given (inside [-velocity, velocity]), and the mean speed of every segment |p_i - p_(i-1)| /
    (t_i - t_(i-1)), which no interpolation between the two points can avoid reaching. Linear time.
    """
    k = int(times.shape[0])
    if k > limits.max_points:
        raise TrajectoryError(f"points: {k} points, more than max_trajectory_points {limits.max_points}")
    if k == 0:
        raise TrajectoryError("points: the trajectory has no waypoint")
    i = _first(~np.isfinite(times) | (times < 0.0))
    if i is not None:
        raise TrajectoryError(f"points[{i}].time_from_start: {times[i]:g} s, must be finite and >= 0")
    if k > 1:
        i = _first(np.diff(times) <= 0.0)
        if i is not None:
            raise TrajectoryError(f"points[{i + 1}].time_from_start: {times[i + 1]:g} s, not after points[{i}] "
                                  f"({times[i]:g} s)")
    i = _first(times > limits.max_duration)
    if i is not None:
        raise TrajectoryError(f"points[{i}].time_from_start: {times[i]:g} s beyond max_trajectory_duration "
                              f"{limits.max_duration:g} s")
    p = positions
    hit = _first_cell(~np.isfinite(p))
    if hit is not None:
        i, j = hit
        raise TrajectoryError(f"points[{i}].positions[{limits.names[j]}]: {p[i, j]:g} is not finite")
    hit = _first_cell((p < limits.lower) | (p > limits.upper))
    if hit is not None:
        i, j = hit
        raise TrajectoryError(f"points[{i}].positions[{limits.names[j]}]: {p[i, j]:g} {limits.units[j]} outside "
                              f"[{limits.lower[j]:g}, {limits.upper[j]:g}]")
    if velocities is not None:
        hit = _first_cell(np.abs(velocities) > limits.velocity)  # NaN (not given) compares false
        if hit is not None:
            i, j = hit
            raise TrajectoryError(f"points[{i}].velocities[{limits.names[j]}]: {velocities[i, j]:g} "
                                  f"{limits.units[j]}/s beyond the velocity limit {limits.velocity[j]:g} "
                                  f"{limits.units[j]}/s")
    if k > 1:
        dt = np.diff(times)[:, None]
        step = np.abs(np.diff(p, axis=0))
        hit = _first_cell(step > limits.velocity * dt * (1.0 + 1e-12))
        if hit is not None:
            i, j = hit
            raise TrajectoryError(f"points[{i + 1}].positions[{limits.names[j]}]: reached from points[{i}] at "
                                  f"{step[i, j] / dt[i, 0]:g} {limits.units[j]}/s, beyond the velocity limit "
                                  f"{limits.velocity[j]:g} {limits.units[j]}/s")


def check_start_segment(start: np.ndarray, first: np.ndarray, seconds: float, limits: TrajectoryLimits) -> None:
    """Raise :class:`TrajectoryError` when the segment from the measured ``start`` to the first waypoint ``first``
    (both in the order of ``limits.names``), due ``seconds`` [s] from now, needs a mean speed beyond a velocity
    limit: the one segment :func:`check_limits` cannot see, because the start is known only when the trajectory
    begins (e.g. a task angle, which has no position limit, 1e6 rad away and due in 0.01 s)."""
    step = np.abs(np.asarray(first, dtype=float) - np.asarray(start, dtype=float))
    if seconds <= 0.0:
        hit = _first((step > 0.0) & np.isfinite(limits.velocity))  # a joint without a velocity limit may jump
        if hit is not None:
            raise TrajectoryError(f"points[0].positions[{limits.names[hit]}]: due at once but "
                                  f"{step[hit]:g} {limits.units[hit]} from the measured position")
        return
    hit = _first(step > limits.velocity * seconds * (1.0 + 1e-12))
    if hit is not None:
        raise TrajectoryError(f"points[0].positions[{limits.names[hit]}]: reached from the measured position at "
                              f"{step[hit] / seconds:g} {limits.units[hit]}/s, beyond the velocity limit "
                              f"{limits.velocity[hit]:g} {limits.units[hit]}/s")


def _first(mask: np.ndarray) -> int | None:
    return int(np.argmax(mask)) if mask.any() else None


def _first_cell(mask: np.ndarray) -> tuple[int, int] | None:
    """(row, column) of the first true entry in row-major order, or None."""
    if not mask.any():
        return None
    i, j = np.unravel_index(int(np.argmax(mask)), mask.shape)
    return int(i), int(j)


def joint_trajectory_limits(robot: RobotModel, max_points: int, max_duration: float) -> TrajectoryLimits:
    """Position and velocity limits of the model's joints (velocity order) from the URDF, plus the caps.

    Position limits exist for revolute and prismatic joints (a URDF without ``lower``/``upper`` means 0, as the
    URDF specification says); a continuous joint has none. A velocity limit that is missing, infinite or 0 (the
    URDF attribute is required, so files often put 0 there) is not checked.
    """
    m = robot.model
    n = robot.nv
    lower, upper, velocity = np.full(n, -np.inf), np.full(n, np.inf), np.full(n, np.inf)
    units = []
    for j in robot.joints:
        units.append("m" if j.prismatic else "rad")
        if j.nq == 1 and j.nv == 1:
            lo, hi = float(m.lowerPositionLimit[j.idx_q]), float(m.upperPositionLimit[j.idx_q])
            lower[j.idx_v] = lo if abs(lo) < NO_LIMIT else -np.inf
            upper[j.idx_v] = hi if abs(hi) < NO_LIMIT else np.inf
        for k in range(j.idx_v, j.idx_v + j.nv):
            v = float(m.velocityLimit[k])
            velocity[k] = v if 0.0 < v < NO_LIMIT else np.inf
    return TrajectoryLimits(tuple(robot.joint_names), tuple(units), lower, upper, velocity, int(max_points),
                            float(max_duration))

"""Sampling a desired joint trajectory in time: positions, velocities and accelerations between waypoints.

A ``trajectory_msgs/JointTrajectory`` gives waypoints at ``time_from_start``; a controller needs q_d(t), q'_d(t),
q''_d(t) at its own rate. Between two waypoints the interpolant is the lowest-order polynomial that matches what
both waypoints specify (the usual convention of joint trajectory controllers):

* positions, velocities and accelerations at both ends: quintic (C2 across waypoints);
* positions and velocities at both ends: cubic Hermite (C1);
* otherwise: linear in position, constant velocity (the segment slope), zero acceleration.

Before the first waypoint the first point is held, after the last waypoint the last positions are held with zero
velocity and acceleration (``finished`` is then true). No physics and no ROS executor here; the message conversion
only reads fields.

Units: time [s], positions [rad, m], velocities [rad/s, m/s], accelerations [rad/s^2, m/s^2].
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np


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
        if self.times[0] <= 0.0:
            return self
        n = self.n_joints
        p0 = np.asarray(positions, dtype=float).reshape(1, n)
        v0 = np.full((1, n), np.nan) if velocities is None else np.asarray(velocities, dtype=float).reshape(1, n)
        a0 = np.zeros((1, n)) if velocities is not None else np.full((1, n), np.nan)
        return PiecewiseTrajectory(
            np.concatenate([[0.0], self.times]),
            np.vstack([p0, self.positions]),
            np.vstack([v0, self.velocities]),
            np.vstack([a0, self.accelerations]),
        )

    def sample(self, t: float) -> TrajectorySample:
        """Desired positions, velocities, accelerations at time ``t`` [s] after the trajectory start."""
        n = self.n_joints
        zero = np.zeros(n)
        if not math.isfinite(t):
            raise TrajectoryError("t: sample time must be finite")
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


def trajectory_from_message(msg: object, joint_order: Sequence[str]) -> PiecewiseTrajectory:
    """A :class:`PiecewiseTrajectory` in ``joint_order`` from a ``trajectory_msgs/JointTrajectory``.

    Every joint of ``joint_order`` must be named once in ``msg.joint_names`` (any order); names outside it are an
    error (the message is meant for another robot). Per point: ``positions`` as long as ``joint_names``;
    ``velocities`` and ``accelerations`` empty or as long as ``joint_names``.
    """
    names = list(msg.joint_names)
    if len(set(names)) != len(names):
        raise TrajectoryError("joint_names: repeated joint names")
    unknown = [n for n in names if n not in joint_order]
    if unknown:
        raise TrajectoryError(f"joint_names: not joints of the model: {unknown}")
    missing = [n for n in joint_order if n not in names]
    if missing:
        raise TrajectoryError(f"joint_names: the trajectory must give every model joint; missing {missing}")
    if not msg.points:
        raise TrajectoryError("points: the trajectory has no waypoint")
    col = [names.index(n) for n in joint_order]
    k, m = len(msg.points), len(names)
    times = np.empty(k)
    pos = np.empty((k, m))
    vel = np.full((k, m), np.nan)
    acc = np.full((k, m), np.nan)
    for i, pt in enumerate(msg.points):
        times[i] = float(pt.time_from_start.sec) + 1e-9 * float(pt.time_from_start.nanosec)
        if len(pt.positions) != m:
            raise TrajectoryError(f"points[{i}].positions: {len(pt.positions)} values for {m} joints")
        pos[i] = pt.positions
        for field, arr in (("velocities", vel), ("accelerations", acc)):
            values = getattr(pt, field)
            if len(values) not in (0, m):
                raise TrajectoryError(f"points[{i}].{field}: {len(values)} values for {m} joints (must be 0 or {m})")
            if len(values):
                if not np.all(np.isfinite(np.asarray(values, dtype=float))):
                    raise TrajectoryError(f"points[{i}].{field}: contains non-finite values")
                arr[i] = values
    return PiecewiseTrajectory(times, pos[:, col], vel[:, col], acc[:, col])

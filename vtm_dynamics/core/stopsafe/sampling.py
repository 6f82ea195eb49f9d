"""Where along a trajectory the emergency stop is assumed to fire, and how much the instants between can differ.

The stop is predicted from sampled instants t_i of the trajectory (Müller 2026, Sec. 1: the system must be
stoppable "at any time"). An E-stop at an instant t between two samples starts from a state that differs from the
nearer sample's by the motion of the trajectory over at most half the interval h_i. To first order the pose reached
s seconds into the stop is q(t) + s q'(t) + (braking terms that do not depend on the start state), so its
rate of change along the trajectory is q'(t) + s q''(t), and joint j's part of it lasts until joint j has stopped
(T_j, the longest over the cases of the two neighbouring samples). Every point of part g therefore stays within

    e_i = h_i / 2 * sum_j W[s, j] (V_j + A_j T_j)                                            (sampling bound)

of the corresponding point of the nearer sample's stop, with V_j and A_j the exact largest |q_j'| and |q_j''| of
the trajectory on the interval (extremes of its polynomials, :mod:`.trajectory`) and W the slot's displacement
weights (:class:`~.sweep.Sweeper`: link lengths for an obstacle, only the joints between two parts for a pair of
the robot's own parts). Since distances are 1-Lipschitz, the clearance of any stop from the interval is at least
the nearer sample's clearance minus e_i. The bound neglects the dependence of the braking deceleration on the start
state (gravity and inertia change with q; which joints stick can change); the check therefore also compares
neighbouring samples: their clearances may differ by at most 2 e_i (plus their resolutions), and an interval
where they differ by more is halved (``suspect``). Defaults: instants are refined until e_i <= ``tolerance``.
Units: s, m, rad.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from vtm_dynamics.core.stopsafe.trajectory import (
    ModelOrder, PlannedTrajectory, TrajectoryError, critical_times,
)

MAX_SAMPLES = 200_000  # E-stop instants of one check (x envelope cases = predicted stops)
MAX_RATE = 10_000.0  # [Hz]


@dataclass(frozen=True)
class SamplingSpec:
    """``rate`` [Hz]: fixed E-stop instants (no refinement) or None (default) for instants refined until the
    sampling bound is at most ``tolerance`` [m], starting from ``initial_rate`` [Hz], in at most ``max_rounds``
    rounds; ``max_samples`` caps the instants."""

    rate: float | None = None
    tolerance: float = 0.005
    initial_rate: float = 10.0
    max_rounds: int = 6
    max_samples: int = 20_000

    def check(self) -> None:
        """One-line :class:`TrajectoryError` for values that cannot be used."""
        for name in ("rate", "initial_rate"):
            value = getattr(self, name)
            if value is not None and not (math.isfinite(value) and 0 < value <= MAX_RATE):
                raise TrajectoryError(f"sampling.{name}: expected 0 < rate <= {MAX_RATE:g} Hz, got {value!r}")
        if not (math.isfinite(self.tolerance) and 1e-5 <= self.tolerance <= 1.0):
            raise TrajectoryError(f"sampling.tolerance: expected 1e-5..1 m, got {self.tolerance!r}")
        if not (isinstance(self.max_rounds, int) and 0 <= self.max_rounds <= 20):
            raise TrajectoryError(f"sampling.max_rounds: expected 0..20, got {self.max_rounds!r}")
        if not (isinstance(self.max_samples, int) and 2 <= self.max_samples <= MAX_SAMPLES):
            raise TrajectoryError(f"sampling.max_samples: expected 2..{MAX_SAMPLES}, got {self.max_samples!r}")


@dataclass(frozen=True)
class Instants:
    """Sampled E-stop instants, sorted: ``t`` [s] and ``left`` (True where the state is the one-sided limit from
    the segment before: at a point where a linear trajectory's velocity jumps, both sides are sampled)."""

    t: np.ndarray
    left: np.ndarray

    def __len__(self) -> int:
        return int(self.t.size)

    def merged(self, extra: np.ndarray) -> "Instants":
        """These instants and ``extra`` (right-sided) times, sorted, without repeats."""
        t = np.concatenate((self.t, extra))
        left = np.concatenate((self.left, np.zeros(len(extra), dtype=bool)))
        order = np.lexsort((~left, t))  # at one time the left-sided state comes first
        t, left = t[order], left[order]
        keep = np.r_[True, (np.diff(t) > 0) | (left[1:] != left[:-1])]
        return Instants(t[keep], left[keep])


def uniform_instants(trajectory: PlannedTrajectory, rate: float, max_samples: int) -> Instants:
    """Instants every 1/``rate`` s from the first to the last point (both included); with linear interpolation
    also every point, from both sides. Refuses more than ``max_samples``."""
    n = int(math.ceil(trajectory.duration * rate - 1e-9)) + 1
    if n > max_samples:
        raise TrajectoryError(f"sampling: {trajectory.duration:.6g} s at {rate:g} Hz is {n} E-stop instants, more "
                              f"than {max_samples}")
    t = np.linspace(trajectory.start, trajectory.end, max(n, 2))
    out = Instants(t, np.zeros(len(t), dtype=bool))
    if trajectory.interpolation == "linear":
        inner = trajectory.time_from_start[1:-1]
        both = Instants(np.concatenate((inner, inner)),
                        np.concatenate((np.ones(len(inner), bool), np.zeros(len(inner), bool))))
        out = both.merged(out.t)
        if len(out) > max_samples:
            raise TrajectoryError(f"sampling: {len(out)} E-stop instants (every point from both sides), more than "
                                  f"{max_samples}")
    return out


def states(trajectory: PlannedTrajectory, order: ModelOrder, instants: Instants) -> tuple[np.ndarray, np.ndarray]:
    """(q, v) in model order at the instants (N x nv each) [rad, rad/s]."""
    q = trajectory.evaluate(instants.t, 0)
    v = trajectory.evaluate(instants.t, 1)
    if instants.left.any():
        v[instants.left] = trajectory.evaluate(instants.t[instants.left], 1, side="left")
    return order.columns(q), order.columns(v)


def interval_maxima(trajectory: PlannedTrajectory, derivative: int, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Exact max |d^k q_j / dt^k| (k = ``derivative``) over each interval [lo_i, hi_i] (sorted, not
    overlapping; trajectory columns): both one-sided values at the ends (an end on a point, where the
    acceleration of a cubic trajectory jumps, counts both) and every critical time inside."""
    lo, hi = np.asarray(lo, dtype=float), np.asarray(hi, dtype=float)
    out = np.abs(trajectory.evaluate(lo, derivative))
    for ends, side in ((lo, "left"), (hi, "right"), (hi, "left")):
        out = np.maximum(out, np.abs(trajectory.evaluate(ends, derivative, side)))
    for j, times in enumerate(critical_times(trajectory, derivative)):
        vals = np.maximum(np.abs(trajectory.evaluate(times, derivative)[:, j]),
                          np.abs(trajectory.evaluate(times, derivative, "left")[:, j]))
        i0 = np.searchsorted(times, lo, side="right")
        i1 = np.searchsorted(times, hi, side="left")
        inside = i1 > i0
        if not inside.any():
            continue
        padded = np.append(vals, 0.0)
        idx = np.column_stack((i0[inside], i1[inside])).ravel()
        inner = np.maximum.reduceat(padded, idx)[::2]
        out[inside, j] = np.maximum(out[inside, j], inner)
    return out


def sampling_bounds(trajectory: PlannedTrajectory, order: ModelOrder, instants: Instants,
                    joint_stop_times: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """e_i (intervals x slots) [m] of the module docstring: ``joint_stop_times`` (N x nv) [s] the longest time
    each joint took to stop over a sample's cases, ``weights`` (slots x nv) the slots' displacement weights."""
    t = instants.t
    if len(t) < 2:
        return np.zeros((0, weights.shape[0]))
    lo, hi = t[:-1], t[1:]
    h = hi - lo
    V = order.columns(interval_maxima(trajectory, 1, lo, hi))
    A = order.columns(interval_maxima(trajectory, 2, lo, hi))
    T = np.maximum(joint_stop_times[:-1], joint_stop_times[1:])
    rate = V + A * T
    return 0.5 * h[:, None] * (rate @ weights.T)


def refinement(instants: Instants, bound: np.ndarray, tolerance: float, suspect: np.ndarray,
               room: int) -> np.ndarray:
    """New instants: each interval whose bound exceeds ``tolerance`` cut into ceil(bound / tolerance) equal parts,
    each ``suspect`` interval halved; at most ``room`` new instants (the largest bounds first)."""
    t = instants.t
    h = np.diff(t)
    parts = np.where(h > 0, np.ceil(bound / tolerance - 1e-12), 1).astype(np.int64)
    parts = np.where(suspect & (h > 0), np.maximum(parts, 2), parts)
    parts = np.maximum(parts, 1)
    wanted = np.flatnonzero(parts > 1)
    if wanted.size == 0 or room <= 0:
        return np.zeros(0)
    wanted = wanted[np.argsort(-bound[wanted], kind="stable")]
    new = []
    used = 0
    for i in wanted:
        k = int(min(parts[i] - 1, room - used))
        if k <= 0:
            break
        new.append(t[i] + h[i] * np.arange(1, k + 1) / (k + 1))
        used += k
    return np.concatenate(new) if new else np.zeros(0)


def estimated_instants(trajectory: PlannedTrajectory, order: ModelOrder, spec: SamplingSpec,
                       joint_stop_times: np.ndarray, weights: np.ndarray) -> int:
    """How many E-stop instants the check will predict (before predicting them): the fixed rate's count, or the
    refinement's, from the sampling bound on a fine grid with the given per-joint stop times [s] (nv)."""
    if spec.rate is not None:
        return int(math.ceil(trajectory.duration * spec.rate - 1e-9)) + 1
    fine = int(min(max(200, trajectory.duration * 200), 20_000))
    grid = Instants(np.linspace(trajectory.start, trajectory.end, fine + 1), np.zeros(fine + 1, dtype=bool))
    T = np.tile(np.asarray(joint_stop_times, dtype=float), (fine + 1, 1))
    e = sampling_bounds(trajectory, order, grid, T, weights).max(axis=1)
    initial = int(math.ceil(trajectory.duration * spec.initial_rate)) + 1
    return int(min(spec.max_samples, max(initial, math.ceil(float(np.sum(e)) / spec.tolerance) + initial)))

"""Reaction solvability and the unique reaction components along a motion (Wojtyra & Frączek 2013, Sect. 4.3-4.4).

Solvability is a property of the configuration: redundancy can appear or vanish as a mechanism moves (the paper's
mobile robot has p = 2 while its steering wheels are straight, when all four wheels restrict the same lateral
velocity, and p = 1 while it steers). This module analyses a series of states (t, q, v) and reports

* per sample: rank, redundancy p, unsolvable pairs and the unique reaction components [N, N m] (pair frame, on the
  child; ``None`` where the rigid-body model does not determine a component), from
  :func:`~vtm_dynamics.core.reactions.solvability.unique_reactions` (no external forces but gravity, drives
  with zero prescribed acceleration at each instant);
* the instants where a verdict or p changes (the interesting configurations).

States come from a recorded joint-state series or from :func:`drive_kinematically`: a driven mechanism moved
along its constraints with prescribed drive coordinates d(t), the free velocities continued step by step by the
velocity change of least kinetic energy that satisfies the constraints (a first-order model of a coasting
vehicle; the paper integrates the full dynamics with ode45).
:func:`paper_steering_drive` is the d(t) of the paper's Fig. 2 as far as the text describes it (the figure's
numbers are not in the text: steer right, hold, back to straight, travel forward, steer left, back; amplitude
and timing chosen here, see its docstring).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np
import pinocchio as pin

from vtm_dynamics.core.reactions.absolute_coordinates import (
    AbsoluteModel,
    assemble_loops,
    body_twists,
    constraint_matrix,
)
from vtm_dynamics.core.reactions.solvability import (
    DEFAULT_RANK_RTOL,
    SolvabilityError,
    analyze_model,
    unique_reactions,
)

from vtm_dynamics.core.reactions.analysis_settings import DEFAULT_MAX_SAMPLES  # noqa: F401 - its interface


@dataclass(frozen=True)
class MotionSample:
    """Solvability and unique reactions at one instant t [s] of a motion."""

    t: float
    rank: int
    redundancy: int
    unsolvable: tuple[str, ...]
    components: tuple[tuple[str, tuple[str, ...], tuple[float | None, ...]], ...]  # (pair, labels, values)

    def component(self, pair: str, label: str) -> float | None:
        """The value of ``label`` (e.g. "Fx") of ``pair`` [N or N m], None when it is not unique."""
        for name, labels, values in self.components:
            if name == pair:
                return values[labels.index(label)]
        raise KeyError(pair)


@dataclass(frozen=True)
class VerdictChange:
    """Between ``t_before`` and ``t_after`` [s] the redundancy or the set of unsolvable pairs changed."""

    t_before: float
    t_after: float
    redundancy_before: int
    redundancy_after: int
    became_unsolvable: tuple[str, ...]
    became_solvable: tuple[str, ...]


@dataclass(frozen=True)
class MotionReport:
    """Samples of a motion and the instants where the verdicts change."""

    model: str
    samples: tuple[MotionSample, ...]
    changes: tuple[VerdictChange, ...]

    def series(self, pair: str, label: str) -> tuple[np.ndarray, np.ndarray]:
        """Times [s] and values of one reaction component; NaN where it is not unique."""
        t = np.array([s.t for s in self.samples])
        v = [s.component(pair, label) for s in self.samples]
        return t, np.array([np.nan if x is None else x for x in v])


def analyze_along(
    model: AbsoluteModel, times: Sequence[float], qs: Sequence[Sequence[float]],
    vs: Sequence[Sequence[float]] | None = None, *, rank_rtol: float = DEFAULT_RANK_RTOL,
    gravity=(0.0, 0.0, -9.81), assemble: bool = True, max_samples: int = DEFAULT_MAX_SAMPLES,
    drives: dict[str, Callable[[float], float]] | None = None, progress: Callable[[int, int], None] | None = None,
) -> MotionReport:
    """Solvability and unique reactions at every sample (t, q[, v]) of a motion (module docstring).

    ``qs``/``vs``: Pinocchio configurations and joint velocities; without ``vs`` the reactions are those at rest.
    With ``assemble`` each q is first closed by Newton's method (driven joints held). ``progress(i, n)`` is called
    after each sample. ``drives`` (driven joint name -> d(t), as for :func:`drive_kinematically`) gives the
    drives' prescribed accelerations d̈(t) (central difference); without it they are taken as zero. Raises :class:`SolvabilityError` (one line) on inconsistent input.
    """
    times = np.asarray(times, dtype=float).reshape(-1)
    n = times.size
    if n == 0 or n > max_samples:
        raise SolvabilityError(f"times: expected 1 to {max_samples} samples (max_samples), got {n}")
    if not np.all(np.isfinite(times)) or np.any(np.diff(times) <= 0):
        raise SolvabilityError("times: must be finite and strictly increasing")
    if len(qs) != n or (vs is not None and len(vs) != n):
        raise SolvabilityError(f"qs/vs: expected {n} rows like times, got {len(qs)}"
                               + ("" if vs is None else f" and {len(vs)}"))
    samples: list[MotionSample] = []
    for i in range(n):
        q = np.asarray(qs[i], dtype=float)
        if assemble:
            q = assemble_loops(model, q)
        report = analyze_model(model, q, rank_rtol=rank_rtol)
        v = None if vs is None else np.asarray(vs[i], dtype=float)
        acc = {d.name: _second_derivative(drives[d.joint], float(times[i]))
               for d in model.extension.driving_constraints if drives and d.joint in drives}
        reactions = unique_reactions(model, q=q, v=v, gravity=gravity, rank_rtol=rank_rtol, report=report,
                                     drive_accelerations=acc)
        samples.append(MotionSample(
            t=float(times[i]), rank=report.rank, redundancy=report.redundancy, unsolvable=report.unsolvable,
            components=tuple((p.name, p.labels, p.components) for p in reactions.pairs)))
        if progress is not None:
            progress(i + 1, n)
    changes = []
    for a, b in zip(samples, samples[1:]):
        if a.redundancy != b.redundancy or a.unsolvable != b.unsolvable:
            changes.append(VerdictChange(
                a.t, b.t, a.redundancy, b.redundancy,
                tuple(x for x in b.unsolvable if x not in a.unsolvable),
                tuple(x for x in a.unsolvable if x not in b.unsolvable)))
    return MotionReport(model.name, tuple(samples), tuple(changes))


def _second_derivative(f: Callable[[float], float], t: float, h: float = 1e-3) -> float:
    return (f(t + h) - 2.0 * f(t) + f(t - h)) / (h * h)


def _joint_velocity_map(model: AbsoluteModel, q: np.ndarray) -> np.ndarray:
    """T(q): absolute coordinates ν = T v from Pinocchio joint velocities v (body twists are linear in v)."""
    nv = model.pin_model.nv
    return np.column_stack([body_twists(model, q, e) for e in np.eye(nv)])


def drive_kinematically(
    model: AbsoluteModel, q0: Sequence[float], v0: Sequence[float], drives: dict[str, Callable[[float], float]],
    duration: float, dt: float, *, max_samples: int = DEFAULT_MAX_SAMPLES,
    progress: Callable[[int, int], None] | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Move a driven mechanism along its constraints: times [s], configurations q and joint velocities v.

    ``drives`` maps a driven joint's name to its coordinate d(t) [m or rad] relative to its value in ``q0``. At
    each step the joint velocities satisfy every constraint row (loop closures, knife edges: C T v = 0; drives:
    the joint rate = ḋ(t), by central difference) and change with the least kinetic energy from the previous
    step (the momentum-consistent projection with the joint-space mass matrix M); q advances on the configuration manifold, loops are closed again by Newton's method with the
    drives held at d(t), so no drift accumulates. A kinematic model: no forces are involved.
    """
    if not (duration > 0 and dt > 0) or duration / dt > max_samples:
        raise SolvabilityError(f"duration/dt: need 0 < dt, 0 < duration and at most {max_samples} steps")
    pm = model.pin_model
    names = [d.joint for d in model.extension.driving_constraints]
    unknown = [k for k in drives if k not in names]
    if unknown:
        raise SolvabilityError(f"drives: {unknown[0][:40]!r} is not a joint with a driving constraint")
    idx_q = {k: pm.joints[pm.getJointId(k)].idx_q for k in drives}
    q = np.asarray(q0, dtype=float).copy()
    base = {k: float(q[i]) for k, i in idx_q.items()}
    v = np.asarray(v0, dtype=float).copy()
    data = pm.createData()  # small models only (Pinocchio's Data grows as nv^3)
    steps = int(round(duration / dt))
    times = np.arange(steps + 1) * dt
    qs, vs = [], []
    for s, t in enumerate(times):
        for k, i in idx_q.items():
            q[i] = base[k] + drives[k](t)
        q = assemble_loops(model, q)
        C = constraint_matrix(model, q)
        A = C.matrix @ _joint_velocity_map(model, q)
        rhs = np.zeros(A.shape[0])
        for pr in C.pairs:
            if pr.kind == "driving_constraint":
                joint = next(d.joint for d in model.extension.driving_constraints if d.name == pr.name)
                if joint in drives:
                    h = min(dt, 1e-3)
                    rhs[pr.rows[0]] = (drives[joint](t + h) - drives[joint](t - h)) / (2 * h)
        # the velocity change of least kinetic energy that satisfies A v = rhs (an impulsive, momentum-consistent
        # projection): dv = M^-1 A^T (A M^-1 A^T)^+ (rhs - A v)
        M = pin.crba(pm, data, q)
        M = np.triu(M) + np.triu(M, 1).T
        MinvAt = np.linalg.solve(M, A.T)
        v = v + MinvAt @ (np.linalg.pinv(A @ MinvAt, rcond=1e-10) @ (rhs - A @ v))
        qs.append(q.copy())
        vs.append(v.copy())
        if progress is not None:
            progress(s + 1, times.size)
        q = pin.integrate(pm, q, v * dt)
    return times, np.array(qs), np.array(vs)


def paper_steering_drive(amplitude: float = 0.01, duration: float = 20.0) -> Callable[[float], float]:
    """d(t) [m] of the steering slider H in the spirit of the paper's Fig. 2 (its numbers are not in the text).

    Straight for the first tenth of ``duration``, a smooth (raised-cosine) turn right of ``amplitude`` over the
    next 30 %, straight again, then the mirror turn left over 55-85 %, straight to the end: the robot "firstly
    turns right, then travels forward, and finally turns left and starts to move along a line parallel to x0"
    (Sect. 4.1). Positive d turns the shipped model right (its yaw decreases; test_solvability_along_motion).
    """
    def bump(t: float, t0: float, t1: float) -> float:
        if t <= t0 or t >= t1:
            return 0.0
        return 0.5 * (1.0 - np.cos(2.0 * np.pi * (t - t0) / (t1 - t0)))

    def d(t: float) -> float:
        return amplitude * (bump(t, 0.1 * duration, 0.4 * duration) - bump(t, 0.55 * duration, 0.85 * duration))

    return d

"""Direct measurement of the brakes from recorded stops, before any output-error fit: each joint's engage instant
from the onset of its deceleration, its sliding/viscous law from the decelerating segments, and the stick/slip
record of every joint in every stop.

**Engage instants and sliding laws.** The twice-integrated momentum balance Y_j of each joint
(:mod:`.smoothed_stop`, Müller 2026, eq. (3): the joints decouple there) equals the twice-integrated brake torque.
While joint j slides in one direction sigma after its brake engaged at instant d, tau_j = -r(t) (sigma sliding_j
+ viscous_j v_j) (:mod:`.brakes`, r the torque rise), so

    Y_j(t) = -sigma sliding_j R2(t - d) - viscous_j V2(t; d),   R2 = int int r (= (t - d)^2 / 2 for a step),
                                                               V2 = int_d^t (t - t') r v_j dt'

is linear in (sliding_j, viscous_j) for a given d. Over the first decelerating segment of every stop (from the
trigger to the joint's first arrival at rest) the instant d is profiled on nested grids with non-negative least
squares in the two torques: one engage delay, one sliding torque and one viscous coefficient per joint from all
stops (:class:`JointSlides`, with 1-sigma from the linearised least squares); then, with the torques fixed, each
stop's own engage instant is profiled alone (the per-stop record, with its profile interval; none where the
stop's optimum lies on the edge of its range). No prior value enters; the brake model's form (Coulomb + viscous,
the prior's rise time and armature) does. A Stribeck rise is not modelled here (the output-error fit that follows
does).

**The stick/slip record** of every joint in every stop (:mod:`.stick_slip_record`) and the recordings' noise
(:func:`~.smoothed_stop.position_noise`) complete the measurement.

Units: s, rad, rad/s, N m, N m s/rad, N m s^2.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np
import scipy.optimize
import scipy.signal

from vtm_dynamics.core.estop.brakes import JointBrake
from vtm_dynamics.core.estop.recorded import RecordedStop
from vtm_dynamics.core.estop.smoothed_stop import (
    SmoothedStop, expected_residual, position_noise, rest_speed, smooth_stop,
)
from vtm_dynamics.core.estop.stick_slip_record import StopRecord, stick_slip_record
from vtm_dynamics.core.robot.model import RobotModel

ONSET_GRIDS = (1e-3, 1e-4)  # [s] nested grids of the engage-instant profile (1 ms over the whole range, ...)
ONSET_FINE = 1e-5  # [s] the finest grid, around the minimum, on which the profile interval is read
MAX_DELAY = 0.2  # [s] the profile looks for engage instants up to this (or the end of the slides)
MIN_ONSET_SAMPLES = 2  # samples after the onset a stop needs to show its own engage instant
MIN_SLIDE_SAMPLES = 4  # samples after the onset (all stops) a joint needs for its friction law
MAX_RELATIVE_SIGMA = 0.5  # a friction estimate less certain than this is "not measured"


@dataclass(frozen=True)
class JointSlides:
    """The direct estimates of one joint (nan where not measured): ``engage_delay`` [s], ``sliding_torque`` [N m],
    ``viscous`` [N m s/rad], each with its 1-sigma; ``instants`` per stop [s] (nan: the stop does not show it)
    with their profile 1-sigma ``instant_sigmas``; ``samples`` used after the onset; ``stops`` contributing."""

    joint: str
    engage_delay: float
    delay_sigma: float
    sliding_torque: float
    sliding_sigma: float
    viscous: float
    viscous_sigma: float
    instants: tuple[float, ...]
    instant_sigmas: tuple[float, ...]
    samples: int
    stops: int

    @property
    def delay_measured(self) -> bool:
        return math.isfinite(self.engage_delay)

    @property
    def friction_measured(self) -> bool:
        return math.isfinite(self.sliding_torque)


@dataclass(frozen=True)
class DirectMeasurement:
    """Everything measured directly: per joint :class:`JointSlides`, per stop :class:`StopRecord` and
    :class:`SmoothedStop`, the position noise per joint [rad] and the timing noise [s] (1-sigma, from the
    smoother's residual, :func:`position_noise`), and the ``residual`` RMS [rad] a perfect model would leave
    (:func:`expected_residual`)."""

    slides: tuple[JointSlides, ...]
    records: tuple[StopRecord, ...]
    smoothed: tuple[SmoothedStop, ...]
    noise: np.ndarray
    timing: float = 0.0
    residual: float = math.nan


def _rise_integrals(s: np.ndarray, rise: float) -> np.ndarray:
    """R2(s) = int_0^s int_0^s' r: the brake torque's rise r = min(1, s / rise) integrated twice (s = t - d)."""
    s = np.maximum(s, 0.0)
    if rise <= 0.0:
        return 0.5 * s * s
    return np.where(s <= rise, s**3 / (6.0 * rise), rise * rise / 6.0 + 0.5 * rise * (s - rise) + 0.5 * (s - rise) ** 2)


def _viscous_integrals(t: np.ndarray, qs: np.ndarray, vs: np.ndarray, d: float, rise: float) -> np.ndarray:
    """V2(t; d) = int_d^t (t - t') r(t') v(t') dt' at the samples ``t`` (one joint's smoothed q, v)."""
    if rise <= 0.0:
        inner = np.where(t > d, qs - np.interp(d, t, qs), 0.0)  # int_d^t v = q(t) - q(d)
    else:
        r = np.clip((t - d) / rise, 0.0, 1.0)
        g = r * vs
        inner = np.concatenate(([0.0], np.cumsum(0.5 * np.diff(t) * (g[1:] + g[:-1]))))
    return np.concatenate(([0.0], np.cumsum(0.5 * np.diff(t) * (inner[1:] + inner[:-1]))))


@dataclass(frozen=True)
class _Segment:
    """The first decelerating segment of one joint in one stop: samples [0, end) of ``stop``, direction sigma."""

    stop: int
    end: int
    sigma: float


def _segments(smoothed: Sequence[SmoothedStop], j: int, at_rest: float) -> list[_Segment]:
    out = []
    for k, s in enumerate(smoothed):
        v = s.vs[:, j]
        sigma = float(np.sign(v[0]))
        if not abs(v[0]) > at_rest:
            continue
        stop_idx = np.flatnonzero((np.sign(v) != sigma) | (np.abs(v) < at_rest))
        end = int(stop_idx[0]) - 1 if stop_idx.size else v.size  # the sample before the arrival is left out
        if end >= 3:
            out.append(_Segment(k, end, sigma))
    return out


def _design(s: SmoothedStop, seg: _Segment, j: int, d: float, rise: float) -> np.ndarray:
    t = s.t[: seg.end]
    return np.column_stack([-seg.sigma * _rise_integrals(t - d, rise),
                            -_viscous_integrals(t, s.qs[: seg.end, j], s.vs[: seg.end, j], d, rise)])


def _profile(smoothed, segs, j, rise, grid, torques=None):
    """Sum of squares of the momentum balance over ``segs`` for each engage instant of ``grid``; the torques are
    fitted (non-negative least squares) unless given. Returns (costs, torques per grid point)."""
    y = np.concatenate([smoothed[g.stop].Y[: g.end, j] for g in segs])
    costs = np.empty(grid.size)
    xs = np.empty((grid.size, 2))
    for n, d in enumerate(grid):
        A = np.vstack([_design(smoothed[g.stop], g, j, d, rise) for g in segs])
        if torques is None:
            x, _ = scipy.optimize.nnls(A, y)
        else:
            x = np.asarray(torques, float)
        r = y - A @ x
        costs[n] = float(r @ r)
        xs[n] = x
    return costs, xs


def _profile_minimum(smoothed, segs, j, rise, upper, torques=None):
    """(best instant, torques, cost, 1-sigma interval half-width, residual variance) of the profile: a coarse
    grid over [0, upper], then a fine grid around the best point; the interval is where the cost stays within
    one residual variance of its minimum (Delta chi^2 = 1)."""
    centre, width = 0.5 * upper, 0.5 * upper
    for spacing in ONSET_GRIDS:  # nested grids: each around the best point of the one before
        grid = np.arange(max(centre - width, 0.0), min(centre + width, upper) + 0.5 * spacing, spacing)
        c, _ = _profile(smoothed, segs, j, rise, grid, torques)
        centre, width = float(grid[int(np.argmin(c))]), 2.0 * spacing
    fine = np.arange(max(centre - width, 0.0), min(centre + width, upper) + ONSET_FINE, ONSET_FINE)
    cf, xf = _profile(smoothed, segs, j, rise, fine, torques)
    kf = int(np.argmin(cf))
    rows = sum(g.end for g in segs)
    dof = max(rows - (1 if torques is not None else 3), 1)
    var = cf[kf] / dof
    inside = fine[cf <= cf[kf] + var]
    half = 0.5 * (inside.max() - inside.min()) if inside.size > 1 else ONSET_FINE
    return float(fine[kf]), xf[kf], float(cf[kf]), max(half, ONSET_FINE), var


def measure_slides(robot: RobotModel, prior: Sequence[JointBrake], smoothed: Sequence[SmoothedStop],
                   noise: np.ndarray) -> tuple[JointSlides, ...]:
    """The engage delay, sliding torque and viscous coefficient of every braked joint of ``prior`` from the
    decelerating segments of all stops, and each stop's engage instant (module docstring). Only the prior's
    rise time (the brake model's form) is used, no prior value."""
    out = []
    index = {name: i for i, name in enumerate(robot.joint_names)}
    for b in prior:
        j = index[b.joint]
        rise = float(b.rise_time or 0.0)
        segs = _segments(smoothed, j, rest_speed(smoothed, noise[j]))
        nan_stops = (math.nan,) * len(smoothed)
        if not segs:
            out.append(JointSlides(b.joint, *(math.nan,) * 6, nan_stops, nan_stops, 0, 0))
            continue
        upper = min(MAX_DELAY, max(float(smoothed[g.stop].t[g.end - 1]) for g in segs))
        d, x, cost, half, var = _profile_minimum(smoothed, segs, j, rise, upper)
        after = sum(int(np.count_nonzero(smoothed[g.stop].t[: g.end] > d)) for g in segs)
        # the linearised covariance of (d, sliding, viscous) at the optimum: columns dY/dd (by differences), A
        A = np.vstack([_design(smoothed[g.stop], g, j, d, rise) for g in segs])
        h = 1e-5
        dA = (np.vstack([_design(smoothed[g.stop], g, j, d + h, rise) for g in segs]) - A) / h
        Jm = np.column_stack([dA @ x, A])
        cov = var * np.linalg.pinv(Jm.T @ Jm)
        sd = np.sqrt(np.maximum(np.diag(cov), 0.0))
        delay_sigma = max(float(sd[0]), half)
        measured = after >= MIN_SLIDE_SAMPLES and x[0] > 0 and sd[1] <= MAX_RELATIVE_SIGMA * x[0]
        instants, sigmas = [], []
        for k in range(len(smoothed)):
            mine = [g for g in segs if g.stop == k]
            seen = mine and np.count_nonzero(smoothed[k].t[: mine[0].end] > d) >= MIN_ONSET_SAMPLES
            if not seen or not measured:
                instants.append(math.nan)
                sigmas.append(math.nan)
                continue
            # the instant must leave MIN_ONSET_SAMPLES samples of braking in the segment; an optimum on the edge of
            # that range (the stop prefers no braking at all) shows no instant
            top = min(upper, float(smoothed[k].t[mine[0].end - MIN_ONSET_SAMPLES]))
            dk, _, _, hk, _ = _profile_minimum(smoothed, mine, j, rise, top, x)
            on_edge = dk + hk >= top - ONSET_FINE or dk - hk <= ONSET_FINE
            instants.append(math.nan if on_edge else dk)
            sigmas.append(math.nan if on_edge else hk)
        delay_ok = after >= MIN_ONSET_SAMPLES
        out.append(JointSlides(
            b.joint, d if delay_ok else math.nan, delay_sigma if delay_ok else math.nan,
            float(x[0]) if measured else math.nan, float(sd[1]) if measured else math.nan,
            float(x[1]) if measured else math.nan, float(sd[2]) if measured else math.nan,
            tuple(instants), tuple(sigmas), after, len(segs)))
    return tuple(out)


def measure_stops(robot: RobotModel, prior: Sequence[JointBrake], stops: Sequence[RecordedStop]) -> DirectMeasurement:
    """The direct measurement of ``stops`` (module docstring); ``prior`` gives the braked joints and the form of
    their brake model (rise time, armature), not values."""
    index = {name: i for i, name in enumerate(robot.joint_names)}
    armature = np.zeros(robot.nv)
    for b in prior:
        armature[index[b.joint]] = float(b.armature or 0.0)
    smoothed = tuple(smooth_stop(robot, s, armature) for s in stops)
    noise, timing = position_noise(smoothed)
    slides = measure_slides(robot, prior, smoothed, noise)
    engage = np.full(robot.nv, math.nan)
    prior_delay = {b.joint: b.engage_delay for b in prior}
    for sl in slides:
        engage[index[sl.joint]] = sl.engage_delay if sl.delay_measured else prior_delay[sl.joint]
    speeds = np.array([rest_speed(smoothed, noise[j]) for j in range(robot.nv)])
    records = tuple(stick_slip_record(s, engage, noise, speeds) for s in smoothed)
    return DirectMeasurement(slides, records, smoothed, noise, timing, expected_residual(smoothed, noise, timing))

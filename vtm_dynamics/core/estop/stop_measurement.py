"""Direct measurement of the brakes from recorded stops, before any output-error fit: each joint's engage instant
from the onset of its deceleration, its sliding/viscous law from the decelerating segments, and the stick/slip
record of every joint in every stop.

**The momentum balance of one joint.** With the drives off (category 0) the only generalized force on joint j is
its brake, tau_j. The generalized momentum p = M(q) v obeys dp/dt = tau + C(q, v)^T v - g(q) (Müller 2026, eq. (3)
with M' = C + C^T), one row per joint, whatever the other joints do: the rows decouple the joints, which the
joint accelerations do not. Integrated twice from the trigger (t = 0, state (q0, v0)):

    Y_j(t) = int_0^t p_j dt' - p_j(0) t - int_0^t int_0^t' (C^T v - g)_j = int_0^t int_0^t' tau_j          [N m s^2]

The first term is sum_i M(q_mid,i) (q_{i+1} - q_i) over the recorded samples: positions, not their derivatives,
so the encoder noise enters Y once and is not amplified; M, C and g are evaluated on the smoothed recording (a
cubic Savitzky-Golay filter), where smoothing does no harm. While joint j slides in one direction sigma after its
brake engaged at instant d, tau_j = -r(t) (sigma sliding_j + viscous_j v_j) (:mod:`.brakes`, r the torque rise),
so

    Y_j(t) = -sigma sliding_j R2(t - d) - viscous_j V2(t; d),   R2 = int int r (= (t - d)^2 / 2 for a step),
                                                               V2 = int_d^t (t - t') r v_j dt'

is linear in (sliding_j, viscous_j) for a given d. Over the first decelerating segment of every stop (from the
trigger to the joint's first arrival at rest) the instant d is profiled on a grid with non-negative least squares
in the two torques: one engage delay, one sliding torque and one viscous coefficient per joint from all stops
(:class:`JointSlides`, with 1-sigma from the linearised least squares); then, with the torques fixed, each stop's
own engage instant is profiled alone (the per-stop record, with its profile interval). No prior value enters; the
brake model's form (Coulomb + viscous, the prior's rise time and armature) does. A Stribeck rise is not modelled
here (the output-error fit that follows does).

**The stick/slip record.** After its brake engages, every arrival of joint j at zero speed is found in the
smoothed velocity (a speed below ``REST_SPEED_SIGMAS`` x its noise, or a sign change), and what followed: the joint
stayed at rest to the end of the recording, or it moved again (it slipped; a reversal is a slip after a rest of
zero length). Arrival and departure instants are located by fitting a parabola that touches down (leaves) at the
instant to the raw positions and are reported as windows (``RestEpisode``): the instants the data cannot exclude
at 2 sigma, widened by one sample period. A holding capacity is bounded by these decisions
(:mod:`.capacity_bounds`).

Units: s, rad, rad/s, N m, N m s/rad, N m s^2.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np
import pinocchio as pin
import scipy.optimize
import scipy.signal

from vtm_dynamics.core.estop.brakes import JointBrake
from vtm_dynamics.core.estop.recorded import RecordedStop
from vtm_dynamics.core.robot.model import RobotModel

SMOOTHING_WINDOW = 0.016  # [s] cubic Savitzky-Golay window for the smoothed state (9 samples at 500 Hz)
ONSET_GRIDS = (1e-3, 1e-4)  # [s] nested grids of the engage-instant profile (1 ms over the whole range, ...)
ONSET_FINE = 1e-5  # [s] the finest grid, around the minimum, on which the profile interval is read
MAX_DELAY = 0.2  # [s] the profile looks for engage instants up to this (or the end of the slides)
REST_SPEED_SIGMAS = 4.0  # a joint moves while its smoothed speed exceeds this many sigmas of its noise
MIN_REST_SPEED = 0.02  # [rad/s] ... and at least this
MIN_ONSET_SAMPLES = 2  # samples after the onset a stop needs to show its own engage instant
MIN_SLIDE_SAMPLES = 4  # samples after the onset (all stops) a joint needs for its friction law
MAX_RELATIVE_SIGMA = 0.5  # a friction estimate less certain than this is "not measured"
EPISODE_WINDOW = 0.02  # [s] of samples around an arrival or departure used to locate it
MOVE_SIGMAS = 8.0  # a joint that moved less than this many sigmas of position noise did not move


@dataclass(frozen=True)
class SmoothedStop:
    """One stop with the trigger state prepended: ``t`` (K+1) [s] from the trigger, raw ``q`` [rad] (row 0 is the
    state estimated at the trigger), smoothed ``qs`` [rad] and ``vs`` [rad/s], the twice-integrated momentum
    balance ``Y`` (K+1 x nv) [N m s^2] (module docstring) and the sample period ``dt`` [s]."""

    label: str
    t: np.ndarray
    q: np.ndarray
    qs: np.ndarray
    vs: np.ndarray
    Y: np.ndarray
    dt: float


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
class RestEpisode:
    """Joint ``joint`` (velocity index) at rest after its brake engaged: it arrived within [``arrival_lo``,
    ``arrival_hi``] and left within [``departure_lo``, ``departure_hi``] [s after the trigger] (both inf: it
    stayed at rest to the end of the recording, ``end`` [s])."""

    joint: int
    arrival_lo: float
    arrival_hi: float
    departure_lo: float
    departure_hi: float
    end: float

    @property
    def slipped(self) -> bool:
        return math.isfinite(self.departure_hi)

    @property
    def kind(self) -> str:
        if not self.slipped:
            return "held"
        return "reversed" if self.departure_lo <= self.arrival_hi else "slipped"


@dataclass(frozen=True)
class StopRecord:
    """The stick/slip record of one stop: every :class:`RestEpisode` of every joint, in time order."""

    label: str
    episodes: tuple[RestEpisode, ...]

    def of(self, joint: int) -> tuple[RestEpisode, ...]:
        return tuple(e for e in self.episodes if e.joint == joint)


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


def _window_samples(dt: float, window: float) -> int:
    return max(5, int(round(window / dt)) | 1)


def smooth_stop(robot: RobotModel, stop: RecordedStop, armature: np.ndarray,
                window: float = SMOOTHING_WINDOW) -> SmoothedStop:
    """The stop's samples with the trigger state prepended, smoothed, and the momentum balance Y (module
    docstring). ``armature`` [kg m^2] per velocity index is added to M (the rotors turn with the joints)."""
    model, data = robot.model, robot.data
    t = np.concatenate(([0.0], stop.t))
    q = np.vstack([stop.q0, stop.q])
    dt = float(np.median(np.diff(stop.t))) if stop.t.size > 1 else 1.0
    w = _window_samples(dt, window)
    if stop.t.size >= w:
        qs = np.vstack([stop.q0, scipy.signal.savgol_filter(stop.q, w, 3, axis=0)])
        vs = np.vstack([stop.v0, scipy.signal.savgol_filter(stop.q, w, 3, deriv=1, delta=dt, axis=0)])
    else:
        qs = q.copy()
        vs = np.vstack([stop.v0, np.gradient(stop.q, stop.t, axis=0) if stop.t.size > 1 else stop.q * 0.0])
    n = t.size
    rotor = np.diag(armature)
    force = np.empty((n, robot.nv))
    for k in range(n):
        C = pin.computeCoriolisMatrix(model, data, qs[k], vs[k])
        force[k] = C.T @ vs[k] - pin.computeGeneralizedGravity(model, data, qs[k])
    P = np.zeros((n, robot.nv))
    for k in range(n - 1):
        M = robot.mass_matrix(0.5 * (qs[k] + qs[k + 1])) + rotor
        P[k + 1] = P[k] + M @ (q[k + 1] - q[k])
    p0 = (robot.mass_matrix(stop.q0) + rotor) @ stop.v0
    h = np.diff(t)[:, None]
    F1 = np.vstack([np.zeros(robot.nv), np.cumsum(0.5 * h * (force[1:] + force[:-1]), axis=0)])
    F2 = np.vstack([np.zeros(robot.nv), np.cumsum(0.5 * h * (F1[1:] + F1[:-1]), axis=0)])
    return SmoothedStop(stop.label, t, q, qs, vs, P - np.outer(t, p0) - F2, dt)


def position_noise(smoothed: Sequence[SmoothedStop], window: float = SMOOTHING_WINDOW) -> tuple[np.ndarray, float]:
    """(per joint position noise [rad], timing noise [s]), both 1-sigma, from the smoother's residual scaled by
    1 / sqrt(1 - h) (h its central weight). A sample taken off its stamp by u errs by v u, so the residual's
    variance grows with the speed: sigma^2(v) = sigma_q^2 + sigma_t^2 v^2. sigma_q is the robust (median absolute
    deviation) spread of the samples at rest; sigma_t the least-squares slope of the binned robust variances
    against v^2 over all joints (timestamps are shared by the joints). Robust spreads, because the smoother
    misfits the few samples around an abrupt change of acceleration."""
    resid, speed = [], []
    for s in smoothed:
        w = _window_samples(s.dt, window)
        if s.t.size - 1 >= w:
            h = scipy.signal.savgol_coeffs(w, 3)[w // 2]
            resid.append((s.q[1:] - s.qs[1:]) / math.sqrt(1.0 - h))
            speed.append(np.abs(s.vs[1:]))
    nv = smoothed[0].q.shape[1] if smoothed else 0
    if not resid:
        return np.full(nv, math.nan), math.nan
    r, v = np.vstack(resid), np.vstack(speed)

    def robust(x: np.ndarray) -> float:
        return float(1.4826 * np.median(np.abs(x - np.median(x)))) if x.size >= 10 else math.nan

    at_rest = v < 0.05
    sigma_q = np.array([robust(r[at_rest[:, j], j]) if at_rest[:, j].sum() >= 10 else robust(r[:, j])
                        for j in range(nv)])
    edges = np.array([0.2, 0.5, 1.0, 2.0, 4.0])
    rows, rhs = [], []
    for lo, hi in zip(edges[:-1], edges[1:]):
        for j in range(nv):
            sel = (v[:, j] >= lo) & (v[:, j] < hi)
            if sel.sum() >= 20:
                mean_v2 = float(np.mean(v[sel, j] ** 2))
                rows.append(mean_v2)
                rhs.append(robust(r[sel, j]) ** 2 - sigma_q[j] ** 2)
    sigma_t = math.sqrt(max(float(np.dot(rows, rhs) / np.dot(rows, rows)), 0.0)) if rows else 0.0
    return sigma_q, sigma_t


def expected_residual(smoothed: Sequence[SmoothedStop], sigma_q: np.ndarray, sigma_t: float) -> float:
    """The RMS [rad] of a perfect model's residual over every sample of these stops: sqrt(mean(sigma_q^2 +
    sigma_t^2 v^2)) with v the smoothed velocities (the noise of :func:`position_noise`)."""
    v2 = np.vstack([s.vs[1:] ** 2 for s in smoothed])
    return float(np.sqrt(np.mean(sigma_q[None, :] ** 2 + sigma_t**2 * v2)))


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


def _segments(smoothed: Sequence[SmoothedStop], j: int, rest_speed: float) -> list[_Segment]:
    out = []
    for k, s in enumerate(smoothed):
        v = s.vs[:, j]
        sigma = float(np.sign(v[0]))
        if not abs(v[0]) > rest_speed:
            continue
        stop_idx = np.flatnonzero((np.sign(v) != sigma) | (np.abs(v) < rest_speed))
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
        rest_speed = _rest_speed(smoothed, noise[j])
        segs = _segments(smoothed, j, rest_speed)
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


def _rest_speed(smoothed: Sequence[SmoothedStop], noise: float, window: float = SMOOTHING_WINDOW) -> float:
    """The speed [rad/s] below which a joint counts as at rest: ``REST_SPEED_SIGMAS`` x the noise of the smoothed
    velocity (the position noise through the filter's derivative weights), at least ``MIN_REST_SPEED``."""
    dt = float(np.median([s.dt for s in smoothed])) if smoothed else 1.0
    w = _window_samples(dt, window)
    gain = float(np.linalg.norm(scipy.signal.savgol_coeffs(w, 3, deriv=1, delta=dt)))
    sigma = noise * gain if math.isfinite(noise) else 0.0
    return max(REST_SPEED_SIGMAS * sigma, MIN_REST_SPEED)


def _touchdown(t: np.ndarray, q: np.ndarray, grid: np.ndarray, leaving: bool, noise: float) -> tuple[float, float]:
    """The instant window [lo, hi] at 2 sigma where a joint arrives at rest (``leaving`` False: it decelerates
    along a parabola that touches zero speed at the instant, then stays) or leaves it (True: at rest before,
    a parabola after), fitted to raw positions ``q`` at ``t`` by profiling the instant over ``grid`` with linear
    least squares in (rest position, curvature) and a slope-continuous onset."""
    s = (t[None, :] - grid[:, None]) if leaving else (grid[:, None] - t[None, :])
    basis = 0.5 * np.maximum(s, 0.0) ** 2  # one row per candidate instant
    n = t.size
    sb, sbb = basis.sum(axis=1), (basis * basis).sum(axis=1)
    sq, sbq, sqq = q.sum(), basis @ q, float(q @ q)
    det = n * sbb - sb * sb
    with np.errstate(divide="ignore", invalid="ignore"):
        curvature = np.where(det > 0, (n * sbq - sb * sq) / det, 0.0)
    offset = (sq - curvature * sb) / n
    # residual sum of squares of the least-squares line q = offset + curvature * basis, for every candidate
    costs = sqq - offset * sq - curvature * sbq
    best = float(costs.min())
    var = max(best / max(t.size - 3, 1), noise * noise)
    inside = grid[costs <= best + 4.0 * var]
    return float(inside.min()), float(inside.max())


def _runs(moving: np.ndarray, v: np.ndarray, q: np.ndarray, first: int, displacement: float) -> list[tuple[int, int, int]]:
    """Runs of samples from index ``first`` on: (start, stop (exclusive), direction) with direction 0 for rest and
    +-1 for motion; a moving run is split where the velocity changes sign (a reversal without rest). A moving run
    after the first one that does not carry the joint ``displacement`` [rad] away from where it began is noise or
    the smoother's ringing after an abrupt stop, not motion: it is counted as rest."""
    labels = np.where(moving, np.sign(v), 0.0).astype(int)
    runs: list[list[int]] = []
    k = first
    while k < v.size:
        n = k + 1
        while n < v.size and labels[n] == labels[k]:
            n += 1
        runs.append([k, n, int(labels[k])])
        k = n
    for n, run in enumerate(runs):
        a, b, direction = run
        if direction != 0 and n > 0 and np.max(np.abs(q[a:b] - q[max(a - 1, 0)])) < displacement:
            run[2] = 0
    merged: list[list[int]] = []
    for run in runs:
        if merged and merged[-1][2] == run[2]:
            merged[-1][1] = run[1]
        else:
            merged.append(list(run))
    return [tuple(r) for r in merged]


def stick_slip_record(smoothed: SmoothedStop, engage: np.ndarray, noise: np.ndarray,
                      rest_speeds: np.ndarray) -> StopRecord:
    """Every rest episode of every joint after its brake engaged (``engage`` [s] per joint; nan: not braked):
    a moving run followed by a rest run is an arrival, a rest run followed by a moving run a departure (the
    slip), a moving run followed by one in the other direction a reversal (a slip after no rest)."""
    episodes = []
    t, dt = smoothed.t, smoothed.dt
    end = float(t[-1])
    w_long = 4 * _window_samples(dt, SMOOTHING_WINDOW) + 1
    slow = (scipy.signal.savgol_filter(smoothed.q[1:], w_long, 2, deriv=1, delta=dt, axis=0)
            if smoothed.q.shape[0] - 1 >= w_long else smoothed.vs[1:])
    slow = np.vstack([smoothed.vs[:1], slow])
    for j in range(smoothed.vs.shape[1]):
        if not math.isfinite(engage[j]):
            continue
        v = smoothed.vs[:, j]
        q = smoothed.q[:, j]
        # moving by the short window (quick events) or by a window four times as long (a joint creeping slower
        # than the short window's noise band, e.g. at the end of a long slide, is still moving)
        moving = (np.abs(v) > rest_speeds[j]) | (np.abs(slow[:, j]) > 0.25 * rest_speeds[j])
        first = int(np.searchsorted(t, engage[j] - dt))
        runs = _runs(moving, v, q, first, MOVE_SIGMAS * noise[j])
        for n, (a, b, direction) in enumerate(runs):
            if direction != 0:
                if n + 1 < len(runs) and runs[n + 1][2] == -direction:  # a reversal
                    c = 0.5 * (t[b - 1] + t[b])
                    episodes.append(RestEpisode(j, c - dt, c + dt, c - dt, c + dt, end))
                continue
            # a rest run [a, b): its arrival, then its departure (if the joint moves again)
            if n == 0:  # at rest when its brake engaged
                lo, hi = float(t[a]) - dt, float(t[a]) + dt
            else:
                sel = (t >= t[a] - EPISODE_WINDOW) & (t <= min(t[b - 1], t[a] + EPISODE_WINDOW))
                grid = np.arange(t[max(a - 3, 0)], t[min(a + 2, t.size - 1)] + 1e-9, 1e-4)
                lo, hi = _touchdown(t[sel], q[sel], grid, False, noise[j]) if np.count_nonzero(sel) >= 4 \
                    else (float(t[a - 1]), float(t[a]))
                lo, hi = lo - dt, hi + dt
            if b >= t.size:
                episodes.append(RestEpisode(j, lo, hi, math.inf, math.inf, end))
                continue
            seen = float(t[b])  # the first sample at which it is seen moving again
            sel = (t >= max(t[a], seen - EPISODE_WINDOW)) & (t <= seen + 0.5 * EPISODE_WINDOW)
            grid = np.arange(max(float(t[a]), seen - EPISODE_WINDOW), seen + 1e-9, 1e-4)
            if np.count_nonzero(sel) >= 4 and grid.size:
                dlo, dhi = _touchdown(t[sel], q[sel], grid, True, noise[j])
                dlo, dhi = dlo - dt, dhi + dt
            else:
                dlo, dhi = float(t[a]), seen
            episodes.append(RestEpisode(j, lo, hi, max(dlo, lo), max(dhi, seen), end))
    episodes.sort(key=lambda e: (e.arrival_lo, e.joint))
    return StopRecord(smoothed.label, tuple(episodes))


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
    speeds = np.array([_rest_speed(smoothed, noise[j]) for j in range(robot.nv)])
    records = tuple(stick_slip_record(s, engage, noise, speeds) for s in smoothed)
    return DirectMeasurement(slides, records, smoothed, noise, timing, expected_residual(smoothed, noise, timing))

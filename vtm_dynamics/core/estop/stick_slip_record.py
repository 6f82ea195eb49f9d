"""The stick/slip record of a recorded stop, read from the recording alone: after its brake engaged, every arrival
of a joint at rest and what followed.

A joint moves while its smoothed speed exceeds its rest speed (``REST_SPEED_SIGMAS`` x the noise of the smoothed
velocity, :func:`~.smoothed_stop.rest_speed`) or the speed of a four times longer window exceeds a quarter of it (a
joint creeping at the end of a long slide still moves). A moving run followed by rest is an arrival; rest followed
by motion a departure, a slip; a moving run followed by one in the other direction a reversal (a slip after a rest
of zero length). Motion smaller than ``MOVE_SIGMAS`` sigmas of the position noise is not motion (the smoother rings
after an abrupt stop). Arrival and departure instants are located by fitting a parabola that touches down (leaves)
at the instant to the raw positions and are reported as windows: the instants the data cannot exclude at 2 sigma,
widened by one sample period. The record is what the stops show; the holding capacities are bracketed by the
output-error comparison of :mod:`.capacity_bounds`, which also sees slips too small to cross these thresholds.

Units: s, rad, rad/s.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import scipy.signal

from vtm_dynamics.core.estop.smoothed_stop import SMOOTHING_WINDOW, SmoothedStop, window_samples

EPISODE_WINDOW = 0.02  # [s] of samples around an arrival or departure used to locate it
MOVE_SIGMAS = 8.0  # a joint that moved less than this many sigmas of position noise did not move


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
    w_long = 4 * window_samples(dt, SMOOTHING_WINDOW) + 1
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

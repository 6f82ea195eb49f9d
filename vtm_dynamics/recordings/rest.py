"""Where a recorded stop comes to rest, in time linear in the samples looked at.

The rule (:mod:`.stops`): the stop ends at the first sample ``a`` after which every joint stays within
``tolerance`` [rad; m for a prismatic joint, its own value] of its value at ``a`` for ``hold`` [s], i.e. every sample ``j`` with
``t[a] <= t[j] <= t[a] + hold`` has ``|q[j] - q[a]| <= tolerance``; the window must be complete (the recording
reaches ``t[a] + hold``) and seen: no two successive samples from ``a`` to the first one at or after ``t[a] + hold``
are more than ``REST_MAX_GAP_FRACTION x hold`` apart. A window that the samples do not cover shows nothing: before,
the last sample ahead of a gap in the joint states (a recording paused between stops, a driver that stopped
publishing) was a complete window of one sample, and an arm still moving at 0.1 rad/s there was read as at rest. Tested naively, every candidate compares its whole window, or worse the whole recording:
a stop that never settles costs quadratic time (80,000 samples took 35 s). Here the windows' maxima and minima
come from monotone queues: the windows of successive candidates only move forward, so each sample enters and
leaves each queue once per joint - O(samples x joints) for all candidates together.
"""

from __future__ import annotations

from collections import deque

import numpy as np

#: The rest rule's defaults: every joint within ``REST_TOLERANCE`` [rad] (a prismatic joint within
#: ``REST_TOLERANCE_LINEAR`` [m]) for ``REST_HOLD`` [s] (here, with numpy only, so that a command line can show
#: them in its help without importing the bag readers). The linear one is its own figure, not the angle's number
#: read in m: 0.5 mm is five times a noisy track encoder's 0.1 mm 1-sigma and half of what a track creeping at
#: 5 mm/s travels in the hold (with 1 mm, that creep sat exactly at the limit and could pass for rest).
REST_TOLERANCE = 1e-3
REST_TOLERANCE_LINEAR = 5e-4
REST_HOLD = 0.2
#: A rest window must be covered by samples: no gap between two successive ones over this fraction of ``hold``.
REST_MAX_GAP_FRACTION = 0.25


def _window_extreme(x: list[float], lo: np.ndarray, hi: np.ndarray, larger: bool) -> np.ndarray:
    """max (``larger``) or min of ``x[lo[i]:hi[i] + 1]`` for every i; ``lo`` and ``hi`` non-decreasing."""
    out = np.empty(len(lo))
    queue: deque[int] = deque()  # indices whose values decrease (max) or increase (min) from the front
    nxt = int(lo[0]) if len(lo) else 0
    for i, (a, b) in enumerate(zip(lo.tolist(), hi.tolist())):
        while nxt <= b:
            v = x[nxt]
            if larger:
                while queue and x[queue[-1]] <= v:
                    queue.pop()
            else:
                while queue and x[queue[-1]] >= v:
                    queue.pop()
            queue.append(nxt)
            nxt += 1
        while queue[0] < a:
            queue.popleft()
        out[i] = x[queue[0]]
    return out


def widest_gap(t: np.ndarray, first: int, stop: int) -> tuple[float, int]:
    """The longest time [s] between two successive samples of ``t[first:stop + 1]`` and the index of the sample
    before it ((0, first) without two samples)."""
    seg = t[first:min(stop + 1, t.size)]
    if seg.size < 2:
        return 0.0, first
    k = int(np.argmax(np.diff(seg)))
    return float(seg[k + 1] - seg[k]), first + k


def first_rest(t: np.ndarray, q: np.ndarray, first: int, stop: int, hold: float,
               tolerance: float | np.ndarray) -> int | None:
    """The smallest ``a`` in ``[first, stop)`` at which the recording ``t`` (N, sorted) [s], ``q`` (N x n) [rad; m
    for a prismatic joint] comes to rest by the rule of the module docstring, with ``tolerance`` one value for all
    joints or one per joint (in its unit), or None (it never does before ``stop``, or the recording ends before a
    complete window)."""
    tolerances = np.broadcast_to(np.asarray(tolerance, dtype=float), (q.shape[1],))
    if stop <= first:
        return None
    times = t[first:stop]
    complete = int(np.count_nonzero(t[-1] >= times + hold))  # a prefix: the windows of later samples end later
    if complete == 0:
        return None
    times = times[:complete]
    lo = np.searchsorted(t, times, side="left")  # the window starts at the first sample stamped t[a]
    hi = np.searchsorted(t, times + hold, side="right") - 1
    ends = np.searchsorted(t, times + hold, side="left")  # the first sample at or after each window's end
    wide = np.concatenate(([0], np.cumsum(np.diff(t) > REST_MAX_GAP_FRACTION * hold)))
    ok = wide[ends] == wide[lo]  # no gap wider than allowed between the window's first sample and its end
    for c in range(q.shape[1]):
        col = q[:, c]
        here = col[first:first + complete]
        values = col.tolist()
        ok &= _window_extreme(values, lo, hi, True) - here <= tolerances[c]
        ok &= here - _window_extreme(values, lo, hi, False) <= tolerances[c]
        if not ok.any():
            return None
    if not ok.any():
        return None
    return first + int(np.argmax(ok))

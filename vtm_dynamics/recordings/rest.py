"""Where a recorded stop comes to rest, in time linear in the samples looked at.

The rule (:mod:`.stops`): the stop ends at the first sample ``a`` after which every joint stays within
``tolerance`` [rad] of its value at ``a`` for ``hold`` [s], i.e. every sample ``j`` with
``t[a] <= t[j] <= t[a] + hold`` has ``|q[j] - q[a]| <= tolerance``; the window must be complete (the recording
reaches ``t[a] + hold``). Tested naively, every candidate compares its whole window, or worse the whole recording:
a stop that never settles costs quadratic time (80,000 samples took 35 s). Here the windows' maxima and minima
come from monotone queues: the windows of successive candidates only move forward, so each sample enters and
leaves each queue once per joint - O(samples x joints) for all candidates together.
"""

from __future__ import annotations

from collections import deque

import numpy as np

#: The rest rule's defaults: every joint within ``REST_TOLERANCE`` [rad] for ``REST_HOLD`` [s] (here, with numpy
#: only, so that a command line can show them in its help without importing the bag readers).
REST_TOLERANCE = 1e-3
REST_HOLD = 0.2


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


def first_rest(t: np.ndarray, q: np.ndarray, first: int, stop: int, hold: float, tolerance: float) -> int | None:
    """The smallest ``a`` in ``[first, stop)`` at which the recording ``t`` (N, sorted) [s], ``q`` (N x n) [rad]
    comes to rest by the rule of the module docstring, or None (it never does before ``stop``, or the recording
    ends before a complete window)."""
    if stop <= first:
        return None
    times = t[first:stop]
    complete = int(np.count_nonzero(t[-1] >= times + hold))  # a prefix: the windows of later samples end later
    if complete == 0:
        return None
    times = times[:complete]
    lo = np.searchsorted(t, times, side="left")  # the window starts at the first sample stamped t[a]
    hi = np.searchsorted(t, times + hold, side="right") - 1
    ok = np.ones(complete, dtype=bool)
    for c in range(q.shape[1]):
        col = q[:, c]
        here = col[first:first + complete]
        values = col.tolist()
        ok &= _window_extreme(values, lo, hi, True) - here <= tolerance
        ok &= here - _window_extreme(values, lo, hi, False) <= tolerance
        if not ok.any():
            return None
    return first + int(np.argmax(ok))

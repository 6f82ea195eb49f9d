"""A stop as a recording shows it: the data type that recordings produce and the brake identification consumes,
and the one rule by which recorded and predicted stops are timed.

:class:`RecordedStop` is built from a rosbag2 recording by ``vtm_dynamics.recordings.stops`` (or by hand) and fitted
by :mod:`.identification`; it lives here, beside both, so that neither depends on the other for it: the state
estimated at the trigger instant with its 1-sigma, and the joint angles sampled after it. Units: s, rad, rad/s.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class RecordedStop:
    """One recorded stop: ``q0`` [rad] (nq) and ``v0`` [rad/s] (nv) at the trigger instant, samples ``t`` (K) [s]
    after the trigger and the recorded angles ``q`` (K x nv) [rad], model order. ``stop_time`` [s] is when the
    recording shows the last joint come to rest (nan if unknown); ``label`` names it in reports.
    ``q0_sigma`` [rad] / ``v0_sigma`` [rad/s] (nv each, or None: unknown) are the 1-sigma of the trigger state's
    estimate, whose error shifts every sample of the stop alike. ``rest_speed`` [rad/s] is the speed threshold of
    the stop-time rule :func:`settle_time` the stop was timed with (predictions of it are timed alike)."""

    label: str
    q0: np.ndarray
    v0: np.ndarray
    t: np.ndarray
    q: np.ndarray
    stop_time: float = math.nan
    trigger_time: float = math.nan
    q0_sigma: np.ndarray | None = None
    v0_sigma: np.ndarray | None = None
    rest_speed: float = 0.01


def settle_time(t: np.ndarray, v: np.ndarray, rest_speed: float) -> float:
    """The time [s] after which every joint speed stays below ``rest_speed`` [rad/s]: the last crossing of the
    threshold, linearly interpolated between the samples around it (0 if never above). Recorded stops and
    predictions are compared by this same rule, because a recording cannot show the instant a joint reaches
    exactly zero speed through its velocity noise."""
    speed = np.max(np.abs(v), axis=1)
    above = np.flatnonzero(speed > rest_speed)
    if above.size == 0:
        return 0.0
    k = int(above[-1])
    if k + 1 >= t.size:
        return float(t[k])
    s0, s1 = speed[k], speed[k + 1]
    frac = (s0 - rest_speed) / (s0 - s1) if s0 != s1 else 1.0
    return float(t[k] + frac * (t[k + 1] - t[k]))

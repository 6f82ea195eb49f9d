"""A stop as a recording shows it: the data type that recordings produce and the brake identification consumes.

:class:`RecordedStop` is built from a rosbag2 recording by ``vtm_dynamics.recordings.stops`` (or by hand) and fitted
by :mod:`.identification`; it lives here, beside both, so that neither depends on the other for it.
Units: s, rad, rad/s.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class RecordedStop:
    """One recorded stop: ``q0`` [rad] (nq) and ``v0`` [rad/s] (nv) at the trigger instant, samples ``t`` (K) [s]
    after the trigger and the recorded angles ``q`` (K x nv) [rad], model order. ``stop_time`` [s] is when the
    recording shows the last joint come to rest (nan if unknown); ``label`` names it in reports."""

    label: str
    q0: np.ndarray
    v0: np.ndarray
    t: np.ndarray
    q: np.ndarray
    stop_time: float = math.nan
    trigger_time: float = math.nan

"""A joint's velocity from the samples a robot reports: measured when reported, else a backward difference.

The start state of a stop prediction (Müller 2026, eq. (3) integrated from (q0, v0)) needs v0. A joint-state stream
may carry positions only; then the velocity is the backward difference of the last two positions over their stamps
(first order; its error is about a/2 times the sample period for an acceleration a), provided the new sample is
stamped, newer than the one before and at most a caller's bound (``max_gap``) after it: a difference over a longer
gap is an average over motion older than the caller accepts for a state at all (the E-stop predictor passes its
``max_start_state_age``), not the velocity now. A continuous joint may be reported wrapped to (-pi, pi]; its
difference is taken on the circle (atan2(sin d, cos d)), which is right while it turns less than pi between samples.
Otherwise the velocity is unavailable: a placeholder 0 that must not be passed off as an estimate (a prediction
refuses to start from it). Units: rad or m, s, rad/s or m/s.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

VELOCITY_SOURCES = ("measured", "estimated", "unavailable")


@dataclass(frozen=True)
class JointVelocity:
    """``value`` [rad/s or m/s] and where it comes from, ``source`` (one of :data:`VELOCITY_SOURCES`); the value
    of an unavailable velocity is the placeholder 0."""

    value: float
    source: str


def joint_velocity(position: float, stamp: float, measured: float | None = None,
                   previous: tuple[float, float] | None = None, *, max_gap: float = math.inf,
                   continuous: bool = False) -> JointVelocity:
    """The velocity at a new sample (``position``, ``stamp`` [s]): ``measured`` when the sample carried one; else
    (position - p0) / (stamp - t0) from the ``previous`` sample (p0, t0) when ``stamp`` is positive (a stamped
    sample), later than t0 and at most ``max_gap`` [s] after it; else unavailable. ``continuous``: the joint is an
    angle without limits, position - p0 is taken as atan2(sin(position - p0), cos(position - p0))."""
    if measured is not None:
        return JointVelocity(float(measured), "measured")
    if previous is not None and stamp > 0.0 and previous[1] < stamp <= previous[1] + max_gap:
        step = position - previous[0]
        if continuous:
            step = math.atan2(math.sin(step), math.cos(step))
        return JointVelocity(step / (stamp - previous[1]), "estimated")
    return JointVelocity(0.0, "unavailable")

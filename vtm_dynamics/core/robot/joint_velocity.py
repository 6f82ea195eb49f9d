"""A joint's velocity from the samples a robot reports: measured when reported, else a backward difference.

The start state of a stop prediction (Müller 2026, eq. (3) integrated from (q0, v0)) needs v0. A joint-state stream
may carry positions only; then the velocity is the backward difference of the last two positions over their stamps
(first order; its error is about a/2 times the sample period for an acceleration a), provided the new sample is
stamped and newer than the one before. Otherwise the velocity is unavailable: a placeholder 0 that must not be
passed off as an estimate (a prediction refuses to start from it). Units: rad or m, s, rad/s or m/s.
"""

from __future__ import annotations

from dataclasses import dataclass

VELOCITY_SOURCES = ("measured", "estimated", "unavailable")


@dataclass(frozen=True)
class JointVelocity:
    """``value`` [rad/s or m/s] and where it comes from, ``source`` (one of :data:`VELOCITY_SOURCES`); the value
    of an unavailable velocity is the placeholder 0."""

    value: float
    source: str


def joint_velocity(position: float, stamp: float, measured: float | None = None,
                   previous: tuple[float, float] | None = None) -> JointVelocity:
    """The velocity at a new sample (``position``, ``stamp`` [s]): ``measured`` when the sample carried one; else
    (position - p0) / (stamp - t0) from the ``previous`` sample (p0, t0) when ``stamp`` is positive (a stamped
    sample) and later than t0; else unavailable."""
    if measured is not None:
        return JointVelocity(float(measured), "measured")
    if previous is not None and stamp > 0.0 and stamp > previous[1]:
        return JointVelocity((position - previous[0]) / (stamp - previous[1]), "estimated")
    return JointVelocity(0.0, "unavailable")

"""Joint position limits along a predicted stop.

The braked dynamics (Müller 2026, eq. (3) with the brake torques; :mod:`.prediction`) have no end stops: a stop
that carries a joint past its position limit describes a motion the robot cannot make. The mechanical end stop (or
the controller's limit), not the brake, would end it, with an impact the prediction does not contain, so such a
prediction must not be taken as the robot's stop. A joint counts when it has one coordinate (revolute or
prismatic, not continuous) and finite limits lower < upper in the model; it crosses when its position leaves
[lower - ``TOLERANCE``, upper + ``TOLERANCE``] at a sample. Units: rad (revolute), m (prismatic).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # light to import: StopPrediction's text needs crossings_text, not Pinocchio
    from vtm_dynamics.core.robot.model import RobotModel

TOLERANCE = 1e-6  # [rad or m] beyond the limit before a crossing counts (a start state at its limit is accepted)


def limit_crossings(robot: RobotModel, q: np.ndarray) -> tuple[str, ...]:
    """One line per joint whose position leaves its limits along the configuration series ``q`` (K x nq), naming
    the farthest position and the limit; () when none does."""
    q = np.asarray(q, dtype=float)
    if q.ndim != 2 or not len(q):
        return ()
    lo, hi = robot.model.lowerPositionLimit, robot.model.upperPositionLimit
    top, bottom = q.max(axis=0), q.min(axis=0)
    with np.errstate(invalid="ignore"):
        suspect = (top > hi + TOLERANCE) | (bottom < lo - TOLERANCE)
    if not suspect.any():
        return ()
    out = []
    for j in robot.joints:
        i = j.idx_q
        if j.nq != 1 or j.nv != 1 or not suspect[i] or not (np.isfinite(lo[i]) and np.isfinite(hi[i]) and hi[i] > lo[i]):
            continue
        unit = "m" if j.prismatic else "rad"
        if top[i] > hi[i] + TOLERANCE:
            out.append(f"{j.name} reaches {top[i]:.4f} {unit}, past its upper limit {hi[i]:.4f} {unit}")
        else:
            out.append(f"{j.name} reaches {bottom[i]:.4f} {unit}, past its lower limit {lo[i]:.4f} {unit}")
    return tuple(out)


def crossings_text(crossings: tuple[str, ...]) -> str:
    """The crossings of :func:`limit_crossings` as the one line every output gives ("" when none)."""
    if not crossings:
        return ""
    return ("past a joint limit: " + "; ".join(crossings) + " (an end stop, not the brake, would end this motion: "
            "outside what the prediction models)")

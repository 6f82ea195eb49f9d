"""Payload: a rigid mass added to a link of a robot model (for stopping data "at maximum payload" and envelopes).

The payload is a point mass or a body with its own inertia, attached at a frame (e.g. ``tool0``) with an offset of
its centre of mass; it is added to the inertia of the joint that carries the frame (Pinocchio
``model.inertias[joint]``), so M(q), h(q, v) and gravity include it exactly (Müller 2026, eq. (3)).
Units: kg, m, kg m^2.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import pinocchio as pin

from vtm_dynamics.core.robot.model import ModelError, RobotModel


def with_payload(
    robot: RobotModel, mass: float, frame: str, com_offset: Sequence[float] = (0.0, 0.0, 0.0),
    inertia: np.ndarray | None = None,
) -> RobotModel:
    """A copy of ``robot`` carrying ``mass`` [kg] at ``frame`` (centre of mass ``com_offset`` [m] in the frame;
    rotational ``inertia`` [kg m^2] about the centre of mass in frame axes, default zero = point mass)."""
    if isinstance(mass, bool) or not np.isfinite(mass) or mass < 0:
        raise ModelError(f"payload.mass: must be finite and >= 0, got {mass!r}")
    other = robot.copy()
    if mass == 0:
        return other
    fid = other.frame_id(frame)
    f = other.model.frames[fid]
    c = np.asarray(com_offset, dtype=float)
    if c.shape != (3,) or not np.all(np.isfinite(c)):
        raise ModelError("payload.com_offset: expected 3 finite numbers [m]")
    I = np.zeros((3, 3)) if inertia is None else np.asarray(inertia, dtype=float)
    if I.shape != (3, 3) or not np.all(np.isfinite(I)):
        raise ModelError("payload.inertia: expected a finite 3x3 matrix [kg m^2]")
    body = pin.Inertia(float(mass), c, I)
    jid = f.parentJoint if hasattr(f, "parentJoint") else f.parent
    other.model.inertias[jid] = other.model.inertias[jid] + f.placement.act(body)
    other.data = other.model.createData()
    return other

"""Spatial forces transmitted by the joints after Pinocchio's RNEA (the reactions of the stop results).

Each force is (linear [N], angular [N m]) in the joint's local frame (Pinocchio ``data.f``); impulsive forces of a
jump are the same quantities for an acceleration equal to the velocity jump [N s, N m s].
"""

from __future__ import annotations

import numpy as np
import pinocchio as pin


def joint_forces(data: pin.Data, njoints: int) -> np.ndarray:
    """(njoints - 1) x 6 spatial forces transmitted by the joints, from ``data.f`` after RNEA (the attribute is
    fetched once: each ``data.f`` access costs more than reading one force)."""
    f = data.f
    return np.array([f[i].vector for i in range(1, njoints)])

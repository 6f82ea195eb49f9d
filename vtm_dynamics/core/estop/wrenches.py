"""Spatial forces transmitted by the joints after Pinocchio's RNEA (the reactions of the stop results), and the
rest pose's joint geometry in world axes that displays of those reactions need.

Each force is (linear [N], angular [N m]) in the joint's local frame (Pinocchio ``data.f``); impulsive forces of a
jump are the same quantities for an acceleration equal to the velocity jump [N s, N m s].
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pinocchio as pin


def joint_forces(data: pin.Data, njoints: int) -> np.ndarray:
    """(njoints - 1) x 6 spatial forces transmitted by the joints, from ``data.f`` after RNEA (the forces are
    taken out in one ``tolist``: indexing ``data.f`` joint by joint costs twice as much, and this runs at every
    event of a stop)."""
    return np.array([f.vector for f in data.f.tolist()[1:njoints]]).reshape(njoints - 1, 6)


@dataclass(frozen=True)
class RestGeometry:
    """Joints of the rest pose, one row per joint of ``robot.joints``: ``names``, ``origins`` (n x 3) [m] and unit
    ``axes`` (n x 3; the rotation axis, or the translation axis of a prismatic joint) in world axes, the reaction
    ``forces`` (n x 3) [N] that hold each joint at rest rotated into world axes, and the ``holding_torques`` (n)
    [N m or N] its brake must supply (nan where the joint is free)."""

    names: tuple[str, ...]
    origins: np.ndarray
    axes: np.ndarray
    forces: np.ndarray
    holding_torques: np.ndarray


def rest_geometry(robot: Any, prediction: Any) -> RestGeometry:
    """:class:`RestGeometry` of ``prediction`` (a StopPrediction of ``robot``) at its rest configuration q_final:
    joint placements from forward kinematics, axes from the world-frame joint Jacobian's angular part (its linear
    part for a prismatic joint), forces = R_joint . f_joint of the rest wrenches."""
    q = prediction.q_final
    names, origins, axes, forces, hold = [], [], [], [], []
    for j in robot.joints:
        placement = robot.frame_placement(q, j.name)
        jac = robot.frame_jacobian(q, j.name, "world")
        axis = jac[3:, j.idx_v] if np.linalg.norm(jac[3:, j.idx_v]) > 1e-12 else jac[:3, j.idx_v]
        names.append(j.name)
        origins.append(np.array(placement.translation))
        axes.append(axis / max(np.linalg.norm(axis), 1e-12))
        forces.append(np.array(placement.rotation) @ prediction.rest_wrenches[j.joint_id - 1][:3])
        hold.append(prediction.holding_torques[j.idx_v])
    return RestGeometry(tuple(names), np.array(origins), np.array(axes), np.array(forces), np.array(hold))

"""Which joint reactions of a mechanism with some joints held by brakes (or locks) are uniquely determined.

A stopped robot with every brake closed is a structure: each 1-DOF tree joint transmits a full wrench (its five
constraint components plus the holding torque or force along its axis, supplied by the brake). For a kinematic
tree that structure is statically determinate; with ``<loop_closure>`` elements it is in general not — a closed loop
of locked joints is hyperstatic, and a rigid-body model cannot tell how the load splits around it. This module
applies the Wojtyra-Frączek test (:mod:`solvability`, the paper's QR test, eq. (27)) to the absolute-coordinate
constraint matrix of the model with a lock row (the joint's own motion direction, as a ``<driving_constraint>``
has) added for every held joint: all 1-DOF tree joints for a robot held at rest by its brakes (the E-stop
predictor's rest reactions), the locked ones for a controller that holds some joints (the projection
controller's reactions). The URDF's own ``<driving_constraint>`` elements are left out: neither a robot held by its
brakes with the drives off nor the controller's constraint set (loop closures, knife edges, locks) contains them.

A joint's reaction is reported unique only if both its constraint rows and, when held, its lock row are solvable.
Verdicts are kept per (URDF text, held joints, configuration) for the last few questions asked: a robot that
stops at the same pose again is answered without matrix work.
"""

from __future__ import annotations

from dataclasses import replace
from functools import lru_cache
from typing import Sequence

import numpy as np

from vtm_dynamics.core.excerpt import excerpt
from vtm_dynamics.core.reactions.absolute_coordinates import (
    AbsoluteModel,
    PairSpec,
    allowed_twists,
    constraint_matrix,
    load_absolute_model,
)
from vtm_dynamics.core.reactions.solvability import DEFAULT_MAX_SOLVABILITY_BODIES, analyze_constraint_matrix
from vtm_dynamics.core.reactions.solvability_report import SolvabilityError
from vtm_dynamics.core.robot.urdf_extension import Pose

LOCKABLE = ("revolute", "continuous", "prismatic")
VERDICTS_KEPT = 64  # (URDF, held joints, configuration) questions whose answers are kept


def lock_row_name(joint: str) -> str:
    """The name of the lock row added for a held ``joint``."""
    return f"{joint}.lock"


def with_locked_joints(model: AbsoluteModel, joints: Sequence[str] | None = None) -> AbsoluteModel:
    """The model plus one lock row (:func:`lock_row_name`) per held joint (``joints``; None: every 1-DOF tree
    joint); the URDF's driving constraints are dropped. A held joint that is not a 1-DOF tree joint of the model is
    a :class:`SolvabilityError` naming it."""
    lockable = {j.name: j for j in model.tree_joints if j.type in LOCKABLE}
    held = list(lockable) if joints is None else list(dict.fromkeys(joints))
    unknown = [name for name in held if name not in lockable]
    if unknown:
        raise SolvabilityError(f"locked: {excerpt(unknown[0])} is not a one-coordinate joint of the model")
    pairs = [p for p in model.pairs if p.kind != "driving_constraint"]
    for name in held:
        j = lockable[name]
        joint = next(p for p in model.pairs if p.kind == "joint" and p.name == name)
        W = allowed_twists(j.type, np.asarray(j.axis))
        pairs.append(PairSpec(lock_row_name(name), "driving_constraint", "lock", joint.parent, joint.child,
                              joint.frame_link, Pose(), W, ("lock",), True))
    return replace(model, pairs=tuple(pairs))


@lru_cache(maxsize=8)
def _parsed(urdf: str, max_bodies: int) -> AbsoluteModel:
    """The parsed model, cached per URDF text: parsing is half the cost."""
    return load_absolute_model(urdf, max_bodies=max_bodies)


@lru_cache(maxsize=VERDICTS_KEPT)
def _verdicts(urdf: str, q: tuple[float, ...], locked: tuple[str, ...] | None,
              max_bodies: int) -> tuple[tuple[str, bool], ...]:
    model = _parsed(urdf, max_bodies)
    names = [j.name for j in model.tree_joints]
    if not model.extension.loop_closures and not model.extension.knife_edges:
        if locked is not None:
            with_locked_joints(model, locked)  # the same refusal of a joint the model does not have
        return tuple((n, True) for n in names)  # a tree stays statically determinate however many joints are held
    held = with_locked_joints(model, locked)
    # the paper's QR test only: the rank cross-check costs one SVD per pair and this runs in the E-stop path
    report = analyze_constraint_matrix(constraint_matrix(held, np.asarray(q)), cross_check=False,
                                       model_name=model.name)
    solvable = {p.name: p.solvable for p in report.pairs}
    return tuple((n, solvable.get(n, True) and solvable.get(lock_row_name(n), True)) for n in names)


def held_joint_uniqueness(urdf: str, q, *, locked: Sequence[str] | None = None,
                          max_bodies: int = DEFAULT_MAX_SOLVABILITY_BODIES) -> dict[str, bool]:
    """Per URDF joint name: is its reaction (wrench, and holding torque where held) unique at ``q`` with the
    ``locked`` joints held (None: every brake closed, the robot at rest after an E-stop)?

    ``urdf``: XML text (never a path); ``q``: Pinocchio configuration. Trees without extension constraints are
    answered without any matrix work (all True). Raises a ValueError subclass with one line on bad input.
    """
    held = None if locked is None else tuple(locked)
    key = tuple(float(x) for x in np.asarray(q, dtype=float).ravel())
    return dict(_verdicts(urdf, key, held, max_bodies))

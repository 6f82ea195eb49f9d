"""Which joint reactions of a mechanism held at rest by its brakes are uniquely determined.

A stopped robot with every brake closed is a structure: each 1-DOF tree joint transmits a full wrench (its five
constraint components plus the holding torque or force along its axis, supplied by the brake). For a kinematic
tree that structure is statically determinate; with ``<loop_closure>`` elements it is in general not — a closed loop
of locked joints is hyperstatic, and a rigid-body model cannot tell how the load splits around it. This module
applies the Wojtyra-Frączek test (:mod:`solvability`) to the absolute-coordinate constraint matrix of the model with
a lock row (the joint's own motion direction, as a ``<driving_constraint>`` has) added for every 1-DOF tree joint.

A joint's reaction is reported unique only if both its constraint rows and its lock row are solvable.
"""

from __future__ import annotations

from dataclasses import replace
from functools import lru_cache

import numpy as np

from vtm_dynamics.core.reactions.absolute_coordinates import (
    AbsoluteModel,
    PairSpec,
    allowed_twists,
    constraint_matrix,
    load_absolute_model,
)
from vtm_dynamics.core.reactions.solvability import DEFAULT_MAX_SOLVABILITY_BODIES, analyze_constraint_matrix
from vtm_dynamics.core.robot.urdf_extension import Pose

LOCKABLE = ("revolute", "continuous", "prismatic")


def with_locked_joints(model: AbsoluteModel) -> AbsoluteModel:
    """The model plus one lock row (name ``<joint>.lock``) per 1-DOF tree joint; existing drives are dropped."""
    pairs = [p for p in model.pairs if p.kind != "driving_constraint"]
    for j in model.tree_joints:
        if j.type not in LOCKABLE:
            continue
        joint = next(p for p in model.pairs if p.kind == "joint" and p.name == j.name)
        W = allowed_twists(j.type, np.asarray(j.axis))
        pairs.append(PairSpec(f"{j.name}.lock", "driving_constraint", "lock", joint.parent, joint.child,
                              joint.frame_link, Pose(), W, ("lock",), True))
    return replace(model, pairs=tuple(pairs))


@lru_cache(maxsize=8)
def _locked_model(urdf: str, max_bodies: int) -> tuple[AbsoluteModel, AbsoluteModel | None]:
    """The parsed model and its locked version (None for trees), cached per URDF text: parsing is half the cost."""
    model = load_absolute_model(urdf, max_bodies=max_bodies)
    if not model.extension.loop_closures and not model.extension.knife_edges:
        return model, None
    return model, with_locked_joints(model)


def held_joint_uniqueness(urdf: str, q, *, max_bodies: int = DEFAULT_MAX_SOLVABILITY_BODIES) -> dict[str, bool]:
    """Per URDF joint name: is its reaction (wrench and holding torque) unique with all brakes closed at ``q``?

    ``urdf``: XML text (never a path); ``q``: Pinocchio configuration. Trees without extension constraints are
    answered without any matrix work (all True). Raises a ValueError subclass with one line on bad input.
    """
    model, locked = _locked_model(urdf, max_bodies)
    names = [j.name for j in model.tree_joints]
    if locked is None:
        return {n: True for n in names}
    # the paper's QR test only: the rank cross-check costs one SVD per pair and this runs in the E-stop path
    report = analyze_constraint_matrix(constraint_matrix(locked, q), cross_check=False, model_name=model.name)
    solvable = {p.name: p.solvable for p in report.pairs}
    return {n: solvable.get(n, True) and solvable.get(f"{n}.lock", True) for n in names}

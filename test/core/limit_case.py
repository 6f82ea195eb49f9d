"""A UR5 stop the brakes cannot end before a joint limit, shared by the tests of everything that must not count
such a stop as valid: the elbow 10 mrad below its upper position limit, moving towards it at 3 rad/s.

Its rest angle is checked here with the independent reference integration (:mod:`ivp_stop`: SciPy on Pinocchio's
M and h with its own brake events, no code of the E-stop engine), not with the engine under test."""

from __future__ import annotations

import os

import numpy as np
import yaml

from test.core.core_testdata import REPO

UR5_BRAKES = os.path.join(REPO, "config", "ur5_brakes.yaml")
INSIDE = 0.01  # [rad] the elbow's start below its upper limit
SPEED = 3.0  # [rad/s] towards the limit (the URDF allows 3.15)
POSE = (0.0, -1.5, None, -1.0, -1.57, 0.0)  # the elbow's entry is set from its limit


def elbow_towards_limit(robot, inside: float = INSIDE, speed: float = SPEED) -> tuple[np.ndarray, np.ndarray, float]:
    """(q [rad], v [rad/s], the elbow's upper limit [rad]) of the UR5 ``robot``: the elbow ``inside`` below its
    upper limit at ``speed`` towards it, the other joints at rest."""
    elbow = robot.joint_names.index("elbow_joint")
    limit = float(robot.model.upperPositionLimit[elbow])
    q = np.array([limit - inside if x is None else x for x in POSE])
    v = np.zeros(robot.nv)
    v[elbow] = speed
    return q, v, limit


def reference_elbow_rest(robot, q: np.ndarray, v: np.ndarray, brake_file: str = UR5_BRAKES) -> float:
    """The elbow's rest angle [rad] of the category-0 stop from (q, v) with the brakes of ``brake_file`` (the
    shipped UR5 brakes by default), by the independent reference (module docstring)."""
    from test.core.ivp_stop import reference_stop

    with open(brake_file, encoding="utf-8") as fh:
        config = yaml.safe_load(fh)["brakes"]
    brakes = {n: {**config.get("defaults", {}), **config["joints"][n]} for n in robot.joint_names}
    ref = reference_stop(robot.model, brakes, q, v)
    assert ref.max_hold_ratio < 1.0  # the reference's locks held: it applies
    return float(ref.q_final[robot.joint_names.index("elbow_joint")])

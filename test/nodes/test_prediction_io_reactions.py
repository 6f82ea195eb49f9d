"""JointReactions from the E-stop predictor say honestly whether each reaction is determined and how it was made.

Before: ``joint_reactions_message`` always claimed ``uniquely_determined = True`` and ``method = "rnea"``, which holds
only for kinematic trees. A parallelogram four-bar held by its brakes is hyperstatic: no joint reaction is unique.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pinocchio as pin
from builtin_interfaces.msg import Time

from vtm_dynamics.core.robot.model import RobotModel
from vtm_dynamics.nodes import prediction_io as io

URDF = Path(__file__).resolve().parents[2] / "urdf"


def _result(robot: RobotModel, q: np.ndarray) -> SimpleNamespace:
    pin.rnea(robot.model, robot.data, q, np.zeros(robot.nv), np.zeros(robot.nv))
    wrenches = np.array([np.array(robot.data.f[i].vector) for i in range(1, robot.model.njoints)])
    hold = np.array(pin.computeGeneralizedGravity(robot.model, robot.data, q))
    return SimpleNamespace(rest_wrenches=wrenches, holding_torques=hold, q_final=q)


def test_closed_chain_reactions_are_not_claimed_unique():
    robot = RobotModel.from_urdf_file(str(URDF / "parallelogram_4bar.urdf"))
    q = np.array([0.3, -0.3, 0.3])  # assembled parallelogram
    msg = io.joint_reactions_message(robot, _result(robot, q), Time())
    assert list(msg.joint_names) == ["O1", "A1", "O2"]
    assert list(msg.uniquely_determined) == [False, False, False]
    assert msg.method != "rnea" and "loop closures" in msg.method


def test_tree_reactions_stay_unique_rnea():
    robot = RobotModel.from_urdf_file(str(URDF / "planar_3r.urdf"))
    q = pin.neutral(robot.model)
    msg = io.joint_reactions_message(robot, _result(robot, q), Time())
    assert all(msg.uniquely_determined) and msg.method == "rnea"

"""A stop that carries a joint past its position limit is not the robot's stop: the model has no end stops, so
the prediction says which joint and how far, and is not valid; a stop within the limits is."""

import os

import numpy as np
import pytest

from core_testdata import REPO
from vtm_dynamics.core.estop import predict_stop
from vtm_dynamics.core.estop.brakes import brakes_from_config
from vtm_dynamics.core.robot.model import RobotModel, example_robot_urdf


@pytest.fixture(scope="module")
def ur5():
    robot = RobotModel.from_urdf_file(example_robot_urdf("ur_description/urdf/ur5_robot.urdf"))
    return robot, brakes_from_config(robot, os.path.join(REPO, "config", "ur5_brakes.yaml"))


def test_an_elbow_driven_into_its_limit_is_named_with_how_far_it_went_and_the_stop_is_not_valid(ur5):
    robot, brakes = ur5
    elbow = robot.joint_names.index("elbow_joint")
    limit = float(robot.model.upperPositionLimit[elbow])
    q = np.array([0.0, -1.5, limit - 0.01, -1.0, 0.5, 0.0])
    v = np.zeros(6)
    v[elbow] = 3.0  # 10 mrad from the limit at 3 rad/s: the brakes cannot stop it in time
    p = predict_stop(robot, brakes, q, v)
    reached = float(np.max(p.q[:, elbow]))
    assert reached > limit + 0.05  # what the model without end stops predicts, computed here from its samples
    assert p.stopped and not p.valid
    (line,) = p.limit_crossings
    assert line == f"elbow_joint reaches {reached:.4f} rad, past its upper limit {limit:.4f} rad"
    assert p.limit_text().startswith("past a joint limit: elbow_joint reaches")


def test_a_stop_within_the_limits_is_valid(ur5):
    robot, brakes = ur5
    p = predict_stop(robot, brakes, np.array([0.0, -1.5, 1.0, -1.0, 0.5, 0.0]), np.full(6, 0.5))
    assert p.stopped and p.valid and p.limit_crossings == () and p.limit_text() == ""

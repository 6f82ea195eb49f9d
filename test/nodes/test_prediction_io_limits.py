"""A stop that carries a joint past its position limit is published as success=false naming the joint: the model
has no end stops, so that stop is not the robot's (before: success=true, message "ok")."""

from __future__ import annotations

import os

import numpy as np
from builtin_interfaces.msg import Time

from vtm_dynamics.core.estop import predict_stop
from vtm_dynamics.core.estop.brakes import brakes_from_config
from vtm_dynamics.core.robot.model import RobotModel, example_robot_urdf
from vtm_dynamics.nodes.prediction_io import stop_prediction_message

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_a_stop_past_a_joint_limit_is_published_as_a_failure_that_names_the_joint():
    robot = RobotModel.from_urdf_file(example_robot_urdf("ur_description/urdf/ur5_robot.urdf"))
    brakes = brakes_from_config(robot, os.path.join(REPO, "config", "ur5_brakes.yaml"))
    elbow = robot.joint_names.index("elbow_joint")
    limit = float(robot.model.upperPositionLimit[elbow])
    q = np.array([0.0, -1.5, limit - 0.01, -1.0, 0.5, 0.0])
    v = np.zeros(6)
    v[elbow] = 3.0
    msg = stop_prediction_message(robot, predict_stop(robot, brakes, q, v, tcp_frame="tool0"), Time(), "world",
                                  "test", 0)
    assert not msg.success
    assert msg.message.startswith("past a joint limit: elbow_joint reaches") and "upper limit" in msg.message
    within = stop_prediction_message(robot, predict_stop(robot, brakes, q, -v, tcp_frame="tool0"), Time(), "world",
                                     "test", 0)
    assert within.success and within.message == "ok"

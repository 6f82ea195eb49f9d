"""The StopPrediction message of a robot with a continuous joint: its trajectory gives the joint's angle
continuous along the stop (a wrist turning through +pi does not jump to -pi between two points), ending at the
start angle plus the stopping angle."""

from __future__ import annotations

import os

import numpy as np
from builtin_interfaces.msg import Time

from test.core.joint_type_models import ur5_text, with_continuous
from vtm_dynamics.core.estop import predict_stop
from vtm_dynamics.core.estop.brakes import brakes_from_config
from vtm_dynamics.core.robot.model import RobotModel
from vtm_dynamics.nodes.prediction_io import stop_prediction_message

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_a_continuous_joint_turning_through_pi_has_a_continuous_trajectory():
    robot = RobotModel.from_urdf(with_continuous(ur5_text(), "wrist_3_joint"))
    brakes = brakes_from_config(robot, os.path.join(REPO, "config", "ur5_brakes.yaml"))
    angles = np.array([0.3, -1.2, 1.4, -0.8, 1.1, 3.1])
    result = predict_stop(robot, brakes, robot.configuration_from_angles(angles),
                          [1.0, -1.5, 2.0, 2.5, -2.0, 3.0], tcp_frame="tool0")
    assert result.stopped and angles[5] + result.stopping_angles[5] > np.pi  # the wrist passes +pi
    msg = stop_prediction_message(robot, result, Time(), "world", "test", 0)
    wrist = np.array([p.positions[5] for p in msg.trajectory.points])
    # it went 3.1 ... 3.14, then -3.14 ... -3.12: a jump of 2 pi between two points
    assert np.max(np.abs(np.diff(wrist))) < 0.1
    assert abs(wrist[0] - 3.1) < 1e-12
    assert abs(wrist[-1] - (3.1 + msg.stopping_angles[5])) < 1e-9

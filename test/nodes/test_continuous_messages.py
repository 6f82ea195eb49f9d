"""A continuous prediction's messages serialized where it is made (nodes/continuous_messages.py) are, once the
node writes the age at publication into them, the messages the node would have built itself (compared field by
field)."""

from __future__ import annotations

import os

import numpy as np
import pytest
from builtin_interfaces.msg import Time
from rclpy.serialization import deserialize_message
from trajectory_msgs.msg import JointTrajectory
from vtm_msgs.msg import JointReactions, StopPrediction

from vtm_dynamics.core.estop import predict_stop
from vtm_dynamics.core.estop.brakes import brakes_from_config
from vtm_dynamics.core.robot.model import RobotModel, example_robot_urdf
from vtm_dynamics.nodes import prediction_io as io
from vtm_dynamics.nodes.continuous_messages import MessageRequest, serialized_messages
from vtm_dynamics.nodes.conversions import seconds_to_stamp

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture(scope="module")
def ur5_stop():
    robot = RobotModel.from_urdf_file(example_robot_urdf("ur_description/urdf/ur5_robot.urdf"))
    brakes = brakes_from_config(robot, os.path.join(REPO, "config", "ur5_brakes.yaml"))
    q, v = np.array([0.3, -1.2, 1.4, -0.6, 1.2, 0.2]), np.array([0.8, -0.6, 0.7, 0.5, -0.4, 0.9])
    return robot, predict_stop(robot, brakes, q, v, tcp_frame="tool0")


@pytest.mark.parametrize("header_stamp", [None, Time(sec=1700000000, nanosec=123456789)])
@pytest.mark.parametrize("age", [0.0, 0.0123, 0.75])
def test_the_serialized_messages_with_their_age_are_the_nodes_own(ur5_stop, header_stamp, age):
    robot, result = ur5_stop
    request = MessageRequest(1700000000.1234, header_stamp, "world", 0, 500, "ur5", "0123456789abcdef", True)
    got = serialized_messages(robot, result, request)
    assert got is not None
    # header.stamp: the joint state's exact stamp when known, else its float seconds
    stamp = header_stamp if header_stamp is not None else seconds_to_stamp(request.stamp)
    want = io.stop_prediction_message(robot, result, stamp, "world", "continuous", 0, 500)
    io.mark_provenance(want, model_name="ur5", model_hash="0123456789abcdef",
                       start_stamp=header_stamp or request.stamp, start_age=age, velocities_estimated=True,
                       revision=0, final=False)
    back = deserialize_message(got.prediction_with_age(age), StopPrediction)
    assert back == want  # field by field (CDR padding bytes are not defined, so the bytes are not compared)
    assert back.start_state_age == age and back.success and back.scenario_id == "continuous"
    assert deserialize_message(got.trajectory, JointTrajectory) == want.trajectory
    assert deserialize_message(got.reactions, JointReactions) == io.joint_reactions_message(robot, result, stamp)

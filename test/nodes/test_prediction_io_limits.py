"""A stop that carries a joint past its position limit is published as success=false naming the joint: the model
has no end stops, so that stop is not the robot's (before: success=true, message "ok")."""

from __future__ import annotations

import os

import numpy as np
import pytest
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


def _ur5_stops():
    """(robot, {name: prediction}): the elbow 10 mrad below its upper limit at 3 rad/s (at rest about 0.1 rad past
    it), the demo stop cut off by a 0.03 s horizon (it takes about 0.07 s), and the demo stop itself."""
    from test.core.limit_case import UR5_BRAKES, elbow_towards_limit
    from vtm_dynamics.core.estop import StopSettings
    from vtm_dynamics.core.robot.catalogue import ROBOTS

    robot = RobotModel.from_urdf_file(example_robot_urdf("ur_description/urdf/ur5_robot.urdf"))
    brakes = brakes_from_config(robot, UR5_BRAKES)
    q, v, limit = elbow_towards_limit(robot)
    demo = ROBOTS["ur5"].state("demo")
    q0, v0 = np.asarray(demo.q), np.asarray(demo.v)
    stops = {"past": predict_stop(robot, brakes, q, v, tcp_frame="tool0"),
             "cut": predict_stop(robot, brakes, q0, v0, tcp_frame="tool0", settings=StopSettings(t_max=0.03)),
             "valid": predict_stop(robot, brakes, q0, v0, tcp_frame="tool0")}
    assert stops["past"].q_final[robot.joint_names.index("elbow_joint")] > limit + 0.1
    assert not stops["cut"].stopped and stops["valid"].valid
    return robot, stops


def test_the_rviz_stop_markers_of_a_stop_that_is_not_valid_say_so_in_red_above_the_rest_pose():
    """The summary marker read "stop 0.070 s, tool0 path 0.052 m" for the elbow resting past its limit, and "stop
    0.030 s" for a stop cut off by the horizon at 0.03 s, in white like any stop."""
    from vtm_dynamics.nodes.prediction_io import stop_markers_message

    robot, stops = _ur5_stops()

    def summary(p):
        return next(m for m in stop_markers_message(robot, p, Time(), "world").markers if m.ns == "summary")

    past, cut, valid = summary(stops["past"]), summary(stops["cut"]), summary(stops["valid"])
    assert past.text.startswith("NOT VALID: past a joint limit\n") and (past.color.r, past.color.g) == pytest.approx((1.0, 0.1))
    assert cut.text.startswith("NOT VALID: not at rest within the horizon\nNOT at rest after 0.030 s")
    assert (cut.color.r, cut.color.g) == pytest.approx((1.0, 0.1))
    assert valid.text.startswith("stop ") and "NOT" not in valid.text and (valid.color.g, valid.color.b) == (1.0, 1.0)


def test_the_replay_markers_of_a_stop_that_is_not_valid_carry_its_mark_and_a_red_path():
    """The ghost replay's markers (predicted_motion_markers) of the elbow resting past its limit were those of any
    stop: an orange TCP path and no word of the limit."""
    from vtm_dynamics.nodes.ghost_replay import replay_markers
    from vtm_dynamics.views import palette
    from vtm_dynamics.views.replay import replay_frames

    robot, stops = _ur5_stops()
    for name, mark in (("past", "NOT VALID: past a joint limit"), ("cut", "NOT VALID: not at rest within the horizon")):
        markers = replay_markers(replay_frames(robot, stops[name]), "world", Time()).markers
        texts = [m.text for m in markers if m.text]
        assert texts == [mark], name
        path = next(m for m in markers if m.ns == "replay_tcp_path" and m.points)
        assert (path.color.r, path.color.g, path.color.b) == pytest.approx(palette.UNSAFE)
    valid = replay_markers(replay_frames(robot, stops["valid"]), "world", Time()).markers
    assert not [m.text for m in valid if m.text]
    path = next(m for m in valid if m.ns == "replay_tcp_path")
    assert (path.color.r, path.color.g, path.color.b) == pytest.approx(palette.TCP_PATH)

"""The stopping map of robots whose joints are not all revolute: the UR5 on a braked linear track (its rows'
largest stopping angle leaves the track's travel in m out) and a continuous joint (refused in one line)."""

from __future__ import annotations

import os

import numpy as np
import pytest
import yaml

from test.core.joint_type_models import TRACK_BRAKE, on_track, ur5_text, with_continuous
from vtm_dynamics.core.estop.brakes import brakes_from_config
from vtm_dynamics.core.robot.model import RobotModel
from vtm_dynamics.core.stopping.workspace_map import MapInputError, MapSpec, check_map_spec, evaluate_chunk

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def test_a_track_robot_map_row_reports_the_largest_angle_of_its_turning_joints():
    robot = RobotModel.from_urdf(on_track(ur5_text()))
    with open(os.path.join(REPO, "config", "ur5_brakes.yaml"), encoding="utf-8") as fh:
        config = yaml.safe_load(fh)
    config["brakes"]["joints"]["track_joint"] = dict(TRACK_BRAKE)
    brakes = brakes_from_config(robot, config)
    # the track at 2 m/s, the arm at 1/20 of 0.5 rad/s: the carriage travels ~0.2 m, the arm turns < 0.01 rad
    spec = MapSpec(n_states=4, chunk_size=4, tcp_frame="tool0", payload_frame="tool0", max_speeds=(2.0,) + (0.5,) * 6,
                   speed_fraction=(1.0, 1.0))
    check_map_spec(robot, spec)
    rows = evaluate_chunk(robot, brakes, spec, 0)
    assert rows["stopped"].all()
    # the row's largest stopping angle was the track's travel in m (0.1-0.2), reported as rad
    assert np.all(rows["max_stopping_angle_rad"] < 0.05)
    assert np.all(np.abs(rows["q_track_joint"]) <= 2.0)  # sampled within the track's travel [m]
    assert np.max(rows["tcp_straight_distance_m"]) > 0.05  # the TCP distance includes the carriage's travel


def test_a_continuous_joint_is_refused_in_one_line():
    robot = RobotModel.from_urdf(with_continuous(ur5_text(), "wrist_3_joint"))
    with pytest.raises(MapInputError, match="one position per velocity"):
        check_map_spec(robot, MapSpec(n_states=4, chunk_size=4, tcp_frame="tool0", payload_frame="tool0", max_speeds=(1.0,) * 6))

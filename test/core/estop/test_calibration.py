"""The Coulomb + viscous UR5 brake set (test data; the defaults shipped before the category-0 fit) is what the 1-DOF
calibration computes from the published figures under its stated test motion (the other joints held), and the
calibrated 1-DOF stops reproduce those figures. The shipped defaults: test_default_brakes.py."""

from __future__ import annotations

import os

import pytest
import yaml

from vtm_dynamics.core.estop import calibration as cal
from vtm_dynamics.core.estop.category0_fit import SPECS
from vtm_dynamics.core.estop.payload import with_payload
from vtm_dynamics.core.robot.catalogue import UR5
from vtm_dynamics.core.robot.model import RobotModel

# the stated test motion of the published figures (robot catalogue, category0_fit): the arm stretched, the joint
# under test at pi rad/s, the rated payload at tool0, a 10 ms engage delay
SPEED, ENGAGE_DELAY = SPECS["ur5"].max_speed, SPECS["ur5"].engage_delay

# the Coulomb + viscous UR5 set of the 1-DOF calibration (the shipped defaults now come from category0_fit)
CONFIG = os.path.join(os.path.dirname(__file__), "data", "ur5_coulomb_viscous_brakes.yaml")


@pytest.fixture(scope="module")
def calibrated():
    robot = RobotModel.from_urdf_file(UR5.urdf_path())
    robot = with_payload(robot, UR5.rated_payload, UR5.payload_frame)
    motion = cal.TestMotion((0.0,) * robot.nv, SPEED, ENGAGE_DELAY)
    return cal.calibrate_brakes(robot, UR5.published_stops, motion)


def test_calibration_reproduces_the_published_angle_and_time_of_each_joint(calibrated):
    for brake, figure in zip(calibrated, UR5.published_stops):
        assert brake.joint == figure.joint
        assert brake.angle == pytest.approx(figure.angle, rel=1e-6)
        assert brake.time == pytest.approx(figure.time, rel=1e-6)


def test_coulomb_viscous_ur5_set_is_the_1dof_calibration(calibrated):
    with open(CONFIG, encoding="utf-8") as fh:
        joints = yaml.safe_load(fh)["brakes"]["joints"]
    assert yaml.safe_load(open(CONFIG, encoding="utf-8"))["brakes"]["defaults"]["engage_delay"] == ENGAGE_DELAY
    for brake in calibrated:
        shipped = joints[brake.joint]
        assert shipped["sliding_torque"] == pytest.approx(brake.sliding_torque, abs=1e-3)
        assert shipped["viscous"] == pytest.approx(brake.viscous, abs=1e-3)

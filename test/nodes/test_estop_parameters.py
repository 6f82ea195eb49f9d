"""The predictor's parameters without ROS graph (nodes/estop_parameters.py): the category-1 drives' torque limits,
``category1_torque_limits``, read like the command lines' ``--torque-limits``, read-only, and in every category-1
prediction of the node."""

import os
from types import SimpleNamespace

import numpy as np
import pytest

from vtm_dynamics.core.estop.brakes import brakes_from_config
from vtm_dynamics.core.estop.defaults import CATEGORY1_TORQUE_LIMITS
from vtm_dynamics.core.robot.model import RobotModel, example_robot_urdf
from vtm_dynamics.nodes.estop_parameters import PARAMETERS, prediction_settings
from vtm_dynamics.nodes.stop_worker import predict_with_brakes

BRAKES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "ur5_test_brakes.yaml")
SPEC = {s.name: s for s in PARAMETERS}["category1_torque_limits"]


def parameters(**given):
    p = {s.name: s.value_of(s.declared_default()) for s in PARAMETERS}
    p.update(robot="ur5", stop_category=1, **given)
    return p


@pytest.fixture(scope="module")
def ur5():
    robot = RobotModel.from_urdf_file(example_robot_urdf("ur_description/urdf/ur5_robot.urdf"))
    return robot, brakes_from_config(robot, BRAKES)


def test_the_torque_limits_are_read_only_after_start_up_and_default_to_the_cores():
    assert not SPEC.changeable and SPEC.descriptor().read_only
    assert prediction_settings(parameters()).torque_limits is CATEGORY1_TORQUE_LIMITS is None


@pytest.mark.parametrize("text, expected", [("", None), ("urdf", "urdf"), ("150 150 150 28 28 28",
                                                                            (150.0, 150.0, 150.0, 28.0, 28.0, 28.0))])
def test_the_torque_limits_read_like_the_command_lines(text, expected):
    assert SPEC.check(text) is None
    assert prediction_settings(parameters(category1_torque_limits=text)).torque_limits == expected


@pytest.mark.parametrize("text, why", [("lots", "neither 'urdf' nor numbers"), ("150 -150", "not a finite torque"),
                                       ("150 nan", "not a finite torque"), (150.0, "must be a string")])
def test_a_torque_limit_that_is_not_one_is_refused_naming_the_parameter(text, why):
    reason = SPEC.check(text)
    assert reason is not None and reason.startswith("category1_torque_limits: ") and why in reason


def test_a_category_1_prediction_of_the_node_keeps_its_ramp_within_the_torque_limits(ur5):
    """Only the base joint turns (vertical axis: no gravity, Coriolis or centrifugal torque on it), so its drive
    torque is M_00 v0 / T and the shortest ramp within a limit L lasts T = M_00 v0 / L (the test brakes carry no
    rotor inertia). 20 rad/s^2 from 2 rad/s is a 0.1 s ramp; a 20 N m base limit makes it M_00 / 10 s. Before, the
    node had no such parameter: its ramp was 0.1 s whatever the drives could give."""
    robot, brakes = ur5
    q = np.array([0.4, -1.0, 1.2, -0.5, 0.8, 0.1])
    state = SimpleNamespace(q=q, v=np.array([2.0, 0.0, 0.0, 0.0, 0.0, 0.0]))
    free = predict_with_brakes(robot, brakes, state, prediction_settings(parameters(category1_deceleration=20.0)))
    held = predict_with_brakes(robot, brakes, state, prediction_settings(parameters(
        category1_deceleration=20.0, category1_torque_limits="20 10000 10000 10000 10000 10000")))
    assert free.result.power_off_time == pytest.approx(0.1, abs=1e-12)
    assert held.result.power_off_time == pytest.approx(robot.mass_matrix(q)[0, 0] * 2.0 / 20.0, rel=1e-6)
    assert held.result.power_off_time > 0.2


def test_torque_limits_of_the_wrong_count_make_the_prediction_fail_naming_them(ur5):
    robot, brakes = ur5
    state = SimpleNamespace(q=np.zeros(6), v=np.array([2.0, 0.0, 0.0, 0.0, 0.0, 0.0]))
    out = predict_with_brakes(robot, brakes, state, prediction_settings(parameters(category1_torque_limits="20 20")))
    assert out.result is None and "torque_limits" in out.reason

"""Loop-closure wrenches as generalized constraint forces (constraint_wrench.py), checked against the
slider-crank's closed form: the guide's vertical force f_z on the pin C acts on the coordinates as
-f_z dy_C/dq with y_C = l (sin q1 + sin(q1 + q2)) (Aghili eq. (66)), l = 0.5 m."""

import os

import numpy as np
import pytest

from vtm_dynamics.core.projection.constraint_wrench import closure_wrench, constraint_force_of_wrench
from vtm_dynamics.core.projection.simulation import ConstraintSet, constrained_dynamics
from vtm_dynamics.core.robot.constraints import constraints_from_extension
from vtm_dynamics.core.robot.model import RobotModel

from core_testdata import REPO

L = 0.5


def model(name):
    robot = RobotModel.from_urdf_file(os.path.join(REPO, "urdf", name))
    return robot, constraints_from_extension(robot)[0]


def dyc_dq(q):
    c1, c12 = np.cos(q[0]), np.cos(q[0] + q[1])
    return L * np.array([c1 + c12, c12])


@pytest.mark.parametrize("theta", [0.3, 0.9, 2.2])
def test_vertical_guide_force_on_the_slider_crank(theta):
    robot, guide = model("slider_crank.urdf")
    q = np.array([1.0, -2.0, 1.0]) * theta
    out = constraint_force_of_wrench(robot, guide, q, [0.0, 0.0, 7.0, 0.0, 0.0, 0.0])
    assert out.exact and out.transmitted == pytest.approx(1.0)
    np.testing.assert_allclose(out.force[:2], -7.0 * dyc_dq(q), atol=1e-12)
    # a force along the guide (world x) is not carried: it is the pair's free direction
    along = constraint_force_of_wrench(robot, guide, q, [3.0, 0.0, 0.0, 0.0, 0.0, 0.0])
    assert np.abs(along.force).max() < 1e-12 and along.transmitted < 1e-12


def test_wrench_of_the_plants_constraint_force_maps_back_to_it():
    robot, guide = model("slider_crank.urdf")
    cs = ConstraintSet((guide,))
    q, v = np.array([1.0, -2.0, 1.0]) * 0.6, np.array([1.0, -2.0, 1.0]) * 1.5
    F = constrained_dynamics(robot, cs, q, v, np.array([0.4, 0.1, 0.0])).constraint_force
    w = closure_wrench(robot, guide, q, F)
    np.testing.assert_allclose(constraint_force_of_wrench(robot, guide, q, w).force, F, atol=1e-10)
    np.testing.assert_allclose(w[[0, 1, 3, 5]], 0.0, atol=1e-10)  # planar: a vertical force and an in-plane moment


def test_point_contact_closing_a_two_coordinate_chain_is_flagged_not_mapped_wrongly():
    robot, pin_row = model("slider_crank_point_on_plane.urdf")
    out = constraint_force_of_wrench(robot, pin_row, np.array([0.6, -1.2]), [0.0, 0.0, 7.0, 0.0, 0.0, 0.0])
    assert not out.exact

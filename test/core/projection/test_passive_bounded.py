"""Passive joints through lost controllability (Aghili, Sec. 7.4, eqs. (57)-(64)): the torque stays bounded by
||f_par|| (1 + 1/tol), the demand that cannot be met is reported (unmet passive force, acceleration error), and
the predicted accelerations are the plant's under the torque actually returned."""

import os

import numpy as np
import pytest

from vtm_dynamics.core.projection.control import (
    DEFAULT_CONTROLLABILITY_TOLERANCE,
    ProjectedInverseDynamicsController,
    projected_inverse_dynamics,
)
from vtm_dynamics.core.projection.projector import constrained_accelerations
from vtm_dynamics.core.projection.simulation import ConstraintSet, constrained_dynamics
from vtm_dynamics.core.robot.constraints import constraints_from_extension
from vtm_dynamics.core.robot.model import RobotModel

from core_testdata import REPO

SLIDER_CRANK = os.path.join(REPO, "urdf", "slider_crank.urdf")
BRANCH = np.array([1.0, -2.0, 1.0])  # the slider-crank branch q2 = -2 q1, q3 = q1
TOL = DEFAULT_CONTROLLABILITY_TOLERANCE


@pytest.fixture(scope="module")
def slider_crank():
    robot = RobotModel.from_urdf_file(SLIDER_CRANK)
    return robot, ConstraintSet(constraints_from_extension(robot))


def test_nearly_passive_only_motion_gets_a_bounded_torque_and_reports_the_unmet_demand():
    """A = [1, 1, 1e-9], joint 2 passive: a motion of joint 2 alone is admissible to 1e-9, so the active joints
    cannot hold joint 2 against its bias force h_2 = 1 N m. The exact pseudo-inverse answered -1e9 N m."""
    z = np.zeros(3)
    M, h, A = np.eye(3), np.array([0.0, 0.0, 1.0]), np.array([[1.0, 1.0, 1e-9]])
    out = projected_inverse_dynamics(M, h, A, [0.0], z, z, z, 0.0, 0.0, passive=[2])
    f_par = out.f_parallel
    assert np.linalg.norm(out.tau) <= np.linalg.norm(f_par) * (1.0 + 1.0 / TOL)
    assert np.abs(out.tau).max() < 1e-6  # nothing the active joints can do moves joint 2
    c = out.controllability
    assert not c.controllable and c.margin < 1e-8
    # the unmet demand: the passive joint needs h_2 = 1 N m to hold still, and does not get it
    assert c.passive_residual == pytest.approx(1.0, abs=1e-6)
    assert c.unmet_force[2] == pytest.approx(1.0, abs=1e-6) and np.all(c.unmet_force[:2] == 0.0)
    # honest prediction: the plant's acceleration under the returned torque (joint 2 falls at 1 rad/s^2)
    plant = constrained_accelerations(M, h, out.tau, A, [0.0])
    np.testing.assert_allclose(out.qdd, plant.qdd, atol=1e-12)
    assert c.acceleration_error == pytest.approx(1.0, abs=1e-6)


def test_slider_crank_driven_by_the_crank_stays_bounded_through_lost_controllability(slider_crank):
    """Sweep the crank through -90 deg (rod and slider passive, holding the pose against gravity): at the
    singular pose the exact inversion commanded 3.7e15 N m. Every command stays within the stated bound and, with
    the effort limit of the URDF (1000 N m), never beyond it; where the demand is not met it is reported, and the
    predicted accelerations are those of an independent forward-dynamics evaluation under the returned torque."""
    robot, cs = slider_crank
    ctl = ProjectedInverseDynamicsController(robot, cs, kp=25.0, kd=10.0, passive_joints=["rod_joint", "slider_joint"])
    z = np.zeros(3)
    verdicts = set()
    worst = 0.0
    rng = np.random.default_rng(7)
    thetas = -np.pi / 2 + np.concatenate([np.linspace(-0.3, 0.3, 61), [0.0, 1e-9, -1e-7, 1e-5]])
    # measured states are never exactly on the constraint manifold: also 1e-7 off it in random directions
    poses = [BRANCH * t for t in thetas] + [BRANCH * t + 1e-7 * rng.normal(size=3) for t in thetas[-5:]]
    for q in poses:
        out = ctl.update(q, z, q, z, z)
        c = out.controllability
        bound = np.linalg.norm(out.f_parallel) * (1.0 + 1.0 / TOL)
        assert np.all(np.isfinite(out.tau)) and np.linalg.norm(out.tau) <= bound + 1e-9
        assert np.abs(out.tau).max() <= 1000.0
        assert out.tau[1] == 0.0 and out.tau[2] == 0.0
        plant = constrained_dynamics(robot, cs, q, z, out.tau)
        np.testing.assert_allclose(out.qdd, plant.qdd, atol=1e-8 * max(1.0, np.abs(plant.qdd).max()))
        if c.controllable:
            assert c.passive_residual < 1e-9 * max(1.0, bound) and c.acceleration_error < 1e-8
        verdicts.add(c.controllable)
        worst = max(worst, float(np.abs(out.tau).max()))
    assert verdicts == {True, False}
    assert worst < 50.0  # the gravity load of this 1 kg, 0.5 m mechanism is a few N m, not 1e15


def test_singular_crank_pose_reports_what_it_could_not_hold(slider_crank):
    """At the singular pose with a motion demand along the extra degree of freedom (rod swinging while the
    crank is still) the active crank cannot produce it: the torque is bounded and the unmet demand is reported."""
    robot, cs = slider_crank
    ctl = ProjectedInverseDynamicsController(robot, cs, kp=25.0, kd=10.0, passive_joints=["rod_joint", "slider_joint"])
    q = BRANCH * (-np.pi / 2)
    z = np.zeros(3)
    q_d = q + np.array([0.0, 0.1, -0.1])  # rod and slider swing about the coincident pivots, crank fixed
    out = ctl.update(q, z, q_d, z, z)
    c = out.controllability
    assert not c.controllable
    assert np.abs(out.tau).max() < 50.0
    assert c.passive_residual > 1e-3 and c.acceleration_error > 1e-3
    plant = constrained_dynamics(robot, cs, q, z, out.tau)
    np.testing.assert_allclose(out.qdd, plant.qdd, atol=1e-8)


def test_two_coordinate_slider_crank_with_a_passive_rod_stays_bounded_through_the_singularity():
    """The paper's two-coordinate model (one point_on_plane row): crank actuated, rod passive. At q1 = -pi/2 the
    row vanishes (rank 0), the rod can swing alone and condition (64) fails; around it the margin shrinks to the
    tolerance. Every torque stays within the stated bound and the plant's accelerations are predicted."""
    robot = RobotModel.from_urdf_file(os.path.join(REPO, "urdf", "slider_crank_point_on_plane.urdf"))
    cs = ConstraintSet(constraints_from_extension(robot))
    ctl = ProjectedInverseDynamicsController(robot, cs, kp=25.0, kd=10.0, passive_joints=["rod_joint"])
    branch, z = np.array([1.0, -2.0]), np.zeros(2)
    verdicts = set()
    for theta in -np.pi / 2 + np.concatenate([np.linspace(-0.2, 0.2, 41), [1e-12, -1e-9, 1e-6, 1e-4, 1e-3]]):
        q = branch * theta
        out = ctl.update(q, z, q + np.array([0.05, -0.1]), z, z)
        c = out.controllability
        assert np.linalg.norm(out.tau) <= np.linalg.norm(out.f_parallel) * (1.0 + 1.0 / TOL) + 1e-9
        assert out.tau[1] == 0.0 and np.abs(out.tau).max() < 100.0
        plant = constrained_dynamics(robot, cs, q, z, out.tau)
        np.testing.assert_allclose(out.qdd, plant.qdd, atol=1e-8 * max(1.0, np.abs(plant.qdd).max()))
        if not c.controllable:
            assert c.passive_residual > 0.0 and abs(c.unmet_force[1]) == pytest.approx(c.passive_residual)
        verdicts.add(c.controllable)
    assert verdicts == {True, False}


def test_force_control_with_a_passive_joint_reaches_the_nearest_admissible_constraint_force(slider_crank, rng):
    """Slider joint passive, crank and rod actuated, force set point F_d = A^T lambda_d: the passive torque stays
    exactly zero, the motion is that of the pure motion law, and the plant's constraint force is the one nearest
    to F_d among those reachable with zero passive torque (peer: F_0 + projection of F_d - F_0 onto
    {x in R(A^T): x_slider = 0}, bases from scipy)."""
    import scipy.linalg

    robot, cs = slider_crank
    q, v = BRANCH * 0.6, BRANCH * 1.0
    A = cs.jacobian(robot, q)
    args = (q, v, BRANCH * 0.7, BRANCH * 0.8, BRANCH * 0.2)
    motion = ProjectedInverseDynamicsController(robot, cs, kp=25.0, kd=10.0, passive_joints=["slider_joint"])
    forced = ProjectedInverseDynamicsController(robot, cs, kp=25.0, kd=10.0, passive_joints=["slider_joint"],
                                                force_gain=0.5, force_integral_gain=2.0)
    base = motion.update(*args)
    F0 = constrained_dynamics(robot, cs, q, v, base.tau).constraint_force
    R = scipy.linalg.orth(A.T)
    S = R @ scipy.linalg.null_space(R[[2]])
    for _ in range(3):
        F_d = A.T @ rng.normal(scale=10.0, size=A.shape[0])
        out = forced.update(*args, force_desired=F_d)
        assert out.tau[2] == 0.0
        plant = constrained_dynamics(robot, cs, q, v, out.tau)
        np.testing.assert_allclose(plant.qdd, base.qdd, atol=1e-9)
        nearest = F0 + S @ (S.T @ (F_d - F0))
        np.testing.assert_allclose(plant.constraint_force, nearest, atol=1e-9 * max(1.0, np.abs(F_d).max()))


def test_force_integral_does_not_wind_up_where_the_passive_joint_blocks_the_force(slider_crank):
    """A set point the passive joint makes unreachable leaves a constant force error; only its reachable part
    is integrated, so the integral stays bounded (a later configuration change cannot release a wound-up torque)."""
    robot, cs = slider_crank
    q, v = BRANCH * 0.6, np.zeros(3)
    A = cs.jacobian(robot, q)
    ctl = ProjectedInverseDynamicsController(robot, cs, kp=25.0, kd=10.0, passive_joints=["slider_joint"],
                                             force_integral_gain=5.0)
    F_d = A.T @ np.array([0.0, 30.0, 0.0, 5.0, 0.0])  # the guide moment on the slider needs slider torque
    integrals = []
    for _ in range(400):
        out = ctl.update(q, v, q, v, np.zeros(3), force_desired=F_d,
                         force_measured=constrained_dynamics(robot, cs, q, v, ctl.update(q, v, q, v, np.zeros(3),
                                                             force_desired=F_d).tau).constraint_force, dt=0.01)
        integrals.append(np.linalg.norm(ctl._force_integral))
        assert out.tau[2] == 0.0
    assert integrals[-1] < 1.01 * integrals[len(integrals) // 2] + 1e-9

"""Specification of the simulation invariants (Müller 2026, Sec. 6, Figs. 2 and 4)."""

import numpy as np
import pytest

from test.core.robot.test_constraints import FOUR_BAR
from vtm_dynamics.core.robot.constraints import JointLock, constraints_from_extension
from vtm_dynamics.core.switching.diagnostics import (
    constraint_residuals,
    energy,
    free_motion_basis,
    generalized_momentum,
    trajectory_energy,
)
from vtm_dynamics.core.robot.model import RobotModel
from vtm_dynamics.core.switching.topology import Topology


def test_momentum_of_unlocked_joints_is_the_free_rows_of_M_v(planar_3r, rng):
    q, v = rng.normal(size=3), rng.normal(size=3)
    topo = Topology.of([JointLock("joint2")])
    P = generalized_momentum(planar_3r, topo, q, v)
    Mv = planar_3r.mass_matrix(q) @ v
    assert np.allclose(P, Mv[[0, 2]], rtol=1e-14)
    assert np.allclose(generalized_momentum(planar_3r, Topology(), q, v), Mv)


def test_energy_of_the_hanging_3r_is_the_hand_computed_potential(planar_3r):
    e = energy(planar_3r, np.zeros(3), np.zeros(3))
    # centres of mass at z = -0.5, -1.5, -2.5 m below the first joint
    assert e.potential == pytest.approx(-108 * 9.81 * 4.5, rel=1e-12)
    assert e.kinetic == 0.0 and e.total == e.potential
    # a rigid rotation of the stretched chain about joint 1: T = 1/2 I_1 w^2 with I_1 = M_11
    w = 0.7
    e2 = energy(planar_3r, np.zeros(3), np.array([w, 0.0, 0.0]))
    assert e2.kinetic == pytest.approx(0.5 * (3 * 9.36 + 108 * 8.75) * w**2, rel=1e-12)
    assert np.allclose(trajectory_energy(planar_3r, np.zeros((2, 3)), np.zeros((2, 3))), e.total)


def test_free_motion_basis_spans_the_admissible_velocities_of_a_loop():
    robot = RobotModel.from_urdf(FOUR_BAR)
    loop = constraints_from_extension(robot)[0]
    topo = Topology.of([loop])
    q = np.array([np.pi / 2, -np.pi / 2, np.pi / 2])
    F = free_motion_basis(robot, topo, q)
    assert F.shape == (3, 1)
    assert np.allclose(loop.jacobian(robot, q) @ F, 0.0, atol=1e-12)


def test_constraint_residuals_measure_lock_and_closure_violations(planar_3r):
    topo = Topology.of([JointLock("joint2")]).activate(planar_3r, np.zeros(3), [])
    topo = Topology(tuple(c.bind(planar_3r, np.zeros(3)) for c in topo.constraints))
    r = constraint_residuals(planar_3r, topo, np.array([0.0, 0.01, 0.0]), np.array([0.0, -0.2, 0.0]))
    assert r.position == pytest.approx(0.01) and r.velocity == pytest.approx(0.2)
    assert constraint_residuals(planar_3r, Topology(), np.zeros(3), np.ones(3)).velocity == 0.0

"""Specification of the projection dynamics (Aghili): projector, constraint inertia matrices, direct dynamics,
constraint forces, drift correction - checked by invariants, against a KKT solve, the paper's closed-form
slider-crank model and Pinocchio's proximal constrained dynamics."""

import os

import numpy as np
import pinocchio as pin
import pytest
import scipy.linalg

from vtm_dynamics.core.projection.simulation import ConstraintSet, constrained_dynamics, constrained_step
from vtm_dynamics.core.robot.constraints import constraints_from_extension
from vtm_dynamics.core.robot.model import RobotModel
from vtm_dynamics.core.projection.projector import (
    METHODS,
    ProjectionInputError,
    RankTolerance,
    constrained_accelerations,
    constraint_acceleration,
    constraint_inertia_matrix,
    correct_positions,
    cross_coupling,
    null_space_projector,
    project_velocity,
    unit_weighting,
)

from core_testdata import PLANAR_3R, REPO

SLIDER_CRANK = os.path.join(REPO, "urdf", "slider_crank.urdf")
L, MASS, G = 0.5, 1.0, 9.81  # the slider-crank parameters stated in urdf/slider_crank.urdf
BRANCH = np.array([1.0, -2.0, 1.0])  # q = BRANCH * theta is the branch q2 = -2 q1, q3 = q1 of the mechanism


def random_spd(rng, n):
    X = rng.normal(size=(n, n))
    return X @ X.T + n * np.eye(n)


def redundant_problem(rng, n=6, independent=3):
    """M, h, f and a constraint set with one dependent row (so the KKT matrix is singular)."""
    M = random_spd(rng, n)
    A0 = rng.normal(size=(independent, n))
    A = np.vstack([A0, A0[0] - 2.0 * A0[1]])
    d0 = rng.normal(size=independent)
    drift = np.concatenate([d0, [d0[0] - 2.0 * d0[1]]])  # consistent: the dependent row's drift is dependent too
    return M, rng.normal(size=n), rng.normal(size=n), A, drift, A0, d0


def kkt_accelerations(M, h, f, A, drift):
    n, m = M.shape[0], A.shape[0]
    K = np.block([[M, A.T], [A, np.zeros((m, m))]])
    sol = np.linalg.solve(K, np.concatenate([f - h, -drift]))
    return sol[:n], A.T @ sol[n:]


@pytest.fixture(scope="module")
def slider_crank():
    robot = RobotModel.from_urdf_file(SLIDER_CRANK)
    return robot, ConstraintSet(constraints_from_extension(robot))


# ---------------------------------------------------------------------------------------------------- projector
def test_projector_is_the_orthogonal_projector_onto_the_null_space_even_with_redundant_rows(rng):
    _, _, _, A, _, A0, _ = redundant_problem(rng)
    p = null_space_projector(A)
    assert p.rank == 3 and p.m == 4 and p.redundancy == 1 and not p.multipliers_unique
    np.testing.assert_allclose(p.P, p.P.T, atol=1e-14)
    np.testing.assert_allclose(p.P @ p.P, p.P, atol=1e-14)
    np.testing.assert_allclose(A @ p.P, 0.0, atol=1e-13)
    Z = scipy.linalg.null_space(A0)  # independent peer: scipy's null space of the independent rows
    np.testing.assert_allclose(p.P, Z @ Z.T, atol=1e-13)
    np.testing.assert_allclose(p.P, np.eye(6) - p.A_pinv @ A, atol=1e-13)  # eq. (15) == eq. (4)


def test_particle_on_a_circle_matches_the_papers_closed_form():
    """Aghili Sec. 5.4, eqs. (33), (36)-(37): P = eps_par eps_par^T and C q' = -|q'|^2 / rho eps_perp."""
    rho, th, thd = 0.7, 0.4, 1.3
    q = rho * np.array([np.cos(th), np.sin(th)])
    qd = rho * thd * np.array([-np.sin(th), np.cos(th)])
    A = (q / rho)[None, :]
    Adot_qdot = np.array([qd @ qd / rho])
    p = null_space_projector(A)
    s, c = np.sin(th), np.cos(th)
    np.testing.assert_allclose(p.P, [[s * s, -s * c], [-s * c, c * c]], atol=1e-15)
    np.testing.assert_allclose(constraint_acceleration(p, Adot_qdot), -rho * thd**2 * np.array([c, s]), atol=1e-14)


def test_rank_tolerance_drops_a_vanishing_row_and_keeps_the_pseudo_inverse_bounded():
    tol = RankTolerance(absolute=1e-6, relative=0.0)
    for scale in (1e-3, 1e-5, 1e-7, 0.0):
        A = np.array([[1.0, 1.0, 1.0], [2.0 * scale, scale, 0.0]])  # the slider-crank rows near q1 = pi/2
        p = null_space_projector(A, tolerance=tol)
        assert p.rank == (2 if np.sqrt(5) * scale > 1e-6 else 1)
        assert np.linalg.norm(p.A_pinv, 2) <= 1.0 / tol.threshold(p.singular_values[0]) + 1e-9


def test_unit_weighting_is_the_papers_diagonal_metric():
    W = unit_weighting([False, True, False], characteristic_length=0.25)
    np.testing.assert_array_equal(np.diag(W), [1.0, 16.0, 1.0])  # kappa^-2 on the prismatic coordinate, eq. (50)
    with pytest.raises(ProjectionInputError, match="characteristic_length"):
        unit_weighting([True], 0.0)


# ---------------------------------------------------------------------------------------------------- inertia
def test_constraint_inertia_matrices_have_the_stated_properties(rng):
    M, _, _, A, _, _, _ = redundant_problem(rng)
    P = null_space_projector(A).P
    Mc = constraint_inertia_matrix(M, P, "Mc").matrix
    Mcp = constraint_inertia_matrix(M, P, "Mc_prime").matrix
    Mcpp = constraint_inertia_matrix(M, P, "Mc_dprime").matrix
    for z in rng.normal(size=(20, 6)):
        assert z @ Mc @ z == pytest.approx(z @ M @ z, rel=1e-12)  # Theorem 2: M~ is skew
    np.testing.assert_allclose(Mcp, Mcp.T, atol=1e-12)  # Proposition 1
    assert np.all(np.linalg.eigvalsh(Mcp) > 0)
    assert np.linalg.cond(Mcpp) < 1e6  # Proposition 2: invertible
    assert not np.allclose(Mc, Mc.T)  # Mc is not symmetric in general (Sec. 5.1.3)


def test_three_inertia_matrices_give_the_kkt_accelerations_with_redundant_rows(rng):
    for _ in range(5):
        M, h, f, A, drift, A0, d0 = redundant_problem(rng)
        qdd_ref, F_ref = kkt_accelerations(M, h, f, A0, d0)  # peer: KKT on the independent rows only
        for method in METHODS:
            r = constrained_accelerations(M, h, f, A, drift, method=method)
            np.testing.assert_allclose(r.qdd, qdd_ref, rtol=1e-10, atol=1e-10)
            np.testing.assert_allclose(r.constraint_force, F_ref, rtol=1e-9, atol=1e-9)
        r = constrained_accelerations(M, h, f, A, drift, method="Mc_dprime", gamma=0.01)
        np.testing.assert_allclose(r.qdd, qdd_ref, rtol=1e-8, atol=1e-8)  # any gamma > 0 works


def test_constraint_force_follows_eq_32_and_multipliers_are_the_minimum_norm_ones(rng):
    M, h, f, A, drift, A0, d0 = redundant_problem(rng)
    r = constrained_accelerations(M, h, f, A, drift)
    P, Cqd = r.projector.P, r.normal_acceleration
    I = np.eye(6)
    mu = cross_coupling(M, P)
    F32 = (I - P) @ (f - h) - mu @ (P @ (f - h)) - mu @ (M @ Cqd)  # eq. (32) written out
    np.testing.assert_allclose(r.constraint_force, F32, atol=1e-10)
    np.testing.assert_allclose(P @ r.constraint_force, 0.0, atol=1e-10)  # P annihilates F
    np.testing.assert_allclose(A.T @ r.multipliers, r.constraint_force, atol=1e-10)
    assert not r.multipliers_unique
    # every other multiplier vector giving F differs by N(A^T) and is longer (Remark 4)
    n_AT = scipy.linalg.null_space(A.T)[:, 0]
    assert np.linalg.norm(r.multipliers + 0.3 * n_AT) > np.linalg.norm(r.multipliers)
    r0 = constrained_accelerations(M, h, f, A0, d0)
    assert r0.multipliers_unique
    np.testing.assert_allclose(r0.multipliers, kkt_lambda := np.linalg.lstsq(A0.T, r0.constraint_force, rcond=None)[0])
    assert kkt_lambda.shape == (3,)


def test_accelerations_do_not_depend_on_the_metric_for_full_rank_constraints(rng):
    M, h, f, _, _, A0, d0 = redundant_problem(rng)
    W = np.diag(rng.uniform(0.1, 10.0, 6))
    a = constrained_accelerations(M, h, f, A0, d0).qdd
    b = constrained_accelerations(M, h, f, A0, d0, W=W).qdd
    np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-10)


def test_bad_inputs_raise_one_line_value_errors_naming_the_field(rng):
    M = random_spd(rng, 3)
    with pytest.raises(ProjectionInputError, match="^tau:"):
        constrained_accelerations(M, np.zeros(3), np.zeros(2), np.zeros((1, 3)), np.zeros(1))
    with pytest.raises(ProjectionInputError, match="^Adot_qdot:"):
        constrained_accelerations(M, np.zeros(3), np.zeros(3), np.zeros((1, 3)), np.zeros(2))
    with pytest.raises(ProjectionInputError, match="^M:"):
        constrained_accelerations(M + np.triu(np.ones((3, 3)), 1), np.zeros(3), np.zeros(3), np.zeros((0, 3)), [])
    with pytest.raises(ProjectionInputError, match="^method:"):
        constrained_accelerations(M, np.zeros(3), np.zeros(3), np.zeros((0, 3)), [], method="Mc3")
    with pytest.raises(ProjectionInputError, match=r"^h(\[\d+\])?:"):
        constrained_accelerations(M, [np.nan, 0, 0], np.zeros(3), np.zeros((0, 3)), [])
    assert issubclass(ProjectionInputError, ValueError)


# ---------------------------------------------------------------------------------------------------- slider-crank
def paper_model(q, qd):
    """The paper's two-coordinate slider-crank, eqs. (68)-(69), with y_C = l (s1 + s12) (eq. (66))."""
    q1, q2 = q
    c1, c2, s1, s2 = np.cos(q1), np.cos(q2), np.sin(q1), np.sin(q2)
    c12, s12 = np.cos(q1 + q2), np.sin(q1 + q2)
    M = MASS * L * L * np.array([[3 + 2 * c2, 1 + c2], [1 + c2, 1.0]])
    h = np.array([
        -MASS * L * L * s2 * (qd[1] ** 2 + 2 * qd[0] * qd[1]) + MASS * L * G * (c12 + 2 * c1),
        MASS * L * L * s2 * qd[0] ** 2 + MASS * L * G * c12,
    ])
    A = L * np.array([[c1 + c12, c12]])
    Adot_qdot = np.array([-L * (s1 * qd[0] ** 2 + s12 * (qd[0] + qd[1]) ** 2)])
    return M, h, A, Adot_qdot


def test_slider_crank_urdf_reproduces_the_papers_closed_form_dynamics(slider_crank):
    """Independent check of the URDF + loop-closure rows + projection against eqs. (66)-(69) solved by KKT."""
    robot, cs = slider_crank
    for theta, rate, torque in [(0.3, 2.0, 1.5), (1.2, -4.0, -3.0), (2.4, 7.0, 0.0), (-0.9, 1.0, 5.0)]:
        q, v = BRANCH * theta, BRANCH * rate
        tau = np.array([torque, 0.0, 0.0])
        res = constrained_dynamics(robot, cs, q, v, tau)
        Mp, hp, Ap, dp = paper_model(q[:2], v[:2])
        qdd_ref, _ = kkt_accelerations(Mp, hp, tau[:2], Ap, dp)
        np.testing.assert_allclose(res.qdd[:2], qdd_ref, rtol=1e-9, atol=1e-9)
        assert res.qdd[2] == pytest.approx(-(res.qdd[0] + res.qdd[1]), abs=1e-9)  # the slider does not rotate
        assert res.rank == 2 and res.projector.m == 5  # three of the five prismatic-pair rows are redundant


def test_slider_crank_at_the_exact_singular_configuration(slider_crank):
    """At q1 = pi/2 (C on the crank pivot) the slider row vanishes: rank 1, P drops it (eq. (70)), finite q''."""
    robot, cs = slider_crank
    q, v = BRANCH * (np.pi / 2), BRANCH * 3.0
    results = [constrained_dynamics(robot, cs, q, v, method=m) for m in METHODS]
    assert results[0].rank == 1
    np.testing.assert_allclose(results[0].projector.P, np.eye(3) - np.ones((3, 3)) / 3.0, atol=1e-12)
    for r in results:
        assert np.all(np.isfinite(r.qdd)) and np.all(np.abs(r.qdd) < 1e3)
        np.testing.assert_allclose(r.qdd, results[0].qdd, atol=1e-10)


def energy(robot, q, v):
    return robot.kinetic_energy(q, v) + robot.potential_energy(q)


@pytest.mark.parametrize(
    "tolerance, method, energy_bound, residual_bound",
    [
        # default tolerance: the slider row is never dropped at this step size
        (RankTolerance(), "Mc", 1e-5, 1e-11),
        # the paper's practice of a coarse eps (eq. (70)): the row is dropped for several steps at each crossing
        (RankTolerance(absolute=2e-2), "Mc_prime", 1e-3, 1e-6),
    ],
)
def test_slider_crank_runs_through_its_singular_configurations(slider_crank, tolerance, method, energy_bound, residual_bound):
    """Unforced motion, 2.5 s at dt = 2 ms, RK4 + Newton correction (eq. (39)) + velocity projection.

    Stated results: the crank passes q1 = +-pi/2 at least 4 times; total energy (12.5 J) drifts by less than
    1e-5 J (default tolerance) or 1e-3 J (coarse tolerance); ||Phi|| stays below 1e-11 m (resp. 1e-6 m); the
    state stays on the branch q2 = -2 q1 (no blow-up, no branch switch).
    """
    robot, cs = slider_crank
    q, v = np.zeros(3), BRANCH * 10.0
    E0 = energy(robot, q, v)
    crossings, ranks, max_res, max_dE = 0, [], 0.0, 0.0
    for _ in range(1250):
        c_before = np.cos(q[0])
        step = constrained_step(robot, cs, q, v, None, 2e-3, method=method, tolerance=tolerance)
        q, v = step.q, step.v
        crossings += int(np.cos(q[0]) * c_before < 0)
        ranks.append(step.rank)
        max_res = max(max_res, step.residual_norm)
        max_dE = max(max_dE, abs(energy(robot, q, v) - E0))
    assert crossings >= 4
    assert max_dE < energy_bound
    assert max_res < residual_bound
    assert abs(q[1] + 2 * q[0]) < 1e-3 and abs(q.sum()) < 1e-6
    assert np.max(np.abs(v)) < 25.0  # |q2'| <= 2 sqrt(2 E0 / (m l^2)) = 20 rad/s on the branch
    if tolerance.absolute > 1e-3:
        assert 1 in ranks  # the coarse tolerance really exercised the rank drop


def test_three_inertia_matrices_agree_along_a_trajectory_through_the_singularity(slider_crank):
    robot, cs = slider_crank
    for theta in np.linspace(1.3, 1.85, 12):  # brackets q1 = pi/2
        q, v = BRANCH * theta, BRANCH * 4.0
        a = [constrained_dynamics(robot, cs, q, v, np.array([2.0, 0, 0]), method=m).qdd for m in METHODS]
        np.testing.assert_allclose(a[1], a[0], atol=1e-9)
        np.testing.assert_allclose(a[2], a[0], atol=1e-9)


# ---------------------------------------------------------------------------------------------------- Pinocchio peer
def closed_four_bar():
    """The planar 3R pendulum with its tip pinned to the world: a four-bar closed by a 3-row spherical pair whose
    out-of-plane row vanishes identically (redundant constraint set, rank 2 of 3)."""
    with open(PLANAR_3R, encoding="utf-8") as handle:
        text = handle.read()
    closure = (
        '<loop_closure name="ground_pin" type="spherical"><parent link="world"/><child link="tip"/>'
        '<origin xyz="1.2 0 -0.5"/></loop_closure></robot>'
    )
    robot = RobotModel.from_urdf(text.replace("</robot>", closure))
    return robot, ConstraintSet(constraints_from_extension(robot))


def test_accelerations_agree_with_pinocchio_proximal_constraint_dynamics_on_a_redundant_loop(rng):
    """Tolerance: 1e-9 (relative to max |q''|) against pinocchio.constraintDynamics with ProximalSettings."""
    robot, cs = closed_four_bar()
    model = robot.model
    data = model.createData()
    tip = model.frames[model.getFrameId("tip")]
    cm = pin.RigidConstraintModel(
        pin.ContactType.CONTACT_3D, model, tip.parentJoint, tip.placement, 0,
        pin.SE3(np.eye(3), np.array([1.2, 0.0, -0.5])), pin.ReferenceFrame.LOCAL,
    )
    cms = pin.StdVec_RigidConstraintModel()
    cms.append(cm)
    cds = pin.StdVec_RigidConstraintData()
    cds.append(cm.createData())
    pin.initConstraintDynamics(model, data, cms, cds)
    checked = 0
    for guess in ([-1.0, 1.5, 1.0], [-0.3, -1.2, 2.0], [-2.0, 2.2, -0.4]):
        corr = correct_positions(guess, lambda x: cs.residual(robot, x), lambda x: cs.residual_jacobian(robot, x),
                                 tol=1e-13, max_iterations=50)
        assert corr.converged
        q = corr.q
        A = cs.jacobian(robot, q)
        v = project_velocity(rng.normal(size=3), A)
        tau = rng.normal(scale=200.0, size=3)
        prox = pin.ProximalSettings(1e-14, 1e-6, 200)
        a_pin = np.array(pin.constraintDynamics(model, data, q, v, tau, cms, cds, prox))
        for method in METHODS:
            res = constrained_dynamics(robot, cs, q, v, tau, method=method)
            assert res.rank == 2 and res.projector.m == 3
            np.testing.assert_allclose(res.qdd, a_pin, atol=1e-9 * max(1.0, np.max(np.abs(a_pin))))
        # the constraint force closes the equations of motion with Pinocchio's accelerations too
        F_pin = tau - robot.bias_forces(q, v) - robot.mass_matrix(q) @ a_pin
        np.testing.assert_allclose(res.constraint_force, F_pin, atol=1e-7 * max(1.0, np.max(np.abs(F_pin))))
        checked += 1
    assert checked == 3


# ---------------------------------------------------------------------------------------------------- drift
def test_newton_correction_converges_quadratically_back_to_the_loop(slider_crank):
    robot, cs = slider_crank
    q_off = BRANCH * 0.7 + np.array([0.02, -0.015, 0.01])
    norms = []
    q = q_off
    for _ in range(4):
        corr = correct_positions(q, lambda x: cs.residual(robot, x), lambda x: cs.residual_jacobian(robot, x), tol=0.0,
                                 max_iterations=1)
        norms.append(corr.initial_residual_norm)
        q = corr.q
    assert norms[-1] < 1e-13 or norms[3] <= 10.0 * norms[2] ** 2
    assert norms[2] <= 10.0 * norms[1] ** 2  # Theorem 3: ||Phi_{k+1}|| <= K ||Phi_k||^2
    assert np.linalg.norm(cs.residual(robot, q)) < 1e-12


def test_mass_metric_velocity_projection_removes_the_least_kinetic_energy(rng):
    M, _, _, A, _, A0, _ = redundant_problem(rng)
    v = rng.normal(size=6)
    v_m = project_velocity(v, A, W=M)
    v_e = project_velocity(v, A)
    np.testing.assert_allclose(A @ v_m, 0.0, atol=1e-12)
    np.testing.assert_allclose(A @ v_e, 0.0, atol=1e-12)
    for _ in range(10):  # any other admissible velocity is farther from v in the kinetic-energy norm
        other = v_m + scipy.linalg.null_space(A0) @ rng.normal(scale=0.1, size=3)
        assert (other - v) @ M @ (other - v) > (v_m - v) @ M @ (v_m - v)

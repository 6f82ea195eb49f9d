"""Specification of projected inverse-dynamics control (Aghili, Sec. 7): exponential tracking with the chosen
gains (closed loop with the constrained plant simulated), minimum (weighted) norm torques checked against a
least-squares peer, passive joints, controllability, constraint force control, decoupling, and a joint lock
absorbed mid-motion by the same controller object."""

import os

import numpy as np
import pytest
import scipy.linalg

from vtm_dynamics.core.projection.simulation import ConstraintSet, constrained_dynamics, constrained_step
from vtm_dynamics.core.robot.constraints import JointLock, constraints_from_extension
from vtm_dynamics.core.robot.model import RobotModel
from vtm_dynamics.core.projection.control import (
    ProjectedInverseDynamicsController,
    controllability,
    decoupling,
    projected_inverse_dynamics,
)
from vtm_dynamics.core.projection.projector import (
    ProjectionInputError,
    constrained_accelerations,
    null_space_projector,
    project_velocity,
    unit_weighting,
)

from core_testdata import REPO

SLIDER_CRANK = os.path.join(REPO, "urdf", "slider_crank.urdf")
BRANCH = np.array([1.0, -2.0, 1.0])  # q = BRANCH * theta: the slider-crank branch q2 = -2 q1, q3 = q1
OMEGA = 5.0  # closed-loop natural frequency [rad/s]; gains K_P = OMEGA^2, K_D = 2 OMEGA (critically damped)


def critically_damped(e0, ed0, t, w=OMEGA):
    """Solution of e'' + 2 w e' + w^2 e = 0."""
    return (e0 + (ed0 + w * e0) * t) * np.exp(-w * t)


@pytest.fixture(scope="module")
def slider_crank():
    robot = RobotModel.from_urdf_file(SLIDER_CRANK)
    return robot, ConstraintSet(constraints_from_extension(robot))


def random_problem(rng, n=6, m=3, redundant=True):
    X = rng.normal(size=(n, n))
    M = X @ X.T + n * np.eye(n)
    A = rng.normal(size=(m, n))
    drift = rng.normal(size=m)
    if redundant:
        A = np.vstack([A, A[0] + A[1]])
        drift = np.concatenate([drift, [drift[0] + drift[1]]])
    return M, rng.normal(size=n), A, drift


# ---------------------------------------------------------------------------------------------------- tracking
@pytest.mark.parametrize("passive, amplitude, rate", [((), 0.0, 6.0), (("rod_joint", "slider_joint"), 0.8, 0.0)])
def test_tracking_error_follows_the_chosen_error_dynamics(slider_crank, passive, amplitude, rate):
    """Continuous-time closed loop (controller evaluated at every RK4 stage), 1 s.

    Case 1: all joints actuated, the crank turns at 6 rad/s through q1 = pi/2 (singular configuration).
    Case 2: only the crank is actuated (eqs. (55)-(62)), oscillating desired motion away from the singularity.
    The desired motion lies on the branch q = BRANCH theta, so the joint error is BRANCH e_theta and Theorem 4
    predicts e_theta'' + K_D e_theta' + K_P e_theta = 0 exactly: the simulated error must follow the analytic
    solution (to 1e-7 rad) and passive joints must receive exactly zero torque.
    """
    robot, cs = slider_crank
    ctl = ProjectedInverseDynamicsController(robot, cs, kp=OMEGA**2, kd=2 * OMEGA, passive_joints=passive)

    def desired(t):
        th = amplitude * np.sin(4.0 * t) + rate * t
        thd = 4.0 * amplitude * np.cos(4.0 * t) + rate
        thdd = -16.0 * amplitude * np.sin(4.0 * t)
        return BRANCH * th, BRANCH * thd, BRANCH * thdd

    q, v = BRANCH * 0.3, np.zeros(3)
    e0, ed0 = -0.3, desired(0.0)[1][0]
    dt, worst, crossed = 2e-3, 0.0, False
    for k in range(500):
        t = k * dt
        out = ctl.update(q, v, *desired(t))
        if passive:
            assert out.tau[1] == 0.0 and out.tau[2] == 0.0
            assert out.controllability.controllable and out.controllability.passive_residual < 1e-9
        step = constrained_step(robot, cs, q, v, lambda qq, vv, s: ctl.update(qq, vv, *desired(t + s)).tau, dt)
        crossed |= np.cos(q[0]) * np.cos(step.q[0]) < 0
        q, v = step.q, step.v
        worst = max(worst, abs((desired(t + dt)[0] - q)[0] - critically_damped(e0, ed0, t + dt)))
    assert worst < 1e-7
    assert crossed == (rate > 0)


def test_sampled_controller_converges_exponentially(slider_crank):
    """The same law sampled at 500 Hz with zero-order hold: the error decays like exp(-OMEGA t) up to the
    sampling error (the error after 2 s is below 1e-3 of the initial error and shrinks from 1 s to 2 s by
    at least exp(-OMEGA * 1 s) * 20)."""
    robot, cs = slider_crank
    ctl = ProjectedInverseDynamicsController(robot, cs, kp=OMEGA**2, kd=2 * OMEGA, passive_joints=["rod_joint"])
    q, v = BRANCH * 0.4, np.zeros(3)
    errors = []
    for k in range(1000):
        t = k * 2e-3
        qd, vd, ad = BRANCH * 0.5 * np.sin(2 * t), BRANCH * np.cos(2 * t), -BRANCH * 2 * np.sin(2 * t)
        errors.append(abs((qd - q)[0]))
        step = constrained_step(robot, cs, q, v, ctl.update(q, v, qd, vd, ad).tau, 2e-3)
        q, v = step.q, step.v
    assert errors[-1] < 1e-3 * errors[0]
    assert max(errors[750:]) < 20 * np.exp(-OMEGA * 1.0) * max(errors[250:500])


# ---------------------------------------------------------------------------------------------------- minimum norm
def test_commanded_torque_has_minimum_norm_among_all_torques_producing_the_same_motion(rng):
    for _ in range(5):
        M, h, A, drift = random_problem(rng)
        n = M.shape[0]
        e, ed, add = rng.normal(size=n), rng.normal(size=n), rng.normal(size=n)
        out = projected_inverse_dynamics(M, h, A, drift, e, ed, add, kp=25.0, kd=10.0)
        # the plant under tau moves with the commanded accelerations
        np.testing.assert_allclose(constrained_accelerations(M, h, out.tau, A, drift).qdd, out.qdd, atol=1e-9)
        # peer: least-squares over the whole family M qdd + h + A^T lambda of torques giving the same motion
        base = M @ out.qdd + h
        lam = np.linalg.lstsq(A.T, -base, rcond=None)[0]
        np.testing.assert_allclose(out.tau, base + A.T @ lam, atol=1e-9)
        P = null_space_projector(A).P
        for z in rng.normal(size=(10, n)):
            other = out.tau + (np.eye(n) - P) @ z
            np.testing.assert_allclose(constrained_accelerations(M, h, other, A, drift).qdd, out.qdd, atol=1e-9)
            assert np.linalg.norm(other) > np.linalg.norm(out.tau)


def test_weighted_norm_is_minimal_and_invariant_under_a_change_of_length_unit(rng):
    """Sec. 7.2: with W = unit_weighting the minimized norm is f^T W^-1 f and the torque does not depend on
    whether prismatic coordinates are in metres or millimetres; the unweighted minimum-norm torque does."""
    prismatic = np.array([False, True, False, True, False])
    M, h, A, drift = random_problem(rng, n=5, m=2, redundant=False)
    e, ed, add = rng.normal(size=5), rng.normal(size=5), rng.normal(size=5)
    W = unit_weighting(prismatic, characteristic_length=0.3)
    out = projected_inverse_dynamics(M, h, A, drift, e, ed, add, kp=4.0, kd=4.0, W=W)
    base = M @ out.qdd + h
    Wi_half = np.diag(1 / np.sqrt(np.diag(W)))
    lam = np.linalg.lstsq(Wi_half @ A.T, -Wi_half @ base, rcond=None)[0]  # peer: min ||W^-1/2 (base + A^T lam)||
    np.testing.assert_allclose(out.tau, base + A.T @ lam, atol=1e-9)
    # the same physical problem with prismatic coordinates in millimetres: x_mm = T x
    T = np.diag(np.where(prismatic, 1000.0, 1.0))
    Ti = np.linalg.inv(T)
    W_mm = unit_weighting(prismatic, characteristic_length=300.0)
    out_mm = projected_inverse_dynamics(Ti @ M @ Ti, Ti @ h, A @ Ti, drift, T @ e, T @ ed, T @ add,
                                        kp=4.0, kd=4.0, W=W_mm)
    np.testing.assert_allclose(T @ out_mm.tau, out.tau, rtol=1e-7, atol=1e-9)  # forces transform as f_mm = T^-1 f
    plain = projected_inverse_dynamics(M, h, A, drift, e, ed, add, kp=4.0, kd=4.0)
    plain_mm = projected_inverse_dynamics(Ti @ M @ Ti, Ti @ h, A @ Ti, drift, T @ e, T @ ed, T @ add, kp=4.0, kd=4.0)
    assert np.linalg.norm(T @ plain_mm.tau - plain.tau) > 1e-3 * np.linalg.norm(plain.tau)


# ---------------------------------------------------------------------------------------------------- passive joints
def test_passive_joint_torque_is_the_minimum_norm_torque_with_zero_passive_entries(rng):
    M, h, A, drift = random_problem(rng, n=6, m=3)
    passive = [2, 5]
    e, ed, add = rng.normal(size=6), rng.normal(size=6), rng.normal(size=6)
    out = projected_inverse_dynamics(M, h, A, drift, e, ed, add, kp=9.0, kd=6.0, passive=passive)
    assert out.controllability.controllable
    assert np.all(out.tau[passive] == 0.0)
    np.testing.assert_allclose(constrained_accelerations(M, h, out.tau, A, drift).qdd, out.qdd, atol=1e-9)
    # peer: minimize ||base + A^T lam|| subject to (base + A^T lam)[passive] = 0, by null-space parametrization
    base = M @ out.qdd + h
    Ap = A.T[passive]
    lam0 = np.linalg.lstsq(Ap, -base[passive], rcond=None)[0]
    Z = scipy.linalg.null_space(Ap)
    t = np.linalg.lstsq(A.T @ Z, -(base + A.T @ lam0), rcond=None)[0]
    np.testing.assert_allclose(out.tau, base + A.T @ (lam0 + Z @ t), atol=1e-8)


def test_controllability_condition_64_matches_the_range_condition_58(rng):
    """(64) N cap B^perp = {0} checked against (58) R((I-B)P) in R((I-B)(I-P)) by matrix ranks."""
    verdicts = set()
    for trial in range(40):
        n, m = 5, int(rng.integers(1, 4))
        A = rng.normal(size=(m, n))
        passive = sorted(rng.choice(n, size=int(rng.integers(1, 4)), replace=False).tolist())
        proj = null_space_projector(A)
        ok, _ = controllability(proj, passive)
        IB = np.diag([1.0 if i in passive else 0.0 for i in range(n)])
        R1, R2 = IB @ proj.P, IB @ (np.eye(n) - proj.P)
        ok58 = np.linalg.matrix_rank(np.hstack([R2, R1]), 1e-9) == np.linalg.matrix_rank(R2, 1e-9)
        assert ok == ok58
        verdicts.add(ok)
    assert verdicts == {True, False}


def test_slider_crank_with_only_the_crank_actuated_loses_controllability_at_the_singularity(slider_crank):
    """Sec. 7.4.2: the extra degree of freedom at q1 = pi/2 moves passive joints only."""
    robot, cs = slider_crank
    ctl = ProjectedInverseDynamicsController(robot, cs, passive_joints=["rod_joint", "slider_joint"])
    z = np.zeros(3)
    regular = ctl.update(BRANCH * 0.5, z, BRANCH * 0.5, z, z)
    singular = ctl.update(BRANCH * np.pi / 2, z, BRANCH * np.pi / 2, z, z)
    assert regular.controllability.controllable and regular.controllability.margin > 0.4
    assert not singular.controllability.controllable and singular.dof == 2


# ---------------------------------------------------------------------------------------------------- force control
def test_constraint_force_feedforward_sets_the_force_without_changing_the_motion(slider_crank, rng):
    """Eqs. (51)-(52) with G_F = G_I = 0: the plant's constraint force equals F_d = A^T lambda_d, and the
    accelerations equal those of the pure motion controller (independent force and motion channels)."""
    robot, cs = slider_crank
    q, v = BRANCH * 0.9, BRANCH * 1.5
    A = cs.jacobian(robot, q)
    ctl = ProjectedInverseDynamicsController(robot, cs, kp=OMEGA**2, kd=2 * OMEGA)
    args = (q, v, BRANCH * 1.0, BRANCH * 1.2, BRANCH * 0.3)
    motion = ctl.update(*args)
    for _ in range(3):
        F_d = A.T @ rng.normal(scale=20.0, size=A.shape[0])
        out = ctl.update(*args, force_desired=F_d)
        plant = constrained_dynamics(robot, cs, q, v, out.tau)
        np.testing.assert_allclose(plant.constraint_force, F_d, atol=1e-9 * max(1.0, np.abs(F_d).max()))
        np.testing.assert_allclose(plant.qdd, motion.qdd, atol=1e-9)


def test_constraint_force_pi_loop_converges_with_measured_forces(slider_crank):
    """The force loop fed with the plant's constraint force of the previous cycle drives e_F to zero."""
    robot, cs = slider_crank
    ctl = ProjectedInverseDynamicsController(robot, cs, kp=OMEGA**2, kd=2 * OMEGA, force_gain=0.5,
                                             force_integral_gain=20.0)
    q, v = BRANCH * 0.6, np.zeros(3)
    F_meas = constrained_dynamics(robot, cs, q, v).constraint_force
    errs = []
    for k in range(300):
        A = cs.jacobian(robot, q)
        lam_d = np.array([0.0, 5.0, 0.0, 1.0, 0.0])  # N (slider normal) and N m (slider moment)
        F_d = A.T @ lam_d
        out = ctl.update(q, v, BRANCH * 0.6, np.zeros(3), np.zeros(3), force_desired=F_d, force_measured=F_meas,
                         dt=2e-3)
        step = constrained_step(robot, cs, q, v, out.tau, 2e-3)
        F_meas = constrained_dynamics(robot, cs, step.q, step.v, out.tau).constraint_force
        errs.append(np.linalg.norm(F_d - F_meas))
        q, v = step.q, step.v
    assert errs[-1] < 1e-3 * errs[0]


# ---------------------------------------------------------------------------------------------------- decoupling
def test_proposition_3_decoupling(rng):
    """A joint lock on a system whose inertia does not couple the locked joint (block-diagonal M) is decoupled:
    the constraint force does not react to the potent force. A generic M is coupled."""
    M = np.diag([2.0, 3.0, 1.5])
    M[0, 1] = M[1, 0] = 0.4
    A = np.array([[0.0, 0.0, 1.0]])
    P = null_space_projector(A).P
    rep = decoupling(M, P)
    assert rep.decoupled and rep.invariance_defect < 1e-15
    h = rng.normal(size=3)
    f = rng.normal(size=3)
    f_par_kick = P @ rng.normal(size=3)
    F1 = constrained_accelerations(M, h, f, A, [0.0]).constraint_force
    F2 = constrained_accelerations(M, h, f + f_par_kick, A, [0.0]).constraint_force
    np.testing.assert_allclose(F1, F2, atol=1e-12)
    Mc = M.copy()
    Mc[1, 2] = Mc[2, 1] = 0.3
    rep2 = decoupling(Mc, P)
    assert not rep2.decoupled and rep2.coupling > 0.05
    F3 = constrained_accelerations(Mc, h, f + f_par_kick, A, [0.0]).constraint_force
    F4 = constrained_accelerations(Mc, h, f, A, [0.0]).constraint_force
    assert np.linalg.norm(F3 - F4) > 1e-3


# ---------------------------------------------------------------------------------------------------- topology change
def test_joint_lock_mid_motion_is_absorbed_without_restarting_the_controller(ur5):
    """UR5 tracking a joint-space sinusoid; at t = 0.3 s the elbow brake locks. The plant takes the lock (an
    inelastic velocity jump, M-metric projection) and the same controller object gets the lock row. Afterwards:
    the locked joint is commanded zero torque (the brake holds it), the other joints' errors follow the chosen
    error dynamics from their post-lock state, and nothing was rebuilt (same object, same force integral)."""
    robot = ur5
    n = robot.nv
    ctl = ProjectedInverseDynamicsController(robot, (), kp=OMEGA**2, kd=2 * OMEGA)
    controller_id = id(ctl)
    q0 = robot.neutral() + np.array([0.2, -1.0, 1.2, -0.5, 0.4, 0.1])
    amp = np.array([0.3, 0.2, 0.4, 0.3, 0.2, 0.3])

    def desired(t):
        return q0 + amp * np.sin(3 * t), 3 * amp * np.cos(3 * t), -9 * amp * np.sin(3 * t)

    plant = ConstraintSet()
    q, v = q0 + 0.05, np.zeros(n)
    dt, t_lock, elbow = 2e-3, 0.3, robot.v_indices(["elbow_joint"])[0]
    free = [i for i in range(n) if i != elbow]
    e_lock = ed_lock = None
    worst = 0.0
    for k in range(300):
        t = k * dt
        if e_lock is None and t >= t_lock - 1e-12:
            plant = plant.with_constraint(JointLock("elbow_joint").bind(robot, q))
            v = project_velocity(v, plant.jacobian(robot, q), W=robot.mass_matrix(q))
            ctl.lock_joints("elbow_joint", q)
            qd, vd, _ = desired(t)
            e_lock, ed_lock, t0 = (qd - q)[free], (vd - v)[free], t
        if e_lock is not None:
            out = ctl.update(q, v, *desired(t))
            assert abs(out.tau[elbow]) < 1e-9 and out.dof == n - 1
            assert abs(out.constraint_force[elbow]) > 1.0  # the brake carries the elbow load
            analytic = critically_damped(e_lock, ed_lock, t - t0)
            worst = max(worst, np.max(np.abs((desired(t)[0] - q)[free] - analytic)))
        step = constrained_step(robot, plant, q, v, lambda qq, vv, s: ctl.update(qq, vv, *desired(t + s)).tau, dt)
        q, v = step.q, step.v
    assert worst < 1e-7
    assert id(ctl) == controller_id and ctl.constraints.names == ("lock(elbow_joint)",)


def test_controller_rejects_bad_inputs_with_one_line_errors(slider_crank):
    robot, cs = slider_crank
    with pytest.raises(ProjectionInputError, match="^kp:"):
        ProjectedInverseDynamicsController(robot, cs, kp=[1.0, 2.0])
    M, h, A, drift = np.eye(3), np.zeros(3), np.zeros((1, 3)), np.zeros(1)
    with pytest.raises(ProjectionInputError, match="^passive:"):
        projected_inverse_dynamics(M, h, A, drift, np.zeros(3), np.zeros(3), np.zeros(3), 1.0, 1.0, passive=[3])

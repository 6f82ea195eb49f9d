"""Specification of the momentum-consistent transition at constraint activation (Müller 2026, eqs. (22)-(37))."""

import numpy as np
from scenarios import Q0_3R
import pinocchio as pin
import pytest

from test.core.robot.test_constraints import FOUR_BAR
from vtm_dynamics.core.robot.constraints import JointLock, LoopClosure, constraints_from_extension
from vtm_dynamics.core.robot.model import RobotModel
from vtm_dynamics.core.switching.transitions import (
    SwitchingError,
    kkt_transition,
    orthogonal_complement,
    solve_activation,
    weighted_nullspace_projector,
)
from vtm_dynamics.core.switching.topology import Topology

PHYSICAL = ("kkt", "redundant", "minimal")


def _moving_3r_state(rng):
    return np.array([0.4, -0.3, 0.9]), rng.normal(scale=2.0, size=3)


def _after_lock(robot, q, v, joints):
    res, topo = solve_activation(robot, q, v, None, [JointLock(joints)], method="kkt")
    return res.v_plus, topo


def test_paper_projector_and_complement_for_the_3r_lock(planar_3r):
    # Müller 2026, Sec. 6: N_{J1,M} = [[1, -mb12/mb22, 0], [0, 0, 0], [0, -mb32/mb22, 1]], F1 = [[1,0],[0,0],[0,1]]
    q = Q0_3R
    M = planar_3r.mass_matrix(q)
    Mi = np.linalg.inv(M)
    expected = np.array([[1, -Mi[0, 1] / Mi[1, 1], 0], [0, 0, 0], [0, -Mi[2, 1] / Mi[1, 1], 1]])
    J1 = np.array([[0.0, 1.0, 0.0]])
    assert np.allclose(weighted_nullspace_projector(M, J1), expected, atol=1e-13)
    F1, s_idx = orthogonal_complement(J1)
    assert np.array_equal(F1, [[1, 0], [0, 0], [0, 1]]) and list(s_idx) == [0, 2]


@pytest.mark.parametrize("seed", range(5))
def test_eqs_22_32_37_agree_on_the_second_lock_of_the_3r(planar_3r, seed):
    rng = np.random.default_rng(seed)
    q, v0 = _moving_3r_state(rng)
    v_minus, topo = _after_lock(planar_3r, q, v0, "joint2")
    results = {m: solve_activation(planar_3r, q, v_minus, topo, [JointLock("joint3")], method=m)[0] for m in PHYSICAL}
    ref = results["kkt"]
    scale = np.abs(v_minus).max()
    for m in ("redundant", "minimal"):
        assert np.abs(results[m].v_plus - ref.v_plus).max() <= 1e-9 * scale, m
        # Lambda_2 of the activated rows is the same impulse in all three formulations
        assert np.allclose(results[m].impulses, ref.impulses, rtol=1e-9, atol=1e-9 * np.abs(ref.impulses).max())
        assert results[m].method == m and results[m].physical
    assert ref.persistent_impulses.shape == (1,) and ref.impulses.shape == (1,)
    # both locked rates are zero and the momentum of the only free joint (joint 1) is unchanged (F^T M dv = 0)
    assert np.abs(ref.v_plus[1:]).max() <= 1e-12 * scale
    M = planar_3r.mass_matrix(q)
    p_before, p_after = (M @ v_minus)[0], (M @ ref.v_plus)[0]
    assert abs(p_after - p_before) <= 1e-9 * abs(p_before)


def test_kkt_stacks_the_whole_active_set_not_only_the_new_rows(planar_3r, rng):
    q, v0 = _moving_3r_state(rng)
    v_minus, topo = _after_lock(planar_3r, q, v0, "joint2")
    assert v_minus[1] == 0.0
    res, _ = solve_activation(planar_3r, q, v_minus, topo, [JointLock("joint3")], method="kkt")
    assert res.v_plus[1] == pytest.approx(0.0, abs=1e-13)  # the earlier lock still holds
    assert res.rows == 2 and res.rank == 2
    # The classic mistake -- eq. (22) with J_+ = J_2 only -- unlocks joint 2 again; this is what the check catches.
    M = planar_3r.mass_matrix(q)
    wrong = kkt_transition(M, None, np.array([[0.0, 0.0, 1.0]]), v_minus)
    assert abs(wrong.v_plus[1]) > 1e-3 * np.abs(v_minus).max()


@pytest.mark.parametrize("method", PHYSICAL)
def test_successive_activation_at_one_instant_equals_simultaneous_activation(ur5, rng, method):
    q = ur5.random_configuration(rng)
    v = rng.normal(size=ur5.nv)
    names = ur5.joint_names
    first, topo = solve_activation(ur5, q, v, None, [JointLock(names[1])], method=method)
    second, topo2 = solve_activation(ur5, q, first.v_plus, topo, [JointLock([names[2], names[4]])], method=method)
    both, topo_b = solve_activation(ur5, q, v, None, [JointLock(names[1]), JointLock([names[2], names[4]])], method=method)
    assert np.allclose(second.v_plus, both.v_plus, rtol=0, atol=1e-10 * np.abs(v).max())
    assert topo2.locked_joints == topo_b.locked_joints == (names[1], names[2], names[4])


@pytest.mark.parametrize("method", PHYSICAL)
def test_momentum_consistent_jump_dissipates_energy_and_naive_breaks_momentum(ur5, rng, method):
    q = ur5.random_configuration(rng)
    v = rng.normal(size=ur5.nv)
    lock = JointLock(ur5.joint_names[:3])
    res, topo = solve_activation(ur5, q, v, None, [lock], method=method)
    naive, _ = solve_activation(ur5, q, v, None, [lock], method="naive")
    M = ur5.mass_matrix(q)
    free = topo.free_v_indices(ur5)
    p0 = (M @ v)[free]
    assert np.abs((M @ res.v_plus)[free] - p0).max() <= 1e-9 * np.abs(p0).max()
    assert res.energy_loss >= -1e-12 and res.constraint_violation <= 1e-12
    assert not naive.physical and naive.impulses.size == 0
    assert np.array_equal(naive.v_plus[free], v[free]) and np.all(naive.v_plus[:3] == 0)
    assert np.abs((M @ naive.v_plus)[free] - p0).max() > 1e-3 * np.abs(p0).max()


@pytest.mark.parametrize("method", PHYSICAL + ("naive",))
def test_redundant_activation_is_detected_and_changes_nothing(planar_3r, rng, method):
    q, v0 = _moving_3r_state(rng)
    v_minus, topo = _after_lock(planar_3r, q, v0, "joint2")
    again = JointLock("joint2", name="second brake on joint 2")
    res, topo2 = solve_activation(planar_3r, q, v_minus, topo, [again], method=method)
    assert res.redundant and res.implied and (res.rank, res.rows) == (1, 2)
    assert np.allclose(res.v_plus, v_minus, atol=1e-12 * np.abs(v_minus).max())
    assert len(topo2) == 2


@pytest.mark.parametrize("method", PHYSICAL)
def test_loop_closure_with_redundant_rows(method):
    robot = RobotModel.from_urdf(FOUR_BAR)
    loop = constraints_from_extension(robot)[0]
    v = np.array([0.7, -0.2, 1.3])
    q_regular = np.array([np.pi / 2, -np.pi / 2, np.pi / 2])  # parallelogram: 5 rows, rank 2
    assert np.allclose(loop.residual(robot, q_regular), 0, atol=1e-12)
    res, _ = solve_activation(robot, q_regular, v, None, [loop], method=method)
    ref, _ = solve_activation(robot, q_regular, v, None, [loop], method="kkt")
    assert res.redundant and (res.rows, res.rank) == (5, 2)
    assert res.constraint_violation <= 1e-12
    assert np.allclose(res.v_plus, ref.v_plus, atol=1e-10)
    assert np.allclose(res.v_plus / res.v_plus[0], [1, -1, 1], atol=1e-10)  # the parallelogram motion remains
    assert res.energy_loss >= -1e-12


def test_singular_closure_configuration_is_reported_not_crashed():
    robot = RobotModel.from_urdf(FOUR_BAR)
    loop = constraints_from_extension(robot)[0]
    # Degenerate placement: crank folded back (pi), coupler straight on, rocker at pi: pins at x = 1 and x = 1.
    q = np.array([np.pi, np.pi, np.pi])
    assert np.allclose(loop.residual(robot, q), 0, atol=1e-12)
    for method in PHYSICAL:
        res, _ = solve_activation(robot, q, np.array([1.0, 0.5, -0.3]), None, [loop], method=method)
        assert res.redundant and res.rank < 2
        assert np.all(np.isfinite(res.v_plus)) and res.constraint_violation <= 1e-10
        assert res.energy_loss >= -1e-12


def _pinocchio_lock_jacobian(model, data, q, joint_names):
    """Rows of welds between each locked joint's body and its parent body, from Pinocchio's own constraint
    models (CONTACT_6D, LOCAL). The tree already satisfies five of each weld's six rows, so the stack has rank
    len(joints); it is reduced to an equivalent full-row-rank basis (SVD) for Pinocchio's impulse solver."""
    pin.forwardKinematics(model, data, q)
    rows = []
    for name in joint_names:
        jid = model.getJointId(name)
        parent = model.parents[jid]
        pMc = data.oMi[parent].actInv(data.oMi[jid])
        cm = pin.RigidConstraintModel(pin.ContactType.CONTACT_6D, model, jid, pin.SE3.Identity(), parent, pMc,
                                      pin.ReferenceFrame.LOCAL)
        cd = cm.createData()
        pin.computeJointJacobians(model, data, q)
        cm.calc(model, data, cd)  # placements of the two constraint frames
        Jc = pin.getConstraintJacobian(model, data, cm, cd)
        rows.append(np.asarray(Jc))
    U, S, Vt = np.linalg.svd(np.vstack(rows))
    r = int(np.sum(S > 1e-10 * S[0]))
    assert r == len(joint_names)
    return S[:r, None] * Vt[:r]


@pytest.mark.parametrize("seed", range(8))
def test_jump_agrees_with_pinocchio_impulse_dynamics_on_a_ur5(ur5, seed):
    rng = np.random.default_rng(100 + seed)
    q = ur5.random_configuration(rng)
    v = rng.normal(scale=1.5, size=ur5.nv)
    names = list(ur5.joint_names)
    rng.shuffle(names)
    locked = names[: rng.integers(1, 5)]
    res, topo = solve_activation(ur5, q, v, None, [JointLock(locked)], method="redundant")
    model = ur5.model.copy()
    data = model.createData()
    Jc = _pinocchio_lock_jacobian(model, data, q, locked)
    v_pin = pin.impulseDynamics(model, data, q, v, Jc, 0.0, 0.0)
    assert np.abs(np.asarray(v_pin) - res.v_plus).max() <= 1e-9 * np.abs(v).max()
    # Pinocchio: M dv = Jc^T impulse; Müller (21): M dv + J^T Lambda = 0, and Jc rows are J rows up to sign
    J = topo.jacobian(ur5, q)
    assert np.allclose(J.T @ res.impulses, -Jc.T @ np.asarray(data.impulse_c), atol=1e-9 * np.abs(res.impulses).max())


def test_bad_inputs_are_named(planar_3r):
    with pytest.raises(SwitchingError, match="method"):
        solve_activation(planar_3r, np.zeros(3), np.zeros(3), None, [JointLock("joint1")], method="magic")
    with pytest.raises(SwitchingError, match="J2"):
        kkt_transition(np.eye(3), None, np.ones((1, 2)), np.zeros(3))
    assert Topology.of(None).dim(planar_3r) == 0


@pytest.mark.parametrize("kind, contact", [("spherical", "CONTACT_3D"), ("fixed", "CONTACT_6D")])
def test_loop_closure_jump_agrees_with_pinocchio_contact_constraints(ur5, rng, kind, contact):
    """A UR5 whose wrist is suddenly pinned (spherical) or welded (fixed) to the world where it is: our rows built
    from the pair frames versus Pinocchio's own rigid-constraint Jacobian fed to pinocchio.impulseDynamics."""
    from vtm_dynamics.core.robot.urdf_extension import LoopClosureSpec, Pose

    q = ur5.random_configuration(rng)
    v = rng.normal(size=ur5.nv)
    point = Pose(xyz=(0.02, -0.03, 0.05), rpy=(0.2, 0.1, -0.3))
    oMf = ur5.frame_placement(q, "wrist_3_link")
    pose = pin.SE3(oMf.rotation, oMf.translation) * pin.SE3(point.rotation(), np.array(point.xyz))
    rpy = pin.rpy.matrixToRpy(pose.rotation)
    world_pose = Pose(xyz=tuple(pose.translation), rpy=tuple(rpy))
    spec = LoopClosureSpec("pin", kind, "world", "wrist_3_link", world_pose, point, (0.0, 0.0, 1.0))
    closure = LoopClosure(spec)
    assert np.abs(closure.residual(ur5, q)).max() < 1e-12
    res, _ = solve_activation(ur5, q, v, None, [closure], method="kkt")

    model = ur5.model.copy()
    data = model.createData()
    frame = model.frames[model.getFrameId("wrist_3_link")]
    jMc = frame.placement * pin.SE3(point.rotation(), np.array(point.xyz))
    cm = pin.RigidConstraintModel(getattr(pin.ContactType, contact), model, frame.parentJoint, jMc, 0, pose,
                                  pin.ReferenceFrame.LOCAL)
    cd = cm.createData()
    pin.computeJointJacobians(model, data, q)
    cm.calc(model, data, cd)  # placements of the two constraint frames
    Jc = np.asarray(pin.getConstraintJacobian(model, data, cm, cd))
    if kind == "spherical":  # Pinocchio's 3D rows are the point velocity in the contact frame: ours rotated
        assert np.allclose(pose.rotation @ Jc, closure.jacobian(ur5, q), atol=1e-12)
    v_pin = pin.impulseDynamics(model, data, q, v, Jc, 0.0, 0.0)
    assert np.abs(np.asarray(v_pin) - res.v_plus).max() <= 1e-9 * np.abs(v).max()

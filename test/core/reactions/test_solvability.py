"""Specification of the reaction solvability analysis (Wojtyra & Frączek 2013, Sect. 3.2-3.3, 4.2, 4.4)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pinocchio as pin
import pytest
import scipy.linalg

from vtm_dynamics.core.reactions.absolute_coordinates import (
    absolute_dynamics,
    allowed_twists,
    assemble_loops,
    constraint_matrix,
    load_absolute_model,
)
from vtm_dynamics.core.reactions.solvability import analyze_constraint_matrix, analyze_solvability, unique_reactions
from vtm_dynamics.core.robot.urdf_extension import read_urdf_file

URDF = Path(__file__).resolve().parents[3] / "urdf"
MOBILE = read_urdf_file(str(URDF / "mobile_robot_knife_edges.urdf"))  # the core takes text only

# Wojtyra & Frączek 2013, Sect. 4.2: eq. (35) and the sentence after the B_X matrices (p. 166):
# "Matrices corresponding to knife-edge kinematic pairs W1-W4 as well as matrices corresponding to revolute
#  joints B and C have nonzero elements ... Matrices corresponding to revolute joints A, D, E, F, and G, to
#  translational joint H, and to the driving constraint equation consist of zeros only" (and B_edW5 = 0).
PAPER_M, PAPER_H, PAPER_N = 17, 5, 21
PAPER_RANK_PHI, PAPER_RANK_PSI, PAPER_RANK_C, PAPER_P = 17, 4, 20, 2
PAPER_UNSOLVABLE = {"B", "C", "W1", "W2", "W3", "W4"}
PAPER_SOLVABLE = {"A", "D", "E", "F", "G", "H", "drive_H", "W5"}


@pytest.fixture(scope="module")
def mobile_report():
    return analyze_solvability(MOBILE, planar=True)


def test_mobile_robot_ranks_and_redundancy_are_the_papers(mobile_report):
    r = mobile_report
    assert (r.m_holonomic, r.h_nonholonomic, r.n_coordinates) == (PAPER_M, PAPER_H, PAPER_N)
    assert (r.rank_holonomic, r.rank_nonholonomic, r.rank, r.redundancy) == (
        PAPER_RANK_PHI, PAPER_RANK_PSI, PAPER_RANK_C, PAPER_P)


def test_mobile_robot_solvability_table_is_the_papers(mobile_report):
    assert {p.name for p in mobile_report.pairs} == PAPER_UNSOLVABLE | PAPER_SOLVABLE
    assert {p.name for p in mobile_report.pairs if not p.solvable} == PAPER_UNSOLVABLE
    assert {p.name for p in mobile_report.pairs if p.solvable} == PAPER_SOLVABLE
    for p in mobile_report.pairs:  # the QR test (eq. (27)) and the direct-sum rank criterion agree, pair by pair
        assert p.criteria_agree, p.name
        assert p.qr_solvable == p.solvable
        assert (p.rank_criterion_dimension == 0) == p.solvable
        assert p.qr_residual < 1e-12 if p.solvable else p.qr_residual > 1e-3


def test_mobile_robot_verdicts_hold_in_another_configuration():
    """Sect. 4.2: 'The same results can be obtained for any other nonsingular configuration'."""
    model = load_absolute_model(MOBILE, planar=True)
    q = pin.neutral(model.pin_model)
    jH = model.pin_model.joints[model.pin_model.getJointId("H")]
    q[jH.idx_q] = 0.01  # displace the steering slider: both front wheels turn
    q = assemble_loops(model, q)
    jB = model.pin_model.joints[model.pin_model.getJointId("B")]
    assert abs(q[jB.idx_q]) > 0.05
    report = analyze_constraint_matrix(constraint_matrix(model, q))
    assert (report.rank, report.redundancy) == (PAPER_RANK_C, PAPER_P)
    assert set(report.unsolvable) == PAPER_UNSOLVABLE


def test_determined_directions_of_unsolvable_pairs(mobile_report):
    """Beyond the paper: pins B and C carry a unique force along the platform (Fx) but not across it (Fy);
    the four redundant knife edges have no unique component at all."""
    for name in ("B", "C"):
        p = mobile_report.pair(name)
        assert p.determined_labels == ("Fx",)
        assert p.indeterminate_directions == ((0.0, 1.0, 0.0, 0.0, 0.0, 0.0),)
    for name in ("W1", "W2", "W3", "W4"):
        assert mobile_report.pair(name).determined_directions == ()


def test_release_set_removes_exactly_the_redundancy(mobile_report):
    model = load_absolute_model(MOBILE, planar=True)
    C = constraint_matrix(model)
    assert len(mobile_report.release_set) == PAPER_P
    drop = [p.rows[p.labels.index(label)] for name, label in mobile_report.release_set
            for p in C.pairs if p.name == name]
    kept = np.delete(C.matrix, drop, axis=0)
    assert np.linalg.matrix_rank(kept) == np.linalg.matrix_rank(C.matrix) == kept.shape[0]
    released_pairs = {name for name, _ in mobile_report.release_set}
    assert released_pairs <= PAPER_UNSOLVABLE  # only rows of unsolvable pairs can go without losing rank
    for p in mobile_report.pairs:
        assert bool(p.releasable_rows) == (not p.solvable), p.name


def _eliminated_reactions(model, C, M, rhs, drop):
    """The paper's redundant-constraint elimination (Sect. 3.1, 4.4): delete rows, solve the regular KKT system."""
    keep = [i for i in range(C.shape[0]) if i not in drop]
    Ck = C[keep]
    n, m = M.shape[0], len(keep)
    K = np.block([[M, -Ck.T], [Ck, np.zeros((m, m))]])
    sol = np.linalg.solve(K, np.concatenate([rhs, np.zeros(m)]))
    lam = np.zeros(C.shape[0])
    lam[keep] = sol[n:]
    return sol[:n], lam


def test_unique_reactions_agree_with_every_elimination_variant_of_the_paper():
    """Sect. 4.4: eliminating rows {6, 21}, {18, 21} or {19, 21} (C.y with W4, W1 with W4, W2 with W4) changes
    the reactions of B, C, W1-W4 but not those of A, D-H, the drive and W5, nor the motion. (W4 is eliminated in
    all three variants, so the minimum-norm solution, another method of Sect. 3.1, is compared as well.)"""
    model = load_absolute_model(MOBILE, planar=True)
    A = constraint_matrix(model)
    rows = {p.name: p.rows for p in A.pairs}
    variants = [[rows["C"][1], rows["W4"][0]], [rows["W1"][0], rows["W4"][0]], [rows["W2"][0], rows["W4"][0]]]
    rng = np.random.default_rng(7)
    applied = rng.normal(size=model.n_coordinates)  # generic loads on every body [N, N m]
    q = pin.neutral(model.pin_model)
    v = np.zeros(model.pin_model.nv)
    M, rhs = absolute_dynamics(model, q, np.zeros(model.n_coordinates), gravity=(0, 0, 0))
    results = [_eliminated_reactions(model, A.matrix, M, rhs + applied, d) for d in variants]
    # a fourth method of Sect. 3.1: the minimum-norm (pseudoinverse) multipliers for the same accelerations
    acc0 = results[0][0]
    results.append((acc0, np.linalg.pinv(A.matrix.T) @ (M @ acc0 - rhs - applied)))
    mine = unique_reactions(model, q=q, v=v, gravity=(0, 0, 0), applied=applied)
    for acc, _ in results:
        assert np.allclose(acc, mine.accelerations, atol=1e-9)
    for p in mine.pairs:
        values = [lam[list(rows[p.name])] for _, lam in results]
        if p.solvable:
            for val in values:
                assert np.allclose(val, p.components, atol=1e-8), p.name
        else:
            assert any(not np.allclose(values[0], val, atol=1e-6) for val in values[1:]), p.name
            for i, c in enumerate(p.components):  # a component is reported only if every variant agrees on it
                if c is not None:
                    assert all(abs(val[i] - c) < 1e-8 for val in values), p.name
    assert mine.pair("B").components[1] is None and mine.pair("B").components[0] is not None
    assert all(mine.pair(w).components == (None,) for w in ("W1", "W2", "W3", "W4"))


def test_tree_reactions_equal_pinocchio_rnea_joint_forces():
    """A serial arm is not redundant; our reactions (on the child, pair frame) equal Pinocchio's data.f."""
    xml = """<robot name="arm"><link name="world"/>
      <link name="l1"><inertial><origin xyz="0.1 0 0.2"/><mass value="2"/>
        <inertia ixx="0.02" ixy="0.001" ixz="0" iyy="0.03" iyz="0" izz="0.01"/></inertial></link>
      <link name="l2"><inertial><origin xyz="0.2 0.05 0" rpy="0.3 0 0"/><mass value="1.5"/>
        <inertia ixx="0.01" ixy="0" ixz="0" iyy="0.02" iyz="0.002" izz="0.02"/></inertial></link>
      <link name="l3"><inertial><origin xyz="0 0.1 0"/><mass value="0.7"/>
        <inertia ixx="0.004" ixy="0" ixz="0" iyy="0.003" iyz="0" izz="0.005"/></inertial></link>
      <joint name="j1" type="revolute"><parent link="world"/><child link="l1"/><origin xyz="0 0 0.3"/>
        <axis xyz="0 0 1"/><limit lower="-3" upper="3" effort="10" velocity="5"/></joint>
      <joint name="j2" type="revolute"><parent link="l1"/><child link="l2"/><origin xyz="0.1 0 0.4" rpy="0.2 0 0"/>
        <axis xyz="0 1 0"/><limit lower="-3" upper="3" effort="10" velocity="5"/></joint>
      <joint name="j3" type="prismatic"><parent link="l2"/><child link="l3"/><origin xyz="0.4 0 0"/>
        <axis xyz="1 0 0"/><limit lower="-1" upper="1" effort="10" velocity="5"/></joint>
    </robot>"""
    model = load_absolute_model(xml)
    pm = model.pin_model
    data = pm.createData()
    q, v = np.array([0.4, -0.7, 0.1]), np.array([1.2, -0.8, 0.3])
    a = pin.aba(pm, data, q, v, np.zeros(pm.nv))  # free motion under gravity
    pin.rnea(pm, data, q, v, a)
    mine = unique_reactions(model, q=q, v=v)
    report = analyze_solvability(xml, q=q)
    assert report.redundancy == 0
    C = constraint_matrix(model, q)
    for pair in C.pairs:
        f = data.f[pm.getJointId(pair.name)]
        wrench = np.concatenate([f.linear, f.angular])  # parent on child, child (= joint) frame
        assert np.allclose(mine.pair(pair.name).components, pair.wrench_basis.T @ wrench, atol=1e-6), pair.name
        joint = next(j for j in model.tree_joints if j.name == pair.name)
        assert np.allclose(allowed_twists(joint.type, np.array(joint.axis)).T @ wrench, 0.0, atol=1e-9)  # τ = 0


def test_spatial_parallelogram_four_bar():
    """By hand: 3 moving bodies, 4 revolutes (20 rows) + drive, n = 18, mobility 0 with the drive -> rank 18, p = 3.
    The self-stress of a loop with parallel axes is a constant wrench (force along z, moment normal to z), so in
    every joint Fz, Mx, My are indeterminate and Fx, Fy unique; the drive torque is unique. In planar mode the
    four-bar is determinate (8 + 1 rows, 9 coordinates)."""
    r = analyze_solvability(read_urdf_file(str(URDF / "parallelogram_4bar.urdf")))
    assert (r.m_holonomic, r.n_coordinates, r.rank, r.redundancy) == (21, 18, 18, 3)
    for name in ("O1", "A1", "O2", "A2"):
        p = r.pair(name)
        assert not p.solvable and p.criteria_agree
        assert p.determined_labels == ("Fx", "Fy")
        assert p.indeterminate_dimension == p.rank_criterion_dimension == 3
    assert r.pair("drive_O1").solvable
    planar = analyze_solvability(read_urdf_file(str(URDF / "parallelogram_4bar.urdf")), planar=True)
    assert (planar.rank, planar.redundancy) == (9, 0)
    assert all(p.solvable for p in planar.pairs)


def test_rssr_variant_is_not_redundant():
    """By hand: rows 5 + 5 + 3 + 3 + 1 = 17, n = 18, mobility 1 (coupler spin) -> rank 17, p = 0: all unique."""
    r = analyze_solvability(read_urdf_file(str(URDF / "parallelogram_4bar_rssr.urdf")))
    assert (r.m_holonomic, r.rank, r.redundancy) == (17, 17, 0)
    assert r.free_pairs == ("coupler_float",)
    assert all(p.solvable and p.criteria_agree for p in r.pairs)


def test_planar_3rrr():
    """Planar: 9 revolutes (18) + 3 drives = 21 rows = n, regular away from singularities -> p = 0.
    Spatial: 45 + 3 rows, n = 42, rank 42 -> p = 6 (3 out-of-plane self-stresses per independent loop);
    every revolute keeps unique in-plane forces, the drives stay unique."""
    planar = analyze_solvability(read_urdf_file(str(URDF / "planar_3rrr.urdf")), planar=True)
    assert (planar.m_holonomic, planar.n_coordinates, planar.rank, planar.redundancy) == (21, 21, 21, 0)
    spatial = analyze_solvability(read_urdf_file(str(URDF / "planar_3rrr.urdf")))
    assert (spatial.m_holonomic, spatial.rank, spatial.redundancy) == (48, 42, 6)
    for p in spatial.pairs:
        assert p.criteria_agree, p.name
        if p.kind == "driving_constraint":
            assert p.solvable
        else:
            assert p.determined_labels == ("Fx", "Fy") and p.indeterminate_dimension == 3


def test_tolerance_is_scaled_to_the_matrix(mobile_report):
    C = constraint_matrix(load_absolute_model(MOBILE, planar=True)).matrix
    assert mobile_report.sigma_max == pytest.approx(np.linalg.norm(C, 2))
    assert mobile_report.rank_tolerance == pytest.approx(mobile_report.rank_rtol * mobile_report.sigma_max)
    assert mobile_report.largest_dropped_singular_value < mobile_report.rank_tolerance
    assert mobile_report.smallest_kept_singular_value > 1e6 * mobile_report.rank_tolerance
    # scaling every row by 1000 (other units) changes no verdict
    scaled = constraint_matrix(load_absolute_model(MOBILE, planar=True))
    object.__setattr__(scaled, "matrix", 1e3 * scaled.matrix)
    assert analyze_constraint_matrix(scaled).unsolvable == mobile_report.unsolvable


def test_qr_left_null_space_is_a_left_null_space(mobile_report):
    """Eq. (21)-(27): the last p columns of Q (pivoted QR) satisfy Q̄^T C = 0; cross-check with scipy's null_space."""
    C = constraint_matrix(load_absolute_model(MOBILE, planar=True)).matrix
    Q, R, _ = scipy.linalg.qr(C, pivoting=True)
    Qbar = Q[:, mobile_report.rank:]
    assert np.max(np.abs(Qbar.T @ C)) < 1e-12
    N = scipy.linalg.null_space(C.T)
    assert N.shape[1] == mobile_report.redundancy
    assert np.linalg.matrix_rank(np.hstack([N, Qbar]), tol=1e-9) == mobile_report.redundancy


@pytest.mark.parametrize(
    "extra, message",
    [
        ('<loop_closure name="X" type="revolute"><parent link="platform"/><child link="nowhere"/></loop_closure>',
         "link 'nowhere' does not exist"),
        ('<loop_closure name="X" type="revolute"><parent link="rod_D"/><child link="rod_D"/></loop_closure>',
         "parent and child are the same link"),
        ('<knife_edge name="W1" link="platform"><axis xyz="0 1 0"/></knife_edge>', "already used"),
    ],
)
def test_bad_extension_elements_give_one_line_errors(extra, message):
    xml = MOBILE.replace("</robot>", extra + "</robot>")
    with pytest.raises(ValueError, match=message) as err:
        analyze_solvability(xml, planar=True)
    assert "\n" not in str(err.value)


def test_duplicate_link_names_are_rejected():
    xml = MOBILE.replace('<link name="rod_E">', '<link name="rod_D">')
    with pytest.raises(ValueError, match="duplicate link names: rod_D"):
        analyze_solvability(xml)


def test_velocities_violating_the_constraints_are_rejected():
    model = load_absolute_model(MOBILE, planar=True)
    v = np.zeros(model.pin_model.nv)
    v[1] = 0.1  # platform sliding sideways: the knife edges forbid it
    with pytest.raises(ValueError, match="violate the constraints"):
        unique_reactions(model, v=v)

"""Specification of the absolute-coordinate constraint matrix (Wojtyra & Frączek 2013, Sect. 2.1, 4.1, Appendix)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pinocchio as pin
import pytest

from vtm_dynamics.core.reactions.absolute_coordinates import (
    GROUND,
    AbsoluteModelError,
    assemble_loops,
    body_poses,
    body_twists,
    closure_residuals,
    constraint_matrix,
    load_absolute_model,
)
from vtm_dynamics.core.robot.urdf_extension import read_urdf_file

URDF = Path(__file__).resolve().parents[3] / "urdf"
MOBILE = read_urdf_file(str(URDF / "mobile_robot_knife_edges.urdf"))  # the core takes text only

# ---------------------------------------------------------------------------------------------------------------
# The paper's mobile robot written independently, straight from the Appendix (eqs. (40), (42), (43)), Table 1,
# Table 3 and eq. (34), in the paper's own coordinates q_i = [x_i, y_i, phi_i] with the paper's reference points.
A_ = 0.05
PSI = math.atan(0.25)
BX, BY = A_ * math.sin(PSI), A_ * math.cos(PSI)
CX = 4 * A_ - BX
CY = math.sqrt((5 * A_) ** 2 - CX**2)
DX, DY = CX / 2, CY / 2 - BY
PAPER_Q0 = np.array([20 * A_, 0, 0, 24 * A_, 0, 0, 16 * A_, 0, 0, 20 * A_ + DX, DY, 0, 20 * A_ - DX, DY, 0,
                     20 * A_, 0, 0, 5 * A_, 0, 0])  # eq. (34)
# Table 3: joint, body i, body j, s_P^(i), s_Q^(j)
PAPER_REVOLUTES = [
    ("A", 7, 1, (7 * A_, 0), (-8 * A_, 0)),
    ("B", 2, 1, (0, 0), (4 * A_, 0)),
    ("C", 3, 1, (0, 0), (-4 * A_, 0)),
    ("D", 4, 2, (CX / 2, -CY / 2), (-BX, -BY)),
    ("E", 5, 3, (-CX / 2, -CY / 2), (BX, -BY)),
    ("F", 6, 4, (0, CY - BY), (-CX / 2, CY / 2)),
    ("G", 6, 5, (0, CY - BY), (CX / 2, CY / 2)),
]
# Table 1: edge, body, s_K, n_K (body frame)
PAPER_EDGES = [("W1", 2, (0, 0)), ("W2", 3, (0, 0)), ("W3", 1, (0, -4 * A_)), ("W4", 1, (0, 4 * A_)),
               ("W5", 7, (0, 0))]


def _rot(phi: float) -> np.ndarray:
    return np.array([[math.cos(phi), -math.sin(phi)], [math.sin(phi), math.cos(phi)]])


def _paper_holonomic(q: np.ndarray) -> np.ndarray:
    """Φ(q): seven revolute joints (eq. (40)), translational H (eq. (42)), driving constraint (eq. (43), d = 0)."""
    r = {k: q[3 * (k - 1): 3 * (k - 1) + 2] for k in range(1, 8)}
    phi = {k: q[3 * (k - 1) + 2] for k in range(1, 8)}
    out = []
    for _, i, j, sp, sq in PAPER_REVOLUTES:
        out.extend(r[i] + _rot(phi[i]) @ sp - r[j] - _rot(phi[j]) @ sq)
    i, j, sp, sq, v, u = 6, 1, np.array([0, 10 * A_]), np.array([0, -10 * A_]), np.array([1.0, 0]), np.array([0, 1.0])
    d = r[j] + _rot(phi[j]) @ sq - r[i] - _rot(phi[i]) @ sp
    out.append(d @ (_rot(phi[j]) @ v))
    out.append(phi[i] - phi[j])
    out.append(d @ (_rot(phi[j]) @ u) - 20 * A_)  # d(t) = PQ at q0
    return np.array(out)


def paper_constraint_matrix(q: np.ndarray = PAPER_Q0) -> np.ndarray:
    """C = [Φ_q; Ψ] (eq. (5)): Φ_q by central differences of Φ, Ψ from eq. (30) with n_K = [0 1]^T."""
    h = 1e-7
    Phi_q = np.column_stack([(_paper_holonomic(q + h * e) - _paper_holonomic(q - h * e)) / (2 * h) for e in np.eye(21)])
    Psi = np.zeros((5, 21))
    omega = np.array([[0.0, -1.0], [1.0, 0.0]])
    for row, (_, i, s) in enumerate(PAPER_EDGES):
        R = _rot(q[3 * (i - 1) + 2])
        n = R @ np.array([0.0, 1.0])
        Psi[row, 3 * (i - 1): 3 * (i - 1) + 2] = n
        Psi[row, 3 * (i - 1) + 2] = n @ omega @ R @ np.asarray(s)
    return np.vstack([Phi_q, Psi])


PAPER_ROWS = {name: [2 * k, 2 * k + 1] for k, (name, *_r) in enumerate(PAPER_REVOLUTES)}
PAPER_ROWS.update({"H": [14, 15], "drive_H": [16]})
PAPER_ROWS.update({name: [17 + k] for k, (name, *_r) in enumerate(PAPER_EDGES)})


def test_independent_transcription_of_the_paper_has_the_papers_ranks():
    """Eq. (35): rank(Φ_q) = 17, rank(Ψ) = 4, rank(C) = 20 (checks the hand transcription used below)."""
    C = paper_constraint_matrix()
    assert C.shape == (22, 21)
    assert np.linalg.matrix_rank(C[:17], tol=1e-6) == 17
    assert np.linalg.matrix_rank(C[17:], tol=1e-6) == 4
    assert np.linalg.matrix_rank(C, tol=1e-6) == 20


def test_mobile_robot_rows_match_the_paper_pair_by_pair():
    """Our rows of every pair span the same space as the paper's rows, after the change of reference points.

    Ours: ν_i = [v(o_i), ω_i] at the URDF link origin o_i; paper: [ṙ_i, φ̇_i] at its reference point c_i.
    v(o_i) = ṙ_i + ω_i × (o_i − c_i), so ν = T q̇_paper with T block diagonal.
    """
    model = load_absolute_model(MOBILE, planar=True)
    assert model.bodies == ("platform", "steer_B", "steer_C", "rod_D", "rod_E", "slider_H", "trolley")
    ours = constraint_matrix(model)
    assert ours.matrix.shape == (22, 21)  # m + h = 17 + 5 rows, n = 21 (Sect. 4.2)
    assert ours.free_pairs == ("ground",)
    poses = body_poses(model)
    T = np.zeros((21, 21))
    for k, body in enumerate(model.bodies):
        d = poses[body][1][:2] - PAPER_Q0[3 * k: 3 * k + 2]
        T[3 * k: 3 * k + 3, 3 * k: 3 * k + 3] = [[1, 0, -d[1]], [0, 1, d[0]], [0, 0, 1]]
    paper = paper_constraint_matrix()
    mapped = ours.matrix @ T
    assert np.linalg.matrix_rank(mapped, tol=1e-6) == 20
    for pair in ours.pairs:
        mine, theirs = mapped[list(pair.rows)], paper[PAPER_ROWS[pair.name]]
        assert len(pair.rows) == len(PAPER_ROWS[pair.name]), pair.name
        assert np.linalg.matrix_rank(np.vstack([mine, theirs]), tol=1e-6) == len(pair.rows), pair.name


def test_pinocchio_twists_satisfy_every_tree_joint_row_for_every_joint_type():
    """At random q, v: link poses equal Pinocchio's framesForwardKinematics; the link twists from Pinocchio are
    annihilated by the tree-joint rows, whose rank is 6b − nv."""
    xml = """<robot name="all_types"><link name="world"/>
      <link name="a"/><link name="b"/><link name="c"/><link name="d"/><link name="e"/><link name="f"/>
      <joint name="j_planar" type="planar"><parent link="world"/><child link="a"/>
        <origin xyz="0.1 0.2 0.3" rpy="0.3 0.2 0.1"/><axis xyz="0 0 1"/></joint>
      <joint name="j_rev" type="revolute"><parent link="a"/><child link="b"/><origin xyz="0.3 0 0.1" rpy="0 0.5 0"/>
        <axis xyz="0 0.6 0.8"/><limit lower="-3" upper="3" effort="1" velocity="1"/></joint>
      <joint name="j_pri" type="prismatic"><parent link="b"/><child link="c"/><origin xyz="0 0.2 0" rpy="0.1 0 0"/>
        <axis xyz="1 0 0"/><limit lower="-1" upper="1" effort="1" velocity="1"/></joint>
      <joint name="j_fix" type="fixed"><parent link="c"/><child link="d"/><origin xyz="0 0 0.4" rpy="0 0 1"/></joint>
      <joint name="j_cont" type="continuous"><parent link="d"/><child link="e"/><origin xyz="0.1 0 0"/>
        <axis xyz="0 0 1"/></joint>
      <joint name="j_free" type="floating"><parent link="e"/><child link="f"/><origin xyz="0 0.1 0"/></joint>
    </robot>"""
    model = load_absolute_model(xml)
    rng = np.random.default_rng(3)
    q = pin.randomConfiguration(model.pin_model, -np.ones(model.pin_model.nq), np.ones(model.pin_model.nq))
    v = rng.normal(size=model.pin_model.nv)
    data = model.pin_model.createData()
    pin.framesForwardKinematics(model.pin_model, data, q)
    for link, (R, o) in body_poses(model, q).items():
        if link != GROUND:
            M = data.oMf[model.pin_model.getFrameId(link, pin.BODY)]
            assert np.allclose(R, M.rotation, atol=1e-14) and np.allclose(o, M.translation, atol=1e-14)
    C = constraint_matrix(model, q)
    assert [len(p.rows) for p in C.pairs] == [3, 5, 5, 6, 5]  # floating: no rows
    assert C.free_pairs == ("j_free",)
    nu = body_twists(model, q, v)
    assert np.max(np.abs(C.matrix @ nu)) < 1e-12
    assert np.linalg.matrix_rank(C.matrix) == 6 * 6 - model.pin_model.nv


def test_planar_mode_keeps_in_plane_wrenches():
    """Planar rows: revolute 2 (Fx, Fy), prismatic 2 (force across the axis, Mz), knife edge 1, drive 1."""
    C = constraint_matrix(load_absolute_model(MOBILE, planar=True))
    labels = {p.name: p.labels for p in C.pairs}
    assert labels["B"] == ("Fx", "Fy")
    assert labels["H"] == ("Fx", "Mz")  # H slides along the platform's y axis
    assert labels["W3"] == ("Fy",)
    assert labels["drive_H"] == ("Fy",)
    spatial = constraint_matrix(load_absolute_model(MOBILE, planar=False))
    assert spatial.matrix.shape == (3 + 8 * 5 + 5 + 1, 42)


def test_planar_mode_rejects_a_tilted_revolute():
    xml = """<robot name="tilted"><link name="world"/><link name="a"/>
      <joint name="hinge" type="revolute"><parent link="world"/><child link="a"/><axis xyz="1 0 1"/>
        <limit lower="-1" upper="1" effort="1" velocity="1"/></joint></robot>"""
    with pytest.raises(AbsoluteModelError, match="'hinge' is not planar"):
        load_absolute_model(xml, planar=True)
    assert constraint_matrix(load_absolute_model(xml)).matrix.shape == (5, 6)


@pytest.mark.parametrize("name, joint, plane", [
    ("slider_crank", "crank_joint", "x-z"),  # revolute axes along world y: a planar mechanism, but in x-z
    ("slider_crank_point_on_plane", "crank_joint", "x-z"),
    ("huang_stewart_platform", "J8", "space"),  # spatial legs
    ("planar_3r", "joint1", "x-z"),  # the E-stop arm swings in the vertical plane
])
def test_planar_mode_refuses_a_model_that_does_not_move_in_the_world_xy_plane(name, joint, plane):
    """Planar mode keeps (x, y, phi) of the world xy-plane; a model moving elsewhere gave a rank and p of nothing
    (slider_crank: rank 3, p = 5, where a planar slider-crank has p = 0)."""
    text = read_urdf_file(str(URDF / f"{name}.urdf"))
    with pytest.raises(AbsoluteModelError, match=f"joint '{joint}' turns about world .*not planar") as err:
        load_absolute_model(text, planar=True)
    assert "\n" not in str(err.value)
    load_absolute_model(text, planar=False)  # spatial mode takes it


def test_planar_mode_takes_the_same_mechanism_drawn_in_the_xy_plane_and_mirrored_frames():
    text = read_urdf_file(str(URDF / "slider_crank.urdf")).replace('rpy="1.5707963267948966 0 0"', 'rpy="0 0 0"')
    model = load_absolute_model(text, planar=True)  # now every joint turns about world z, the slider slides along x
    assert np.linalg.matrix_rank(constraint_matrix(model).matrix) == 8  # 3 bodies x 3 - 1 degree of freedom
    flipped = read_urdf_file(str(URDF / "huang_double_pendulum.urdf")).replace(
        '<origin xyz="0 0 0" rpy="0 0 0"/>', '<origin xyz="0 0 0" rpy="3.141592653589793 0 0"/>')
    assert constraint_matrix(load_absolute_model(flipped, planar=True)).matrix.shape == (4, 6)  # z -> -z: same plane


def test_planar_mode_refuses_a_pair_frame_tilted_out_of_the_plane():
    xml = """<robot name="tilted_frame"><link name="world"/><link name="a"><inertial><mass value="1"/>
        <inertia ixx="1" ixy="0" ixz="0" iyy="1" iyz="0" izz="1"/></inertial></link>
      <joint name="weld" type="fixed"><parent link="world"/><child link="a"/><origin rpy="1.5707963267948966 0 0"/>
      </joint></robot>"""
    with pytest.raises(AbsoluteModelError, match="pair 'weld': its frame's z axis is world"):
        load_absolute_model(xml, planar=True)


def test_loops_are_assembled_by_newton_with_driven_joints_held():
    model = load_absolute_model(read_urdf_file(str(URDF / "planar_3rrr.urdf")))
    q0 = pin.neutral(model.pin_model)
    assert np.max(np.abs(closure_residuals(model, q0))) < 1e-12
    q = q0 + 0.05
    assert np.max(np.abs(closure_residuals(model, q))) > 1e-3
    qa = assemble_loops(model, q)
    assert np.max(np.abs(closure_residuals(model, qa))) < 1e-12
    for name in ("B1", "B2", "B3"):
        idx = model.pin_model.joints[model.pin_model.getJointId(name)].idx_q
        assert qa[idx] == pytest.approx(q[idx], abs=1e-14)
    # the assembled pose is a valid one: the two copies of pin P2 coincide in world
    poses = body_poses(model, qa)
    lc = model.extension.loop_closures[0]
    Ra, oa = poses[lc.parent]
    Rb, ob = poses[lc.child]
    assert np.allclose(oa + Ra @ np.array(lc.parent_origin.xyz), ob + Rb @ np.array(lc.child_origin.xyz), atol=1e-12)


def test_ground_is_the_root_link_and_world_references_map_to_it():
    model = load_absolute_model(MOBILE, planar=True)
    assert model.root_link == "world"
    assert GROUND not in model.bodies
    assert next(p for p in model.pairs if p.name == "W1").parent == GROUND


@pytest.mark.parametrize(
    "snippet, message",
    [
        ('<joint name="j" type="ball"><parent link="world"/><child link="a"/></joint>', "type must be one of"),
        ('<joint name="j" type="revolute"><parent link="world"/><child link="a"/><axis xyz="0 0 0"/></joint>',
         "axis must not be zero"),
        ('<joint name="j" type="fixed"><parent link="world"/><child link="a"/></joint>'
         '<knife_edge name="k" link="world"><axis xyz="0 1 0"/></knife_edge>', "is the ground"),
        ('<joint name="j" type="fixed"><parent link="world"/><child link="a"/></joint>'
         '<driving_constraint name="d" joint="j"/>', "has not exactly one coordinate"),
        ('<joint name="j" type="fixed"><parent link="world"/><child link="a"/></joint>'
         '<joint name="k" type="fixed"><parent link="a"/><child link="world"/></joint>', "exactly one root link"),
    ],
)
def test_bad_models_give_one_line_errors(snippet, message):
    xml = f'<robot name="bad"><link name="world"/><link name="a"/>{snippet}</robot>'
    with pytest.raises(ValueError, match=message) as err:
        load_absolute_model(xml)
    assert "\n" not in str(err.value)


# ---------------------------------------------------------------------------------------------------------------
# Loop-closure pair types: the absolute-coordinate rows (pair-type wrench bases) against the joint-coordinate rows
# of core.robot.constraints.LoopClosure (written independently, from the relative velocities of the pair frames).
_CHAIN_AXES = ["0 0 1", "0 1 0", "1 0 0", "0 0.6 0.8", "0 1 0", "1 0 0"]


def _chain_urdf(closure: str = "") -> str:
    links = "".join(
        f'<link name="l{i}"><inertial><origin xyz="0.1 0 0"/><mass value="1"/>'
        f'<inertia ixx="0.01" ixy="0" ixz="0" iyy="0.02" iyz="0" izz="0.02"/></inertial></link>'
        for i in range(6))
    joints = "".join(
        f'<joint name="j{i}" type="revolute"><parent link="{"world" if i == 0 else f"l{i - 1}"}"/>'
        f'<child link="l{i}"/><origin xyz="{0 if i == 0 else 0.3} 0.05 0"/><axis xyz="{ax}"/>'
        f'<limit lower="-3" upper="3" effort="1" velocity="1"/></joint>'
        for i, ax in enumerate(_CHAIN_AXES))
    return f'<robot name="chain"><link name="world"/>{links}{joints}{closure}</robot>'


@pytest.mark.parametrize("kind, shift, turn", [
    ("revolute", (0, 0, 0), (0, 0, 0.4)),
    ("prismatic", (0, 0, 0.2), (0, 0, 0)),
    ("spherical", (0, 0, 0), (0.3, -0.5, 0.2)),
    ("fixed", (0, 0, 0), (0, 0, 0)),
    ("cylindrical", (0, 0, -0.15), (0, 0, 0.7)),
    ("point_on_line", (0, 0, 0.25), (0.3, -0.5, 0.2)),
    ("point_on_plane", (0.2, -0.1, 0), (0.3, -0.5, 0.2)),
])
def test_every_loop_closure_type_has_the_rows_of_the_joint_coordinate_closure(kind, shift, turn):
    """At a pose assembled with the child moved by the pair's own freedom (a slider off the pair origin), the
    closure rows of C(q) mapped through the Pinocchio twists span the same rows as the joint-coordinate closure,
    with as many rows as the type removes freedoms, and the residual is zero."""
    from vtm_dynamics.core.robot.constraints import LoopClosure
    from vtm_dynamics.core.robot.model import RobotModel
    from vtm_dynamics.core.robot.urdf_extension import LOOP_CLOSURE_ROWS

    tree = RobotModel.from_urdf(_chain_urdf())
    q = np.array([0.3, -0.4, 0.7, 0.2, -0.6, 0.5])
    oMa = tree.frame_placement(q, "l1") * pin.SE3(pin.rpy.rpyToMatrix(0.2, -0.1, 0.3), np.array([0.1, 0.05, 0.0]))
    oMb = oMa * pin.SE3(pin.exp3(np.array(turn, dtype=float)), np.array(shift, dtype=float))
    bMb = tree.frame_placement(q, "l5").actInv(oMb)
    closure = (
        f'<loop_closure name="c" type="{kind}"><parent link="l1"/><child link="l5"/>'
        f'<origin xyz="0.1 0.05 0" rpy="0.2 -0.1 0.3"/>'
        f'<child_origin xyz="{" ".join(f"{x:.17g}" for x in bMb.translation)}" '
        f'rpy="{" ".join(f"{x:.17g}" for x in pin.rpy.matrixToRpy(bMb.rotation))}"/><axis xyz="0 0 1"/></loop_closure>')
    text = _chain_urdf(closure)
    model = load_absolute_model(text)
    assert np.max(np.abs(closure_residuals(model, q))) < 1e-12
    C = constraint_matrix(model, q)
    (pair,) = [p for p in C.pairs if p.kind == "loop_closure"]
    assert len(pair.rows) == LOOP_CLOSURE_ROWS[kind]
    T = np.column_stack([body_twists(model, q, e) for e in np.eye(6)])  # body twists per joint velocity
    absolute = C.matrix[list(pair.rows)] @ T
    robot = RobotModel.from_urdf(text)
    J = LoopClosure(robot.extension.loop_closures[0]).jacobian(robot, q)
    assert np.allclose(LoopClosure(robot.extension.loop_closures[0]).residual(robot, q), 0.0, atol=1e-12)
    r = np.linalg.matrix_rank(J, tol=1e-9)
    assert r == np.linalg.matrix_rank(absolute, tol=1e-9) == np.linalg.matrix_rank(np.vstack([J, absolute]), tol=1e-9)

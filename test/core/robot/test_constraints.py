"""Specification of constraint rows J(q), drift J'(q, v) v and residuals (Müller 2026, eqs. (3)-(4))."""

import numpy as np
import pytest

from vtm_dynamics.core.robot.constraints import (
    ConstraintError,
    JointLock,
    KnifeEdge,
    LoopClosure,
    constraints_from_extension,
)
from vtm_dynamics.core.robot.model import RobotModel
from vtm_dynamics.core.robot.urdf_extension import LOOP_CLOSURE_TYPES, KnifeEdgeSpec, LoopClosureSpec, Pose

# A planar four-bar (ground 2 m, crank 1 m, coupler 2 m, rocker 1 m) written as a tree plus one loop closure.
FOUR_BAR = """<?xml version="1.0"?>
<robot name="four_bar">
  <link name="ground"/>
  <joint name="crank_joint" type="revolute"><parent link="ground"/><child link="crank"/>
    <axis xyz="0 0 1"/><limit lower="-10" upper="10" effort="1" velocity="1"/></joint>
  <link name="crank"><inertial><origin xyz="0.5 0 0"/><mass value="1"/>
    <inertia ixx="0.01" ixy="0" ixz="0" iyy="0.09" iyz="0" izz="0.09"/></inertial></link>
  <joint name="coupler_joint" type="revolute"><parent link="crank"/><child link="coupler"/>
    <origin xyz="1 0 0"/><axis xyz="0 0 1"/><limit lower="-10" upper="10" effort="1" velocity="1"/></joint>
  <link name="coupler"><inertial><origin xyz="1 0 0"/><mass value="2"/>
    <inertia ixx="0.02" ixy="0" ixz="0" iyy="0.7" iyz="0" izz="0.7"/></inertial></link>
  <joint name="rocker_joint" type="revolute"><parent link="ground"/><child link="rocker"/>
    <origin xyz="2 0 0"/><axis xyz="0 0 1"/><limit lower="-10" upper="10" effort="1" velocity="1"/></joint>
  <link name="rocker"><inertial><origin xyz="0.5 0 0"/><mass value="1"/>
    <inertia ixx="0.01" ixy="0" ixz="0" iyy="0.09" iyz="0" izz="0.09"/></inertial></link>
  <loop_closure name="close" type="revolute">
    <parent link="coupler"/><child link="rocker"/>
    <origin xyz="2 0 0"/><child_origin xyz="1 0 0"/><axis xyz="0 0 1"/>
  </loop_closure>
  <knife_edge name="blade" link="coupler"><origin xyz="1 0 0"/><axis xyz="0 1 0"/></knife_edge>
</robot>
"""


def _flow_derivative(robot, f, q, v, eps=1e-6):
    """d/dt f(q(t)) at t = 0 along q(t) = q (+) t v (central differences)."""
    return (f(robot.integrate(q, v, eps)) - f(robot.integrate(q, v, -eps))) / (2 * eps)


def _specs():
    pose_a = Pose(xyz=(0.1, -0.2, 0.05), rpy=(0.3, -0.2, 0.5))
    pose_b = Pose(xyz=(0.0, 0.1, 0.2), rpy=(-0.1, 0.4, 0.2))
    for kind in LOOP_CLOSURE_TYPES:
        yield LoopClosureSpec(kind, kind, "forearm_link", "wrist_3_link", pose_a, pose_b, (0.0, 0.6, 0.8))
    yield LoopClosureSpec("to_world", "spherical", "world", "wrist_2_link", pose_a, pose_b, (0.0, 0.0, 1.0))


def test_joint_lock_rows_are_unit_rows_and_remember_the_lock_angle(planar_3r):
    lock = JointLock(["joint3", "joint2"])
    q = np.array([0.1, 0.2, 0.3])
    assert np.array_equal(lock.jacobian(planar_3r, q), [[0, 0, 1], [0, 1, 0]])
    assert np.array_equal(lock.drift(planar_3r, q, np.ones(3)), [0, 0])
    bound = lock.bind(planar_3r, q)
    assert bound.lock_q == (0.3, 0.2)
    assert np.allclose(bound.residual(planar_3r, [5.0, 0.25, 0.3]), [0.0, 0.05])
    with pytest.raises(ConstraintError, match="lock angle not recorded"):
        lock.residual(planar_3r, q)
    with pytest.raises(ConstraintError, match="joints"):
        JointLock(["joint1", "joint1"])
    with pytest.raises(ConstraintError, match="JointLock.joints"):
        JointLock("elbow").jacobian(planar_3r, q)


def test_joint_lock_of_a_continuous_joint_has_one_row_and_an_angle_residual():
    from test.core.robot.test_model import CONTINUOUS_URDF

    robot = RobotModel.from_urdf(CONTINUOUS_URDF)
    q = robot.integrate(robot.neutral(), [3.0, 0.1])
    lock = JointLock("wheel").bind(robot, q)
    assert lock.jacobian(robot, q).shape == (1, 2)
    assert len(lock.lock_q) == 2  # cos, sin
    assert np.allclose(lock.residual(robot, robot.integrate(q, [0.2, 0.5])), [0.2])


@pytest.mark.parametrize("spec", list(_specs()), ids=lambda s: s.name)
def test_loop_closure_drift_is_the_time_derivative_of_its_rows(ur5, rng, spec):
    c = LoopClosure(spec)
    q = ur5.random_configuration(rng)
    v = rng.normal(size=ur5.nv)
    J = c.jacobian(ur5, q)
    assert J.shape == (c.dim(ur5), ur5.nv)
    expected = _flow_derivative(ur5, lambda qq: c.jacobian(ur5, qq) @ v, q, v)
    assert np.allclose(c.drift(ur5, q, v), expected, atol=1e-6 * max(1.0, np.abs(expected).max()))


@pytest.mark.parametrize("spec", list(_specs()), ids=lambda s: s.name)
def test_translational_rows_are_the_gradient_of_the_position_residual(ur5, rng, spec):
    c = LoopClosure(spec)
    q = ur5.random_configuration(rng)
    v = rng.normal(size=ur5.nv)
    rate = _flow_derivative(ur5, lambda qq: c.residual(ur5, qq), q, v)
    Jv = c.jacobian(ur5, q) @ v
    # spherical/revolute/fixed: first three rows are d/dt (p_B - p_A); the axis-type pairs: first two (one for
    # point_on_plane) are d/dt d_k.(p_B - p_A) with d_k fixed in A -- exact at any configuration, assembled or not
    n = {"prismatic": 2, "cylindrical": 2, "point_on_line": 2, "point_on_plane": 1}.get(spec.type, 3)
    assert np.allclose(Jv[:n], rate[:n], atol=1e-6)


def test_fixed_closure_angular_rows_are_the_relative_angular_velocity(ur5, rng):
    spec = list(_specs())[3]
    c = LoopClosure(spec)
    q = ur5.random_configuration(rng)
    v = rng.normal(size=ur5.nv)
    wB = ur5.frame_velocity(q, v, "wrist_3_link", "local_world_aligned")[3:]
    wA = ur5.frame_velocity(q, v, "forearm_link", "local_world_aligned")[3:]
    assert np.allclose((c.jacobian(ur5, q) @ v)[3:], wB - wA, atol=1e-12)


def test_four_bar_extension_builds_a_consistent_closure():
    robot = RobotModel.from_urdf(FOUR_BAR)
    loop, blade = constraints_from_extension(robot)
    assert isinstance(loop, LoopClosure) and isinstance(blade, KnifeEdge)
    # Assembled at the rectangle: crank up, coupler along +x, rocker up (parallelogram).
    q = np.array([np.pi / 2, -np.pi / 2, np.pi / 2])
    assert np.allclose(loop.residual(robot, q), 0.0, atol=1e-12)
    J = loop.jacobian(robot, q)
    # a planar four-bar has one degree of freedom: rank 2 among the 5 rows, the parallelogram motion is allowed
    assert np.linalg.matrix_rank(J, tol=1e-9) == 2
    assert np.allclose(J @ np.array([1.0, -1.0, 1.0]), 0.0, atol=1e-12)
    v = np.array([1.0, -1.0, 1.0])
    assert np.allclose(loop.drift(robot, q, v), _flow_derivative(robot, lambda qq: loop.jacobian(robot, qq) @ v, q, v), atol=1e-6)
    assert blade.residual(robot, q) is None and not blade.holonomic


def test_knife_edge_row_blocks_the_blade_normal_velocity(ur5, rng):
    blade = KnifeEdge(KnifeEdgeSpec("blade", "wrist_3_link", (0.0, 0.05, 0.1), (0.0, 1.0, 0.0)))
    q = ur5.random_configuration(rng)
    v = rng.normal(size=ur5.nv)
    J = blade.jacobian(ur5, q)
    # independent: velocity of the point via the frame Jacobian at the link origin and the lever arm
    oMf = ur5.frame_placement(q, "wrist_3_link")
    V = ur5.frame_velocity(q, v, "wrist_3_link", "local_world_aligned")
    p_rel = oMf.rotation @ np.array([0.0, 0.05, 0.1])
    v_point = V[:3] + np.cross(V[3:], p_rel)
    assert (J @ v)[0] == pytest.approx(oMf.rotation[:, 1] @ v_point, abs=1e-12)
    expected = _flow_derivative(ur5, lambda qq: blade.jacobian(ur5, qq) @ v, q, v)
    assert np.allclose(blade.drift(ur5, q, v), expected, atol=1e-6)


def test_unknown_link_is_a_constraint_error(ur5):
    spec = LoopClosureSpec("bad", "fixed", "nope", "tool0", Pose(), Pose(), (1.0, 0.0, 0.0))
    with pytest.raises(ConstraintError, match="link"):
        LoopClosure(spec).jacobian(ur5, ur5.neutral())


@pytest.mark.parametrize("kind", LOOP_CLOSURE_TYPES)
def test_at_an_assembled_pose_every_residual_row_differentiates_to_its_jacobian_row(ur5, rng, kind):
    """All rows, rotational ones included: a Newton step q -= J^+ r on the residual then removes position drift."""
    import pinocchio as pin

    q = ur5.random_configuration(rng)
    pose_a = Pose(xyz=(0.1, -0.2, 0.05), rpy=(0.3, -0.2, 0.5))
    oMa = ur5.frame_placement(q, "forearm_link") * pin.SE3(pose_a.rotation(), np.array(pose_a.xyz))
    bMa = ur5.frame_placement(q, "wrist_3_link").actInv(oMa)  # pair frame A seen from link B: assembled at q
    pose_b = Pose(xyz=tuple(bMa.translation), rpy=tuple(pin.rpy.matrixToRpy(bMa.rotation)))
    c = LoopClosure(LoopClosureSpec(kind, kind, "forearm_link", "wrist_3_link", pose_a, pose_b, (0.0, 0.6, 0.8)))
    assert np.allclose(c.residual(ur5, q), 0.0, atol=1e-12)
    v = rng.normal(size=ur5.nv)
    rate = _flow_derivative(ur5, lambda qq: c.residual(ur5, qq), q, v)
    assert np.allclose(rate, c.jacobian(ur5, q) @ v, atol=1e-6)


def _assembled_pair(robot, q, kind, axis, shift=(0.0, 0.0, 0.0), turn=(0.0, 0.0, 0.0)):
    """A closure between forearm and wrist 3 of the UR5, assembled at q, with the child's pair frame moved by the
    pair's own freedom: ``shift`` [m] and ``turn`` [rad] (rotation vector), both in pair frame A."""
    import pinocchio as pin

    pose_a = Pose(xyz=(0.1, -0.2, 0.05), rpy=(0.3, -0.2, 0.5))
    oMa = robot.frame_placement(q, "forearm_link") * pin.SE3(pose_a.rotation(), np.array(pose_a.xyz))
    oMb = oMa * pin.SE3(pin.exp3(np.array(turn)), np.array(shift))
    bMb = robot.frame_placement(q, "wrist_3_link").actInv(oMb)
    pose_b = Pose(xyz=tuple(bMb.translation), rpy=tuple(pin.rpy.matrixToRpy(bMb.rotation)))
    return LoopClosure(LoopClosureSpec(kind, kind, "forearm_link", "wrist_3_link", pose_a, pose_b, axis))


# Motions each pair allows (in pair frame A, axis a = (0, 0.6, 0.8)): the child point may sit anywhere on the line
# or plane, and the child may be turned as the pair lets it turn.
_A = np.array([0.0, 0.6, 0.8])
_IN_PLANE = np.array([1.0, 0.0, 0.0])
_ALLOWED = {
    "cylindrical": (0.3 * _A, 0.7 * _A),
    "point_on_line": (-0.25 * _A, (0.4, -0.9, 0.3)),
    "point_on_plane": (0.2 * _IN_PLANE + 0.1 * np.cross(_A, _IN_PLANE), (0.4, -0.9, 0.3)),
    "prismatic": (0.3 * _A, (0.0, 0.0, 0.0)),
}


@pytest.mark.parametrize("kind", sorted(_ALLOWED))
def test_an_axis_pair_is_assembled_wherever_its_own_freedom_puts_the_child(ur5, rng, kind):
    """Sliding along the line/plane/axis and turning as allowed leaves the residual zero, and the residual's rate is
    still J v there: the rows are exact away from the pair origin (a slider far along its guide)."""
    q = ur5.random_configuration(rng)
    shift, turn = _ALLOWED[kind]
    c = _assembled_pair(ur5, q, kind, tuple(_A), tuple(shift), tuple(turn))
    assert np.allclose(c.residual(ur5, q), 0.0, atol=1e-12)
    v = rng.normal(size=ur5.nv)
    rate = _flow_derivative(ur5, lambda qq: c.residual(ur5, qq), q, v)
    assert np.allclose(rate, c.jacobian(ur5, q) @ v, atol=1e-6)
    assert np.allclose(c.drift(ur5, q, v), _flow_derivative(ur5, lambda qq: c.jacobian(ur5, qq) @ v, q, v), atol=1e-5)


@pytest.mark.parametrize("kind, forbidden", [
    ("cylindrical", "turn"), ("point_on_line", "shift"), ("point_on_plane", "shift"), ("prismatic", "turn"),
])
def test_a_motion_the_pair_forbids_shows_in_its_residual(ur5, rng, kind, forbidden):
    q = ur5.random_configuration(rng)
    off_axis = np.cross(_A, _IN_PLANE) * 0.05  # perpendicular to the axis (forbidden for a point on the line)
    move = {"shift": (tuple(0.05 * _A) if kind == "point_on_plane" else tuple(off_axis)), "turn": tuple(0.05 * _IN_PLANE)}
    c = _assembled_pair(ur5, q, kind, tuple(_A), **{forbidden: move[forbidden]})
    assert np.max(np.abs(c.residual(ur5, q))) > 1e-3


def test_rows_per_loop_closure_type_are_the_freedoms_it_removes(ur5, rng):
    q = ur5.random_configuration(rng)
    expected = {"fixed": 6, "revolute": 5, "prismatic": 5, "cylindrical": 4, "spherical": 3, "point_on_line": 2,
                "point_on_plane": 1}
    for spec in _specs():
        c = LoopClosure(spec)
        assert c.jacobian(ur5, q).shape[0] == expected[spec.type] == c.dim(ur5)

"""Specification of RobotModel: the unconstrained dynamics of Müller 2026, eq. (3), from a URDF via Pinocchio."""

import numpy as np
import pytest

from core_testdata import PLANAR_3R
from vtm_dynamics.core.robot.model import ModelError, RobotModel

CONTINUOUS_URDF = """<?xml version="1.0"?>
<robot name="mixed">
  <link name="base"/>
  <joint name="wheel" type="continuous">
    <parent link="base"/><child link="a"/><axis xyz="0 0 1"/>
  </joint>
  <link name="a"><inertial><origin xyz="0.3 0 0"/><mass value="2"/>
    <inertia ixx="0.1" ixy="0" ixz="0" iyy="0.2" iyz="0" izz="0.3"/></inertial></link>
  <joint name="bolt" type="fixed"><parent link="a"/><child link="b"/><origin xyz="0.5 0 0"/></joint>
  <link name="b"><inertial><mass value="1"/>
    <inertia ixx="0.01" ixy="0" ixz="0" iyy="0.01" iyz="0" izz="0.01"/></inertial></link>
  <joint name="slide" type="prismatic">
    <parent link="b"/><child link="c"/><axis xyz="1 0 0"/>
    <limit lower="-1" upper="1" effort="10" velocity="1"/>
  </joint>
  <link name="c"><inertial><mass value="0.5"/>
    <inertia ixx="0.01" ixy="0" ixz="0" iyy="0.01" iyz="0" izz="0.01"/></inertial></link>
</robot>
"""


def test_planar_3r_mass_matrix_matches_hand_computed_bar_inertias(planar_3r):
    # Last diagonal entry: the third bar about its joint, I_c + m (L/2)^2 = 9.36 + 108 * 0.25 (Steiner).
    M = planar_3r.mass_matrix(np.zeros(3))
    assert M[2, 2] == pytest.approx(9.36 + 108 * 0.25, rel=1e-12)
    # Stretched chain: M_11 = sum over bars of I_c + m d_i^2 with d = 0.5, 1.5, 2.5 m.
    assert M[0, 0] == pytest.approx(3 * 9.36 + 108 * (0.25 + 2.25 + 6.25), rel=1e-12)
    assert np.allclose(M, M.T, atol=0)


def test_planar_3r_gravity_torque_of_a_horizontal_last_bar(planar_3r):
    # At q = (pi/6,)*3 the third bar is at pi/2 from the vertical: torque m g L/2 about joint 3.
    tau = planar_3r.gravity_torques(np.full(3, np.pi / 6))
    assert tau[2] == pytest.approx(108 * 9.81 * 0.5, rel=1e-12)


def test_mass_matrix_and_bias_reproduce_inverse_dynamics(ur5, rng):
    for _ in range(3):
        q = ur5.random_configuration(rng)
        v = rng.normal(size=ur5.nv)
        a = rng.normal(size=ur5.nv)
        tau = ur5.inverse_dynamics(q, v, a)
        M = ur5.mass_matrix(q)
        assert np.allclose(M, M.T, atol=0)
        assert np.all(np.linalg.eigvalsh(M) > 0)
        assert np.allclose(M @ a + ur5.bias_forces(q, v), tau, rtol=1e-10, atol=1e-9)
        assert np.allclose(ur5.bias_forces(q, np.zeros(ur5.nv)), ur5.gravity_torques(q), atol=1e-10)
        assert np.allclose(ur5.forward_dynamics(q, v, tau), a, atol=1e-8)
        assert ur5.kinetic_energy(q, v) == pytest.approx(0.5 * v @ M @ v, rel=1e-12)


def test_gravity_is_a_parameter(planar_3r):
    q = np.full(3, np.pi / 6)
    lunar = planar_3r.with_gravity((0.0, 0.0, -1.62))
    assert np.allclose(lunar.gravity_torques(q), planar_3r.gravity_torques(q) * 1.62 / 9.81, rtol=1e-12)
    assert np.allclose(planar_3r.gravity, (0, 0, -9.81))


def test_continuous_and_fixed_joints_get_consistent_index_maps():
    robot = RobotModel.from_urdf(CONTINUOUS_URDF)
    assert robot.joint_names == ("wheel", "slide")  # the fixed joint owns no coordinate
    assert (robot.nq, robot.nv) == (3, 2)
    wheel, slide = robot.joint("wheel"), robot.joint("slide")
    assert (wheel.q_slice, wheel.v_slice) == (slice(0, 2), slice(0, 1))
    assert (slide.q_slice, slide.v_slice) == (slice(2, 3), slice(1, 2))
    q0 = robot.neutral()
    assert np.allclose(q0, [1.0, 0.0, 0.0])
    q = robot.integrate(q0, [np.pi / 2, 0.25], 1.0)
    assert np.allclose(q, [0.0, 1.0, 0.25], atol=1e-15)
    assert np.allclose(robot.difference(q0, q), [np.pi / 2, 0.25])
    assert list(robot.v_indices(["slide", "wheel"])) == [1, 0]
    # the merged fixed body b still exists as a frame, half a metre beyond a
    assert np.allclose(robot.frame_placement(q, "b").translation, [0.0, 0.5, 0.0], atol=1e-15)


def test_frame_jacobian_is_the_derivative_of_the_frame_position(ur5, rng):
    q = ur5.random_configuration(rng)
    J = ur5.frame_jacobian(q, "tool0", "local_world_aligned")
    eps = 1e-7
    for k in range(ur5.nv):
        dq = np.zeros(ur5.nv)
        dq[k] = eps
        p1 = ur5.frame_placement(ur5.integrate(q, dq), "tool0").translation
        p0 = ur5.frame_placement(ur5.integrate(q, -dq), "tool0").translation
        assert np.allclose((p1 - p0) / (2 * eps), J[:3, k], atol=1e-6)
    v = rng.normal(size=ur5.nv)
    assert np.allclose(ur5.frame_velocity(q, v, "tool0"), J @ v, atol=1e-12)


@pytest.mark.parametrize(
    "urdf, words",
    [
        ("/nonexistent/robot.urdf", "not URDF XML text"),  # text only: a path is never opened
        ("<robot name='x'><link name='a'></robot>", "well-formed"),
        ("<model name='x'/>", "<robot>"),
        ("<robot name='x'><link name='a'/></robot>", "no movable joint"),
        ("", "urdf"),
    ],
)
def test_unreadable_urdfs_raise_one_line_model_errors(urdf, words):
    with pytest.raises(ModelError) as err:
        RobotModel.from_urdf(urdf)
    assert words in str(err.value)
    assert "\n" not in str(err.value)
    assert isinstance(err.value, ValueError)


def test_bad_inputs_name_the_field(planar_3r):
    with pytest.raises(ModelError, match="q: expected 3 values"):
        planar_3r.mass_matrix(np.zeros(4))
    with pytest.raises(ModelError, match=r"v\[1\]: not a finite number"):
        planar_3r.bias_forces(np.zeros(3), [0, np.nan, 0])
    with pytest.raises(ModelError, match="joint"):
        planar_3r.joint("elbow")
    with pytest.raises(ModelError, match="frame"):
        planar_3r.frame_placement(np.zeros(3), "nope")


def test_extension_is_parsed_with_the_model():
    robot = RobotModel.from_urdf_file(PLANAR_3R)
    assert robot.extension is not None and robot.extension.robot_name == "planar_3r"
    assert robot.extension.loop_closures == ()


def test_prismatic_joints_are_told_from_revolute_and_continuous_ones():
    link = '<link name="{n}"><inertial><mass value="1"/><inertia ixx="0.1" ixy="0" ixz="0" iyy="0.1" iyz="0" izz="0.1"/></inertial></link>'
    urdf = ('<robot name="rp">' + '<link name="base"/>' + link.format(n="a") + link.format(n="b") + link.format(n="c")
            + '<joint name="turn" type="revolute"><parent link="base"/><child link="a"/><axis xyz="0 0 1"/>'
              '<limit lower="-1" upper="1" effort="1" velocity="1"/></joint>'
            + '<joint name="slide" type="prismatic"><parent link="a"/><child link="b"/><axis xyz="1 0 0"/>'
              '<limit lower="-1" upper="1" effort="1" velocity="1"/></joint>'
            + '<joint name="tilted" type="prismatic"><parent link="b"/><child link="c"/><axis xyz="1 1 0"/>'
              '<limit lower="-1" upper="1" effort="1" velocity="1"/></joint></robot>')
    kinds = {j.name: j.prismatic for j in RobotModel.from_urdf(urdf).joints}
    assert kinds == {"turn": False, "slide": True, "tilted": True}
    assert {j.name: j.prismatic for j in RobotModel.from_urdf(CONTINUOUS_URDF).joints} == {"wheel": False,
                                                                                         "slide": True}

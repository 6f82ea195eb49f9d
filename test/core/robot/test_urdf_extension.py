"""The URDF extension: loop closures, knife edges and driving constraints parse, and bad files are refused clearly."""

import math
import os

import numpy as np
import pinocchio as pin
import pytest

from vtm_dynamics.core.robot.urdf_extension import URDFExtensionError, parse_urdf_extension, read_urdf_file

TREE = """<robot name="r">
  <link name="base"/>
  <link name="a"><inertial><mass value="1"/><inertia ixx="1" iyy="1" izz="1" ixy="0" ixz="0" iyz="0"/></inertial></link>
  <link name="b"><inertial><mass value="1"/><inertia ixx="1" iyy="1" izz="1" ixy="0" ixz="0" iyz="0"/></inertial></link>
  <joint name="j1" type="revolute"><parent link="base"/><child link="a"/><axis xyz="0 0 1"/>
    <limit lower="-3" upper="3" effort="10" velocity="3"/></joint>
  <joint name="j2" type="revolute"><parent link="a"/><child link="b"/><origin xyz="1 0 0"/><axis xyz="0 0 1"/>
    <limit lower="-3" upper="3" effort="10" velocity="3"/></joint>
  {extra}
</robot>"""

CLOSURE = """<loop_closure name="c" type="revolute"><parent link="b"/><child link="world"/>
  <origin xyz="1 0 0" rpy="0 0 1.5707963267948966"/><child_origin xyz="2 0 0"/><axis xyz="0 0 2"/></loop_closure>"""


def test_all_three_elements_parse_with_units_and_normalised_axes():
    ext = parse_urdf_extension(TREE.format(extra=CLOSURE + """
        <knife_edge name="k" link="a"><origin xyz="0.5 0 0"/><axis xyz="0 3 0"/></knife_edge>
        <driving_constraint name="d" joint="j1"/>"""))
    assert ext.robot_name == "r" and ext.joints == ("j1", "j2")
    (c,) = ext.loop_closures
    assert (c.type, c.parent, c.child, c.axis) == ("revolute", "b", "world", (0.0, 0.0, 1.0))
    assert c.parent_origin.xyz == (1.0, 0.0, 0.0) and c.child_origin.xyz == (2.0, 0.0, 0.0)
    np.testing.assert_allclose(c.parent_origin.rotation(), [[0, -1, 0], [1, 0, 0], [0, 0, 1]], atol=1e-15)
    (k,) = ext.knife_edges
    assert k.point == (0.5, 0.0, 0.0) and k.axis == (0.0, 1.0, 0.0)
    assert ext.driving_constraints[0].joint == "j1"


def test_pose_rotation_follows_the_urdf_fixed_axis_rpy_convention():
    from vtm_dynamics.core.robot.urdf_extension import Pose

    rpy = (0.3, -0.7, 1.1)
    expected = pin.rpy.rpyToMatrix(*rpy)  # Pinocchio's independent implementation of the same convention
    np.testing.assert_allclose(Pose(rpy=rpy).rotation(), expected, atol=1e-14)


def test_pinocchio_and_urdf_tools_see_the_same_tree_with_or_without_the_extension():
    plain = pin.buildModelFromXML(TREE.format(extra=""))
    extended = pin.buildModelFromXML(TREE.format(extra=CLOSURE))
    assert (plain.nq, plain.nv, list(plain.names)) == (extended.nq, extended.nv, list(extended.names))


@pytest.mark.parametrize(
    "extra, words",
    [
        (CLOSURE.replace('child link="world"', 'child link="ghost"'), ["link 'ghost' does not exist"]),
        (CLOSURE.replace('child link="world"', 'child link="b"'), ["same link 'b'"]),
        (CLOSURE.replace('type="revolute"', 'type="helical"'), ["type must be one of", "helical"]),
        (CLOSURE.replace('axis xyz="0 0 2"', 'axis xyz="0 0 0"'), ["axis must not be zero"]),
        (CLOSURE.replace('xyz="1 0 0" rpy', 'xyz="1 nan 0" rpy'), ["origin xyz", "finite"]),
        (CLOSURE.replace("<parent link=\"b\"/>", ""), ["missing <parent link"]),
        (CLOSURE + CLOSURE, ["'c'", "already used"]),
        (CLOSURE.replace('name="c"', 'name="j1"'), ["'j1'", "already used"]),
        ('<knife_edge name="k" link="nowhere"/>', ["knife_edge", "'nowhere' does not exist"]),
        ('<driving_constraint name="d" joint="j9"/>', ["driving_constraint", "'j9' does not exist"]),
        ('<link name="a"/>', ["duplicate link names: a"]),
    ],
)
def test_bad_extension_elements_give_one_clear_error(extra, words):
    with pytest.raises(URDFExtensionError) as err:
        parse_urdf_extension(TREE.format(extra=extra))
    message = str(err.value)
    assert "\n" not in message
    for word in words:
        assert word in message


@pytest.mark.parametrize("kind", ["cylindrical", "point_on_line", "point_on_plane"])
def test_cylindrical_and_point_contact_closures_are_part_of_the_extension(kind):
    (c,) = parse_urdf_extension(TREE.format(extra=CLOSURE.replace('type="revolute"', f'type="{kind}"'))).loop_closures
    assert c.type == kind and c.axis == (0.0, 0.0, 1.0)
    with pytest.raises(URDFExtensionError) as err:
        parse_urdf_extension(TREE.format(extra=CLOSURE.replace('type="revolute"', 'type="point_on_sphere"')))
    assert kind in str(err.value)  # the message lists every accepted type


def test_unreadable_input_is_refused_clearly(tmp_path):
    with pytest.raises(URDFExtensionError, match="not well-formed"):
        parse_urdf_extension("<robot name='x'><link name='a'></robot>")
    with pytest.raises(URDFExtensionError, match="root element must be <robot>"):
        parse_urdf_extension("<sdf/>")
    with pytest.raises(URDFExtensionError, match="not URDF XML text"):  # text only: a path is never opened
        parse_urdf_extension(str(tmp_path / "missing.urdf"))
    path = tmp_path / "ok.urdf"
    path.write_text(TREE.format(extra=CLOSURE))
    assert parse_urdf_extension(read_urdf_file(str(path))).loop_closures[0].name == "c"


def test_default_pose_is_identity():
    from vtm_dynamics.core.robot.urdf_extension import Pose

    np.testing.assert_array_equal(Pose().homogeneous(), np.eye(4))
    assert math.isclose(np.linalg.det(Pose(rpy=(1, 2, 3)).rotation()), 1.0)


def test_a_urdf_file_over_the_text_cap_is_refused_before_it_is_read(tmp_path):
    from vtm_dynamics.core.robot.urdf_extension import DEFAULT_MAX_URDF_BYTES

    path = tmp_path / "huge.urdf"
    with open(path, "wb") as fh:  # sparse: no disk space used
        fh.write(b"<robot name='r'>")
        fh.truncate(DEFAULT_MAX_URDF_BYTES + 1)
    with pytest.raises(URDFExtensionError, match=f"has {DEFAULT_MAX_URDF_BYTES + 1} bytes, more than max_bytes"):
        read_urdf_file(str(path))  # was read whole, to be refused by the parser afterwards
    assert read_urdf_file(str(path), max_bytes=DEFAULT_MAX_URDF_BYTES + 1).startswith("<robot")


@pytest.mark.parametrize("kind", ["fifo", "device"])
def test_a_urdf_path_that_is_no_regular_file_is_refused_without_reading(tmp_path, kind):
    path = tmp_path / "arm.urdf"
    if kind == "fifo":
        os.mkfifo(path)  # was opened for reading: blocked for ever, waiting for a writer
    else:
        os.symlink("/dev/zero", path)  # was read until memory ran out
    with pytest.raises(URDFExtensionError, match="is not a regular file"):
        read_urdf_file(str(path))

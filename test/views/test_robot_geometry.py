"""What a view draws of a robot: the URDF's visuals on Pinocchio's frames, a stick figure where a body has none,
and mesh files read only inside trusted roots and within their caps (views/robot_geometry.py)."""

from __future__ import annotations

import os

import numpy as np
import pinocchio as pin
import pytest

from test.collada_testdata import EDGE, cube_dae, unit_package, unit_urdf
from test.ros_helpers import REPO_ROOT
from test.views.views_testdata import ur5_geometry, ur5_stop
from vtm_dynamics.core.robot import mesh_units
from vtm_dynamics.core.robot.model import RobotModel
from vtm_dynamics.views.mesh_files import mesh_bytes
from vtm_dynamics.views.robot_geometry import frame_positions, link_poses, robot_geometry

MESH_URDF = """<robot name="probe">
  <link name="base"/>
  <joint name="j" type="revolute"><parent link="base"/><child link="arm"/><axis xyz="0 0 1"/>
    <limit lower="-3" upper="3" effort="1" velocity="1"/></joint>
  <link name="arm">
    <inertial><origin xyz="0.25 0 0"/><mass value="1"/><inertia ixx="0.01" iyy="0.01" izz="0.01" ixy="0" ixz="0" iyz="0"/></inertial>
    <visual><geometry><mesh filename="{name}"/></geometry></visual>
  </link>
</robot>"""
OBJ = "v 0 0 0\nv 1 0 0\nv 0 1 0\nf 1 2 3\n"


def _probe(tmp_path, name: str, **limits):
    text = MESH_URDF.format(name=name)
    robot = RobotModel.from_urdf(text)
    return robot, robot_geometry(robot.model, text, urdf_dir=str(tmp_path / "robot"), package_roots=[], **limits)


@pytest.fixture()
def robot_dir(tmp_path):
    (tmp_path / "robot" / "meshes").mkdir(parents=True)
    (tmp_path / "robot" / "meshes" / "arm.obj").write_text(OBJ)
    (tmp_path / "secret.obj").write_text(OBJ)
    return tmp_path


def test_the_ur5_is_drawn_from_its_seven_visual_meshes_each_read_once():
    robot, _, _ = ur5_stop()
    g = ur5_geometry()
    assert [link.name for link in g.links] == ["base_link", "shoulder_link", "upper_arm_link", "forearm_link",
                                               "wrist_1_link", "wrist_2_link", "wrist_3_link"]
    assert len(g.meshes) == 7 and all(m.format == "dae" and mesh_bytes(m).lstrip().startswith(b"<?xml") for m in g.meshes)
    assert g.notes == ()


def test_link_poses_are_the_frames_world_placements():
    robot, p, _ = ur5_stop()
    g = ur5_geometry()
    q = p.q[len(p.q) // 2]
    poses = link_poses(robot.model, g, q[None, :])[0]
    for link, pose in zip(g.links, poses):
        M = robot.frame_placement(q, link.frame_id)  # the model's own API, not the view's
        x, y, z, w = pose[3:]
        R = np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
                      [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
                      [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)]])
        np.testing.assert_allclose(pose[:3], M.translation, atol=1e-12)
        np.testing.assert_allclose(R, M.rotation, atol=1e-9)
    np.testing.assert_allclose(frame_positions(robot.model, "tool0", p.q[:3]), p.tcp_positions[:3], atol=1e-9)


def test_a_robot_without_visuals_is_drawn_as_bones_to_its_child_joints_and_frames():
    robot = RobotModel.from_urdf_file(os.path.join(REPO_ROOT, "urdf", "planar_3r.urdf"))
    g = robot_geometry(robot.model, robot.urdf_text)
    bones = {link.name: sorted(round(v.length, 9) for v in link.visuals if v.radius < 0.05) for link in g.links}
    # each 1 m bar reaches the next joint (the third one its tip frame); the short cylinders are the joints
    assert bones == {"joint1": [1.0], "joint2": [1.0], "joint3": [1.0]}


def test_a_loop_closure_attachment_is_part_of_its_link_stick_figure():
    from vtm_dynamics.core.robot.urdf_extension import read_urdf_file

    text = read_urdf_file(os.path.join(REPO_ROOT, "urdf", "parallelogram_4bar.urdf"))
    model = pin.buildModelFromXML(text)
    g = robot_geometry(model, text)
    coupler = next(link for link in g.links if link.name == "A1")
    ends = [v.origin[:3, 3] * 2 for v in coupler.visuals if v.length > 0.1]  # bone centres are half-way
    assert any(np.allclose(e, [0.4, 0.0, 0.0]) for e in ends)  # the closing pair A2 on the coupler
    ground = next(link for link in g.links if link.name == "universe")
    assert [round(v.length, 9) for v in ground.visuals] == [0.4]  # O1 - O2


def test_a_mesh_beside_the_urdf_file_is_read(robot_dir):
    _, g = _probe(robot_dir, "meshes/arm.obj")
    assert len(g.meshes) == 1 and mesh_bytes(g.meshes[0]).decode() == OBJ and g.notes == ()


@pytest.mark.parametrize("name, why", [
    ("../secret.obj", "leaves its root"),
    ("meshes/../../secret.obj", "leaves its root"),
    ("file:///etc/hostname.obj", "outside the trusted roots"),
    ("http://example.org/arm.obj", "outside the trusted roots"),
    ("package://unknown_pkg/arm.obj", "outside the trusted roots"),
    ("meshes/arm.ply", "only .dae, .obj and .stl"),
    ("meshes/missing.obj", "not found"),
])
def test_a_mesh_outside_the_trusted_roots_is_not_read_and_the_link_becomes_a_stick(robot_dir, name, why):
    robot, g = _probe(robot_dir, name)
    assert g.meshes == ()
    assert len(g.notes) == 1 and why in g.notes[0]
    assert any(link.visuals and link.visuals[0].kind == "cylinder" for link in g.links)  # still drawn


def test_symbolic_links_special_files_and_oversized_meshes_are_refused(robot_dir):
    os.symlink(robot_dir / "secret.obj", robot_dir / "robot" / "meshes" / "link.obj")
    assert "leaves its root" in _probe(robot_dir, "meshes/link.obj")[1].notes[0]
    os.mkfifo(robot_dir / "robot" / "meshes" / "fifo.obj")
    assert "not a regular file" in _probe(robot_dir, "meshes/fifo.obj")[1].notes[0]
    assert "over max_mesh_bytes" in _probe(robot_dir, "meshes/arm.obj", max_mesh_bytes=10)[1].notes[0]
    assert "max_total_bytes" in _probe(robot_dir, "meshes/arm.obj", max_total_bytes=10)[1].notes[0]


def test_package_names_resolve_inside_the_given_package_roots_only(robot_dir):
    text = MESH_URDF.format(name="package://robot/meshes/arm.obj")
    robot = RobotModel.from_urdf(text)
    g = robot_geometry(robot.model, text, package_roots=[str(robot_dir)])
    assert len(g.meshes) == 1 and g.notes == ()


def _geometry_without(module, robot, parser: str, monkeypatch):
    """``geometry_of(robot)`` with ``module.<parser>`` failing the test when it is called."""
    def no_parse(*_args, **_kw):
        raise AssertionError(f"{parser} was called again")

    monkeypatch.setattr(module, parser, no_parse)
    return module.geometry_of(robot)


def _assert_drawn_alike(kept, again) -> None:
    assert [(link.name, link.frame_id) for link in kept.links] == [(link.name, link.frame_id) for link in again.links]
    for a, b in zip(kept.links, again.links):
        assert [(v.kind, v.mesh, v.scale, v.size, v.radius, v.length) for v in a.visuals] == \
            [(v.kind, v.mesh, v.scale, v.size, v.radius, v.length) for v in b.visuals]
        assert all(np.array_equal(u.origin, v.origin) for u, v in zip(a.visuals, b.visuals))


def test_the_geometry_of_a_model_reuses_the_urdf_it_parsed_and_draws_the_same(monkeypatch):
    """``geometry_of`` draws from the ``<robot>`` element the model kept (its URDF is not parsed a second time),
    and what it draws is what parsing the text again gives; a copy of the model keeps the element."""
    from vtm_dynamics.views import robot_geometry as module

    robot, _, _ = ur5_stop()
    assert robot.urdf_root is not None and robot.copy().urdf_root is robot.urdf_root
    again = robot_geometry(robot.model, robot.urdf_text)

    kept = _geometry_without(module, robot, "parse_urdf_xml", monkeypatch)
    _assert_drawn_alike(kept, again)
    assert [m.file.path for m in kept.meshes] == [m.file.path for m in again.meshes] and kept.notes == again.notes


@pytest.mark.parametrize("urdf", ["parallelogram_4bar.urdf", "mobile_robot_knife_edges.urdf", "planar_3rrr.urdf"])
def test_the_geometry_of_a_model_takes_the_extension_it_parsed_and_draws_the_same_sticks(urdf, monkeypatch):
    """A mechanism's loop-closure and knife-edge points come from the extension the model parsed from its URDF
    (not parsed again for every view), and the stick figure is the one parsing the text again gives."""
    from vtm_dynamics.views import robot_geometry as module

    robot = RobotModel.from_urdf_file(os.path.join(REPO_ROOT, "urdf", urdf))
    assert robot.extension is not None
    again = robot_geometry(robot.model, robot.urdf_text)

    _assert_drawn_alike(_geometry_without(module, robot, "extension_from_root", monkeypatch), again)


def test_link_poses_of_many_configurations_are_each_configurations_own():
    """A motion's poses, row by row, are those of each configuration alone."""
    robot, p, _ = ur5_stop()
    g = ur5_geometry()
    qs = p.q[:: max(len(p.q) // 7, 1)]
    together = link_poses(robot.model, g, qs)
    assert together.shape == (len(qs), len(g.links), 7)
    for k, q in enumerate(qs):
        assert np.array_equal(together[k], link_poses(robot.model, g, q[None, :])[0])


@pytest.mark.parametrize("meter", ["1", "0.001", "0.0254"])
def test_a_collada_mesh_is_scaled_by_its_unit_times_the_urdf_scale(tmp_path, meter):
    """A COLLADA file's <unit meter="..."> says how many metres one of its coordinates is (RViz draws it so): the
    page scales the file's coordinates by the unit times the URDF's <mesh scale>, so the 0.1 m cube written in
    metres, millimetres or inches is drawn 0.2 m x 0.1 m x 0.1 m with scale="2 1 1". The viewer's COLLADA
    loader puts the unit on the root of what it reads, and Drake's viewer drops that root's transform."""
    from vtm_dynamics.views.scene import Scene
    from vtm_dynamics.views.web_page import scene_payload

    pkg = unit_package(str(tmp_path), {"cube.dae": cube_dae(meter)})
    text = unit_urdf("cube.dae", scale="2 1 1")
    robot = RobotModel.from_urdf(text)
    g = robot_geometry(robot.model, text, package_roots=[pkg])
    assert g.notes == () and len(g.meshes) == 1
    (visual,) = next(link for link in g.links if link.name == "arm").visuals
    written = EDGE / float(meter)  # the cube's edge in the file's own numbers
    np.testing.assert_allclose(np.array(visual.scale) * written, [2 * EDGE, EDGE, EDGE], rtol=1e-12)
    payload, _ = scene_payload(Scene("unit", g))
    (drawn,) = next(link for link in payload["links"] if link["name"] == "arm")["visuals"]
    np.testing.assert_allclose(np.array(drawn["scale"]) * written, [2 * EDGE, EDGE, EDGE], rtol=1e-12)


def test_a_collada_files_unit_is_parsed_once_then_kept_until_the_file_changes(tmp_path, monkeypatch):
    """The unit is read from the file's head once and kept in the view cache (views/packed_files.kept_value) under
    the file's path, inode, size and time stamps: the next geometry of the file, in this process or a new one,
    parses nothing and gets the same unit; a file changed on disk is parsed again; a kept text that is no unit
    (edited by hand) is not believed: the file is parsed again."""
    from vtm_dynamics.views import mesh_files, packed_files

    monkeypatch.setenv("VTM_VIEW_CACHE", str(tmp_path / "cache"))
    packed_files.clear_memory()
    pkg = unit_package(str(tmp_path / "pkg"), {"cube.dae": cube_dae("0.001")})
    path = os.path.join(pkg, "probe", "meshes", "cube.dae")
    os.utime(path, ns=(1_600_000_000 * 10**9, 1_600_000_000 * 10**9))  # settled long ago: kept
    parsed = []
    monkeypatch.setattr(mesh_files, "collada_unit", lambda fd: parsed.append(fd) or mesh_units.collada_unit(fd))
    text = unit_urdf("cube.dae")
    robot = RobotModel.from_urdf(text)

    def unit() -> float:
        g = robot_geometry(robot.model, text, package_roots=[pkg])
        (visual,) = next(link for link in g.links if link.name == "arm").visuals
        return visual.scale[0]

    assert unit() == 0.001 and len(parsed) == 1
    assert unit() == 0.001 and len(parsed) == 1  # this process's cache
    packed_files.clear_memory()
    assert unit() == 0.001 and len(parsed) == 1  # a new process: the disk cache
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(cube_dae("0.0254"))
    os.utime(path, ns=(1_600_000_001 * 10**9, 1_600_000_001 * 10**9))
    assert unit() == 0.0254 and len(parsed) == 2
    info = os.stat(os.path.realpath(path))
    entry = tmp_path / "cache" / packed_files.entry_name(packed_files.cache_key(os.path.realpath(path), info,
                                                                                "collada-unit"))
    assert entry.read_bytes().endswith(b"\n0.0254")
    entry.unlink()
    packed_files.clear_memory()  # an intact entry of another text under the key: 4 km (a kilometre is the most)
    assert packed_files.kept_value(os.path.realpath(path), info, "collada-unit", lambda: "4000.0") == "4000.0"
    assert entry.read_bytes().endswith(b"\n4000.0")
    packed_files.clear_memory()
    assert unit() == 0.0254 and len(parsed) == 3


@pytest.mark.parametrize("meter", ["0", "-1", "nan", "inf", "5000", "1e-9"])
def test_a_collada_mesh_with_a_nonsense_unit_is_not_drawn_and_the_note_says_why(tmp_path, meter):
    pkg = unit_package(str(tmp_path), {"cube.dae": cube_dae(meter)})
    text = unit_urdf("cube.dae")
    robot = RobotModel.from_urdf(text)
    g = robot_geometry(robot.model, text, package_roots=[pkg])
    assert g.meshes == () and len(g.notes) == 1
    assert "cube.dae" in g.notes[0] and "unit" in g.notes[0] and "\n" not in g.notes[0]
    assert any(link.visuals and link.visuals[0].kind == "cylinder" for link in g.links)  # still drawn, as a stick

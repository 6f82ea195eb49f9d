"""Trajectories from YAML and CSV text and scenes from YAML: the message semantics, caps and one-line errors."""

import numpy as np
import pytest

from vtm_dynamics.core.stopsafe.scene import (
    MAX_OBSTACLES, SceneError, load_mesh_file, quaternion_matrix, scene_from_mapping, scene_from_yaml_text,
)
from vtm_dynamics.core.stopsafe.trajectory import TrajectoryError
from vtm_dynamics.core.stopsafe.trajectory_files import (
    read_trajectory_file, trajectory_from_csv_text, trajectory_from_yaml_text,
)

YAML = """
joint_trajectory:
  joint_names: [a, b]
  points:
    - {positions: [0.0, 1.0], velocities: [0.0, 0.0], time_from_start: {sec: 0, nanosec: 0}}
    - {positions: [0.5, 1.5], velocities: [0.1, 0.2], time_from_start: {sec: 1, nanosec: 500000000}}
"""


def test_yaml_trajectory_reads_duration_mappings_and_velocities():
    traj = trajectory_from_yaml_text(YAML)
    assert traj.joint_names == ("a", "b") and traj.interpolation == "cubic"
    np.testing.assert_allclose(traj.time_from_start, [0.0, 1.5])
    np.testing.assert_allclose(traj.evaluate([1.5], 1)[0], [0.1, 0.2])


def test_csv_trajectory_reads_q_v_columns_in_any_joint_order(tmp_path):
    path = tmp_path / "plan.csv"
    path.write_text("time_from_start,q_b,q_a,v_b,v_a\n0,1,0,0,0\n1.5,1.5,0.5,0.2,0.1\n")
    traj = read_trajectory_file(str(path))
    assert traj.joint_names == ("b", "a")
    np.testing.assert_allclose(traj.evaluate([1.5], 1)[0], [0.2, 0.1])


@pytest.mark.parametrize("text, words", [
    ("joint_names: [a]\npoints: [{positions: [0], time_from_start: 0}]", "expected a list of 2..100000 points"),
    ("joint_names: [a]\npoints: [{positions: [0], time_from_start: 0}, {positions: [1], velocities: [0], "
     "time_from_start: 1}]", "carries velocities but the first point carries positions only"),
    ("joint_names: [a]\npoints: [{positions: [0], time_from_start: 0}, {positions: [1, 2], time_from_start: 1}]",
     "points[1].positions: expected 1 numbers"),
    ("joint_names: [a]\npoints: [{positions: [0], time_from_start: 0}, {positions: [1], time_from_start: "
     "{sec: 1, nanosec: 2000000000}}]", "expected 0 <= sec"),
    ("joint_names: [a]\nfile: /etc/passwd\npoints: []", "trajectory.file: unknown key"),
    ("[" * 50, "nested deeper than 12 levels"),
])
def test_bad_yaml_trajectories_are_one_line(text, words):
    with pytest.raises(TrajectoryError) as err:
        trajectory_from_yaml_text(text)
    assert words in str(err.value) and "\n" not in str(err.value)


def test_csv_row_cap_and_bad_numbers():
    with pytest.raises(TrajectoryError, match="more than 3 rows"):
        trajectory_from_csv_text("t,q_a\n" + "".join(f"{k},0\n" for k in range(5)), max_points=3)
    with pytest.raises(TrajectoryError, match="line 3: not a number"):
        trajectory_from_csv_text("t,q_a\n0,0\n1,x\n")
    with pytest.raises(TrajectoryError, match="column v_b is missing"):
        trajectory_from_csv_text("t,q_a,q_b,v_a\n0,0,0,0\n1,1,1,0\n")


SCENE = """
scene:
  floor: {height: -0.1}
  allowed_self_pairs: [[b_link, a_link]]
  obstacles:
    - name: table
      primitive: {type: 1, dimensions: [1.0, 0.5, 0.1]}
      pose: {position: {x: 0.5, y: 0, z: 0}, orientation: [0, 0, 0.7071068, 0.7071068]}
    - name: post
      primitive: {type: cylinder, dimensions: [1.0, 0.05]}
    - name: jig
      mesh_name: jig
      scale: [0.001, 0.001, 0.001]
"""


def _cube(size=1.0):
    V = np.array([[x, y, z] for x in (0, size) for y in (0, size) for z in (0, size)], dtype=float)
    T = np.array([[0, 1, 3], [0, 3, 2], [4, 6, 7], [4, 7, 5], [0, 4, 5], [0, 5, 1], [2, 3, 7], [2, 7, 6],
                  [0, 2, 6], [0, 6, 4], [1, 5, 7], [1, 7, 3]])
    return V, T


def test_scene_yaml_follows_solid_primitive_and_pose_semantics():
    scene = scene_from_yaml_text(SCENE, {"jig": _cube(100.0)})
    table, post, jig = scene.obstacles
    assert (table.kind, table.dimensions) == ("box", (1.0, 0.5, 0.1))
    np.testing.assert_allclose(table.rotation @ [1, 0, 0], [0, 1, 0], atol=1e-6)  # 90 deg about z
    assert (post.kind, post.dimensions) == ("cylinder", (1.0, 0.05))
    assert jig.kind == "mesh" and jig.vertices.max() == pytest.approx(0.1)
    assert scene.floor_height == -0.1 and scene.allowed_self_pairs == frozenset({("a_link", "b_link")})
    np.testing.assert_allclose(quaternion_matrix([0, 0, 0, 1]), np.eye(3))


@pytest.mark.parametrize("data, words", [
    ({"scene": {"obstacles": [{"primitive": {"type": 5, "dimensions": [1]}}]}}, "type 5 is not supported"),
    ({"scene": {"obstacles": [{"primitive": {"type": "box", "dimensions": [1, 2]}}]}}, "a box needs 3 numbers"),
    ({"scene": {"obstacles": [{"primitive": {"type": "sphere", "dimensions": [-1]}}]}}, "outside [0, 1000]"),
    ({"scene": {"obstacles": [{"primitive": {"type": "sphere", "dimensions": [1]},
                               "pose": {"orientation": [0, 0, 0, 2]}}]}}, "not a unit quaternion"),
    ({"scene": {"obstacles": [{"mesh_name": "fixture"}]}}, "no mesh 'fixture' was given"),
    ({"scene": {"obstacles": [{"mesh": {"vertices": [[0, 0, 0]] * 4, "triangles": [[0, 1, 2]]}}]}}, "flat"),
    ({"scene": {"obstacles": [{"mesh": {"vertices": [[0, 0, 0]] * 4, "triangles": [[0, 1, 9]]}}]}},
     "vertex indices in 0..3"),
    ({"scene": {"obstacles": [{"name": "a", "primitive": {"type": 2, "dimensions": [1]}}] * 2}}, "used twice"),
    ({"scene": {"obstacles": [{"primitive": {"type": 2, "dimensions": [1]}}] * (MAX_OBSTACLES + 1)}},
     f"more than {MAX_OBSTACLES}"),
    ({"scene": {"include": "other.yaml"}}, "scene.include: unknown key"),
])
def test_bad_scenes_are_one_line(data, words):
    with pytest.raises(SceneError) as err:
        scene_from_mapping(data)
    assert words in str(err.value) and "\n" not in str(err.value)


def test_mesh_files_unreadable_or_too_large_are_one_line(tmp_path):
    bad = tmp_path / "broken.stl"
    bad.write_bytes(b"solid x\nthis is not an stl\n" * 3)
    with pytest.raises(SceneError, match=r"mesh: (cannot read broken.stl|broken.stl: the vertices)"):
        load_mesh_file(str(bad))
    with pytest.raises(SceneError, match="has 81 bytes, more than 10"):
        load_mesh_file(str(bad), max_bytes=10)
    with pytest.raises(SceneError, match="file not found"):
        load_mesh_file(str(tmp_path / "missing.stl"))


@pytest.mark.parametrize("meter", ["1", "0.001"])
def test_an_obstacle_mesh_file_in_millimetres_is_as_large_as_its_unit_says(tmp_path, meter):
    """An obstacle's COLLADA file (``--mesh fixture=F.dae``) is scaled to metres by its <unit meter>, as RViz
    draws it: the 0.1 m cube written in millimetres is 0.1 m wide, not 100 m."""
    from test.collada_testdata import CENTRE, EDGE, cube_dae

    path = tmp_path / "fixture.dae"
    path.write_text(cube_dae(meter))
    V, T = load_mesh_file(str(path))
    np.testing.assert_allclose(np.ptp(V, axis=0), [EDGE, EDGE, EDGE], rtol=1e-6)
    np.testing.assert_allclose(0.5 * (V.min(axis=0) + V.max(axis=0)), CENTRE, atol=1e-7)
    assert len(T) == 12


def test_an_obstacle_mesh_file_with_a_nonsense_unit_is_one_line(tmp_path):
    from test.collada_testdata import cube_dae

    path = tmp_path / "fixture.dae"
    path.write_text(cube_dae("-1"))
    with pytest.raises(SceneError, match=r"^mesh: fixture.dae: its <unit meter='-1'> is not a length"):
        load_mesh_file(str(path))


def test_an_obstacle_mesh_file_of_several_materials_is_its_whole_surface(tmp_path):
    """The triangles of a COLLADA geometry of two cubes 0.3 m apart, each in its own material, are both cubes once
    each, so a check with ``--shapes mesh`` measures to both. coal's loader numbered the second material's
    triangles against the first one's vertices: the far cube was not there."""
    from test.collada_testdata import CENTRE, EDGE, cube_dae

    path = tmp_path / "fixture.dae"
    path.write_text(cube_dae("1", twin=0.3))
    V, T = load_mesh_file(str(path))
    X = V[T]
    assert len(T) == 24
    assert 0.5 * np.linalg.norm(np.cross(X[:, 1] - X[:, 0], X[:, 2] - X[:, 0]), axis=1).sum() == \
        pytest.approx(12 * EDGE**2, rel=1e-6)
    far = X.reshape(-1, 3)[:, 0] > CENTRE[0] + 0.3 - EDGE  # corners of the far cube's triangles
    assert far.sum() == 36

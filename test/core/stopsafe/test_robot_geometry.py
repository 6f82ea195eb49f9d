"""The robot's collision geometry: batched kinematics equal Pinocchio's, the convex hulls give distances no larger
than the meshes' vertices allow, every broad-phase bound is below the exact distance, and meshes are found only
inside the package directories."""

import numpy as np
import pinocchio as pin
import pytest

import stopsafe_scenarios as S
from test.collada_testdata import CENTRE, EDGE, cube_dae, unit_package, unit_urdf
from vtm_dynamics.core.robot.model import example_robot_urdf
from vtm_dynamics.core.robot.urdf_extension import read_urdf_file
from vtm_dynamics.core.stopsafe.broad_phase import scene_bodies, segment_distances
from vtm_dynamics.core.stopsafe.robot_geometry import (
    GeometryError, build_robot_geometry, example_robot_package_dir, resolve_mesh,
)
from vtm_dynamics.core.stopsafe.sweep import Sweeper


@pytest.fixture(scope="module")
def robots():
    return {"ur5": S.ur5()[:2], "panda": S.panda()[:2]}


def _configurations(robot, rng, n):
    lo = np.maximum(robot.model.lowerPositionLimit, -np.pi)
    hi = np.minimum(robot.model.upperPositionLimit, np.pi)
    return lo + (hi - lo) * rng.random((n, robot.nq))


@pytest.mark.parametrize("name", ["ur5", "panda"])
def test_batched_joint_frames_equal_pinocchio_forward_kinematics(robots, name, rng):
    robot, geometry = robots[name]
    Q = _configurations(robot, rng, 40)
    Rs, ps = geometry.joint_poses(Q)
    data = robot.model.createData()
    for k, q in enumerate(Q):
        pin.forwardKinematics(robot.model, data, q)
        for j in range(robot.model.njoints):
            np.testing.assert_allclose(Rs[k, j], data.oMi[j].rotation, atol=1e-12)
            np.testing.assert_allclose(ps[k, j], data.oMi[j].translation, atol=1e-12)


def test_hull_distances_never_exceed_the_distance_to_any_vertex(robots, rng):
    """The distance between two convex hulls is at most the distance between any two of their vertices. The hull
    built by coal's buildConvexRepresentation (mesh faces as a 'convex') broke this by up to 15 cm on the UR5's
    upper arm; the qhull hull holds it."""
    import coal

    robot, geometry = robots["ur5"]
    sweeper = Sweeper(geometry, scene_bodies(S.scene("ur5")))
    geometry.set_self_pairs(True)
    sweeper = Sweeper(geometry, [])
    Q = _configurations(robot, rng, 25)
    Rs, ps = geometry.joint_poses(Q)
    Rp, tp = geometry.part_placements(Rs, ps)
    for s in range(sweeper.n_slots):
        a, b = sweeper.slot_a[s], sweeper.slot_b[s]
        for k in range(len(Q)):
            d = sweeper.exact(s, Rp[k], tp[k])
            A = geometry.parts[a].hull @ Rs[k, geometry.parts[a].joint].T + ps[k, geometry.parts[a].joint]
            B = geometry.parts[b].hull @ Rs[k, geometry.parts[b].joint].T + ps[k, geometry.parts[b].joint]
            closest_vertices = np.min(np.linalg.norm(A[:, None] - B[None], axis=-1))
            assert d <= closest_vertices + 1e-7, (sweeper.slot_names(s), d, closest_vertices)
    assert isinstance(geometry.parts[2].shape, coal.ConvexBase)


@pytest.mark.parametrize("name", ["ur5", "panda"])
def test_broad_phase_bounds_are_below_the_exact_distances(robots, name, rng):
    robot, geometry = robots[name]
    geometry.set_self_pairs(True)
    sweeper = Sweeper(geometry, scene_bodies(S.scene(name)))
    Q = _configurations(robot, rng, 60)
    Rs, ps = geometry.joint_poses(Q)
    lb = sweeper.pose_bounds(Rs, ps)
    Rp, tp = geometry.part_placements(Rs, ps)
    for s in range(sweeper.n_slots):
        exact = np.array([sweeper.exact(s, Rp[k], tp[k]) for k in range(len(Q))])
        apart = lb[:, s] > 0  # where the bound says "apart", the parts are at least that far apart
        assert np.all(exact[apart] >= lb[apart, s] - 1e-9), sweeper.slot_names(s)
        assert np.all((exact > 0) | (lb[:, s] <= 1e-9)), sweeper.slot_names(s)


def test_segment_distances_match_a_dense_search(rng):
    p0, p1, q0, q1 = rng.normal(size=(4, 300, 3))
    p1[:10] = p0[:10]  # degenerate segments (points) too, on either side and on both
    q1[5:20] = q0[5:20]
    q1[250:] = q0[250:] + 1e-3 * (p1[250:] - p0[250:])  # nearly parallel
    d = segment_distances(p0, p1, q0, q1)
    # reference: points along the first segment, each point's exact distance to the second (a clamped projection)
    x = p0[:, None] + np.linspace(0, 1, 2001)[None, :, None] * (p1 - p0)[:, None]
    d2 = q1 - q0
    t = np.clip(np.einsum("nki,ni->nk", x - q0[:, None], d2) / np.maximum(np.einsum("ni,ni->n", d2, d2), 1e-300)[:, None],
                0, 1)
    brute = np.min(np.linalg.norm(x - (q0[:, None] + t[..., None] * d2[:, None]), axis=-1), axis=1)
    assert np.all(d <= brute + 1e-12) and np.all(brute - d <= 2e-3)


def test_meshes_outside_the_package_directories_are_refused(tmp_path):
    with pytest.raises(GeometryError, match="not found inside the package directories"):
        resolve_mesh("package://example-robot-data/robots/ur_description/meshes/ur5/collision/base.stl",
                     [str(tmp_path)])
    with pytest.raises(GeometryError, match="not found inside"):
        resolve_mesh("/etc/hostname", [str(tmp_path)])
    with pytest.raises(GeometryError, match="not found inside"):
        resolve_mesh("../../etc/hostname", [str(tmp_path)])
    assert resolve_mesh("package://example-robot-data/robots/ur_description/meshes/ur5/collision/base.stl",
                        [example_robot_package_dir()]).endswith("base.stl")


def test_an_unreadable_collision_mesh_is_one_line(tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "link.stl").write_bytes(b"\x00" * 84 + b"garbage")
    urdf = ('<robot name="r"><link name="base"/><link name="l"><collision><geometry>'
            '<mesh filename="package://pkg/link.stl"/></geometry></collision></link>'
            '<joint name="j" type="revolute"><parent link="base"/><child link="l"/><axis xyz="0 0 1"/>'
            '<limit lower="-1" upper="1" effort="1" velocity="1"/></joint></robot>')
    with pytest.raises(GeometryError) as err:
        build_robot_geometry(urdf, [str(tmp_path)])
    assert "\n" not in str(err.value) and ("cannot" in str(err.value) or "convex hull" in str(err.value))


def test_fixed_joints_reduce_the_model_and_its_geometry():
    text = read_urdf_file(example_robot_urdf(S.PANDA_URDF))
    robot, geometry = build_robot_geometry(text, [example_robot_package_dir()], fixed_joints=S.PANDA_FINGERS)
    assert robot.nv == 7 and "panda_finger_joint1" not in robot.joint_names
    assert {p.link for p in geometry.parts} >= {"panda_leftfinger", "panda_hand"}
    with pytest.raises(GeometryError, match="outside the joint limits"):
        build_robot_geometry(text, [example_robot_package_dir()], fixed_joints={"panda_finger_joint1": 0.5})


@pytest.mark.parametrize("meter", ["1", "0.001", "0.0254"])
def test_a_collada_collision_mesh_is_as_large_as_its_unit_says(tmp_path, meter):
    """<unit meter="..."> of a COLLADA file says how many metres one of its coordinates is (RViz draws it so): the
    same 0.1 m cube written in metres, millimetres and inches is one part, 0.1 m on each side, centred 0.2 m above
    the joint, 0.4 m from a 0.05 m sphere whose centre is 0.5 m out along x. coal alone read the millimetre file
    1000 times too large."""
    import coal

    pkg = unit_package(str(tmp_path), {"cube.dae": cube_dae(meter)})
    _, geometry = build_robot_geometry(unit_urdf("cube.dae"), [pkg])
    (part,) = geometry.parts
    lo, hi = part.hull.min(axis=0), part.hull.max(axis=0)
    np.testing.assert_allclose(hi - lo, [EDGE, EDGE, EDGE], rtol=1e-6)
    np.testing.assert_allclose(0.5 * (lo + hi), CENTRE, atol=1e-7)
    request, result = coal.DistanceRequest(), coal.DistanceResult()
    d = coal.distance(part.shape, geometry.part_transform(0, np.eye(3), np.zeros(3)), coal.Sphere(0.05),
                      coal.Transform3s(np.eye(3), np.array([0.5, 0.0, CENTRE[2]])), request, result)
    assert d == pytest.approx(0.5 - EDGE / 2 - 0.05, abs=1e-6)
    assert float(np.max(part.sphere_radii)) < EDGE  # the broad-phase spheres are the cube's, not 1000 times larger


def test_the_urdf_mesh_scale_multiplies_the_collada_unit(tmp_path):
    pkg = unit_package(str(tmp_path), {"cube_mm.dae": cube_dae("0.001")})
    _, geometry = build_robot_geometry(unit_urdf("cube_mm.dae", scale="2 1 0.5"), [pkg])
    (part,) = geometry.parts
    np.testing.assert_allclose(np.ptp(part.hull, axis=0), [2 * EDGE, EDGE, 0.5 * EDGE], rtol=1e-6)
    np.testing.assert_allclose(0.5 * (part.hull.min(axis=0) + part.hull.max(axis=0)), [0.0, 0.0, 0.5 * CENTRE[2]],
                               atol=1e-7)


def test_the_collada_up_axis_is_ignored_as_rviz_ignores_it(tmp_path):
    """RViz (and Drake's Meshcat viewer) keep a COLLADA file's coordinates as written whatever its <up_axis>; so
    does the collision geometry: a Y_UP cube 0.2 m up z stays there (turned to z up it would be 0.2 m along -y)."""
    pkg = unit_package(str(tmp_path), {"cube_y.dae": cube_dae("0.001", up_axis="Y_UP")})
    _, geometry = build_robot_geometry(unit_urdf("cube_y.dae"), [pkg])
    (part,) = geometry.parts
    np.testing.assert_allclose(0.5 * (part.hull.min(axis=0) + part.hull.max(axis=0)), CENTRE, atol=1e-7)


@pytest.mark.parametrize("meter, why", [
    ("0", "unit"), ("-0.001", "unit"), ("nan", "unit"), ("inf", "unit"), ("5000", "unit"), ("1e-9", "unit"),
    ("millimetre", "unit"),
])
def test_a_nonsense_collada_unit_is_refused_in_one_line(tmp_path, meter, why):
    pkg = unit_package(str(tmp_path), {"cube.dae": cube_dae(meter if meter != "millimetre" else "1").replace(
        'meter="1"', 'meter="millimetre"')})
    with pytest.raises(GeometryError) as err:
        build_robot_geometry(unit_urdf("cube.dae"), [pkg])
    assert why in str(err.value) and "cube.dae" in str(err.value) and "\n" not in str(err.value)


def test_a_collada_file_with_entity_declarations_is_refused(tmp_path):
    """The unit is read with the document type refused: an entity that would expand (a billion laughs) or read
    another file is never expanded."""
    bomb = cube_dae("0.001").replace('<?xml version="1.0" encoding="utf-8"?>',
                                     '<?xml version="1.0"?>\n<!DOCTYPE COLLADA [<!ENTITY a "aaaaaaaaaa">'
                                     '<!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;">]>').replace(
        '<unit name="probe"', '<contributor><author>&b;</author></contributor><unit name="probe"')
    pkg = unit_package(str(tmp_path), {"bomb.dae": bomb})
    with pytest.raises(GeometryError, match="bomb.dae.*(DTD|entit)"):
        build_robot_geometry(unit_urdf("bomb.dae"), [pkg])


def _triangles_of(bvh) -> np.ndarray:
    V = np.array(bvh.vertices())
    T = np.array([[bvh.tri_indices(i)[k] for k in range(3)] for i in range(bvh.num_tris)])
    return V[T]


@pytest.mark.parametrize("materials", [1, 2])
def test_an_exact_collision_mesh_holds_every_part_of_a_collada_geometry_of_several_materials(tmp_path, materials):
    """shapes='mesh' measures to the mesh's triangles. A COLLADA geometry of two cubes 0.3 m apart, each in its
    own material (assimp reads them as two meshes; the first cube's faces split between ``materials`` more), is
    both cubes: every face 0.05 m from a sphere just beyond it. coal's loader numbered the second material's
    triangles against the first one's vertices: the far cube was missing, and a sphere 0.05 m beyond it measured
    0.35 m, to the near cube."""
    import coal

    twin = 0.3
    pkg = unit_package(str(tmp_path), {"cubes.dae": cube_dae("1", materials=materials, twin=twin)})
    _, geometry = build_robot_geometry(unit_urdf("cubes.dae"), [pkg], shapes="mesh")
    (part,) = geometry.parts
    X = _triangles_of(part.shape)
    area = 0.5 * np.linalg.norm(np.cross(X[:, 1] - X[:, 0], X[:, 2] - X[:, 0]), axis=1).sum()
    assert area == pytest.approx(2 * 6 * EDGE**2, rel=1e-6)
    radius, gap = 0.01, 0.05
    for shift in (0.0, twin):
        for direction in np.vstack([np.eye(3), -np.eye(3)]):
            if direction[0] * (1 if shift else -1) < 0:
                continue  # between the cubes: nearer to the other one
            centre = np.asarray(CENTRE) + [shift, 0.0, 0.0] + direction * (EDGE / 2 + gap + radius)
            d = coal.distance(part.shape, geometry.part_transform(0, np.eye(3), np.zeros(3)), coal.Sphere(radius),
                              coal.Transform3s(np.eye(3), centre), coal.DistanceRequest(), coal.DistanceResult())
            assert d == pytest.approx(gap, abs=1e-6), (shift, direction)

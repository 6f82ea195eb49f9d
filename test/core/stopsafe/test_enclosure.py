"""Distances between triangle meshes (``--shapes mesh``) see a shape wholly inside another: coal's distance to a
mesh is the distance to its surface, so a 5 mm pin inside the UR5's shoulder link read as 16 mm clear and the
trajectory check passed, where the convex hulls (the default) found the overlap."""

from __future__ import annotations

import coal
import numpy as np
import pytest
import scipy.spatial

from vtm_dynamics.core.robot.model import example_robot_urdf
from vtm_dynamics.core.robot.urdf_extension import read_urdf_file
from vtm_dynamics.core.stopsafe.broad_phase import scene_bodies
from vtm_dynamics.core.stopsafe.enclosure import inside_mesh
from vtm_dynamics.core.stopsafe.robot_geometry import build_robot_geometry, example_robot_package_dir
from vtm_dynamics.core.stopsafe.scene import scene_from_mapping
from vtm_dynamics.core.stopsafe.sweep import Sweeper


def _box_mesh(half: float):
    corners = np.array([[x, y, z] for x in (-half, half) for y in (-half, half) for z in (-half, half)])
    triangles = scipy.spatial.ConvexHull(corners).simplices.astype(np.int64)
    mesh = coal.BVHModelOBBRSS()
    mesh.beginModel(len(triangles), len(corners))
    mesh.addVertices(corners)
    mesh.addTriangles(triangles)
    mesh.endModel()
    return mesh


def test_points_inside_a_closed_mesh_are_inside_and_points_outside_are_not():
    mesh = _box_mesh(0.1)
    R = np.array([[0.0, -1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 1.0]])
    placement = coal.Transform3s(R, np.array([1.0, 2.0, 0.5]))
    at = np.array([1.0, 2.0, 0.5])
    assert inside_mesh(at, mesh, placement)
    assert inside_mesh(at + [0.09, -0.09, 0.09], mesh, placement)
    assert not inside_mesh(at + [0.11, 0.0, 0.0], mesh, placement)  # beside a face
    assert not inside_mesh(at + [0.11, 0.11, 0.0], mesh, placement)  # in the bounding sphere, outside the box
    assert not inside_mesh(at + [5.0, 0.0, 0.0], mesh, placement)


@pytest.mark.parametrize("shapes", ["mesh", "convex"])
def test_a_pin_inside_a_link_mesh_is_an_overlap_with_either_kind_of_shape(shapes):
    robot, geometry = build_robot_geometry(read_urdf_file(example_robot_urdf("ur_description/urdf/ur5_robot.urdf")),
                                           [example_robot_package_dir()], shapes=shapes)
    pin_at = [0.0, 0.0, 0.089]  # on the pan axis, inside the shoulder link's collision mesh
    scene = scene_from_mapping({"scene": {"self_collision": False, "obstacles": [
        {"name": "pin", "primitive": {"type": "sphere", "dimensions": [0.005]}, "pose": {"position": pin_at}}]}})
    sweeper = Sweeper(geometry, scene_bodies(scene, shapes))
    Rp, tp = sweeper.placements_of(np.array([0.0, -1.6, 0.2, -1.2, -1.57, 0.0]))
    shoulder = [k for k, p in enumerate(geometry.parts) if p.link == "shoulder_link"]
    slot = next(s for s in range(sweeper.n_slots) if sweeper.slot_a[s] in shoulder and not sweeper.slot_self[s])
    assert sweeper.exact(slot, Rp, tp) < 0.0

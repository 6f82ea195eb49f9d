"""Whether a point lies inside a triangle mesh, for distances between meshes (``--shapes mesh``).

coal's distance to a triangle mesh (a BVH of its triangles) is the distance to its surface: a shape wholly inside a
closed mesh is at a positive distance from it although the two overlap. Two shapes whose surfaces do not meet
(distance d > 0) are either apart or one encloses the other, and then every point of the inner one is inside the
outer one; so it is enough to ask for one point, the nearest point of the distance query. A point is taken as
inside when a ray from it meets the mesh in each of the six axis directions. A point outside has an escaping ray
unless it sits in a pocket of the mesh that blocks all six; then the test says "inside": it errs towards a negative
clearance, never towards a larger one. It assumes closed meshes: through a hole a ray escapes.
Rays are coal capsules of radius ``RAY_RADIUS`` [m], as long as the mesh's bounding sphere needs. Units: m.
"""

from __future__ import annotations

import numpy as np

RAY_RADIUS = 1e-9  # [m]
_DIRECTIONS = np.vstack((np.eye(3), -np.eye(3)))


def _rotation_with_z(u: np.ndarray) -> np.ndarray:
    """A rotation whose third column is the unit vector ``u``."""
    a = np.array([1.0, 0.0, 0.0]) if abs(u[0]) < 0.9 else np.array([0.0, 1.0, 0.0])
    x = np.cross(a, u)
    x /= np.linalg.norm(x)
    return np.column_stack((x, np.cross(u, x), u))


_ROTATIONS = tuple(_rotation_with_z(u) for u in _DIRECTIONS)


def is_mesh(shape) -> bool:
    """Whether ``shape`` (a coal geometry) is a triangle mesh, whose distance is its surface's."""
    import coal

    return isinstance(shape, coal.BVHModelBase)


def inside_mesh(point: np.ndarray, mesh, placement) -> bool:
    """Whether the world ``point`` [m] is inside the triangle ``mesh`` (a coal BVH model) at ``placement`` (a coal
    ``Transform3s``): every axis ray from the point meets it (module docstring)."""
    import coal

    if mesh.aabb_radius < 0.0:
        mesh.computeLocalAABB()
    center = np.asarray(placement.transform(np.asarray(mesh.aabb_center, dtype=float)))
    point = np.asarray(point, dtype=float)
    reach = float(np.linalg.norm(point - center))
    if reach > mesh.aabb_radius:
        return False  # outside the mesh's bounding sphere
    length = reach + mesh.aabb_radius + 1e-3
    ray = coal.Capsule(RAY_RADIUS, length)
    request, result = coal.CollisionRequest(), coal.CollisionResult()
    for u, R in zip(_DIRECTIONS, _ROTATIONS):
        result.clear()
        if not coal.collide(ray, coal.Transform3s(R, point + 0.5 * length * u), mesh, placement, request, result):
            return False
    return True


def enclosed(shapes: tuple, placements: tuple, result) -> bool:
    """Whether one of two ``shapes`` (coal geometries at coal ``placements``) lies inside the other's triangle mesh,
    after a distance query that found them apart (``result``: its coal ``DistanceResult``, nearest points in the
    world frame)."""
    (a, b), (Ta, Tb) = shapes, placements
    if is_mesh(b) and inside_mesh(np.array(result.getNearestPoint1()), b, Tb):
        return True
    return is_mesh(a) and inside_mesh(np.array(result.getNearestPoint2()), a, Ta)

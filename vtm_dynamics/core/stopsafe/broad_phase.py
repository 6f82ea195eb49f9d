"""Scene bodies for the sweep and the broad phase: lower bounds of distances from spheres, many poses at once.

Each obstacle of a :class:`~vtm_dynamics.core.stopsafe.scene.Scene` becomes a :class:`Body`: its coal shape and
world transform for exact distances, and a simple *bounding* solid for lower bounds - the primitive itself (box,
sphere, cylinder), the circumscribed cylinder of a cone, the oriented bounding box of a mesh, the half-space of
the floor. The signed distance from a point to such a solid, minus a sphere's radius, is a lower bound of the
distance from anything inside the sphere to anything inside the obstacle (both are 1-Lipschitz in the point),
and likewise |c_a - c_b| - r_a - r_b for two spheres of the robot. Negative values mean possible contact.
Units: m.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from vtm_dynamics.core.stopsafe.robot_geometry import convex_hull
from vtm_dynamics.core.stopsafe.scene import Obstacle, Scene


@dataclass(frozen=True)
class Body:
    """One obstacle for the sweep: ``name``, coal ``shape`` and ``transform`` (world), and its bounding solid:
    ``kind`` box | sphere | cylinder | halfspace with ``center`` (3), ``rotation`` (3 x 3), ``size`` (box: half
    extents; sphere: (radius,); cylinder: (radius, half height); halfspace: (offset,) with the normal as the
    rotation's third column)."""

    name: str
    shape: object
    transform: object
    kind: str
    center: np.ndarray
    rotation: np.ndarray
    size: np.ndarray


def _mesh_shape(ob: Obstacle, shapes: str):
    import coal

    bvh = coal.BVHModelOBBRSS()
    bvh.beginModel(len(ob.triangles), len(ob.vertices))
    bvh.addVertices(np.ascontiguousarray(ob.vertices, dtype=float))
    bvh.addTriangles(np.ascontiguousarray(ob.triangles, dtype=np.int64))
    bvh.endModel()
    if shapes == "convex":
        return convex_hull(bvh, ob.name)
    return bvh


def scene_bodies(scene: Scene, shapes: str = "convex") -> tuple[Body, ...]:
    """The bodies of ``scene``'s obstacles and floor (the floor is named ``floor``)."""
    import coal

    bodies = []
    for ob in scene.obstacles:
        R = ob.rotation
        T = coal.Transform3s(R, ob.position)
        if ob.kind == "box":
            shape = coal.Box(*ob.dimensions)
            bodies.append(Body(ob.name, shape, T, "box", ob.position, R, 0.5 * np.array(ob.dimensions)))
        elif ob.kind == "sphere":
            shape = coal.Sphere(ob.dimensions[0])
            bodies.append(Body(ob.name, shape, T, "sphere", ob.position, R, np.array(ob.dimensions[:1])))
        elif ob.kind in ("cylinder", "cone"):
            height, radius = ob.dimensions
            shape = coal.Cylinder(radius, height) if ob.kind == "cylinder" else coal.Cone(radius, height)
            bodies.append(Body(ob.name, shape, T, "cylinder", ob.position, R, np.array([radius, 0.5 * height])))
        else:
            V = ob.vertices
            mean = V.mean(axis=0)
            _, _, axes = np.linalg.svd(V - mean, full_matrices=False)
            local = (V - mean) @ axes.T
            lo, hi = local.min(axis=0), local.max(axis=0)
            center_local = mean + 0.5 * (lo + hi) @ axes
            box_R = R @ axes.T
            bodies.append(Body(ob.name, _mesh_shape(ob, shapes), T, "box", ob.position + R @ center_local, box_R,
                               0.5 * (hi - lo)))
    if scene.floor_height is not None:
        normal = np.array([0.0, 0.0, 1.0])
        bodies.append(Body("floor", coal.Halfspace(normal, float(scene.floor_height)), coal.Transform3s(),
                           "halfspace", np.array([0.0, 0.0, scene.floor_height]), np.eye(3),
                           np.array([float(scene.floor_height)])))
    return tuple(bodies)


def point_body_distance(points: np.ndarray, body: Body) -> np.ndarray:
    """Signed distance [m] from ``points`` (... x 3) to the body's bounding solid (negative inside)."""
    if body.kind == "halfspace":
        return points[..., 2] - body.size[0]
    local = (points - body.center) @ body.rotation  # into the solid's frame
    if body.kind == "sphere":
        return np.linalg.norm(local, axis=-1) - body.size[0]
    if body.kind == "box":
        excess = np.abs(local) - body.size
        outside = np.linalg.norm(np.maximum(excess, 0.0), axis=-1)
        return np.where(np.all(excess <= 0.0, axis=-1), np.max(excess, axis=-1), outside)
    radial = np.linalg.norm(local[..., :2], axis=-1) - body.size[0]
    axial = np.abs(local[..., 2]) - body.size[1]
    outside = np.hypot(np.maximum(radial, 0.0), np.maximum(axial, 0.0))
    return np.where((radial <= 0.0) & (axial <= 0.0), np.maximum(radial, axial), outside)


def part_body_bounds(centers: np.ndarray, radii: np.ndarray, owner: np.ndarray, n_parts: int,
                     bodies: tuple[Body, ...]) -> np.ndarray:
    """Lower bounds (P x parts x bodies) [m] of the distance from each part to each body, from the parts'
    bounding spheres (``centers`` P x S x 3, ``radii`` S, ``owner`` S -> part)."""
    P = centers.shape[0]
    out = np.full((P, n_parts, len(bodies)), np.inf)
    starts = np.flatnonzero(np.r_[True, owner[1:] != owner[:-1]])
    for b, body in enumerate(bodies):
        per_sphere = point_body_distance(centers, body) - radii[None, :]
        out[:, owner[starts], b] = np.minimum.reduceat(per_sphere, starts, axis=1)
    return out


def part_body_support_bounds(Rs: np.ndarray, ps: np.ndarray, parts: Sequence, moving: Sequence[int],
                             bodies: tuple[Body, ...], coarse: np.ndarray | None = None,
                             within: float = math.inf) -> np.ndarray:
    """Lower bounds (P x parts x bodies) [m] from the parts' convex hulls (``parts[g].hull``, joint frame; the
    joint frames ``Rs`` P x njoints x 3 x 3, ``ps`` P x njoints x 3) against box and half-space bodies by
    separating axes: along a unit direction n the gap min_part n.x - max_body n.y is at most the distance; the
    axes are the box's three face normals (both ways) and the half-space's normal, for which the hull's gap is
    its exact distance. The projections n.(R v + p) = (R^T n).v + n.p are one matrix product per part and axis.
    Only where the ``coarse`` bound (P x parts x bodies, e.g. the spheres') is below ``within`` [m]: elsewhere, and
    for other kinds and parts not in ``moving``, -inf (the coarse bound applies)."""
    P = Rs.shape[0]
    out = np.full((P, len(parts), len(bodies)), -np.inf)
    for b, body in enumerate(bodies):
        if body.kind not in ("halfspace", "box"):
            continue
        axes = [np.array([0.0, 0.0, 1.0])] if body.kind == "halfspace" else list(body.rotation.T)
        for g in moving:
            part = parts[g]
            rows = np.arange(P) if coarse is None else np.flatnonzero(coarse[:, g, b] < within)
            if rows.size == 0:
                continue
            R, p = Rs[rows, part.joint], ps[rows, part.joint]
            gap = np.full(rows.size, -np.inf)
            for i, n in enumerate(axes):
                u = np.einsum("pij,i->pj", R, n)  # R^T n for every pose
                proj = u @ part.hull.T + (p @ n)[:, None]
                if body.kind == "halfspace":
                    gap = proj.min(axis=1) - body.size[0]
                else:
                    c = float(n @ body.center)
                    gap = np.maximum(gap, np.maximum(proj.min(axis=1) - c - body.size[i],
                                                     c - body.size[i] - proj.max(axis=1)))
            out[rows, g, b] = gap
    return out


def part_pair_bounds(centers: np.ndarray, radii: np.ndarray, owner: np.ndarray,
                     pairs: np.ndarray) -> np.ndarray:
    """Lower bounds (P x pairs) [m] of the distance between the two parts of each pair (sphere against sphere);
    :func:`pair_axis_bounds` gives a second bound."""
    P = centers.shape[0]
    if len(pairs) == 0:
        return np.zeros((P, 0))
    by_part = [np.flatnonzero(owner == g) for g in range(int(owner.max()) + 1)]
    ia, ib, pid = [], [], []
    for k, (a, b) in enumerate(pairs):
        sa, sb = by_part[a], by_part[b]
        ia.append(np.repeat(sa, len(sb)))
        ib.append(np.tile(sb, len(sa)))
        pid.append(np.full(len(sa) * len(sb), k))
    ia, ib, pid = np.concatenate(ia), np.concatenate(ib), np.concatenate(pid)
    d = np.linalg.norm(centers[:, ia] - centers[:, ib], axis=-1) - radii[ia] - radii[ib]
    starts = np.flatnonzero(np.r_[True, pid[1:] != pid[:-1]])
    return np.minimum.reduceat(d, starts, axis=1)


def segment_distances(p0: np.ndarray, p1: np.ndarray, q0: np.ndarray, q1: np.ndarray) -> np.ndarray:
    """Distances [m] between segments [p0, p1] and [q0, q1] (... x 3 each), elementwise: the closest points
    minimise |p0 + s d1 - q0 - t d2| over s, t in [0, 1] - the unconstrained optimum clamped to [0, 1], the other
    parameter re-optimised for it and clamped, the first once more for that (exact for segments; a segment of
    zero length is a point)."""
    d1, d2, r = p1 - p0, q1 - q0, p0 - q0
    a = np.einsum("...i,...i", d1, d1)
    e = np.einsum("...i,...i", d2, d2)
    b = np.einsum("...i,...i", d1, d2)
    c = np.einsum("...i,...i", d1, r)
    f = np.einsum("...i,...i", d2, r)
    tiny = 1e-18
    pa, pe = a > tiny, e > tiny
    safe_a, safe_e = np.where(pa, a, 1.0), np.where(pe, e, 1.0)
    denom = a * e - b * b
    general = np.clip((b * f - c * e) / np.where(denom > tiny, denom, 1.0), 0.0, 1.0)
    s = np.where(denom > 1e-12 * np.maximum(a * e, tiny), general, 0.0)  # parallel segments: any s, take 0
    s = np.where(pa, s, 0.0)
    t = np.where(pe, np.clip((b * s + f) / safe_e, 0.0, 1.0), 0.0)
    s = np.where(pa, np.clip((b * t - c) / safe_a, 0.0, 1.0), 0.0)
    t = np.where(pe, np.clip((b * s + f) / safe_e, 0.0, 1.0), 0.0)
    diff = p0 + s[..., None] * d1 - q0 - t[..., None] * d2
    return np.linalg.norm(diff, axis=-1)


def capsule_pair_bounds(a: np.ndarray, b: np.ndarray, radii: np.ndarray, pairs: np.ndarray) -> np.ndarray:
    """Lower bounds (P x pairs) [m] between parts from their bounding capsules (ends ``a``, ``b`` P x parts x 3)."""
    if len(pairs) == 0:
        return np.zeros((a.shape[0], 0))
    i, j = pairs[:, 0], pairs[:, 1]
    return segment_distances(a[:, i], b[:, i], a[:, j], b[:, j]) - radii[i] - radii[j]

"""Bounding volumes of a collision shape, for lower bounds of distances (the broad phase of the sweep).

Each is built from points whose convex hull holds the shape (:func:`shape_points`): a few spheres (the points'
oriented bounding box cut into near-cubic slabs, a circumscribed sphere each), the exact convex hull's vertices and
a capsule. Every one holds the shape, so a distance computed to it is at most the shape's own distance. Units: m.
"""

from __future__ import annotations

import math

import numpy as np


def bounding_spheres(points: np.ndarray, max_spheres: int = 4) -> tuple[np.ndarray, np.ndarray]:
    """Spheres (centers S x 3, radii S) whose union holds the convex hull of ``points``: the points' oriented
    bounding box (principal axes) cut along its longest side into near-cubic slabs, one circumscribed sphere each."""
    pts = np.asarray(points, dtype=float)
    mean = pts.mean(axis=0)
    _, _, axes = np.linalg.svd(pts - mean, full_matrices=False)
    local = (pts - mean) @ axes.T
    lo, hi = local.min(axis=0), local.max(axis=0)
    ext = hi - lo
    order = np.argsort(ext)[::-1]
    n = int(min(max_spheres, max(1, math.ceil(ext[order[0]] / max(ext[order[1]], 1e-9) - 1e-9))))
    edges = np.linspace(lo[order[0]], hi[order[0]], n + 1)
    centers, radii = [], []
    for k in range(n):
        blo, bhi = lo.copy(), hi.copy()
        blo[order[0]], bhi[order[0]] = edges[k], edges[k + 1]
        c_local = 0.5 * (blo + bhi)
        centers.append(mean + c_local @ axes)
        radii.append(0.5 * float(np.linalg.norm(bhi - blo)))
    return np.array(centers), np.array(radii)


def bounding_capsule(points: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
    """A capsule (segment ends, radius [m]) that holds the convex hull of ``points``: the segment on the points'
    principal axis between their extreme projections, the radius the largest distance of a point from it (a
    capsule is convex, so holding the points it holds their hull)."""
    pts = np.asarray(points, dtype=float)
    mean = pts.mean(axis=0)
    _, _, axes = np.linalg.svd(pts - mean, full_matrices=False)
    u = axes[0]
    proj = (pts - mean) @ u
    lo, hi = float(proj.min()), float(proj.max())
    # shorten the segment by the cross-section's half width (the caps cover the ends) where that keeps it valid
    a, b = mean + lo * u, mean + hi * u
    along = np.clip(proj, lo, hi)
    radius = float(np.max(np.linalg.norm(pts - (mean + along[:, None] * u), axis=1)))
    shrink = min(radius, 0.5 * (hi - lo))
    a2, b2 = mean + (lo + shrink) * u, mean + (hi - shrink) * u
    t = np.clip(proj, lo + shrink, hi - shrink)
    radius2 = float(np.max(np.linalg.norm(pts - (mean + t[:, None] * u), axis=1)))
    if radius2 < radius + shrink - 1e-12 and radius2 <= radius * 1.2:
        return a2, b2, radius2
    return a, b, radius


def in_frame(capsule: tuple[np.ndarray, np.ndarray, float], R: np.ndarray,
                    p: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
    return R @ capsule[0] + p, R @ capsule[1] + p, capsule[2]


def hull_vertices(points: np.ndarray) -> np.ndarray:
    """The vertices of the convex hull of ``points`` (all points when the hull is degenerate)."""
    from scipy.spatial import ConvexHull

    try:
        return np.asarray(points)[ConvexHull(points).vertices]
    except Exception:  # noqa: BLE001 - flat or too few points: every point is kept (still exact for the bounds)
        return np.asarray(points, dtype=float)


def shape_points(shape: object) -> np.ndarray:
    """Points whose convex hull holds a coal shape (mesh vertices, box corners, else its local AABB corners)."""
    import coal

    if isinstance(shape, coal.BVHModelBase):
        return np.array(shape.vertices(), dtype=float)
    if isinstance(shape, coal.Box):
        h = np.asarray(shape.halfSide, dtype=float)
        return np.array([[sx * h[0], sy * h[1], sz * h[2]] for sx in (-1, 1) for sy in (-1, 1) for sz in (-1, 1)])
    shape.computeLocalAABB()
    lo, hi = np.asarray(shape.aabb_local.min_, dtype=float), np.asarray(shape.aabb_local.max_, dtype=float)
    return np.array([[x, y, z] for x in (lo[0], hi[0]) for y in (lo[1], hi[1]) for z in (lo[2], hi[2])])

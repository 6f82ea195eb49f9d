"""The robot's collision geometry: the URDF's ``<collision>`` elements through Pinocchio's geometry model and coal.

Each collision element becomes a *part* carried by a joint of the kinematic model. Its distance shape is the convex
hull of its mesh (``shapes="convex"``, the default: GJK distances in microseconds, and never larger than the mesh's
own distance because the hull contains the mesh - the check errs on the safe side; the hull is computed by qhull,
see :func:`convex_hull`) or the mesh itself
(``shapes="mesh"``: exact, about a hundred times slower; its triangles read again by :func:`exact_mesh`, since coal's
loader misnumbers those of a COLLADA geometry in several materials); primitives (box, cylinder, sphere, capsule) stay as
they are. For the broad phase every part is covered by a few spheres fixed in its joint frame (the part's
oriented bounding box cut into near-cubic slabs, each slab in its circumscribed sphere), and
:func:`joint_poses` computes the joint frames of many configurations at once (numpy, checked against Pinocchio's
forward kinematics in the tests).

Displacement bound (used by the sweep and the sampling, docs/stopsafe.md): when the joints move by |dq_j|, every
point of part g moves by at most sum_j R[g, j] |dq_j| with R[g, j] the largest distance of a point of g from joint
j's origin over all configurations (bounded by the lengths of the links between them plus the part's sphere
extent; 1 m/m for a prismatic joint; 0 for joints not upstream of g).

Mesh files are found only inside the package directories the caller gives (``package://pkg/rel`` as
``<dir>/pkg/rel``; any other file name must resolve inside one of them), each capped in bytes and triangles; an
unreadable mesh is one line naming it. Units: m, rad.
"""

from __future__ import annotations

import math
import os
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np
import pinocchio as pin

from vtm_dynamics.core.excerpt import clip, first_line
from vtm_dynamics.core.package_data import example_robot_data_share
from vtm_dynamics.core.robot.mesh_units import MeshUnitError, mesh_file_unit
from vtm_dynamics.core.robot.model import ModelError, RobotModel
from vtm_dynamics.core.robot.urdf_extension import URDFExtensionError, numbers, parse_urdf_xml
from vtm_dynamics.core.stopsafe.bounding_volumes import (
    bounding_capsule, bounding_spheres, hull_vertices, in_frame, shape_points,
)
from vtm_dynamics.core.stopsafe.scene import MAX_MESH_FILE_BYTES, MAX_MESH_TRIANGLES, SceneError, mesh_file_triangles_at

SHAPES = ("convex", "mesh")
MAX_PARTS = 512
REVOLUTE = {"JointModelRX": (1.0, 0.0, 0.0), "JointModelRY": (0.0, 1.0, 0.0), "JointModelRZ": (0.0, 0.0, 1.0)}
PRISMATIC = {"JointModelPX": (1.0, 0.0, 0.0), "JointModelPY": (0.0, 1.0, 0.0), "JointModelPZ": (0.0, 0.0, 1.0)}


class GeometryError(SceneError):
    """Collision geometry that cannot be built (one line: a mesh not found or not readable, a limit)."""


@dataclass(frozen=True)
class Part:
    """One collision element: ``name`` (Pinocchio's), ``link`` it belongs to, ``joint`` (Pinocchio joint id that
    carries it, 0 = fixed to the world), its placement in that joint's frame (``rotation``, ``translation``),
    the coal ``shape`` used for distances, its bounding ``sphere_centers`` (S x 3, joint frame) and
    ``sphere_radii`` (S) [m], the vertices (V x 3, joint frame) of the shape's convex ``hull`` (for a sphere,
    cylinder or capsule the corners of its bounding box), and a bounding ``capsule`` (segment ends in the joint
    frame, radius [m]) for part-to-part bounds."""

    name: str
    link: str
    joint: int
    rotation: np.ndarray
    translation: np.ndarray
    shape: object
    sphere_centers: np.ndarray
    sphere_radii: np.ndarray
    hull: np.ndarray
    capsule: tuple[np.ndarray, np.ndarray, float]


def convex_hull(mesh: object, name: str) -> object:
    """The convex hull (coal ``Convex``, computed by qhull) of a coal mesh. Not ``buildConvexRepresentation``:
    that keeps every vertex with the mesh's triangles as faces, and GJK's support search on that non-convex
    surface returns distances that are too large (checked in the tests)."""
    try:
        mesh.buildConvexHull(False, "Qt")
        hull = mesh.convex
        if hull is None or hull.num_points < 4:
            raise ValueError("degenerate")
    except Exception:  # noqa: BLE001 - qhull fails on flat meshes; a flat mesh cannot be swept as a hull
        raise GeometryError(f"mesh of {clip(name)}: its convex hull cannot be computed (flat or degenerate)") from None
    return hull


def exact_mesh(path: str, scale: np.ndarray, name: str) -> object:
    """The triangle mesh (coal ``BVHModelOBBRSS``) of the collision mesh file at ``path`` (resolved and checked by
    :func:`resolve_mesh`), its numbers times ``scale`` (the URDF's scale times a COLLADA file's unit), its
    triangles read by :func:`~vtm_dynamics.core.stopsafe.scene.mesh_file_triangles_at`: coal's loader, which read
    the file for Pinocchio, misnumbers the triangles of a geometry in several materials
    (:mod:`vtm_dynamics.core.robot.mesh_triangles`); the distances of ``shapes="mesh"`` are to these triangles."""
    import coal

    try:
        V, T = mesh_file_triangles_at(path)
    except SceneError as err:
        raise GeometryError(f"collision mesh of {clip(name)}: {err}") from None
    bvh = coal.BVHModelOBBRSS()
    bvh.beginModel(len(T), len(V))
    bvh.addVertices(np.ascontiguousarray(V * scale, dtype=float))
    bvh.addTriangles(np.ascontiguousarray(T, dtype=np.int64))
    bvh.endModel()
    return bvh


def example_robot_package_dir() -> str:
    """The directory that holds ``example-robot-data`` (what ``package://example-robot-data/...`` resolves in)."""
    share = example_robot_data_share()
    if share is None:
        raise ModelError("example-robot-data is not installed")
    return share


def resolve_mesh(filename: str, package_dirs: Sequence[str]) -> str:
    """The file a URDF mesh name points to, inside one of ``package_dirs`` (else :class:`GeometryError`)."""
    roots = [os.path.realpath(d) for d in package_dirs]
    shown = clip(filename, 120)
    candidates = []
    if filename.startswith("package://"):
        rel = filename[len("package://"):]
        candidates = [os.path.join(r, rel) for r in roots]
    elif filename.startswith("file://"):
        candidates = [filename[len("file://"):]]
    elif os.path.isabs(filename):
        candidates = [filename]
    else:
        candidates = [os.path.join(r, filename) for r in roots]
    for c in candidates:
        real = os.path.realpath(c)
        if not any(real == r or real.startswith(r + os.sep) for r in roots):
            continue
        if os.path.isfile(real):
            size = os.path.getsize(real)
            if size > MAX_MESH_FILE_BYTES:
                raise GeometryError(f"urdf: collision mesh {shown} has {size} bytes, more than {MAX_MESH_FILE_BYTES}")
            return real
    raise GeometryError(f"urdf: collision mesh {shown} not found inside the package directories "
                        f"({len(roots)} given)")


def _collision_mesh_elements(root: ET.Element) -> list[ET.Element]:
    return [mesh for link in root.findall("link") for col in link.findall("collision") for mesh in col.iter("mesh")
            if mesh.get("filename")]


def _parse(urdf_text: str) -> ET.Element:
    try:
        return parse_urdf_xml(urdf_text)
    except URDFExtensionError as err:
        raise GeometryError(str(err)) from None


def collision_meshes(urdf_text: str) -> list[str]:
    """The mesh file names of the URDF's ``<collision>`` elements (in document order)."""
    return [mesh.get("filename") for mesh in _collision_mesh_elements(_parse(urdf_text))]


def with_mesh_units(urdf_text: str, package_dirs: Sequence[str]) -> tuple[str, set[str]]:
    """(the URDF text Pinocchio builds the collision geometry from, the files its collision meshes resolve to).

    Each collision mesh is found by :func:`resolve_mesh`; a COLLADA file's unit (``mesh_units``: coal reads the
    file's numbers as metres) multiplies the element's ``<mesh scale>``. The scale is changed in the URDF before
    Pinocchio reads it, rather than the shapes after, so that Pinocchio's geometry objects (their ``meshScale``)
    and every bound derived from them are built once, at the right size. A text whose meshes are all in metres is
    returned unchanged."""
    root = _parse(urdf_text)
    files, changed = set(), False
    for mesh in _collision_mesh_elements(root):
        name = mesh.get("filename")
        path = resolve_mesh(name, package_dirs)
        files.add(path)
        try:
            unit = mesh_file_unit(path)
        except MeshUnitError as err:
            raise GeometryError(f"urdf: collision mesh {clip(name, 120)}: {err}") from None
        if unit != 1.0:
            scale = numbers(mesh.get("scale"), (1.0, 1.0, 1.0), f"urdf: collision mesh {clip(name, 120)} scale",
                            GeometryError)
            mesh.set("scale", " ".join(repr(unit * s) for s in scale))
            changed = True
    return (ET.tostring(root, encoding="unicode") if changed else urdf_text), files


class RobotGeometry:
    """The collision parts of a robot model and its batched kinematics (module docstring).

    Attributes: ``robot`` (the kinematic model), ``parts``, ``shapes`` (``convex`` or ``mesh``), ``radii``
    (parts x nv, the displacement bound's R [m/rad]), ``self_pairs`` (part index pairs that may collide: not the
    same or adjacent joints, not allowed by name), ``adjacent_excluded`` (how many pairs that rule removed)."""

    def __init__(self, robot: RobotModel, geometry: pin.GeometryModel, shapes: str = "convex") -> None:
        import coal

        if shapes not in SHAPES:
            raise GeometryError(f"shapes: expected one of {', '.join(SHAPES)}, got {clip(shapes)!r}")
        if geometry.ngeoms == 0:
            raise GeometryError(f"urdf: {robot.name!r} has no <collision> geometry")
        if geometry.ngeoms > MAX_PARTS:
            raise GeometryError(f"urdf: {geometry.ngeoms} collision elements, more than {MAX_PARTS}")
        self.robot = robot
        self.shapes = shapes
        model = robot.model
        self._check_joints(robot)
        parts = []
        for g in geometry.geometryObjects:
            shape = g.geometry
            if isinstance(shape, coal.BVHModelBase):
                if shape.num_tris > MAX_MESH_TRIANGLES:
                    raise GeometryError(f"urdf: collision mesh of {clip(g.name)} has {shape.num_tris} triangles, "
                                        f"more than {MAX_MESH_TRIANGLES}")
                if shapes == "convex":
                    shape = convex_hull(shape, g.name)  # of the vertices, which coal's loader reads right
                else:
                    shape = exact_mesh(g.meshPath, np.asarray(g.meshScale, dtype=float), g.name)
            pts = shape_points(g.geometry)
            centers, radii = bounding_spheres(pts)
            M = g.placement
            R, p = np.array(M.rotation), np.array(M.translation)
            link = model.frames[g.parentFrame].name if g.parentFrame < len(model.frames) else g.name
            parts.append(Part(g.name, link, int(g.parentJoint), R, p, shape, centers @ R.T + p, radii,
                              hull_vertices(pts) @ R.T + p,
                              in_frame(bounding_capsule(pts), R, p)))
        self.parts = tuple(parts)
        self.radii = self._displacement_radii()
        self.self_pairs = np.zeros((0, 2), dtype=int)
        self.adjacent_excluded = 0

    # ------------------------------------------------------------------ construction helpers
    @staticmethod
    def _check_joints(robot: RobotModel) -> None:
        for jid in range(1, robot.model.njoints):
            jm = robot.model.joints[jid]
            kind = jm.shortname()
            if kind in REVOLUTE or kind in PRISMATIC or kind in ("JointModelRevoluteUnaligned",
                                                                  "JointModelPrismaticUnaligned"):
                continue
            raise GeometryError(f"robot: joint {robot.model.names[jid]!r} ({kind}) is not supported by the sweep "
                                "(revolute and prismatic joints only)")

    def _axis(self, jid: int) -> tuple[np.ndarray, bool]:
        jm = self.robot.model.joints[jid]
        kind = jm.shortname()
        if kind in REVOLUTE:
            return np.array(REVOLUTE[kind]), False
        if kind in PRISMATIC:
            return np.array(PRISMATIC[kind]), True
        axis = np.array(jm.extract().axis, dtype=float)
        return axis / np.linalg.norm(axis), kind == "JointModelPrismaticUnaligned"

    def _displacement_radii(self) -> np.ndarray:
        model = self.robot.model
        R = np.zeros((len(self.parts), self.robot.nv))
        for g, part in enumerate(self.parts):
            extent = float(np.max(np.linalg.norm(part.sphere_centers, axis=1) + part.sphere_radii))
            reach = extent
            jid = part.joint
            while jid > 0:
                _, prismatic = self._axis(jid)
                iv = model.joints[jid].idx_v
                R[g, iv] = 1.0 if prismatic else reach
                reach += float(np.linalg.norm(model.jointPlacements[jid].translation))
                if prismatic:  # the joint's own travel lengthens the lever of every joint above it
                    iq = model.joints[jid].idx_q
                    lo, hi = model.lowerPositionLimit[iq], model.upperPositionLimit[iq]
                    travel = max(abs(lo), abs(hi)) if np.isfinite(lo) and np.isfinite(hi) else math.inf
                    reach += float(travel)
                jid = model.parents[jid]
        return R

    def set_self_pairs(self, enabled: bool, allowed: "frozenset[tuple[str, str]]" = frozenset()) -> None:
        """Choose the self-collision pairs: every two parts on different, non-adjacent joints (a joint and its
        parent are adjacent), except link pairs in ``allowed`` (names must be links of the robot)."""
        links = {p.link for p in self.parts}
        for a, b in allowed:
            for n in (a, b):
                if n not in links:
                    raise GeometryError(f"scene.allowed_self_pairs: {clip(n)!r} is not a link with collision geometry "
                                        f"(links: {', '.join(sorted(links))})")
        parents = self.robot.model.parents
        pairs, adjacent = [], 0
        if enabled:
            for i, a in enumerate(self.parts):
                for j in range(i + 1, len(self.parts)):
                    b = self.parts[j]
                    if a.joint == b.joint or parents[a.joint] == b.joint or parents[b.joint] == a.joint:
                        adjacent += 1
                        continue
                    if tuple(sorted((a.link, b.link))) in allowed:
                        continue
                    pairs.append((i, j))
        self.self_pairs = np.array(pairs, dtype=int).reshape(-1, 2)
        self.adjacent_excluded = adjacent

    # ------------------------------------------------------------------ kinematics
    def joint_poses(self, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """World rotations (P x njoints x 3 x 3) and origins (P x njoints x 3) [m] of every joint frame for the
        configurations ``q`` (P x nq); joint 0 is the world. Batched Rodrigues rotations, same result as
        ``pinocchio.forwardKinematics``."""
        q = np.atleast_2d(np.asarray(q, dtype=float))
        model = self.robot.model
        P = q.shape[0]
        Rs = np.empty((P, model.njoints, 3, 3))
        ps = np.empty((P, model.njoints, 3))
        Rs[:, 0] = np.eye(3)
        ps[:, 0] = 0.0
        for jid in range(1, model.njoints):
            parent = model.parents[jid]
            M = model.jointPlacements[jid]
            MR, Mp = np.array(M.rotation), np.array(M.translation)
            axis, prismatic = self._axis(jid)
            angle = q[:, model.joints[jid].idx_q]
            base_R = Rs[:, parent] @ MR
            ps[:, jid] = ps[:, parent] + Rs[:, parent] @ Mp
            if prismatic:
                ps[:, jid] += (base_R @ axis) * angle[:, None]
                Rs[:, jid] = base_R
            else:
                K = np.array([[0.0, -axis[2], axis[1]], [axis[2], 0.0, -axis[0]], [-axis[1], axis[0], 0.0]])
                s, c = np.sin(angle)[:, None, None], np.cos(angle)[:, None, None]
                Rs[:, jid] = base_R @ (np.eye(3) + s * K + (1.0 - c) * (K @ K))
        return Rs, ps

    def sphere_centers(self, Rs: np.ndarray, ps: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """World centers (P x S x 3) of every part's bounding spheres, their radii (S) and owning part (S)."""
        centers, radii, owner = [], [], []
        for g, part in enumerate(self.parts):
            R, p = Rs[:, part.joint], ps[:, part.joint]
            centers.append(p[:, None, :] + np.einsum("pij,sj->psi", R, part.sphere_centers))
            radii.append(part.sphere_radii)
            owner.append(np.full(len(part.sphere_radii), g))
        return np.concatenate(centers, axis=1), np.concatenate(radii), np.concatenate(owner)

    def capsules(self, Rs: np.ndarray, ps: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """World capsule segment ends (P x parts x 3, twice) and radii (parts) of every part."""
        joints = np.array([p.joint for p in self.parts])
        a = np.array([p.capsule[0] for p in self.parts])
        b = np.array([p.capsule[1] for p in self.parts])
        r = np.array([p.capsule[2] for p in self.parts])
        Rj, pj = Rs[:, joints], ps[:, joints]
        return (pj + np.einsum("pgij,gj->pgi", Rj, a), pj + np.einsum("pgij,gj->pgi", Rj, b), r)

    def part_placements(self, Rs: np.ndarray, ps: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """World rotations (P x parts x 3 x 3) and translations (P x parts x 3) of every part."""
        joints = np.array([p.joint for p in self.parts])
        Rp = np.array([p.rotation for p in self.parts])
        tp = np.array([p.translation for p in self.parts])
        Rj, pj = Rs[:, joints], ps[:, joints]
        return Rj @ Rp[None], pj + np.einsum("pgij,gj->pgi", Rj, tp)

    def part_transform(self, g: int, R: np.ndarray, p: np.ndarray):
        """coal Transform3s of part ``g`` given its joint's world rotation ``R`` and origin ``p``."""
        import coal

        part = self.parts[g]
        return coal.Transform3s(R @ part.rotation, p + R @ part.translation)


def build_robot_geometry(urdf_text: str, package_dirs: Sequence[str], *, shapes: str = "convex",
                         fixed_joints: Mapping[str, float] | None = None,
                         robot: RobotModel | None = None) -> tuple[RobotModel, RobotGeometry]:
    """(kinematic model, collision geometry) of a URDF (text). ``fixed_joints`` {name: value [rad or m]} locks
    joints (e.g. a gripper's fingers) so that a trajectory need not name them (Pinocchio's reduced model and
    geometry). ``robot`` reuses an already built model of the same text when nothing is fixed."""
    import coal

    geometry_text, files = with_mesh_units(urdf_text, package_dirs)
    full = robot if (robot is not None and not fixed_joints) else RobotModel.from_urdf(urdf_text)
    try:
        geometry = pin.buildGeomFromUrdfString(full.model, geometry_text, pin.GeometryType.COLLISION,
                                               package_dirs=[os.path.realpath(d) for d in package_dirs])
    except Exception as err:  # noqa: BLE001 - Pinocchio/assimp raise plain errors with long texts
        first = first_line(err)
        raise GeometryError(f"urdf: a collision mesh cannot be read ({clip(first, 160)})") from None
    for g in geometry.geometryObjects:  # the unit was read from the very file Pinocchio loaded
        if isinstance(g.geometry, coal.BVHModelBase) and os.path.realpath(g.meshPath) not in files:
            raise GeometryError(f"urdf: collision mesh of {clip(g.name)} was loaded from another file than the one "
                                "checked")
    if not fixed_joints:
        return full, RobotGeometry(full, geometry, shapes)
    q = full.neutral()
    ids = []
    for name, value in fixed_joints.items():
        try:
            j = full.joint(name)
        except ModelError:
            raise GeometryError(f"fixed_joints: {clip(name)!r} is not a movable joint of {full.name!r}") from None
        if j.nq != 1 or not math.isfinite(float(value)):
            raise GeometryError(f"fixed_joints.{name}: expected a finite value of a one-coordinate joint")
        lo, hi = full.model.lowerPositionLimit[j.idx_q], full.model.upperPositionLimit[j.idx_q]
        if hi > lo and not lo - 1e-9 <= float(value) <= hi + 1e-9:
            raise GeometryError(f"fixed_joints.{name}: {float(value):.6g} outside the joint limits [{lo:.6g}, {hi:.6g}]")
        q[j.idx_q] = float(value)
        ids.append(j.joint_id)
    if len(ids) >= full.nv:
        raise GeometryError("fixed_joints: every joint would be fixed")
    reduced, geoms = pin.buildReducedModel(full.model, [geometry], ids, q)
    reduced.name = full.model.name
    kin = RobotModel(reduced, full.extension, urdf_text)
    return kin, RobotGeometry(kin, geoms[0], shapes)

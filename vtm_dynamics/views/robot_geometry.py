"""The robot as drawn: the URDF's visual geometry per Pinocchio frame, or a stick figure of the kinematic tree.

Visuals (``<link><visual>``: mesh, box, cylinder, sphere, with their ``<origin>``) are attached to the link's
Pinocchio BODY frame, so their world placement along a motion is ``oMf`` of that frame (fixed joints merged as
Pinocchio merges them). A body (the links Pinocchio merges into one joint) without any drawable visual gets a stick
figure instead: a cylinder from its joint to every child joint, attached frame, loop-closure attachment and
knife-edge point, or to twice its centre of mass when it has none, and a short cylinder along its joint axis. The
mechanisms of the solvability examples carry no visuals at all and are drawn that way.

Mesh files are data named by the URDF: found and checked inside trusted roots by ``mesh_files`` (a file that
fails a check is not drawn: the body becomes a stick figure and the notes say why). A COLLADA file's
``<unit meter>`` is honoured as RViz honours it, and its ``<up_axis>`` ignored as RViz ignores it
(:mod:`vtm_dynamics.core.robot.mesh_units`). Units: m.
"""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET
from dataclasses import dataclass

import numpy as np
import pinocchio as pin

from vtm_dynamics.core.excerpt import excerpt
from vtm_dynamics.core.robot.model import RobotModel
from vtm_dynamics.core.robot.urdf_extension import (
    Pose,
    URDFExtension,
    URDFExtensionError,
    extension_from_root,
    numbers,
    parse_urdf_xml,
)
from vtm_dynamics.views.mesh_files import (
    DEFAULT_MAX_MESH_BYTES,
    DEFAULT_MAX_TOTAL_BYTES,
    MeshData,
    MeshReader,
)

MAX_VISUALS = 4096
_PARSE = object()  # robot_geometry: no extension given, parse it from the element
Point = tuple[float, float, float]  # [m], in a joint's frame


@dataclass(frozen=True)
class Visual:
    """One drawable item in its frame: ``kind`` mesh | box | cylinder | sphere; ``origin`` (4 x 4) in the frame;
    ``mesh`` index into :attr:`RobotGeometry.meshes` and ``scale`` (the URDF's ``<mesh scale>`` times the mesh
    file's unit, :attr:`MeshData.unit`: what multiplies the numbers in the file); ``size`` (box, m), ``radius`` and ``length``
    (cylinder along its z axis, sphere) [m]."""

    kind: str
    origin: np.ndarray
    mesh: int = -1
    scale: tuple[float, float, float] = (1.0, 1.0, 1.0)
    size: tuple[float, float, float] = (0.0, 0.0, 0.0)
    radius: float = 0.0
    length: float = 0.0


@dataclass(frozen=True)
class LinkGeometry:
    """The visuals attached to Pinocchio frame ``frame_id`` (named ``name``)."""

    name: str
    frame_id: int
    visuals: tuple[Visual, ...]


@dataclass(frozen=True)
class RobotGeometry:
    """Everything drawn of one robot model. ``notes``: what was not drawn and why (one line each)."""

    links: tuple[LinkGeometry, ...]
    meshes: tuple[MeshData, ...]
    notes: tuple[str, ...]
    max_total_bytes: int = DEFAULT_MAX_TOTAL_BYTES  # all mesh files together, when a page reads them

    @property
    def frame_ids(self) -> list[int]:
        return [link.frame_id for link in self.links]


def _origin(element, what: str) -> np.ndarray:
    o = element.find("origin")
    if o is None:
        return np.eye(4)
    return Pose(numbers(o.get("xyz"), (0.0, 0.0, 0.0), f"{what}.origin.xyz"),
                numbers(o.get("rpy"), (0.0, 0.0, 0.0), f"{what}.origin.rpy")).homogeneous()


def _visual(visual, what: str, meshes: MeshReader) -> tuple[Visual | None, str]:
    geometry = visual.find("geometry")
    shape = None if geometry is None else next(iter(geometry), None)
    if shape is None:
        return None, f"{what}: no geometry"
    origin = _origin(visual, what)
    if shape.tag == "mesh":
        scale = numbers(shape.get("scale"), (1.0, 1.0, 1.0), f"{what}.mesh.scale")
        index, why = meshes.read(shape.get("filename") or "")
        if index < 0:
            return None, f"{what}: {why}"
        unit = meshes.meshes[index].unit  # Drake's viewer draws a COLLADA file's numbers as metres
        return Visual("mesh", origin, mesh=index, scale=tuple(unit * s for s in scale)), ""
    if shape.tag == "box":
        size = numbers(shape.get("size"), (0.0, 0.0, 0.0), f"{what}.box.size")
        return Visual("box", origin, size=tuple(abs(s) for s in size)), ""
    if shape.tag == "cylinder":
        (radius,) = numbers(shape.get("radius"), (0.0,), f"{what}.cylinder.radius")
        (length,) = numbers(shape.get("length"), (0.0,), f"{what}.cylinder.length")
        return Visual("cylinder", origin, radius=abs(radius), length=abs(length)), ""
    if shape.tag == "sphere":
        (radius,) = numbers(shape.get("radius"), (0.0,), f"{what}.sphere.radius")
        return Visual("sphere", origin, radius=abs(radius)), ""
    return None, f"{what}: <{excerpt(shape.tag)}> is not drawn"


def _body_frame(model: pin.Model, link: str) -> int | None:
    if model.existFrame(link, pin.FrameType.BODY):
        return int(model.getFrameId(link, pin.FrameType.BODY))
    if model.existFrame(link):
        return int(model.getFrameId(link))
    return None


def _cylinder_between(a: Point, b: Point, radius: float) -> Visual | None:
    """A cylinder from a to b (frame coordinates [m])."""
    dx, dy, dz = b[0] - a[0], b[1] - a[1], b[2] - a[2]
    length = math.hypot(dx, dy, dz)
    if length < 1e-9:
        return None
    return Visual("cylinder", _z_to((dx / length, dy / length, dz / length),
                                    (0.5 * (a[0] + b[0]), 0.5 * (a[1] + b[1]), 0.5 * (a[2] + b[2]))),
                  radius=radius, length=length)


def _z_to(axis: Point, center: Point) -> np.ndarray:
    """4 x 4 placement whose z axis is the unit vector ``axis``, at ``center`` (plain arithmetic on three numbers:
    numpy's calls on 3-vectors cost more than the sums)."""
    zx, zy, zz = float(axis[0]), float(axis[1]), float(axis[2])
    hx, hy, hz = (1.0, 0.0, 0.0) if abs(zx) < 0.9 else (0.0, 1.0, 0.0)
    xx, xy, xz = hy * zz - hz * zy, hz * zx - hx * zz, hx * zy - hy * zx  # helper x z
    n = math.hypot(xx, xy, xz)
    xx, xy, xz = xx / n, xy / n, xz / n
    yx, yy, yz = zy * xz - zz * xy, zz * xx - zx * xz, zx * xy - zy * xx  # z x x
    return np.array([[xx, yx, zx, float(center[0])], [xy, yy, zy, float(center[1])],
                     [xz, yz, zz, float(center[2])], [0.0, 0.0, 0.0, 1.0]])


def _stick_points(model: pin.Model, extension: URDFExtension | None) -> dict[int, list[Point]]:
    """Per joint (0 = the fixed base): the points [m, joint frame] its stick figure reaches."""
    points: dict[int, list[Point]] = {j: [] for j in range(model.njoints)}
    placements, frames = model.jointPlacements.tolist(), model.frames.tolist()  # a list at once: a fraction of
    for j in range(1, model.njoints):                                           # indexing the vectors each time
        points[model.parents[j]].append(tuple(placements[j].translation.tolist()))
    for f in frames:
        p = tuple(f.placement.translation.tolist())
        if math.hypot(*p) > 1e-9:
            points[int(f.parentJoint)].append(p)

    def attach(link: str, local: np.ndarray) -> None:
        fid = _body_frame(model, link)
        if fid is not None:
            frame = model.frames[fid]
            points[int(frame.parentJoint)].append(tuple(np.asarray(frame.placement.act(local), dtype=float).tolist()))

    if extension is not None:
        for lc in extension.loop_closures:
            attach(lc.parent, np.array(lc.parent_origin.xyz))
            attach(lc.child, np.array(lc.child_origin.xyz))
        for ke in extension.knife_edges:
            attach(ke.link, np.array(ke.point))
    return points


def _unique(points: list[Point]) -> list[Point]:
    """The points without repeats (a fixed joint and the link it carries share one placement)."""
    seen, out = set(), []
    for p in points:
        key = tuple(round(float(x), 9) for x in p)
        if key not in seen:
            seen.add(key)
            out.append(p)
    return out


def _joint_axes(root, names: set[str]) -> dict[str, Point]:
    """The unit ``<axis>`` of each URDF joint named in ``names`` (the URDF's default x when it has none or it is
    not three numbers or zero)."""
    axes = {}
    for joint in root.findall("joint"):
        name = joint.get("name")
        if name not in names:
            continue
        axis = joint.find("axis")
        try:
            a = numbers(None if axis is None else axis.get("xyz"), (1.0, 0.0, 0.0), "joint.axis")
        except URDFExtensionError:
            a = (1.0, 0.0, 0.0)
        n = math.hypot(*a)
        axes[name] = (a[0] / n, a[1] / n, a[2] / n) if n > 0 else (1.0, 0.0, 0.0)
    return axes


def _stick_figures(model: pin.Model, root, extension: URDFExtension | None, bare: set[int]) -> list[LinkGeometry]:
    """Stick-figure visuals of the joints in ``bare`` (bodies without any drawn visual)."""
    points = _stick_points(model, extension)
    for j in bare:
        if not points[j] and j > 0:
            lever = model.inertias[j].lever.tolist()
            if math.hypot(*lever) > 1e-6:
                points[j].append((2.0 * lever[0], 2.0 * lever[1], 2.0 * lever[2]))
    longest = max((math.hypot(*p) for j in bare for p in points[j]), default=0.0)
    radius = min(max(0.035 * longest, 0.002), 0.05) if longest > 0 else 0.01
    axes = _joint_axes(root, {model.names[j] for j in bare if j > 0})
    origin = (0.0, 0.0, 0.0)
    out = []
    for j in sorted(bare):
        visuals = []
        if j == 0:  # the fixed base: a bar through its pivots, in order
            pts = [origin] * (len(points[0]) == 1) + points[0]
            visuals += [v for a, b in zip(pts[:-1], pts[1:]) if (v := _cylinder_between(a, b, radius))]
            frame_id = 0
        else:
            visuals += [v for p in _unique(points[j]) if (v := _cylinder_between(origin, p, radius))]
            name = model.names[j]
            visuals.append(Visual("cylinder", _z_to(axes.get(name, (0.0, 0.0, 1.0)), origin),
                                  radius=1.8 * radius, length=4.0 * radius))
            frame_id = int(model.getFrameId(name, pin.FrameType.JOINT)) if model.existFrame(name, pin.FrameType.JOINT) \
                else int(model.getFrameId(name))
        if visuals:
            out.append(LinkGeometry(model.frames[frame_id].name, frame_id, tuple(visuals)))
    return out


def robot_geometry(model: pin.Model, urdf_text: str, *, urdf_dir: str | None = None,
                   package_roots: list[str] | None = None, max_mesh_bytes: int = DEFAULT_MAX_MESH_BYTES,
                   max_total_bytes: int = DEFAULT_MAX_TOTAL_BYTES, root: ET.Element | None = None,
                   extension: URDFExtension | None | object = _PARSE) -> RobotGeometry:
    """What to draw of the Pinocchio ``model`` built from ``urdf_text`` (module docstring). ``urdf_dir``: the
    directory of the URDF file when it came from a file the user named (plain mesh paths resolve there only).
    ``root``: the text's ``<robot>`` element as ``parse_urdf_xml`` returned it, when the caller holds it already
    (``RobotModel.urdf_root``: :func:`geometry_of`); else the text is parsed here (0.4 ms for the UR5).
    ``extension``: the vtm_dynamics extension parsed from that element (``RobotModel.extension``), else parsed
    here (an extension that does not parse draws no loop-closure or knife-edge points)."""
    root = root if root is not None else parse_urdf_xml(urdf_text)
    if extension is _PARSE:
        try:
            extension = extension_from_root(root)
        except URDFExtensionError:
            extension = None
    reader = MeshReader(None if package_roots is None else list(package_roots), urdf_dir, max_mesh_bytes,
                        max_total_bytes)  # None: the default roots, found only if a mesh asks for a package
    links, notes = [], []
    drawn_joints: set[int] = set()
    count = 0
    for link in root.findall("link"):
        name = link.get("name") or ""
        fid = _body_frame(model, name)
        visuals = []
        for k, visual in enumerate(link.findall("visual")):
            count += 1
            if count > MAX_VISUALS:
                notes.append(f"more than {MAX_VISUALS} visuals: the rest is not drawn")
                break
            what = f"link {excerpt(name)} visual {k}"
            try:
                item, why = _visual(visual, what, reader)
            except URDFExtensionError as err:
                item, why = None, str(err)
            if item is None:
                notes.append(why)
            else:
                visuals.append(item)
        if visuals and fid is not None:
            links.append(LinkGeometry(name, fid, tuple(visuals)))
            drawn_joints.add(int(model.frames[fid].parentJoint))
    bare = set(range(model.njoints)) - drawn_joints
    if bare:
        links += _stick_figures(model, root, extension, bare)
    return RobotGeometry(tuple(links), tuple(reader.meshes), tuple(notes), max_total_bytes)


def geometry_of(robot: RobotModel, **options) -> RobotGeometry:
    """:func:`robot_geometry` of ``robot`` (its model, URDF text, and the element and extension parsed from it);
    ``options`` as there."""
    if robot.urdf_root is not None:  # RobotModel.from_urdf parsed both from the same element
        options.setdefault("extension", robot.extension)
    return robot_geometry(robot.model, robot.urdf_text, root=robot.urdf_root, **options)


def link_poses(model: pin.Model, geometry: RobotGeometry, configurations: np.ndarray,
               data: pin.Data | None = None) -> np.ndarray:
    """(F, L, 7) world placements (position [m], quaternion x y z w) of the geometry's L frames at each of the F
    configurations (Pinocchio forward kinematics; in ``data``, a Data of ``model`` the caller does not use
    meanwhile, else a new one: the caller's model and its workspace are not disturbed)."""
    data = data if data is not None else model.createData()
    qs = np.atleast_2d(np.asarray(configurations, dtype=float))
    fids = geometry.frame_ids
    xyzquat, kinematics = pin.SE3ToXYZQUAT, pin.framesForwardKinematics
    rows: list[np.ndarray] = []
    for q in qs:  # one list of rows converted once: a third less time than filling the array row by row
        kinematics(model, data, q)
        placements = data.oMf.tolist()  # all frames at once: a fifth of the time of indexing the vector per frame
        rows += [xyzquat(placements[fid]) for fid in fids]
    return np.array(rows, dtype=float).reshape(len(qs), len(fids), 7)


def frame_positions(model: pin.Model, frame: str, configurations: np.ndarray,
                    data: pin.Data | None = None) -> np.ndarray:
    """(F, 3) world positions [m] of ``frame`` at each configuration (``data`` as in :func:`link_poses`)."""
    data = data if data is not None else model.createData()
    fid = model.getFrameId(frame)
    if fid >= model.nframes:
        raise ValueError(f"frame: {excerpt(frame)} does not exist")
    out = []
    for q in np.atleast_2d(np.asarray(configurations, dtype=float)):
        pin.framesForwardKinematics(model, data, q)
        out.append(np.array(data.oMf[fid].translation))
    return np.array(out)


def geometry_scale(poses: np.ndarray) -> float:
    """A length [m] for markers in a view: the largest spread of the frames' positions (at least 0.1 m)."""
    p = np.asarray(poses, dtype=float)[..., :3].reshape(-1, 3)
    finite = np.isfinite(p).all(axis=1)
    p = p if finite.all() else p[finite]
    return max(float((p.max(axis=0) - p.min(axis=0)).max()) if len(p) else 0.0, 0.1)

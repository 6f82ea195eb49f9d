"""The robot as drawn: the URDF's visual geometry per Pinocchio frame, or a stick figure of the kinematic tree.

Visuals (``<link><visual>``: mesh, box, cylinder, sphere, with their ``<origin>``) are attached to the link's
Pinocchio BODY frame, so their world placement along a motion is ``oMf`` of that frame (fixed joints merged as
Pinocchio merges them). A body (the links Pinocchio merges into one joint) without any drawable visual gets a stick
figure instead: a cylinder from its joint to every child joint, attached frame, loop-closure attachment and
knife-edge point, or to twice its centre of mass when it has none, and a short cylinder along its joint axis. The
mechanisms of the solvability examples carry no visuals at all and are drawn that way.

Mesh files are data named by the URDF, so they are opened only inside trusted roots: ``package://PKG/path`` in
``package_roots`` (the directories that hold packages: example-robot-data's share directory, each
``AMENT_PREFIX_PATH`` share directory, and any the caller adds), plain and ``file://`` paths only inside
``urdf_dir`` (the directory of a URDF file the user named). A path that leaves its root (``..``, a symbolic link),
is not a regular file, is not .dae/.obj/.stl or exceeds ``max_mesh_bytes`` (in all ``max_total_bytes``) is not
read; the view draws the body as a stick figure and its notes say why. A mesh file is found, checked and opened
here, its bytes read only when a page needs them and its packed form is not cached (:func:`mesh_bytes`, under the
same checks and caps). Units: m.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass

import numpy as np
import pinocchio as pin

from vtm_dynamics.core.excerpt import excerpt
from vtm_dynamics.core.robot.urdf_extension import (
    Pose,
    URDFExtension,
    URDFExtensionError,
    extension_from_root,
    numbers,
    parse_urdf_xml,
)

MESH_FORMATS = {".dae": "dae", ".obj": "obj", ".stl": "stl"}
DEFAULT_MAX_MESH_BYTES = 32 * 1024 * 1024  # one mesh file (the Panda's largest visual mesh is ~2 MB)
DEFAULT_MAX_TOTAL_BYTES = 128 * 1024 * 1024  # all mesh files of one robot
MAX_VISUALS = 4096
# a mesh file is opened without following a symbolic link in its last component, and without blocking on a FIFO
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


class MeshFileError(OSError):
    """A mesh file that was checked when the geometry was made can no longer be read as it was (one line)."""


@dataclass(frozen=True)
class MeshFile:
    """A mesh file checked inside its trusted root: its resolved ``path``, the byte cap its reads obey, and the
    ``device`` and ``inode`` the path led to when it was checked."""

    path: str
    max_bytes: int
    device: int = -1
    inode: int = -1


@dataclass(frozen=True)
class MeshData:
    """A mesh in ``format`` ('dae', 'obj', 'stl'); ``source`` is the URDF's name for it. Its bytes are ``data``
    (a mesh made in memory) or in ``file`` (read by :func:`mesh_bytes`); exactly one is set."""

    format: str
    data: bytes | None
    source: str
    file: MeshFile | None = None


@dataclass(frozen=True)
class Visual:
    """One drawable item in its frame: ``kind`` mesh | box | cylinder | sphere; ``origin`` (4 x 4) in the frame;
    ``mesh`` index into :attr:`RobotGeometry.meshes` and ``scale``; ``size`` (box, m), ``radius`` and ``length``
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


def default_package_roots() -> list[str]:
    """Directories holding ROS-style packages: example-robot-data's share directory (its URDFs say
    ``package://example-robot-data/...``) and ``share`` of every ``AMENT_PREFIX_PATH`` entry."""
    roots = []
    try:
        import importlib.metadata

        dist = importlib.metadata.distribution("example-robot-data")
        roots.append(str(dist.locate_file(os.path.join("cmeel.prefix", "share"))))
    except importlib.metadata.PackageNotFoundError:
        pass
    for prefix in os.environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep):
        if prefix:
            roots.append(os.path.join(prefix, "share"))
    return [r for r in roots if os.path.isdir(r)]


class _MeshReader:
    """Resolves mesh names inside trusted roots and checks each file once (opened, regular, within the byte caps)."""

    def __init__(self, package_roots: list[str], urdf_dir: str | None, max_mesh_bytes: int, max_total: int) -> None:
        self.package_roots = package_roots
        self.urdf_dir = urdf_dir
        self.max_mesh_bytes, self.max_total = max_mesh_bytes, max_total
        self.total = 0
        self.meshes: list[MeshData] = []
        self.index: dict[str, int] = {}
        self.real_roots: dict[str, str] = {}
        self.plain: set[str] = set()  # folders below a resolved root that are no symbolic link

    def _real(self, root: str) -> str:
        if root not in self.real_roots:
            self.real_roots[root] = os.path.realpath(root)
        return self.real_roots[root]

    def _without_links(self, real_root: str, wanted: str) -> bool:
        """Whether no part of ``wanted`` below ``real_root`` (resolved) is a symbolic link: what
        ``realpath(wanted) == wanted`` says, with one ``lstat`` per folder of this geometry instead of one per part
        of every path."""
        path = real_root
        for part in wanted[len(real_root) + 1:].split(os.sep):
            path = os.path.join(path, part)
            if path in self.plain:
                continue
            try:
                if stat.S_ISLNK(os.lstat(path).st_mode):
                    return False
            except OSError:
                return True  # missing (as realpath sees it): not found when opened
            if path != wanted:
                self.plain.add(path)
        return True

    def _candidates(self, name: str) -> list[tuple[str, str]]:
        """(root, path relative to it) pairs where ``name`` may live."""
        if name.startswith("package://"):
            rel = name[len("package://"):]
            return [(root, rel) for root in self.package_roots]
        if "://" in name and not name.startswith("file://"):
            return []
        path = name[len("file://"):] if name.startswith("file://") else name
        if self.urdf_dir is None:
            return []
        if os.path.isabs(path):
            root = os.path.realpath(self.urdf_dir)
            return [(self.urdf_dir, os.path.relpath(path, root))] if path.startswith(root + os.sep) else []
        return [(self.urdf_dir, path)]

    def read(self, name: str) -> tuple[int, str]:
        """(index into meshes, "") or (-1, why it is not drawn)."""
        ext = os.path.splitext(name)[1].lower()
        if ext not in MESH_FORMATS:
            return -1, f"mesh {excerpt(name)}: only .dae, .obj and .stl are drawn"
        candidates = self._candidates(name)
        if not candidates:
            return -1, f"mesh {excerpt(name)}: outside the trusted roots (package:// or beside the URDF file)"
        for root, rel in candidates:
            real_root = self._real(root)
            wanted = os.path.normpath(os.path.join(real_root, rel))
            if not wanted.startswith(real_root + os.sep) or not self._without_links(real_root, wanted):
                return -1, f"mesh {excerpt(name)}: leaves its root (.. or a symbolic link)"
            if wanted in self.index:
                return self.index[wanted], ""
            try:
                fd = os.open(wanted, _READ_FLAGS)
            except FileNotFoundError:
                continue
            except OSError as err:
                return -1, f"mesh {excerpt(name)}: cannot read ({err.strerror or type(err).__name__})"
            try:
                info = os.fstat(fd)
            finally:
                os.close(fd)
            if not stat.S_ISREG(info.st_mode):
                return -1, f"mesh {excerpt(name)}: not a regular file"
            if info.st_size > self.max_mesh_bytes:
                return -1, f"mesh {excerpt(name)}: {info.st_size} bytes, over max_mesh_bytes {self.max_mesh_bytes}"
            if self.total + info.st_size > self.max_total:
                return -1, f"mesh {excerpt(name)}: the meshes exceed max_total_bytes {self.max_total}"
            self.total += info.st_size
            self.index[wanted] = len(self.meshes)
            self.meshes.append(MeshData(MESH_FORMATS[ext], None, name,
                                        MeshFile(wanted, self.max_mesh_bytes, info.st_dev, info.st_ino)))
            return self.index[wanted], ""
        return -1, f"mesh {excerpt(name)}: not found in the trusted roots"


def _origin(element, what: str) -> np.ndarray:
    o = element.find("origin")
    if o is None:
        return np.eye(4)
    return Pose(numbers(o.get("xyz"), (0.0, 0.0, 0.0), f"{what}.origin.xyz"),
                numbers(o.get("rpy"), (0.0, 0.0, 0.0), f"{what}.origin.rpy")).homogeneous()


def _visual(visual, what: str, meshes: _MeshReader) -> tuple[Visual | None, str]:
    geometry = visual.find("geometry")
    shape = None if geometry is None else next(iter(geometry), None)
    if shape is None:
        return None, f"{what}: no geometry"
    origin = _origin(visual, what)
    if shape.tag == "mesh":
        scale = numbers(shape.get("scale"), (1.0, 1.0, 1.0), f"{what}.mesh.scale")
        index, why = meshes.read(shape.get("filename") or "")
        return (Visual("mesh", origin, mesh=index, scale=scale), "") if index >= 0 else (None, f"{what}: {why}")
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


def _cylinder_between(a: np.ndarray, b: np.ndarray, radius: float) -> Visual | None:
    """A cylinder from a to b (frame coordinates [m])."""
    d = b - a
    length = float(np.linalg.norm(d))
    if length < 1e-9:
        return None
    return Visual("cylinder", _z_to(d / length, 0.5 * (a + b)), radius=radius, length=length)


def _z_to(axis: np.ndarray, center: np.ndarray) -> np.ndarray:
    """4 x 4 placement whose z axis is the unit vector ``axis``, at ``center``."""
    z = np.asarray(axis, dtype=float)
    helper = np.array([1.0, 0.0, 0.0]) if abs(z[0]) < 0.9 else np.array([0.0, 1.0, 0.0])
    x = np.cross(helper, z)
    x /= np.linalg.norm(x)
    T = np.eye(4)
    T[:3, :3] = np.column_stack([x, np.cross(z, x), z])
    T[:3, 3] = center
    return T


def _stick_points(model: pin.Model, extension: URDFExtension | None) -> dict[int, list[np.ndarray]]:
    """Per joint (0 = the fixed base): the points [m, joint frame] its stick figure reaches."""
    points: dict[int, list[np.ndarray]] = {j: [] for j in range(model.njoints)}
    for j in range(1, model.njoints):
        points[model.parents[j]].append(np.array(model.jointPlacements[j].translation))
    for f in model.frames:
        p = np.array(f.placement.translation)
        if np.linalg.norm(p) > 1e-9:
            points[int(f.parentJoint)].append(p)

    def attach(link: str, local: np.ndarray) -> None:
        fid = _body_frame(model, link)
        if fid is not None:
            frame = model.frames[fid]
            points[int(frame.parentJoint)].append(np.array(frame.placement.act(local)))

    if extension is not None:
        for lc in extension.loop_closures:
            attach(lc.parent, np.array(lc.parent_origin.xyz))
            attach(lc.child, np.array(lc.child_origin.xyz))
        for ke in extension.knife_edges:
            attach(ke.link, np.array(ke.point))
    return points


def _unique(points: list[np.ndarray]) -> list[np.ndarray]:
    """The points without repeats (a fixed joint and the link it carries share one placement)."""
    seen, out = set(), []
    for p in points:
        key = tuple(np.round(p, 9))
        if key not in seen:
            seen.add(key)
            out.append(p)
    return out


def _stick_figures(model: pin.Model, root, extension: URDFExtension | None, bare: set[int]) -> list[LinkGeometry]:
    """Stick-figure visuals of the joints in ``bare`` (bodies without any drawn visual)."""
    points = _stick_points(model, extension)
    for j in bare:
        if not points[j] and j > 0:
            lever = np.array(model.inertias[j].lever)
            if np.linalg.norm(lever) > 1e-6:
                points[j].append(2.0 * lever)
    longest = max((float(np.linalg.norm(p)) for j in bare for p in points[j]), default=0.0)
    radius = min(max(0.035 * longest, 0.002), 0.05) if longest > 0 else 0.01
    axes = {}
    for joint in root.findall("joint"):
        axis = joint.find("axis")
        try:
            a = np.array(numbers(None if axis is None else axis.get("xyz"), (1.0, 0.0, 0.0), "joint.axis"))
        except URDFExtensionError:
            a = np.array([1.0, 0.0, 0.0])
        axes[joint.get("name")] = a / np.linalg.norm(a) if np.linalg.norm(a) > 0 else np.array([1.0, 0.0, 0.0])
    out = []
    for j in sorted(bare):
        visuals = []
        if j == 0:  # the fixed base: a bar through its pivots, in order
            pts = [np.zeros(3)] * (len(points[0]) == 1) + points[0]
            visuals += [v for a, b in zip(pts[:-1], pts[1:]) if (v := _cylinder_between(a, b, radius))]
            frame_id = 0
        else:
            visuals += [v for p in _unique(points[j]) if (v := _cylinder_between(np.zeros(3), p, radius))]
            name = model.names[j]
            visuals.append(Visual("cylinder", _z_to(axes.get(name, np.array([0.0, 0.0, 1.0])), np.zeros(3)),
                                  radius=1.8 * radius, length=4.0 * radius))
            frame_id = int(model.getFrameId(name, pin.FrameType.JOINT)) if model.existFrame(name, pin.FrameType.JOINT) \
                else int(model.getFrameId(name))
        if visuals:
            out.append(LinkGeometry(model.frames[frame_id].name, frame_id, tuple(visuals)))
    return out


def robot_geometry(model: pin.Model, urdf_text: str, *, urdf_dir: str | None = None,
                   package_roots: list[str] | None = None, max_mesh_bytes: int = DEFAULT_MAX_MESH_BYTES,
                   max_total_bytes: int = DEFAULT_MAX_TOTAL_BYTES) -> RobotGeometry:
    """What to draw of the Pinocchio ``model`` built from ``urdf_text`` (module docstring). ``urdf_dir``: the
    directory of the URDF file when it came from a file the user named (plain mesh paths resolve there only)."""
    root = parse_urdf_xml(urdf_text)
    try:
        extension = extension_from_root(root)
    except URDFExtensionError:
        extension = None
    reader = _MeshReader(default_package_roots() if package_roots is None else list(package_roots), urdf_dir,
                         max_mesh_bytes, max_total_bytes)
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
    links += _stick_figures(model, root, extension, bare)
    return RobotGeometry(tuple(links), tuple(reader.meshes), tuple(notes), max_total_bytes)


def open_mesh_file(mesh: MeshFile) -> tuple[int, os.stat_result]:
    """(an open descriptor, its status) of ``mesh``'s file, when it is still a regular file within its cap at the
    resolved path checked when the geometry was made (a symbolic link put there since is not followed; a path
    that no longer leads to the file checked then is resolved again); else a one-line :class:`MeshFileError`.
    The caller closes the descriptor."""
    what = f"mesh {excerpt(os.path.basename(mesh.path))}"
    try:
        fd = os.open(mesh.path, _READ_FLAGS)
    except OSError as err:
        raise MeshFileError(f"{what}: cannot read ({err.strerror or type(err).__name__})") from None
    info = os.fstat(fd)
    if (info.st_dev, info.st_ino) != (mesh.device, mesh.inode) and os.path.realpath(mesh.path) != mesh.path:
        os.close(fd)
        raise MeshFileError(f"{what}: its path leads elsewhere since the robot's geometry was read")
    if not stat.S_ISREG(info.st_mode) or info.st_size > mesh.max_bytes:
        os.close(fd)
        why = "not a regular file" if not stat.S_ISREG(info.st_mode) else \
            f"{info.st_size} bytes, over max_mesh_bytes {mesh.max_bytes}"
        raise MeshFileError(f"{what}: {why}")
    return fd, info


def read_mesh_file(fd: int, info: os.stat_result, mesh: MeshFile) -> bytes:
    """The bytes of the file open as ``fd`` (from :func:`open_mesh_file`), exactly ``info.st_size`` of them: a file
    that grew or shrank while read is a :class:`MeshFileError`."""
    chunks, size = [], 0
    while size <= info.st_size:
        chunk = os.read(fd, min(info.st_size + 1 - size, 1 << 24))
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    if size != info.st_size or os.fstat(fd).st_mtime_ns != info.st_mtime_ns:
        raise MeshFileError(f"mesh {excerpt(os.path.basename(mesh.path))}: changed while read")
    return b"".join(chunks)


def mesh_bytes(mesh: MeshData) -> bytes:
    """The bytes of ``mesh``: its ``data``, or its file read under the checks of :func:`open_mesh_file`."""
    if mesh.file is None:
        return mesh.data or b""
    fd, info = open_mesh_file(mesh.file)
    try:
        return read_mesh_file(fd, info, mesh.file)
    finally:
        os.close(fd)


def link_poses(model: pin.Model, geometry: RobotGeometry, configurations: np.ndarray) -> np.ndarray:
    """(F, L, 7) world placements (position [m], quaternion x y z w) of the geometry's L frames at each of the F
    configurations (Pinocchio forward kinematics; a private Data, so the caller's model is not disturbed)."""
    data = model.createData()
    qs = np.atleast_2d(np.asarray(configurations, dtype=float))
    fids = geometry.frame_ids
    out = np.empty((len(qs), len(fids), 7))
    for k, q in enumerate(qs):
        pin.framesForwardKinematics(model, data, q)
        for i, fid in enumerate(fids):
            out[k, i] = pin.SE3ToXYZQUAT(data.oMf[fid])
    return out


def frame_positions(model: pin.Model, frame: str, configurations: np.ndarray) -> np.ndarray:
    """(F, 3) world positions [m] of ``frame`` at each configuration."""
    data = model.createData()
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
    p = p[np.all(np.isfinite(p), axis=1)]
    return max(float(np.max(np.ptp(p, axis=0))) if len(p) else 0.0, 0.1)

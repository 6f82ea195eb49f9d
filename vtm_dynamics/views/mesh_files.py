"""Mesh files named by a URDF: found only inside trusted roots, checked, and read within byte caps.

Mesh files are data named by the URDF, so they are opened only inside trusted roots: ``package://PKG/path`` in
``package_roots`` (the directories that hold packages: example-robot-data's share directory, each
``AMENT_PREFIX_PATH`` share directory, and any the caller adds), plain and ``file://`` paths only inside
``urdf_dir`` (the directory of a URDF file the user named). A path that leaves its root (``..``, a symbolic link),
is not a regular file, is not .dae/.obj/.stl or exceeds ``max_mesh_bytes`` (in all ``max_total_bytes``) is
refused with the reason. A file that passes is opened and checked when the robot's geometry is made
(:class:`MeshReader`; a COLLADA file's ``<unit meter>`` is read then, from the head of the file open for the check:
:mod:`vtm_dynamics.core.robot.mesh_units`, a file with a unit that is no length is not drawn; the unit found is
kept in the view cache, ``packed_files``, for the next geometry made of the same file), and its bytes are read only when a page needs them and does not hold them packed already
(``packed_files``): :func:`open_mesh_file` and :func:`read_mesh_file` apply the same checks and caps again then.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass

from vtm_dynamics.core.excerpt import excerpt
from vtm_dynamics.core.package_data import example_robot_data_share
from vtm_dynamics.core.robot.mesh_units import MeshUnitError, collada_unit, unit_from_meter
from vtm_dynamics.views.packed_files import kept_value

MESH_FORMATS = {".dae": "dae", ".obj": "obj", ".stl": "stl"}
DEFAULT_MAX_MESH_BYTES = 32 * 1024 * 1024  # one mesh file (the Panda's largest visual mesh is ~2 MB)
DEFAULT_MAX_TOTAL_BYTES = 128 * 1024 * 1024  # all mesh files of one robot
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
    (a mesh made in memory) or in ``file`` (read by :func:`mesh_bytes`); exactly one is set. ``unit``: metres per
    one of its coordinates (a COLLADA file's ``<unit meter>``, else 1), which the URDF's scale is multiplied by."""

    format: str
    data: bytes | None
    source: str
    file: MeshFile | None = None
    unit: float = 1.0


def default_package_roots() -> list[str]:
    """Directories holding ROS-style packages: example-robot-data's share directory (its URDFs say
    ``package://example-robot-data/...``) and ``share`` of every ``AMENT_PREFIX_PATH`` entry."""
    share = example_robot_data_share()
    roots = [share] if share is not None else []
    for prefix in os.environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep):
        if prefix:
            roots.append(os.path.join(prefix, "share"))
    return [r for r in roots if os.path.isdir(r)]


class MeshReader:
    """Resolves mesh names inside trusted roots and checks each file once (opened, regular, within the byte caps)."""

    def __init__(self, package_roots: list[str] | None, urdf_dir: str | None, max_mesh_bytes: int,
                 max_total: int) -> None:
        self._package_roots = package_roots  # None: default_package_roots(), looked up at the first package:// name
        self.urdf_dir = urdf_dir
        self.max_mesh_bytes, self.max_total = max_mesh_bytes, max_total
        self.total = 0
        self.meshes: list[MeshData] = []
        self.index: dict[str, int] = {}
        self.real_roots: dict[str, str] = {}
        self.plain: set[str] = set()  # folders below a resolved root that are no symbolic link

    @property
    def package_roots(self) -> list[str]:
        if self._package_roots is None:
            self._package_roots = default_package_roots()
        return self._package_roots

    def _real(self, root: str) -> str:
        if root not in self.real_roots:
            self.real_roots[root] = os.path.realpath(root)
        return self.real_roots[root]

    def _without_links(self, real_root: str, wanted: str) -> bool:
        """Whether no part of ``wanted`` below ``real_root`` (resolved) is a symbolic link: what
        ``realpath(wanted) == wanted`` says, with one ``lstat`` per folder of this geometry instead of one per part
        of every path."""
        folder = os.path.dirname(wanted)
        if folder in self.plain or folder == real_root:  # a folder of this geometry checked already: the file alone
            try:
                return not stat.S_ISLNK(os.lstat(wanted).st_mode)
            except OSError:
                return True  # missing (as realpath sees it): not found when opened
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

    def _check(self, info: os.stat_result) -> str:
        """Why the file with status ``info`` is not read ("" when it may be)."""
        if not stat.S_ISREG(info.st_mode):
            return "not a regular file"
        if info.st_size > self.max_mesh_bytes:
            return f"{info.st_size} bytes, over max_mesh_bytes {self.max_mesh_bytes}"
        if self.total + info.st_size > self.max_total:
            return f"the meshes exceed max_total_bytes {self.max_total}"
        return ""

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
                why = self._check(info)
                unit = _collada_unit(wanted, info, fd) if not why and ext == ".dae" else 1.0
            except MeshUnitError as err:
                why = str(err)
            finally:
                os.close(fd)
            if why:
                return -1, f"mesh {excerpt(name)}: {why}"
            self.total += info.st_size
            self.index[wanted] = len(self.meshes)
            self.meshes.append(MeshData(MESH_FORMATS[ext], None, name,
                                        MeshFile(wanted, self.max_mesh_bytes, info.st_dev, info.st_ino), unit))
            return self.index[wanted], ""
        return -1, f"mesh {excerpt(name)}: not found in the trusted roots"


def _collada_unit(path: str, info: os.stat_result, fd: int) -> float:
    """The unit [m] of the COLLADA file at the resolved ``path`` open as ``fd`` with status ``info``: read from its
    head once (``mesh_units.collada_unit``, a parse that cost 0.07-0.14 ms a file, most of the UR5 geometry's
    time), then kept beside the packed files (``packed_files.kept_value``, the same key: path, device, inode, size
    and time stamps) and checked again as a unit when read back."""
    text = kept_value(path, info, "collada-unit", lambda: repr(collada_unit(fd)))
    try:
        return unit_from_meter(text)
    except MeshUnitError:
        return collada_unit(fd)  # a kept text that is no unit (edited by hand): the file says


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

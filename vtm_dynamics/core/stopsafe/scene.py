"""The scene a stopping robot must stay clear of: obstacles, an optional floor, and the robot's own links.

Obstacles follow the ROS shapes so that a request can carry them unchanged: ``shape_msgs/SolidPrimitive``
(``type`` BOX = 1 with ``dimensions`` [x, y, z], SPHERE = 2 [radius], CYLINDER = 3 [height, radius] about the local
z axis, CONE = 4 [height, radius] about z, centred like the cylinder) or ``shape_msgs/Mesh`` (``vertices``
[[x, y, z], ...] and ``triangles`` [[i, j, k], ...]), each placed by a ``geometry_msgs/Pose`` (``position`` [m],
``orientation`` a unit quaternion x, y, z, w) in the robot's world frame. The YAML scene file (docs/stopsafe.md)::

    scene:
      floor: {height: 0.0}                 # optional: everything below z = height is solid
      self_collision: true                 # the robot's links against each other (adjacent links never)
      allowed_self_pairs: [[upper_arm_link, wrist_2_link]]   # link pairs that may touch (by link name)
      obstacles:
        - name: table
          primitive: {type: box, dimensions: [1.2, 0.8, 0.04]}
          pose: {position: [0.6, 0.0, -0.02], orientation: [0, 0, 0, 1]}
        - name: fixture
          mesh_name: fixture                # a mesh the caller loaded (vtm-check-trajectory --mesh fixture=F.stl)
          scale: [0.001, 0.001, 0.001]
          pose: {position: [0.5, 0.3, 0.0]}

A scene never names a file: meshes come inline (``mesh``) or by a name the caller mapped to a mesh it read
(:func:`load_mesh_file`). Sizes are capped (obstacles, vertices, triangles, bytes); errors are one line naming the
field. Units: m.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np

from vtm_dynamics.core.excerpt import clip
from vtm_dynamics.core.estop.inputs import StopInputError
from vtm_dynamics.core.limited_yaml import load_yaml_text
from vtm_dynamics.core.robot.mesh_triangles import MeshTrianglesError, mesh_file_triangles
from vtm_dynamics.core.robot.mesh_units import MeshUnitError, mesh_file_unit

MAX_OBSTACLES = 1000
MAX_MESH_VERTICES = 200_000  # per mesh
MAX_MESH_TRIANGLES = 400_000  # per mesh
MAX_SCENE_TRIANGLES = 2_000_000  # all meshes of a scene together
MAX_SCENE_BYTES = 16 * 1024 * 1024  # YAML text of a scene with inline meshes
MAX_SCENE_YAML_NODES = 2_000_000
MAX_MESH_FILE_BYTES = 64 * 1024 * 1024  # a binary STL of ~1.3 million triangles
MAX_EXTENT = 1000.0  # [m] a dimension or coordinate beyond this is a unit error
MAX_NAME_CHARS = 128
PRIMITIVE_TYPES = {1: "box", 2: "sphere", 3: "cylinder", 4: "cone"}  # shape_msgs/SolidPrimitive constants
DIMENSIONS = {"box": 3, "sphere": 1, "cylinder": 2, "cone": 2}


class SceneError(StopInputError):
    """A scene that cannot be used (one line naming the field, e.g. ``scene.obstacles[2].primitive.dimensions``)."""


@dataclass(frozen=True)
class Obstacle:
    """One obstacle: ``kind`` box | sphere | cylinder | cone | mesh, ``dimensions`` in SolidPrimitive order [m],
    pose ``position`` (3) [m] and ``orientation`` (x, y, z, w) in the world frame; a mesh's ``vertices`` (V x 3)
    [m, scaled, obstacle frame] and ``triangles`` (T x 3 vertex indices)."""

    name: str
    kind: str
    dimensions: tuple[float, ...]
    position: np.ndarray
    orientation: np.ndarray
    vertices: np.ndarray | None = None
    triangles: np.ndarray | None = None

    @property
    def rotation(self) -> np.ndarray:
        """3 x 3 rotation matrix of the orientation quaternion."""
        return quaternion_matrix(self.orientation)

    def as_dict(self) -> dict:
        """Plain dict in the scene file's format (meshes inline), e.g. for a 3-D viewer."""
        out: dict = {"name": self.name, "pose": {"position": self.position.tolist(),
                                                 "orientation": self.orientation.tolist()}}
        if self.kind == "mesh":
            out["mesh"] = {"vertices": self.vertices.tolist(), "triangles": self.triangles.tolist()}
        else:
            out["primitive"] = {"type": self.kind, "dimensions": list(self.dimensions)}
        return out


@dataclass(frozen=True)
class Scene:
    """``obstacles``, ``floor_height`` [m] (None: no floor), ``self_collision`` and ``allowed_self_pairs`` (sorted
    link-name pairs that are never checked)."""

    obstacles: tuple[Obstacle, ...] = ()
    floor_height: float | None = None
    self_collision: bool = True
    allowed_self_pairs: frozenset[tuple[str, str]] = frozenset()

    @property
    def empty(self) -> bool:
        return not self.obstacles and self.floor_height is None and not self.self_collision

    def as_dict(self) -> dict:
        """The scene as the YAML file's mapping."""
        out: dict = {"self_collision": self.self_collision,
                     "allowed_self_pairs": [list(p) for p in sorted(self.allowed_self_pairs)],
                     "obstacles": [o.as_dict() for o in self.obstacles]}
        if self.floor_height is not None:
            out["floor"] = {"height": self.floor_height}
        return {"scene": out}


def check_keys(mapping: Mapping, allowed: tuple[str, ...], where: str, error: type[ValueError] = SceneError) -> None:
    """One-line ``error`` naming the first key of ``mapping`` that is not ``allowed`` (as ``<where>.<key>``)."""
    extra = set(mapping) - set(allowed)
    if extra:
        raise error(f"{where}.{clip(sorted(map(str, extra))[0])}: unknown key (expected {', '.join(allowed)})")


def quaternion_matrix(q: np.ndarray) -> np.ndarray:
    """Rotation matrix of a unit quaternion (x, y, z, w)."""
    x, y, z, w = (float(c) for c in q)
    return np.array([
        [1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
        [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
        [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)],
    ])


def _number(x: Any, where: str, low: float = -MAX_EXTENT, high: float = MAX_EXTENT) -> float:
    if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(float(x)):
        raise SceneError(f"{where}: expected a finite number")
    if not low <= float(x) <= high:
        raise SceneError(f"{where}: {float(x):.6g} outside [{low:g}, {high:g}]")
    return float(x)


def _triple(x: Any, where: str, keys: str = "xyz", low: float = -MAX_EXTENT) -> np.ndarray:
    if isinstance(x, Mapping):
        extra = set(x) - set(keys)
        if extra:
            raise SceneError(f"{where}: unknown key {clip(sorted(map(str, extra))[0])!r}")
        x = [x.get(k, 0.0 if k != "w" else 1.0) for k in keys]
    if not isinstance(x, (list, tuple)) or len(x) != len(keys):
        raise SceneError(f"{where}: expected {len(keys)} numbers ({', '.join(keys)})")
    return np.array([_number(v, f"{where}[{k}]", low) for k, v in enumerate(x)])


def pose_from_mapping(pose: Any, where: str) -> tuple[np.ndarray, np.ndarray]:
    """(position, unit quaternion x, y, z, w) of a ``geometry_msgs/Pose``-shaped mapping (missing = identity)."""
    if pose is None:
        return np.zeros(3), np.array([0.0, 0.0, 0.0, 1.0])
    if not isinstance(pose, Mapping):
        raise SceneError(f"{where}: expected a mapping with position and orientation")
    check_keys(pose, ("position", "orientation"), where)
    p = _triple(pose.get("position", [0, 0, 0]), f"{where}.position")
    q = _triple(pose.get("orientation", [0, 0, 0, 1]), f"{where}.orientation", "xyzw")
    norm = float(np.linalg.norm(q))
    if abs(norm - 1.0) > 1e-3:
        raise SceneError(f"{where}.orientation: not a unit quaternion (norm {norm:.6g})")
    return p, q / norm


def mesh_arrays(vertices: Any, triangles: Any, where: str, scale: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Checked (vertices V x 3 [m] scaled, triangles T x 3) of a ``shape_msgs/Mesh``-shaped pair (capped)."""
    try:
        n_v = len(vertices)
        n_t = len(triangles)
    except TypeError:
        raise SceneError(f"{where}: expected vertices and triangles lists") from None
    if not 4 <= n_v <= MAX_MESH_VERTICES:
        raise SceneError(f"{where}.vertices: expected 4..{MAX_MESH_VERTICES} vertices, got {n_v}")
    if not 1 <= n_t <= MAX_MESH_TRIANGLES:
        raise SceneError(f"{where}.triangles: expected 1..{MAX_MESH_TRIANGLES} triangles, got {n_t}")
    try:
        V = np.asarray(vertices, dtype=float)
        T = np.asarray(triangles)
    except (TypeError, ValueError):
        raise SceneError(f"{where}: vertices must be [x, y, z] numbers and triangles [i, j, k] indices") from None
    if V.shape != (n_v, 3) or not np.all(np.isfinite(V)) or np.any(np.abs(V) > MAX_EXTENT):
        raise SceneError(f"{where}.vertices: expected [x, y, z] finite numbers within {MAX_EXTENT:g} m")
    if T.shape != (n_t, 3) or T.dtype.kind not in "iu" or np.any(T < 0) or np.any(T >= n_v):
        raise SceneError(f"{where}.triangles: expected [i, j, k] vertex indices in 0..{n_v - 1}")
    if scale is not None:
        V = V * scale[None, :]
    if np.linalg.matrix_rank(V - V.mean(axis=0)) < 3:
        raise SceneError(f"{where}: the vertices are flat (a mesh obstacle needs volume)")
    return V, T.astype(np.int64)


def _primitive(spec: Any, where: str) -> tuple[str, tuple[float, ...]]:
    if not isinstance(spec, Mapping):
        raise SceneError(f"{where}: expected a mapping with type and dimensions")
    check_keys(spec, ("type", "dimensions", "polygon"), where)
    kind = spec.get("type")
    if isinstance(kind, int) and not isinstance(kind, bool):
        if kind not in PRIMITIVE_TYPES:
            raise SceneError(f"{where}.type: SolidPrimitive type {kind} is not supported (1 box, 2 sphere, "
                             "3 cylinder, 4 cone)")
        kind = PRIMITIVE_TYPES[kind]
    if not isinstance(kind, str) or kind.lower() not in DIMENSIONS:
        raise SceneError(f"{where}.type: expected box, sphere, cylinder or cone (or 1..4), got {clip(kind)!r}")
    kind = kind.lower()
    dims = spec.get("dimensions")
    if not isinstance(dims, (list, tuple)) or len(dims) != DIMENSIONS[kind]:
        raise SceneError(f"{where}.dimensions: a {kind} needs {DIMENSIONS[kind]} numbers")
    values = tuple(_number(d, f"{where}.dimensions[{k}]", 0.0) for k, d in enumerate(dims))
    if any(d <= 0 for d in values):
        raise SceneError(f"{where}.dimensions: every dimension must be positive")
    return kind, values


def scene_from_mapping(data: Any, meshes: Mapping[str, tuple[np.ndarray, np.ndarray]] | None = None) -> Scene:
    """A :class:`Scene` from the file's mapping (module docstring). ``meshes`` maps a ``mesh_name`` to (vertices,
    triangles) the caller read (:func:`load_mesh_file`); the scene cannot name files."""
    meshes = meshes or {}
    if isinstance(data, Mapping) and "scene" in data:
        data = data["scene"]
    if data is None:
        data = {}
    if not isinstance(data, Mapping):
        raise SceneError("scene: expected a mapping")
    check_keys(data, ("floor", "self_collision", "allowed_self_pairs", "obstacles"), "scene")
    floor = data.get("floor")
    height = None
    if floor is not None:
        if not isinstance(floor, Mapping) or set(floor) - {"height"}:
            raise SceneError("scene.floor: expected {height: z [m]}")
        height = _number(floor.get("height", 0.0), "scene.floor.height")
    self_collision = data.get("self_collision", True)
    if not isinstance(self_collision, bool):
        raise SceneError("scene.self_collision: expected true or false")
    pairs = set()
    raw_pairs = data.get("allowed_self_pairs") or []
    if not isinstance(raw_pairs, list) or len(raw_pairs) > 10_000:
        raise SceneError("scene.allowed_self_pairs: expected a list of [link, link] pairs")
    for k, p in enumerate(raw_pairs):
        if (not isinstance(p, (list, tuple)) or len(p) != 2
                or not all(isinstance(n, str) and 0 < len(n) <= MAX_NAME_CHARS for n in p)):
            raise SceneError(f"scene.allowed_self_pairs[{k}]: expected [link, link]")
        pairs.add(tuple(sorted(p)))
    obstacles_in = data.get("obstacles") or []
    if not isinstance(obstacles_in, list):
        raise SceneError("scene.obstacles: expected a list")
    if len(obstacles_in) > MAX_OBSTACLES:
        raise SceneError(f"scene.obstacles: {len(obstacles_in)} obstacles, more than {MAX_OBSTACLES}")
    obstacles = []
    names: set[str] = set()
    triangles = 0
    for k, ob in enumerate(obstacles_in):
        where = f"scene.obstacles[{k}]"
        if not isinstance(ob, Mapping):
            raise SceneError(f"{where}: expected a mapping")
        check_keys(ob, ("name", "primitive", "mesh", "mesh_name", "scale", "pose"), where)
        name = ob.get("name", f"obstacle_{k}")
        if not isinstance(name, str) or not 0 < len(name) <= MAX_NAME_CHARS:
            raise SceneError(f"{where}.name: expected a name of 1..{MAX_NAME_CHARS} characters")
        if name in names:
            raise SceneError(f"{where}.name: {clip(name)!r} is used twice")
        names.add(name)
        given = [key for key in ("primitive", "mesh", "mesh_name") if key in ob]
        if len(given) != 1:
            raise SceneError(f"{where}: expected exactly one of primitive, mesh, mesh_name")
        position, orientation = pose_from_mapping(ob.get("pose"), f"{where}.pose")
        if given[0] == "primitive":
            if "scale" in ob:
                raise SceneError(f"{where}.scale: only meshes are scaled")
            kind, dims = _primitive(ob["primitive"], f"{where}.primitive")
            obstacles.append(Obstacle(name, kind, dims, position, orientation))
            continue
        scale = _triple(ob.get("scale", [1.0, 1.0, 1.0]), f"{where}.scale", low=0.0)
        if np.any(scale <= 0):
            raise SceneError(f"{where}.scale: every factor must be positive")
        if given[0] == "mesh":
            m = ob["mesh"]
            if not isinstance(m, Mapping) or set(m) != {"vertices", "triangles"}:
                raise SceneError(f"{where}.mesh: expected vertices and triangles")
            V, T = mesh_arrays(m["vertices"], m["triangles"], f"{where}.mesh", scale)
        else:
            ref = ob["mesh_name"]
            if not isinstance(ref, str) or ref not in meshes:
                known = ", ".join(sorted(meshes)) or "none given"
                raise SceneError(f"{where}.mesh_name: no mesh {clip(ref)!r} was given (meshes: {known})")
            V, T = meshes[ref]
            V = V * scale[None, :]
        triangles += len(T)
        if triangles > MAX_SCENE_TRIANGLES:
            raise SceneError(f"{where}: the scene's meshes have more than {MAX_SCENE_TRIANGLES} triangles")
        obstacles.append(Obstacle(name, "mesh", (), position, orientation, V, T))
    return Scene(tuple(obstacles), height, self_collision, frozenset(pairs))


def scene_from_yaml_text(text: str, meshes: Mapping[str, tuple[np.ndarray, np.ndarray]] | None = None,
                         source: str = "") -> Scene:
    """Parse scene YAML text (bounded: :data:`MAX_SCENE_BYTES`, depth 12, :data:`MAX_SCENE_YAML_NODES`)."""
    data = load_yaml_text(text, "scene", SceneError, max_bytes=MAX_SCENE_BYTES, max_depth=12,
                          max_nodes=MAX_SCENE_YAML_NODES, allow_aliases=True, source=source)
    return scene_from_mapping(data, meshes)


def mesh_file_triangles_at(path: str, max_bytes: int = MAX_MESH_FILE_BYTES) -> tuple[np.ndarray, np.ndarray]:
    """(vertices [file units], triangles) of the mesh file at ``path`` (its extension names the format), read
    within ``max_bytes`` and the vertex and triangle caps by
    :func:`~vtm_dynamics.core.robot.mesh_triangles.mesh_file_triangles`, not by coal's loader (whose triangles of
    a geometry in several materials are misnumbered: that module). One-line :class:`SceneError` naming the file by
    its base name."""
    name = clip(os.path.basename(str(path)), 120)
    try:
        with open(path, "rb") as fh:
            data = fh.read(max_bytes + 1)
    except OSError as err:
        raise SceneError(f"mesh: cannot read {name} ({err.strerror or type(err).__name__})") from None
    if len(data) > max_bytes:
        raise SceneError(f"mesh: {name} has more than {max_bytes} bytes")
    try:
        return mesh_file_triangles(data, os.path.splitext(str(path))[1][1:], MAX_MESH_VERTICES, MAX_MESH_TRIANGLES)
    except MeshTrianglesError as err:
        raise SceneError(f"mesh: cannot read {name} ({err})") from None


def load_mesh_file(path: str, max_bytes: int = MAX_MESH_FILE_BYTES) -> tuple[np.ndarray, np.ndarray]:
    """(vertices [m], triangles) of a mesh file the caller names (STL, OBJ, COLLADA, PLY, OFF:
    :func:`mesh_file_triangles_at`), capped in bytes before reading and in vertices and triangles after; a COLLADA
    file's numbers are scaled by its ``<unit meter>`` (:mod:`vtm_dynamics.core.robot.mesh_units`). One-line
    :class:`SceneError` naming the file by its base name when it cannot be read."""
    name = clip(os.path.basename(str(path)), 120)
    if not isinstance(path, str) or not os.path.isfile(path):
        raise SceneError(f"mesh: file not found: {name}")
    size = os.path.getsize(path)
    if size > max_bytes:
        raise SceneError(f"mesh: {name} has {size} bytes, more than {max_bytes}")
    try:
        unit = mesh_file_unit(path)  # a COLLADA file's <unit meter>, which the reader does not apply
    except MeshUnitError as err:
        raise SceneError(f"mesh: {name}: {err}") from None
    V, T = mesh_file_triangles_at(path, max_bytes)
    V = V * unit
    return mesh_arrays(V, T, f"mesh {name}")

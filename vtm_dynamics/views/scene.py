"""What a 3-D view holds: robots as link poses over time, shapes, paths, point clouds, and events and coloured
spans on a timeline.

Plain frozen dataclasses, no drawing: builders (``stop_view``, ``map_view``, ``solvability_view``,
``clearance_view``) fill them from core results, ``web_page`` writes them. Every size is checked against the caps
below when a scene is made (:func:`check_scene`), so a view of any input stays bounded. Units: m, s; poses are
world placements, quaternions (x, y, z, w); colours RGB in 0..1.
"""

from __future__ import annotations

import math
import weakref
from dataclasses import dataclass, field

import numpy as np

from vtm_dynamics.views.robot_geometry import RobotGeometry

MAX_FRAMES = 4000  # samples of one animated robot (a 5 s stop at 1.25 ms); longer motions are thinned
MAX_LAYERS = 16  # robots (animated or ghosts) in one scene
MAX_SHAPES = 2000  # boxes, cylinders, spheres
MAX_LINE_POINTS = 20000  # all polylines together
MAX_CLOUD_POINTS = 50000  # all point clouds together
MAX_EVENTS = 1000
MAX_SPANS = 1000  # coloured stretches of the timeline
MAX_MESH_TRIANGLES = 300_000  # all triangle meshes of the scene's shapes together (a page of ~15 MB)
MAX_LABELS = 500
MAX_TEXT = 200  # characters of one label, info line or event text
MAX_INFO_LINES = 40

Color = tuple[float, float, float]


class SceneError(ValueError):
    """A scene that cannot be drawn (one line naming the field)."""


@dataclass(frozen=True)
class RobotLayer:
    """One copy of the robot: ``times`` (F,) [s] and ``poses`` (F, L, 7) (position [m], quaternion x y z w) of the
    geometry's L links; F = 1 is a still pose (a ghost). ``name`` is its key in the page (letters, digits, _),
    ``label`` what the legend says; ``opacity`` 1 opaque .. 0.05; ``appears``: not drawn before its first time
    (a stop that begins during a longer motion)."""

    name: str
    label: str
    color: Color
    opacity: float
    times: np.ndarray
    poses: np.ndarray
    appears: bool = False


@dataclass(frozen=True)
class Box:
    """A box of ``size`` (x, y, z) [m] at ``pose`` (4 x 4); ``wire``: also draw its edges."""

    name: str
    size: tuple[float, float, float]
    pose: np.ndarray
    color: Color
    opacity: float = 1.0
    wire: bool = False


@dataclass(frozen=True)
class Cylinder:
    """A cylinder of ``radius`` and ``length`` [m] along the z axis of ``pose`` (4 x 4), centred on its origin;
    with ``top_radius`` (at +z) a truncated cone, a cone when it is 0."""

    name: str
    radius: float
    length: float
    pose: np.ndarray
    color: Color
    opacity: float = 1.0
    top_radius: float | None = None


@dataclass(frozen=True)
class Mesh:
    """A triangle mesh: ``vertices`` (V, 3) [m] in the frame ``pose`` (4 x 4), ``triangles`` (T, 3) vertex
    indices."""

    name: str
    vertices: np.ndarray
    triangles: np.ndarray
    pose: np.ndarray
    color: Color
    opacity: float = 1.0


@dataclass(frozen=True)
class Sphere:
    """A sphere; ``on_top``: drawn over everything (a marker that must stay visible inside a mesh)."""

    name: str
    radius: float
    center: tuple[float, float, float]
    color: Color
    opacity: float = 1.0
    on_top: bool = False


@dataclass(frozen=True)
class Polyline:
    """A path through ``points`` (N, 3) [m], ``width`` in screen pixels; with ``times`` (N,) [s] a marker follows
    it during playback (``tracer``)."""

    name: str
    label: str
    points: np.ndarray
    color: Color
    width: float = 3.0
    times: np.ndarray | None = None
    tracer: bool = False


@dataclass(frozen=True)
class PointCloud:
    """Points (N, 3) [m] with per-point ``colors`` (N, 3), drawn ``size`` [m] wide."""

    name: str
    label: str
    points: np.ndarray
    colors: np.ndarray
    size: float = 0.01


@dataclass(frozen=True)
class TimelineEvent:
    """A mark on the timeline at ``time`` [s]: ``kind`` picks its colour, ``text`` is its tooltip."""

    time: float
    kind: str
    text: str


@dataclass(frozen=True)
class TimelineSpan:
    """A stretch ``start`` .. ``end`` [s] of the timeline drawn in ``color`` (e.g. where a check failed), ``text``
    its tooltip."""

    start: float
    end: float
    color: Color
    text: str


@dataclass(frozen=True)
class JointTrack:
    """The joint table beside the animation (follows ``layer``): per frame of that layer the joints' ``angles``
    since the first frame [rad or m], ``rates`` [rad/s or m/s] and ``held`` (brake holds the joint)."""

    layer: str
    names: tuple[str, ...]
    angles: np.ndarray
    rates: np.ndarray
    held: np.ndarray


@dataclass(frozen=True)
class Label:
    """Text beside a point of the scene (a pair's name, a distance), drawn over the 3-D view; hidden with the
    layer, shape or line named ``follows`` (if any)."""

    text: str
    position: tuple[float, float, float]
    color: Color = (0.1, 0.1, 0.1)
    follows: str = ""


@dataclass(frozen=True)
class LegendEntry:
    color: Color
    text: str
    toggles: tuple[str, ...] = ()  # names of the layers, shapes, lines or clouds its checkbox shows and hides


@dataclass(frozen=True)
class Scene:
    """Everything one page shows. ``duration`` [s] of the timeline (0: a still view without player)."""

    title: str
    geometry: RobotGeometry | None
    robots: tuple[RobotLayer, ...] = ()
    shapes: tuple[Box | Cylinder | Sphere | Mesh, ...] = ()
    lines: tuple[Polyline, ...] = ()
    clouds: tuple[PointCloud, ...] = ()
    events: tuple[TimelineEvent, ...] = ()
    spans: tuple[TimelineSpan, ...] = ()
    labels: tuple[Label, ...] = ()
    joints: JointTrack | None = None
    info: tuple[str, ...] = ()
    legend: tuple[LegendEntry, ...] = ()
    duration: float = 0.0
    notes: tuple[str, ...] = field(default=())  # what could not be drawn (missing meshes, thinned samples)
    focus: np.ndarray | None = None  # points (N, 3) [m] the camera starts framed on (default: everything drawn)


def _finite(a: np.ndarray, what: str) -> None:
    if not np.isfinite(np.asarray(a, dtype=float)).all():
        raise SceneError(f"{what}: values must be finite")


def _name(name: str, what: str) -> None:
    if not (isinstance(name, str) and 0 < len(name) <= 64 and name.replace("_", "a").isalnum() and name.isascii()):
        raise SceneError(f"{what}: name must be 1..64 ASCII letters, digits or _, got {name[:40]!r}")


_checked: weakref.WeakValueDictionary[int, Scene] = weakref.WeakValueDictionary()  # scenes that passed, by identity


def check_scene(scene: Scene) -> Scene:
    """``scene`` itself when it is drawable within the caps; else a one-line :class:`SceneError` naming the part.
    A scene is a value: the scene object that passed once (its builder checks it, the page writer asks again) is
    not checked again while it lives (the arrays it holds are not to be changed after it is made)."""
    if _checked.get(id(scene)) is scene:
        return scene
    if not (math.isfinite(scene.duration) and scene.duration >= 0):
        raise SceneError("duration: must be finite and >= 0")
    if len(scene.robots) > MAX_LAYERS:
        raise SceneError(f"robots: at most {MAX_LAYERS} layers, got {len(scene.robots)}")
    names: set[str] = set()
    n_links = len(scene.geometry.links) if scene.geometry is not None else 0
    for layer in scene.robots:
        _name(layer.name, "robots")
        if scene.geometry is None:
            raise SceneError(f"robots.{layer.name}: the scene has no robot geometry")
        t, p = np.asarray(layer.times), np.asarray(layer.poses)
        if t.ndim != 1 or not 1 <= len(t) <= MAX_FRAMES or p.shape != (len(t), n_links, 7):
            raise SceneError(f"robots.{layer.name}: expected 1..{MAX_FRAMES} times and poses of shape "
                             f"(frames, {n_links}, 7), got {t.shape} and {p.shape}")
        _finite(t, f"robots.{layer.name}.times")
        _finite(p, f"robots.{layer.name}.poses")
        if len(t) > 1 and np.any(np.diff(t) < 0):  # (a ghost's one instant has nothing to compare)
            raise SceneError(f"robots.{layer.name}.times: must not decrease")
        names.add(layer.name)
    if len(scene.shapes) > MAX_SHAPES:
        raise SceneError(f"shapes: at most {MAX_SHAPES}, got {len(scene.shapes)}")
    triangles = 0
    for s in scene.shapes:
        _name(s.name, "shapes")
        if isinstance(s, Mesh):
            triangles += _check_mesh(s)
            if triangles > MAX_MESH_TRIANGLES:
                raise SceneError(f"shapes.{s.name}: the meshes have more than {MAX_MESH_TRIANGLES} triangles in all")
        elif isinstance(s, Sphere) and len(s.center) == 3:  # the common case (event dots), without numpy
            if not all(math.isfinite(float(x)) for x in (s.radius, *s.center)):
                raise SceneError(f"shapes.{s.name}: values must be finite")
        else:
            values = [getattr(s, k) for k in ("size", "radius", "length", "center", "top_radius")
                      if getattr(s, k, None) is not None]
            _finite(np.concatenate([np.ravel(np.asarray(v, dtype=float)) for v in values]), f"shapes.{s.name}")
        if hasattr(s, "pose"):
            pose = np.asarray(s.pose, dtype=float)
            if pose.shape != (4, 4):
                raise SceneError(f"shapes.{s.name}.pose: expected 4 x 4")
            _finite(pose, f"shapes.{s.name}.pose")
    if sum(len(line.points) for line in scene.lines) > MAX_LINE_POINTS:
        raise SceneError(f"lines: at most {MAX_LINE_POINTS} points in all")
    for line in scene.lines:
        _name(line.name, "lines")
        pts = np.asarray(line.points, dtype=float)
        if pts.ndim != 2 or pts.shape[1] != 3 or len(pts) < 1:
            raise SceneError(f"lines.{line.name}: expected points of shape (N, 3), got {pts.shape}")
        _finite(pts, f"lines.{line.name}")
        if line.times is not None and np.asarray(line.times).shape != (len(pts),):
            raise SceneError(f"lines.{line.name}.times: expected {len(pts)} times")
    if sum(len(c.points) for c in scene.clouds) > MAX_CLOUD_POINTS:
        raise SceneError(f"clouds: at most {MAX_CLOUD_POINTS} points in all")
    for cloud in scene.clouds:
        _name(cloud.name, "clouds")
        if np.asarray(cloud.points).shape != np.asarray(cloud.colors).shape or np.ndim(cloud.points) != 2:
            raise SceneError(f"clouds.{cloud.name}: points and colors must both be (N, 3)")
        _finite(np.asarray(cloud.points, dtype=float), f"clouds.{cloud.name}")
    if len(scene.events) > MAX_EVENTS:
        raise SceneError(f"events: at most {MAX_EVENTS}, got {len(scene.events)}")
    if len(scene.spans) > MAX_SPANS:
        raise SceneError(f"spans: at most {MAX_SPANS}, got {len(scene.spans)}")
    for span in scene.spans:
        _finite(np.array([span.start, span.end], dtype=float), "spans")
        if span.end < span.start:
            raise SceneError("spans: a span must not end before it starts")
    if len(scene.labels) > MAX_LABELS:
        raise SceneError(f"labels: at most {MAX_LABELS}, got {len(scene.labels)}")
    for label in scene.labels:
        _finite(np.asarray(label.position, dtype=float), "labels")
    if len(scene.info) > MAX_INFO_LINES:
        raise SceneError(f"info: at most {MAX_INFO_LINES} lines")
    if scene.focus is not None:
        focus = np.asarray(scene.focus, dtype=float)
        if focus.ndim != 2 or focus.shape[1] != 3 or not 1 <= len(focus) <= MAX_LINE_POINTS:
            raise SceneError(f"focus: expected 1..{MAX_LINE_POINTS} points of shape (N, 3)")
        _finite(focus, "focus")
    if scene.joints is not None and scene.joints.layer not in names:
        raise SceneError(f"joints.layer: no robot layer named {scene.joints.layer!r}")
    _checked[id(scene)] = scene
    return scene


def _check_mesh(mesh: Mesh) -> int:
    """The triangle count of a drawable ``mesh`` (else a one-line :class:`SceneError`)."""
    v, f = np.asarray(mesh.vertices), np.asarray(mesh.triangles)
    if v.ndim != 2 or v.shape[1] != 3 or len(v) < 3 or f.ndim != 2 or f.shape[1] != 3 or len(f) < 1:
        raise SceneError(f"shapes.{mesh.name}: expected vertices (V, 3) and triangles (T, 3)")
    _finite(v.astype(float), f"shapes.{mesh.name}.vertices")
    if f.dtype.kind not in "iu" or f.min() < 0 or f.max() >= len(v):
        raise SceneError(f"shapes.{mesh.name}.triangles: expected vertex indices 0..{len(v) - 1}")
    return len(f)


def clip_text(text: str) -> str:
    """A label as the page shows it: one line, at most MAX_TEXT characters."""
    one = " ".join(str(text).split())
    return one if len(one) <= MAX_TEXT else one[: MAX_TEXT - 1] + "…"

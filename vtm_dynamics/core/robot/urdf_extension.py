"""The vtm_dynamics URDF extension: loop closures, knife edges and driving constraints.

Plain URDF describes a kinematic tree and forbids loops. We keep every URDF a valid tree (so
robot_state_publisher, RViz, MoveIt and Pinocchio load it unchanged; their parsers ignore unknown top-level
elements) and add three top-level elements beside ``<link>`` and ``<joint>``. The format is documented for users
in ``docs/urdf_extension.md``; this module parses it with ``xml.etree`` and returns frozen dataclasses.

``<loop_closure>`` (holonomic): a kinematic pair between two links that the tree does not contain.

.. code-block:: xml

    <loop_closure name="C" type="revolute">   <!-- revolute | prismatic | spherical | fixed -->
      <parent link="crank"/>                  <!-- first link (any link of the tree, or "world") -->
      <child link="slider"/>                  <!-- second link, different from the first -->
      <origin xyz="1 0 0" rpy="0 0 0"/>       <!-- pair frame on the parent link, in the parent link frame [m, rad] -->
      <child_origin xyz="0 0 0" rpy="0 0 0"/> <!-- the same pair frame on the child link, in the child link frame -->
      <axis xyz="0 0 1"/>                     <!-- joint axis in the pair frame (revolute, prismatic) -->
    </loop_closure>

When the pair is assembled the two pair frames coincide (up to the motion the pair allows about/along ``axis``).

``<knife_edge>`` (Pfaffian, nonholonomic): a point fixed in a link whose velocity along a link-fixed direction is
zero (a blade or a wheel that cannot slip sideways).

.. code-block:: xml

    <knife_edge name="wheel_left" link="wheel_l">
      <origin xyz="0 0 0"/>       <!-- contact point in the link frame [m] -->
      <axis xyz="0 1 0"/>         <!-- the blocked direction, fixed in the link (the blade normal) -->
    </knife_edge>

``<driving_constraint>`` (rheonomic): a joint whose coordinate is prescribed by a drive (a motor under position
control); it contributes one row, the joint's own velocity.

.. code-block:: xml

    <driving_constraint name="drive_1" joint="crank_joint"/>
"""

from __future__ import annotations

import math
import os
import xml.etree.ElementTree as ET
from dataclasses import dataclass

import numpy as np

LOOP_CLOSURE_TYPES = ("revolute", "prismatic", "spherical", "fixed")
WORLD_LINK = "world"


class URDFExtensionError(ValueError):
    """A URDF (or its vtm_dynamics extension elements) is unreadable or inconsistent."""


@dataclass(frozen=True)
class Pose:
    """A rigid placement: translation ``xyz`` [m] and roll-pitch-yaw ``rpy`` [rad] (URDF convention)."""

    xyz: tuple[float, float, float] = (0.0, 0.0, 0.0)
    rpy: tuple[float, float, float] = (0.0, 0.0, 0.0)

    def rotation(self) -> np.ndarray:
        """3x3 rotation matrix R = Rz(yaw) Ry(pitch) Rx(roll) (URDF fixed-axis convention)."""
        r, p, y = self.rpy
        cr, sr, cp, sp, cy, sy = math.cos(r), math.sin(r), math.cos(p), math.sin(p), math.cos(y), math.sin(y)
        return np.array(
            [
                [cy * cp, cy * sp * sr - sy * cr, cy * sp * cr + sy * sr],
                [sy * cp, sy * sp * sr + cy * cr, sy * sp * cr - cy * sr],
                [-sp, cp * sr, cp * cr],
            ]
        )

    def homogeneous(self) -> np.ndarray:
        """4x4 homogeneous transform of this placement."""
        T = np.eye(4)
        T[:3, :3] = self.rotation()
        T[:3, 3] = self.xyz
        return T


@dataclass(frozen=True)
class LoopClosureSpec:
    """A ``<loop_closure>`` element: a holonomic pair between ``parent`` and ``child`` links."""

    name: str
    type: str
    parent: str
    child: str
    parent_origin: Pose
    child_origin: Pose
    axis: tuple[float, float, float]


@dataclass(frozen=True)
class KnifeEdgeSpec:
    """A ``<knife_edge>`` element: the velocity of ``point`` [m, link frame] along ``axis`` (link frame) is zero."""

    name: str
    link: str
    point: tuple[float, float, float]
    axis: tuple[float, float, float]


@dataclass(frozen=True)
class DrivingConstraintSpec:
    """A ``<driving_constraint>`` element: the coordinate of ``joint`` is prescribed."""

    name: str
    joint: str


@dataclass(frozen=True)
class URDFExtension:
    """All extension elements of one URDF, plus the tree's link and joint names (for validation by callers)."""

    robot_name: str
    links: tuple[str, ...]
    joints: tuple[str, ...]
    loop_closures: tuple[LoopClosureSpec, ...]
    knife_edges: tuple[KnifeEdgeSpec, ...]
    driving_constraints: tuple[DrivingConstraintSpec, ...]


def _floats(text: str | None, n: int, what: str, default: tuple[float, ...]) -> tuple[float, ...]:
    if text is None:
        return default
    try:
        values = tuple(float(t) for t in text.split())
    except ValueError:
        raise URDFExtensionError(f"{what}: expected {n} numbers, got {text!r}") from None
    if len(values) != n or not all(math.isfinite(v) for v in values):
        raise URDFExtensionError(f"{what}: expected {n} finite numbers, got {text!r}")
    return values


def _pose(element: ET.Element | None, what: str) -> Pose:
    if element is None:
        return Pose()
    return Pose(
        xyz=_floats(element.get("xyz"), 3, f"{what} xyz", (0.0, 0.0, 0.0)),  # type: ignore[arg-type]
        rpy=_floats(element.get("rpy"), 3, f"{what} rpy", (0.0, 0.0, 0.0)),  # type: ignore[arg-type]
    )


def _unit_axis(element: ET.Element | None, what: str) -> tuple[float, float, float]:
    axis = np.array(_floats(None if element is None else element.get("xyz"), 3, what, (1.0, 0.0, 0.0)))
    norm = float(np.linalg.norm(axis))
    if norm < 1e-12:
        raise URDFExtensionError(f"{what}: the axis must not be zero")
    return tuple(float(a) for a in axis / norm)  # type: ignore[return-value]


def _required(element: ET.Element, tag: str, attr: str, what: str) -> str:
    child = element.find(tag)
    value = None if child is None else child.get(attr)
    if not value:
        raise URDFExtensionError(f"{what}: missing <{tag} {attr}=...>")
    return value


def read_urdf_text(urdf: str) -> str:
    """Return URDF XML text from either a file path or an XML string."""
    if urdf.lstrip().startswith("<"):
        return urdf
    if not os.path.isfile(urdf):
        raise URDFExtensionError(f"URDF file not found: {urdf}")
    with open(urdf, encoding="utf-8") as handle:
        return handle.read()


def parse_urdf_extension(urdf: str) -> URDFExtension:
    """Parse the extension elements of a URDF given as a path or an XML string and validate them.

    Checks: well-formed XML with a ``<robot>`` root; unique names among links, joints and extension elements;
    every referenced link/joint exists (``world`` is always allowed); a loop closure joins two different links;
    known loop-closure types; finite numbers; non-zero axes.
    """
    text = read_urdf_text(urdf)
    try:
        root = ET.fromstring(text)
    except ET.ParseError as err:
        raise URDFExtensionError(f"URDF is not well-formed XML: {err}") from None
    if root.tag != "robot":
        raise URDFExtensionError(f"URDF root element must be <robot>, found <{root.tag}>")
    links = tuple(link.get("name", "") for link in root.findall("link"))
    joints = tuple(joint.get("name", "") for joint in root.findall("joint"))
    for kind, names in (("link", links), ("joint", joints)):
        if "" in names:
            raise URDFExtensionError(f"a <{kind}> has no name")
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise URDFExtensionError(f"duplicate {kind} names: {', '.join(dup)}")
    known_links = set(links) | {WORLD_LINK}

    def check_link(name: str, what: str) -> None:
        if name not in known_links:
            raise URDFExtensionError(f"{what}: link {name!r} does not exist in the URDF")

    used: set[str] = set(joints)
    def check_name(element: ET.Element, kind: str) -> str:
        name = element.get("name")
        if not name:
            raise URDFExtensionError(f"a <{kind}> has no name")
        if name in used:
            raise URDFExtensionError(f"<{kind} name={name!r}>: the name is already used by a joint or constraint")
        used.add(name)
        return name

    closures = []
    for el in root.findall("loop_closure"):
        name = check_name(el, "loop_closure")
        what = f"<loop_closure name={name!r}>"
        kind = el.get("type", "")
        if kind not in LOOP_CLOSURE_TYPES:
            raise URDFExtensionError(f"{what}: type must be one of {', '.join(LOOP_CLOSURE_TYPES)}, got {kind!r}")
        parent = _required(el, "parent", "link", what)
        child = _required(el, "child", "link", what)
        check_link(parent, what)
        check_link(child, what)
        if parent == child:
            raise URDFExtensionError(f"{what}: parent and child are the same link {parent!r}")
        axis = _unit_axis(el.find("axis"), f"{what} axis")
        closures.append(
            LoopClosureSpec(
                name=name,
                type=kind,
                parent=parent,
                child=child,
                parent_origin=_pose(el.find("origin"), f"{what} origin"),
                child_origin=_pose(el.find("child_origin"), f"{what} child_origin"),
                axis=axis,
            )
        )

    knives = []
    for el in root.findall("knife_edge"):
        name = check_name(el, "knife_edge")
        what = f"<knife_edge name={name!r}>"
        link = el.get("link", "")
        check_link(link, what)
        origin = el.find("origin")
        point = _floats(None if origin is None else origin.get("xyz"), 3, f"{what} origin", (0.0, 0.0, 0.0))
        knives.append(
            KnifeEdgeSpec(name=name, link=link, point=point, axis=_unit_axis(el.find("axis"), f"{what} axis"))  # type: ignore[arg-type]
        )

    drives = []
    for el in root.findall("driving_constraint"):
        name = check_name(el, "driving_constraint")
        joint = el.get("joint", "")
        if joint not in joints:
            raise URDFExtensionError(f"<driving_constraint name={name!r}>: joint {joint!r} does not exist in the URDF")
        drives.append(DrivingConstraintSpec(name=name, joint=joint))

    return URDFExtension(
        robot_name=root.get("name", ""),
        links=links,
        joints=joints,
        loop_closures=tuple(closures),
        knife_edges=tuple(knives),
        driving_constraints=tuple(drives),
    )

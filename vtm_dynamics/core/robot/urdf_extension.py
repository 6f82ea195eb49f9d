"""The vtm_dynamics URDF extension: loop closures, knife edges and driving constraints.

Plain URDF describes a kinematic tree and forbids loops. We keep every URDF a valid tree (so
robot_state_publisher, RViz, MoveIt and Pinocchio load it unchanged; their parsers ignore unknown top-level
elements) and add three top-level elements beside ``<link>`` and ``<joint>``. The format is documented for users
in ``docs/urdf_extension.md``; this module parses it and returns frozen dataclasses. It takes XML text only, never
a path, and parses it safely and within limits (:func:`parse_urdf_xml`); files are read by :func:`read_urdf_file`.

``<loop_closure>`` (holonomic): a kinematic pair between two links that the tree does not contain.

.. code-block:: xml

    <loop_closure name="C" type="revolute">   <!-- see LOOP_CLOSURE_TYPES -->
      <parent link="crank"/>                  <!-- first link (any link of the tree, or "world") -->
      <child link="slider"/>                  <!-- second link, different from the first -->
      <origin xyz="1 0 0" rpy="0 0 0"/>       <!-- pair frame on the parent link, in the parent link frame [m, rad] -->
      <child_origin xyz="0 0 0" rpy="0 0 0"/> <!-- the same pair frame on the child link, in the child link frame -->
      <axis xyz="0 0 1"/>                     <!-- axis in the pair frame: joint axis, line direction, plane normal -->
    </loop_closure>

When the pair is assembled the two pair frames coincide (up to the motion the pair allows about/along ``axis``);
for ``point_on_line`` and ``point_on_plane`` only the child's pair point is constrained: it stays on the line
through the parent's pair point along ``axis``, or in the plane through it normal to ``axis``.

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
from collections import Counter
from dataclasses import dataclass

import numpy as np
from defusedxml import DefusedXmlException
from defusedxml.ElementTree import DefusedXMLParser

from vtm_dynamics.core.bounded_file import NOT_REGULAR, TOO_LARGE, BoundedFileError, read_bounded_file
from vtm_dynamics.core.excerpt import clip, excerpt, excerpt_list

LOOP_CLOSURE_TYPES = ("revolute", "prismatic", "spherical", "fixed", "cylindrical", "point_on_line", "point_on_plane")
# Constraint rows per loop-closure type in 3-D (the relative freedoms a pair removes): docs/urdf_extension.md.
LOOP_CLOSURE_ROWS = {"fixed": 6, "revolute": 5, "prismatic": 5, "cylindrical": 4, "spherical": 3,
                     "point_on_line": 2, "point_on_plane": 1}
WORLD_LINK = "world"
COUNTED_ELEMENTS = ("link", "joint", "loop_closure", "knife_edge", "driving_constraint")

# Limits for URDF text (a description from a message is untrusted). Real arms: 10-50 links, 5-100 kB of URDF;
# a humanoid with hands ~100 links. The defaults leave an order of magnitude of room and keep parsing ~0.1 s.
DEFAULT_MAX_URDF_BYTES = 2_000_000
DEFAULT_MAX_XML_DEPTH = 32  # URDF needs 5 (robot/link/visual/geometry/mesh); vendor tags a few more
DEFAULT_MAX_LINKS = 1000
# Degrees of freedom of the tree joints. Pinocchio's Data needs memory ~ 66 B x nv^3 (measured: nv = 128: 0.14 GB,
# 300: 1.8 GB, 500: 5 GB, 1000: MemoryError; a 10,000-joint chain crashed the process). Arms have 6-7, humanoids
# and dual-arm mobile manipulators 30-60.
DEFAULT_MAX_DOF = 128
JOINT_DOF = {"revolute": 1, "continuous": 1, "prismatic": 1, "fixed": 0, "planar": 3, "floating": 6}
NOT_URDF_TEXT = "urdf: not URDF XML text (expected '<robot ...>'); paths are not accepted here"


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


def numbers(text: str | None, default: tuple[float, ...], what: str,
            error: type[ValueError] = URDFExtensionError) -> tuple[float, ...]:
    """The numbers of a URDF attribute (``xyz="0 0 1"``, ``value="2.5"``): ``default`` when the attribute is
    absent, else exactly ``len(default)`` finite numbers, or ``error`` with one line naming ``what`` (the one number
    reader for every URDF element the package reads)."""
    if text is None:
        return default
    n = len(default)
    try:
        values = tuple(float(t) for t in text.split())
    except ValueError:
        raise error(f"{what}: expected {n} numbers, got {excerpt(text)}") from None
    if len(values) != n or not all(math.isfinite(v) for v in values):
        raise error(f"{what}: expected {n} finite numbers, got {excerpt(text)}")
    return values


def _pose(element: ET.Element | None, what: str) -> Pose:
    if element is None:
        return Pose()
    return Pose(
        xyz=numbers(element.get("xyz"), (0.0, 0.0, 0.0), f"{what} xyz"),  # type: ignore[arg-type]
        rpy=numbers(element.get("rpy"), (0.0, 0.0, 0.0), f"{what} rpy"),  # type: ignore[arg-type]
    )


def _unit_axis(element: ET.Element | None, what: str) -> tuple[float, float, float]:
    axis = np.array(numbers(None if element is None else element.get("xyz"), (1.0, 0.0, 0.0), what))
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


def read_urdf_file(path: str, max_bytes: int = DEFAULT_MAX_URDF_BYTES) -> str:
    """The text of a URDF file, for trusted callers only (command lines, node parameters, tests, benches).

    Message fields never come here: they are text and go straight to :func:`parse_urdf_xml`. The file must be a
    regular file of at most ``max_bytes`` (the cap :func:`parse_urdf_xml` applies to the text), checked on the open
    file before anything is read: a FIFO is opened without blocking and refused (it blocked the reader for ever)
    and so is a device (``/dev/zero`` was read until memory ran out: 2.7 GB in 7 s under a 3 GB limit). The text
    is checked here only for starting like XML (a file that does not is named as such, not as "text"); the text
    entry points check the rest (once). Raises :class:`URDFExtensionError` (one line, the file's full path and the
    reason, never its contents).
    """
    where = os.path.abspath(str(path))
    try:
        text = read_bounded_file(path, max_bytes).decode("utf-8")
    except BoundedFileError as err:
        if err.why == NOT_REGULAR:
            raise URDFExtensionError(f"urdf: {where} is not a regular file") from None
        if err.why == TOO_LARGE:
            raise URDFExtensionError(f"urdf: {where} has {err.size} bytes, more than max_bytes {max_bytes}") from None
        raise URDFExtensionError(f"urdf: {where} has more than max_bytes {max_bytes} bytes") from None  # it grew
    except (OSError, UnicodeDecodeError) as err:
        reason = getattr(err, "strerror", None) or type(err).__name__
        raise URDFExtensionError(f"urdf: cannot read {where}: {reason}") from None
    if not text.lstrip("\ufeff \t\r\n").startswith("<"):
        raise URDFExtensionError(f"urdf: {where} is not a URDF file (it does not start with XML '<robot ...>')")
    return text


class _LimitedTreeBuilder(ET.TreeBuilder):
    """A TreeBuilder that refuses, while parsing, documents nested too deeply or with too many top-level items."""

    def __init__(self, max_depth: int, max_links: int, links_field: str, max_dof: int) -> None:
        super().__init__()
        self._max_depth = max_depth
        self._max_links = max_links
        self._links_field = links_field
        self._max_dof = max_dof
        self._dof = 0
        self._depth = 0
        self._counts = dict.fromkeys(COUNTED_ELEMENTS, 0)

    def start(self, tag, attrs):  # type: ignore[override]
        self._depth += 1
        if self._depth > self._max_depth:
            raise URDFExtensionError(f"urdf: elements nested deeper than {self._max_depth} levels (max_depth)")
        if self._depth == 2 and tag in self._counts:
            self._counts[tag] += 1
            if self._counts[tag] > self._max_links:
                field = self._links_field if tag == "link" else "max_links"
                raise URDFExtensionError(f"urdf: more than {self._max_links} <{tag}> elements ({field})")
            if tag == "joint":
                self._dof += JOINT_DOF.get(attrs.get("type", ""), 1)
                if self._dof > self._max_dof:
                    raise URDFExtensionError(f"urdf: more than {self._max_dof} joint degrees of freedom (max_dof)")
        return super().start(tag, attrs)

    def end(self, tag):  # type: ignore[override]
        self._depth -= 1
        return super().end(tag)


def parse_urdf_xml(
    text: str, *, max_bytes: int = DEFAULT_MAX_URDF_BYTES, max_depth: int = DEFAULT_MAX_XML_DEPTH,
    max_links: int = DEFAULT_MAX_LINKS, links_field: str = "max_links", max_dof: int = DEFAULT_MAX_DOF,
) -> ET.Element:
    """The ``<robot>`` root of URDF XML **text** (never a path), parsed safely within limits.

    Checked in this order, each a one-line :class:`URDFExtensionError` that quotes none of the input: a string
    whose first non-blank character is ``<``; at most ``max_bytes`` bytes (UTF-8); no DTD (so no entity
    declarations, no entity expansion and no external entities: ``defusedxml``); element nesting at most
    ``max_depth`` levels, at most ``max_links`` top-level ``<link>`` elements (likewise joints and extension
    elements) and at most ``max_dof`` joint degrees of freedom, all counted while parsing so that an oversized
    document is abandoned early; well-formed XML; a ``<robot>`` root. ``links_field`` names the link cap in the
    message (callers with a cap of their own pass its name).
    """
    if not isinstance(text, str) or not text.lstrip("\ufeff \t\r\n").startswith("<"):
        raise URDFExtensionError(NOT_URDF_TEXT)
    if len(text) > max_bytes or len(text.encode("utf-8", "surrogatepass")) > max_bytes:
        raise URDFExtensionError(f"urdf: more than {max_bytes} bytes (max_bytes)")
    parser = DefusedXMLParser(target=_LimitedTreeBuilder(max_depth, max_links, links_field, max_dof),
                              forbid_dtd=True)
    try:
        parser.feed(text)
        root = parser.close()
    except DefusedXmlException:
        raise URDFExtensionError("urdf: DTD and entity declarations are not allowed in URDF text") from None
    except ET.ParseError as err:
        raise URDFExtensionError(f"urdf: URDF is not well-formed XML: {str(err)[:120]}") from None
    except (RecursionError, MemoryError) as err:  # not reachable within the limits; never let it escape
        raise URDFExtensionError(f"urdf: URDF too complex ({type(err).__name__})") from None
    if root.tag != "robot":
        raise URDFExtensionError(f"urdf: URDF root element must be <robot>, found <{clip(root.tag)}>")
    return root


def parse_urdf_extension(
    urdf: str, *, max_bytes: int = DEFAULT_MAX_URDF_BYTES, max_depth: int = DEFAULT_MAX_XML_DEPTH,
    max_links: int = DEFAULT_MAX_LINKS, max_dof: int = DEFAULT_MAX_DOF,
) -> URDFExtension:
    """Parse the extension elements of URDF XML **text** (see :func:`parse_urdf_xml` for the limits)."""
    return extension_from_root(parse_urdf_xml(urdf, max_bytes=max_bytes, max_depth=max_depth, max_links=max_links,
                                              max_dof=max_dof))


def extension_from_root(root: ET.Element) -> URDFExtension:
    """The validated extension elements of a parsed ``<robot>`` root (from :func:`parse_urdf_xml`).

    Checks (linear time): unique names among links, joints and extension elements; every referenced link/joint
    exists (``world`` is always allowed); a loop closure joins two different links; known loop-closure types;
    finite numbers; non-zero axes.
    """
    links = tuple(link.get("name", "") for link in root.findall("link"))
    joints = tuple(joint.get("name", "") for joint in root.findall("joint"))
    for kind, names in (("link", links), ("joint", joints)):
        if "" in names:
            raise URDFExtensionError(f"a <{kind}> has no name")
        dup = sorted(n for n, k in Counter(names).items() if k > 1)
        if dup:
            raise URDFExtensionError(f"duplicate {kind} names: {excerpt_list(dup)}")
    known_links = set(links) | {WORLD_LINK}

    def check_link(name: str, what: str) -> None:
        if name not in known_links:
            raise URDFExtensionError(f"{what}: link {excerpt(name)} does not exist in the URDF")

    used: set[str] = set(joints)
    def check_name(element: ET.Element, kind: str) -> str:
        name = element.get("name")
        if not name:
            raise URDFExtensionError(f"a <{kind}> has no name")
        if name in used:
            raise URDFExtensionError(f"<{kind} name={excerpt(name)}>: the name is already used by a joint or constraint")
        used.add(name)
        return name

    closures = []
    for el in root.findall("loop_closure"):
        name = check_name(el, "loop_closure")
        what = f"<loop_closure name={excerpt(name)}>"
        kind = el.get("type", "")
        if kind not in LOOP_CLOSURE_TYPES:
            raise URDFExtensionError(f"{what}: type must be one of {', '.join(LOOP_CLOSURE_TYPES)}, got {excerpt(kind)}")
        parent = _required(el, "parent", "link", what)
        child = _required(el, "child", "link", what)
        check_link(parent, what)
        check_link(child, what)
        if parent == child:
            raise URDFExtensionError(f"{what}: parent and child are the same link {excerpt(parent)}")
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
        what = f"<knife_edge name={excerpt(name)}>"
        link = el.get("link", "")
        check_link(link, what)
        origin = el.find("origin")
        point = numbers(None if origin is None else origin.get("xyz"), (0.0, 0.0, 0.0), f"{what} origin")
        knives.append(
            KnifeEdgeSpec(name=name, link=link, point=point, axis=_unit_axis(el.find("axis"), f"{what} axis"))  # type: ignore[arg-type]
        )

    drives = []
    joint_set = set(joints)
    for el in root.findall("driving_constraint"):
        name = check_name(el, "driving_constraint")
        joint = el.get("joint", "")
        if joint not in joint_set:
            raise URDFExtensionError(
                f"<driving_constraint name={excerpt(name)}>: joint {excerpt(joint)} does not exist in the URDF")
        drives.append(DrivingConstraintSpec(name=name, joint=joint))

    return URDFExtension(
        robot_name=root.get("name", ""),
        links=links,
        joints=joints,
        loop_closures=tuple(closures),
        knife_edges=tuple(knives),
        driving_constraints=tuple(drives),
    )

"""The length unit of a COLLADA (.dae) mesh file: how many metres one of its coordinates is.

COLLADA (1.4.1 and 1.5 specifications, element ``<asset>``): ``<asset>`` is the first child of ``<COLLADA>``, and
its ``<unit meter="...">`` is the length of one of the document's distance units in metres (1 when absent). A part
drawn in millimetres says ``meter="0.001"``. RViz honours it: ROS 2's RViz takes the root transform of Assimp's
COLLADA import (which carries the unit scale; the up-axis turn is switched off with Assimp's
``IGNORE_UP_DIRECTION`` option), ROS 1's RViz reads the attribute itself and scales by it. The two loaders this
package draws and checks with drop it: coal's mesh loader (so Pinocchio's collision geometry) and Drake's Meshcat
viewer (three.js's COLLADA loader puts the unit, and the ``<up_axis>`` turn, on the root of what it reads; Drake's
viewer merges the meshes without that root's transform). So the callers multiply the URDF's ``<mesh scale>`` by
this unit. ``<up_axis>`` is ignored everywhere, as RViz ignores it: a file's coordinates are used as written.

The file is untrusted input: only its head is read (``<asset>`` must end within ``MAX_HEAD_BYTES``), by the XML
parser with the document type refused (``defusedxml``: no entity is declared, expanded or fetched), and no file the
document names is opened. A unit that is not a number from ``MIN_UNIT`` to ``MAX_UNIT`` metres is refused with one
line (:class:`MeshUnitError`). Units: m.
"""

from __future__ import annotations

import math
import os
import stat
import xml.etree.ElementTree as ET

from defusedxml import DefusedXmlException
from defusedxml.ElementTree import DefusedXMLParser

from vtm_dynamics.core.excerpt import clip, excerpt

MAX_HEAD_BYTES = 1024 * 1024  # where the <asset> element must have ended (it is a few hundred bytes in practice)
MIN_UNIT = 1e-6  # [m] a micrometre: anything smaller is no robot part
MAX_UNIT = 1e3  # [m] a kilometre
_FIRST_CHUNK, _MAX_CHUNK = 4096, 64 * 1024  # bytes read at first (an <asset> fits), doubled up to the last
_FEED = 512  # bytes given to the parser at a time (each element costs a Python call: the head, not the file)
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


class MeshUnitError(ValueError):
    """The unit of a COLLADA file cannot be read or is not a length (one line, without the file's name: the caller
    names the mesh)."""


def _local(tag: str) -> str:
    return tag.rsplit("}", 1)[-1]


class _AssetReader:
    """Parser target that keeps the ``meter`` attribute of ``<COLLADA><asset><unit>`` and notes when ``<asset>``
    (or the first element that is not ``<asset>``) has ended: nothing after it matters."""

    def __init__(self) -> None:
        self.depth = 0
        self.in_asset = False
        self.done = False
        self.meter: str | None = None
        self.root = ""

    def start(self, tag: str, attrib: dict) -> None:
        name = _local(tag)
        if self.depth == 0:
            self.root = name
        elif self.depth == 1 and not self.done:
            if name == "asset":
                self.in_asset = True
            else:
                self.done = True  # no <asset> first: the unit is the default
        elif self.depth == 2 and self.in_asset and name == "unit":
            self.meter = attrib.get("meter")
        self.depth += 1

    def end(self, tag: str) -> None:
        self.depth -= 1
        if self.depth == 1 and self.in_asset:
            self.in_asset, self.done = False, True
        elif self.depth == 0:
            self.done = True

    def data(self, text: str) -> None:
        pass

    def close(self) -> None:
        return None


def unit_from_meter(meter: str | None) -> float:
    """The unit [m] the ``meter`` attribute's text says (1 when there is none), checked to be a number from
    ``MIN_UNIT`` to ``MAX_UNIT``."""
    if meter is None:
        return 1.0
    try:
        unit = float(meter.strip())
    except ValueError:
        unit = math.nan
    if not (math.isfinite(unit) and MIN_UNIT <= unit <= MAX_UNIT):
        raise MeshUnitError(f"its <unit meter={excerpt(meter)}> is not a length from {MIN_UNIT:g} m to "
                            f"{MAX_UNIT:g} m")
    return unit


def collada_unit(fd: int, max_head: int = MAX_HEAD_BYTES) -> float:
    """The unit [m] of the COLLADA file open as ``fd`` (module docstring), read from its start with ``os.pread``
    (the descriptor's position is not moved)."""
    reader = _AssetReader()
    parser = DefusedXMLParser(target=reader, forbid_dtd=True)
    offset, size = 0, _FIRST_CHUNK
    try:
        while not reader.done:
            if offset >= max_head:
                raise MeshUnitError(f"its <asset> does not end within the first {max_head} bytes")
            chunk = os.pread(fd, min(size, max_head - offset), offset)
            if not chunk:
                parser.close()  # a document that ends here: well-formed only if it is complete
                break
            offset += len(chunk)
            size = min(2 * size, _MAX_CHUNK)
            for start in range(0, len(chunk), _FEED):  # fed in small pieces: parsing stops soon after </asset>
                parser.feed(chunk[start:start + _FEED])
                if reader.done:
                    break
    except DefusedXmlException:
        raise MeshUnitError("DTD and entity declarations are not allowed in a mesh file") from None
    except ET.ParseError as err:
        if not reader.done:  # past the <asset> the loader judges the rest
            raise MeshUnitError(f"not well-formed XML ({str(err)[:80]})") from None
    if reader.root != "COLLADA":
        raise MeshUnitError(f"not a COLLADA document (its root is <{clip(reader.root)}>)")
    return unit_from_meter(reader.meter)


def mesh_file_unit(path: str, max_head: int = MAX_HEAD_BYTES) -> float:
    """The unit [m] of the mesh file at ``path`` (a path already checked by the caller): a .dae file's
    ``<unit meter>``, 1 for every other format (STL and OBJ carry no unit). A symbolic link is not followed."""
    if os.path.splitext(path)[1].lower() != ".dae":
        return 1.0
    try:
        fd = os.open(path, _READ_FLAGS)
    except OSError as err:
        raise MeshUnitError(f"cannot read ({err.strerror or type(err).__name__})") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise MeshUnitError("not a regular file")
        return collada_unit(fd, max_head)
    finally:
        os.close(fd)

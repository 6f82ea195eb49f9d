"""The triangles of a mesh file (STL, OBJ, COLLADA, PLY, OFF): its vertices and the vertex indices of each triangle.

Read by trimesh (COLLADA through pycollada) from bytes the caller read under its own caps, with no resolver, so
the file's content names no other file that is opened: an OBJ's material lines are dropped as well, and a COLLADA
file with a document type (``<!DOCTYPE``, ``<!ENTITY``) is refused, as :mod:`vtm_dynamics.core.robot.mesh_units`
refuses it (and so is one in an encoding where that search is blind, such as UTF-16: the XML parser underneath,
lxml, expands the entities a document declares). The numbers are the file's own with its node transforms applied; a COLLADA file's ``<unit>`` and
``<up_axis>`` are not applied (the callers scale by the unit, :mod:`mesh_units`; the up axis is ignored as RViz
ignores it).

Not coal's mesh loader (assimp), whose vertices are right but whose triangles are not always: it numbers the
triangles of a node's second mesh (a COLLADA geometry with two materials, as the UR5's base, which assimp splits in
two) as if they were the first mesh's, and those of a nested node from the wrong offset (coal 3.0,
``recurseBuildMesh``). Three.js's COLLADA loader, an independent reader, finds the same number of triangles, the same
surface area and the same box in each of the UR5's seven files (test/views/test_browser.py).
"""

from __future__ import annotations

import io
import re

import numpy as np

FORMATS = ("stl", "obj", "dae", "ply", "off")
MAX_VERTICES = 2_000_000
MAX_TRIANGLES = 2_000_000
_DOCUMENT_TYPE = re.compile(rb"<!(DOCTYPE|ENTITY)", re.IGNORECASE)
_MATERIAL_LINE = re.compile(rb"^[ \t]*(mtllib|usemtl)\b[^\n]*$", re.IGNORECASE | re.MULTILINE)


class MeshTrianglesError(ValueError):
    """The bytes are not a mesh this reader takes (format, content, size); one line."""


def mesh_file_triangles(data: bytes, fmt: str, max_vertices: int = MAX_VERTICES,
                        max_triangles: int = MAX_TRIANGLES) -> tuple[np.ndarray, np.ndarray]:
    """(vertices (V, 3) [file units], triangles (T, 3) int64) of the mesh file bytes ``data`` in ``fmt`` (one of
    :data:`FORMATS`, the file's extension without its dot); :class:`MeshTrianglesError` when they cannot be read,
    hold no triangle or exceed the caps."""
    import trimesh

    fmt = fmt.lower()
    if fmt not in FORMATS:
        raise MeshTrianglesError(f"not a mesh format read here ({', '.join(FORMATS)})")
    if fmt == "dae":
        text = data[3:] if data.startswith(b"\xef\xbb\xbf") else data
        if text.lstrip()[:1] != b"<" or b"\0" in data[:4096]:  # UTF-16, UTF-32, EBCDIC: the search below is blind
            raise MeshTrianglesError("a COLLADA file not in UTF-8 (or an encoding ASCII text reads the same in) "
                                     "is not read")
        if _DOCUMENT_TYPE.search(data):
            raise MeshTrianglesError("a COLLADA file with a document type (DOCTYPE or ENTITY) is not read")
    if fmt == "obj":
        data = _MATERIAL_LINE.sub(b"", data)
    try:
        mesh = trimesh.load(io.BytesIO(data), file_type=fmt, force="mesh", process=False, resolver=None)
        vertices = np.asarray(mesh.vertices, dtype=np.float64).reshape(-1, 3)
        triangles = np.asarray(mesh.faces, dtype=np.int64).reshape(-1, 3)
    except Exception as err:  # noqa: BLE001 - the readers fail in many ways on bad files; each becomes one line
        raise MeshTrianglesError(f"unreadable as {fmt} ({type(err).__name__})") from None
    if len(vertices) > max_vertices or len(triangles) > max_triangles:
        raise MeshTrianglesError(f"{len(vertices)} vertices and {len(triangles)} triangles, more than "
                                 f"{max_vertices} / {max_triangles}")
    if len(triangles) == 0:
        raise MeshTrianglesError("no triangles" + (" in its scene (for example a node bound to a material whose "
                                                   "texture the file does not hold; export it again, or as STL)"
                                                   if fmt == "dae" else ""))
    if triangles.min() < 0 or triangles.max() >= len(vertices) or not np.all(np.isfinite(vertices)):
        raise MeshTrianglesError("triangles outside its vertices or vertices that are not finite")
    return vertices, triangles

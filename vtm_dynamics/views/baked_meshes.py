"""A triangle mesh baked into the page's compact format: what the page draws instead of the mesh file it came from.

A robot's visual mesh files are text or loosely packed binaries (the UR5's seven COLLADA files hold 6.7 MB for
95,694 triangles) that the page's viewer would parse again in the browser each time the page opens. Baked and
compressed, the same triangles take 0.44 MB (0.58 MB in the page's base64, against 2.75 MB for the compressed
files), and the page builds them without a parser.

How a mesh file becomes triangles: :mod:`vtm_dynamics.core.robot.mesh_triangles` reads the bytes read under
``mesh_files``' checks (trimesh, from memory, no file the content names is opened). The numbers are the file's own
with its node transforms applied, its ``<unit>`` and ``<up_axis>`` not: the visual's scale carries the unit, and
the viewer's own COLLADA loader drew the same numbers (the browser test compares the two on the UR5: the same
triangles, areas and boxes). A file that cannot be read this way stays a packed file for the viewer's loader
(``web_page``).

The format ``vtm-mesh/1`` (little-endian; :func:`baked_bytes`, :func:`unbaked` and the page's ``assets/page.js``):

====== ================================================================================================
bytes  field
====== ================================================================================================
0      ``VTMM``, then u32 version (1), u32 vertex count ``nv``, u32 triangle count ``nt``
16     f64[3] ``lo`` and f64[3] ``step``: a vertex is ``lo + step * count`` per axis (file units)
64     u16[nv] per axis (x, then y, then z): each vertex's count minus the previous vertex's, modulo 2**16,
       zigzag-coded (0, -1, 1, -2 ... as 0, 1, 2, 3 ...); two bytes of padding when ``nv`` is odd
...    u16 (``nv`` < 65536) or u32: per triangle corner, how far below the next new vertex index its index lies
       (0 is the next new vertex: vertices are numbered in the order the triangles first use them)
====== ================================================================================================

Vertices that sit at the same point are welded into one before the counts are taken and vertices no triangle uses
are dropped; the page computes normals from the faces with a crease angle (:data:`CREASE_DEG`). The grid has 65,535
steps per axis of the mesh's box: a vertex moves by at most half a step (4.2 um for the UR5's 0.55 m upper arm).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import numpy as np

from vtm_dynamics.core.robot.mesh_triangles import MeshTrianglesError, mesh_file_triangles

FORMAT = "vtm-mesh/1"
MAGIC = b"VTMM"
VERSION = 1
COUNTS = 65535  # grid steps per axis of the mesh's box
HEADER_BYTES = 64
MAX_VERTICES = 2_000_000  # one baked mesh (the page builds 72 bytes per triangle; above this a file stays a file)
MAX_TRIANGLES = 2_000_000
CREASE_DEG = 40.0  # [deg] faces meeting at a larger angle keep their own normals (an edge); the page's constant too
_HEADER = struct.Struct("<4sIII3d3d")


class BakeError(ValueError):
    """The mesh cannot be baked (unreadable by the loader, empty, too large, not finite); one line."""


@dataclass(frozen=True)
class BakedMesh:
    """Triangles as the page receives them: ``vertices`` (nv, 3) on the format's grid [file units] and
    ``triangles`` (nt, 3) indices into them."""

    vertices: np.ndarray
    triangles: np.ndarray


def baked_size(nv: int, nt: int) -> int:
    """Bytes of a baked mesh of ``nv`` vertices and ``nt`` triangles."""
    return HEADER_BYTES + 6 * nv + 2 * (nv % 2) + 3 * nt * (2 if nv < 65536 else 4)


def _welded(vertices: np.ndarray, triangles: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(vertices, triangles) with coincident vertices made one and the vertices numbered in order of first use."""
    unique, inverse = np.unique(vertices, axis=0, return_inverse=True)
    corners = inverse.reshape(-1)[triangles.reshape(-1)]
    used, first = np.unique(corners, return_index=True)
    order = used[np.argsort(first)]  # vertex indices in the order the corners first name them
    number = np.empty(len(unique), dtype=np.int64)
    number[order] = np.arange(len(order))
    return unique[order], number[corners].reshape(-1, 3)


def baked_bytes(vertices: np.ndarray, triangles: np.ndarray) -> bytes:
    """The ``vtm-mesh/1`` bytes (module docstring) of ``vertices`` (V, 3) [file units] and ``triangles`` (T, 3)."""
    V = np.asarray(vertices, dtype=np.float64).reshape(-1, 3)
    T = np.asarray(triangles).reshape(-1, 3)
    if len(T) == 0:
        raise BakeError("no triangles")
    if not np.issubdtype(T.dtype, np.integer) or T.min() < 0 or T.max() >= len(V):
        raise BakeError("triangle indices outside the vertices")
    if len(V) > MAX_VERTICES or len(T) > MAX_TRIANGLES:
        raise BakeError(f"{len(V)} vertices and {len(T)} triangles, over {MAX_VERTICES} / {MAX_TRIANGLES}")
    if not np.all(np.isfinite(V)):
        raise BakeError("vertices that are not finite")
    U, F = _welded(V, T.astype(np.int64))
    lo, hi = U.min(axis=0), U.max(axis=0)
    with np.errstate(over="ignore"):
        span = (hi - lo) / COUNTS
    step = np.where(span > 0, span, 1.0)
    if not np.all(np.isfinite(step)) or not np.all(np.isfinite(lo + COUNTS * step)):
        raise BakeError("vertices spread too far for the grid")
    counts = np.clip(np.rint((U - lo) / step), 0, COUNTS).astype(np.int64)
    delta = np.diff(counts, axis=0, prepend=np.zeros((1, 3), dtype=np.int64)).T.reshape(-1)
    signed = ((delta + 32768) & 0xFFFF) - 32768  # the difference modulo 2**16, as -32768..32767
    zigzag = ((signed << 1) ^ (signed >> 15)) & 0xFFFF
    corners = F.reshape(-1)
    fresh = np.concatenate([[0], np.maximum.accumulate(corners)[:-1] + 1])  # the next new index at each corner
    codes = fresh - corners
    index_type = "<u2" if len(U) < 65536 else "<u4"
    pad = b"\0\0" if len(U) % 2 else b""
    head = _HEADER.pack(MAGIC, VERSION, len(U), len(F), *lo, *step)
    return b"".join([head, zigzag.astype("<u2").tobytes(), pad, codes.astype(index_type).tobytes()])


def unbaked(data: bytes) -> BakedMesh:
    """The mesh in ``vtm-mesh/1`` bytes ``data`` (the page's decoding, in numpy); :class:`BakeError` when they are
    not a whole mesh of this format."""
    if len(data) < HEADER_BYTES:
        raise BakeError("shorter than the header")
    magic, version, nv, nt, *grid = _HEADER.unpack_from(data)
    if magic != MAGIC or version != VERSION:
        raise BakeError("not a vtm-mesh/1 block")
    if not 0 < nv <= MAX_VERTICES or not 0 < nt <= MAX_TRIANGLES or len(data) != baked_size(nv, nt):
        raise BakeError("counts that do not match its length")
    lo, step = np.array(grid[:3]), np.array(grid[3:])
    if not (np.all(np.isfinite(lo)) and np.all(np.isfinite(step)) and np.all(step > 0)
            and np.all(np.isfinite(lo + COUNTS * step))):
        raise BakeError("a grid that is not finite")
    zigzag = np.frombuffer(data, dtype="<u2", count=3 * nv, offset=HEADER_BYTES).astype(np.int64)
    delta = (zigzag >> 1) ^ -(zigzag & 1)
    counts = np.cumsum(delta.reshape(3, nv), axis=1) & 0xFFFF
    start = HEADER_BYTES + 6 * nv + 2 * (nv % 2)
    codes = np.frombuffer(data, dtype="<u2" if nv < 65536 else "<u4", count=3 * nt, offset=start).astype(np.int64)
    corners = np.empty_like(codes)
    fresh = 0
    for k, code in enumerate(codes.tolist()):  # sequential by nature; tests only (the page decodes in the browser)
        if code > fresh:
            raise BakeError("an index code beyond the vertices numbered so far")
        corners[k] = fresh - code
        fresh += code == 0
    if fresh != nv:
        raise BakeError("vertex count that the triangles do not use")
    return BakedMesh(lo + step * counts.T.astype(np.float64), corners.reshape(-1, 3))


def baked_file(data: bytes, fmt: str) -> bytes:
    """The ``vtm-mesh/1`` bytes of the mesh file bytes ``data`` in ``fmt`` ('dae', 'obj', 'stl'; read by
    :func:`~vtm_dynamics.core.robot.mesh_triangles.mesh_file_triangles`); :class:`BakeError` when it cannot be."""
    try:
        vertices, triangles = mesh_file_triangles(data, fmt, MAX_VERTICES, MAX_TRIANGLES)
    except MeshTrianglesError as err:
        raise BakeError(str(err)) from None
    return baked_bytes(vertices, triangles)

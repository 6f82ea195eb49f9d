"""A scene as ONE self-contained HTML file: opens offline in any current browser, loads nothing from anywhere.

The page inlines Drake's Meshcat viewer (``meshcat.js`` from the ``drake`` wheel: three.js with its COLLADA, OBJ
and STL loaders; without the glTF and texture decoders it embeds, which no page uses: ``viewer_script``), the robot's mesh files baked into triangles (``baked_meshes``; each file once, however many
ghosts use it) and packed (compressed and in base64; ``packed_files``: made once, then copied from its cache), a
scene's triangle meshes baked the same way, the scene as JSON (arrays as base64 little-endian float32/float64) and
the page's own script and style (``assets/``). The page's script unpacks the viewer and the meshes with the
browser's ``DecompressionStream`` (each to at most the size the scene gives it) before it builds the scene. Its
Content-Security-Policy (``default-src 'none'``) makes the browser refuse any request to the network or the file
system, so the file cannot depend on one unnoticed; a ``securitypolicyviolation`` listener counts attempts, another
(``assets/watch.js``, before the viewer) records console errors and uncaught exceptions, and the page reports its
state (ready and when [ms after navigation], meshes loaded, meshes built, each built mesh's box, triangles and
area, errors, console errors, violations, current time) in the ``data-vtm-status`` attribute of ``<html>`` for
tests and tools. Each mesh is built once (from its baked triangles, or by the viewer's loader from a file that
could not be baked); later copies of the robot get the geometry built for the first.

URL fragment (for links to one instant and for screenshots): ``#t=0.05`` shows that time paused, ``#t=end`` the
end, ``&speed=0.25`` plays slower, ``&hide=start,rest`` hides those layers.
"""

from __future__ import annotations

import base64
import functools
import importlib.util
import json
import os
import re
import stat

import numpy as np

from vtm_dynamics.views.baked_meshes import FORMAT as BAKED
from vtm_dynamics.views.baked_meshes import BakeError, baked_bytes, baked_file
from vtm_dynamics.views.packed_files import PackedFile, cache_key, clear_memory, pack, packed_file
from vtm_dynamics.views.mesh_files import (
    MeshFile,
    MeshFileError,
    open_mesh_file,
    read_mesh_file,
)
from vtm_dynamics.views.scene import Box, Cylinder, Mesh, Scene, Sphere, check_scene
from vtm_dynamics.views.viewer_script import lean_viewer

CSP = ("default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data: blob:; "
       "worker-src blob:; base-uri 'none'; form-action 'none'")
ASSETS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "assets")
_UNSAFE_IN_SCRIPT = re.compile(rb"</script|<!--|<script", re.IGNORECASE)
# the picture is drawn this far right of the window's centre (a fraction of the half width; the camera still orbits
# the scene's centre), so that the info panel on the left does not cover what the camera looks at
PANEL_SHIFT = 0.3
MAX_VIEWER_BYTES = 32 * 1024 * 1024  # meshcat.js (2.2 MB in Drake 1.51)


class ViewError(RuntimeError):
    """The page cannot be written (the viewer script is missing, the file cannot be written)."""


@functools.lru_cache(maxsize=1)
def meshcat_path() -> str:
    """Drake's Meshcat browser viewer in the installed ``drake`` wheel (found without importing pydrake)."""
    spec = importlib.util.find_spec("pydrake")
    for base in list(spec.submodule_search_locations or []) if spec else []:
        path = os.path.realpath(os.path.join(base, "share", "drake", "geometry", "meshcat.js"))
        if os.path.isfile(path):
            return path
    raise ViewError("drake: Meshcat's viewer (pydrake/share/drake/geometry/meshcat.js) is not installed; "
                    "install the drake wheel of requirements.txt")


def forget_process_caches() -> None:
    """Forget what this process keeps between pages (the packed files, the viewer's path, the page's assets): the
    next page costs what it costs a new process (the disk cache stays)."""
    clear_memory()
    _unbakeable.clear()
    meshcat_path.cache_clear()
    _asset.cache_clear()


def packed_viewer() -> PackedFile:
    """Drake's viewer script without the decoders it embeds for formats a page never sends (``viewer_script``),
    packed (``packed_files``)."""
    path = meshcat_path()

    def read() -> bytes:  # only when the cache does not hold it: the file opened is the one the key describes
        with open(path, "rb") as fh:
            now = os.fstat(fh.fileno())
            data = fh.read(info.st_size + 1)
        if len(data) != info.st_size or (now.st_dev, now.st_ino, now.st_mtime_ns) != \
                (info.st_dev, info.st_ino, info.st_mtime_ns):
            raise ViewError("drake: meshcat.js changed while read")
        return data

    try:
        info = os.stat(path)  # the cache key: a hit opens nothing
        if info.st_size > MAX_VIEWER_BYTES:
            raise ViewError(f"drake: meshcat.js has {info.st_size} bytes, over {MAX_VIEWER_BYTES}")
        return packed_file(path, info, lambda: lean_viewer(read()), "lean-viewer")
    except OSError as err:
        raise ViewError(f"drake: cannot read meshcat.js ({err.strerror or type(err).__name__})") from None


_unbakeable: set[tuple] = set()  # mesh files that could not be baked in this process: packed as they are


def packed_mesh(mesh: MeshFile, fmt: str, bake: bool = True) -> tuple[PackedFile, int, str]:
    """(the mesh file packed, its size now [bytes], the format the page reads it in), read under the checks of
    ``robot_geometry`` when not cached: baked ('vtm': ``baked_meshes``) unless ``bake`` is False or the file
    cannot be baked, else the file itself in ``fmt`` for the viewer's loader."""
    try:
        fd, info = open_mesh_file(mesh)
    except MeshFileError as err:
        raise ViewError(f"view: {err}") from None
    try:
        key = cache_key(mesh.path, info, BAKED)
        if bake and key not in _unbakeable:
            try:
                return packed_file(mesh.path, info, lambda: baked_file(read_mesh_file(fd, info, mesh), fmt),
                                   BAKED), info.st_size, "vtm"
            except BakeError:
                if len(_unbakeable) >= 4096:
                    _unbakeable.clear()
                _unbakeable.add(key)
                os.lseek(fd, 0, os.SEEK_SET)
        return packed_file(mesh.path, info, lambda: read_mesh_file(fd, info, mesh)), info.st_size, fmt
    except MeshFileError as err:
        raise ViewError(f"view: {err}") from None
    finally:
        os.close(fd)


@functools.lru_cache(maxsize=8)  # the page's four assets (a cache of two read each of them again for every page)
def _asset(name: str) -> str:
    with open(os.path.join(ASSETS, name), encoding="utf-8") as fh:
        return fh.read()


@functools.lru_cache(maxsize=None)
def _little(dtype: str) -> np.dtype:
    return np.dtype(dtype).newbyteorder("<")


def _b64(array: np.ndarray, dtype: str) -> str:
    return base64.b64encode(np.ascontiguousarray(array, dtype=_little(dtype)).tobytes()).decode()


def _byte(c: float) -> int:
    return round(255 * min(max(c, 0.0), 1.0))


@functools.lru_cache(maxsize=1024)  # a page's colours are a palette's few
def _rgb_hex(r: float, g: float, b: float) -> str:
    return f"#{_byte(r):02x}{_byte(g):02x}{_byte(b):02x}"


def _hex(color) -> str:
    return _rgb_hex(float(color[0]), float(color[1]), float(color[2]))


def _matrix(T: np.ndarray) -> list[float]:
    """A 4 x 4 placement as three.js reads it: column-major."""
    return np.asarray(T, dtype=float).T.ravel().tolist()


def _drawn_points(scene: Scene) -> np.ndarray:
    """Points [m] that bound everything drawn: link origins, path and cloud points, shape corners."""
    pts = [np.asarray(layer.poses, dtype=float)[..., :3].reshape(-1, 3) for layer in scene.robots]
    pts += [np.asarray(line.points, dtype=float) for line in scene.lines]
    pts += [np.asarray(c.points, dtype=float) for c in scene.clouds]
    centers = [s.center for s in scene.shapes if isinstance(s, Sphere)]
    if centers:
        pts.append(np.asarray(centers, dtype=float).reshape(-1, 3))
    for s in scene.shapes:
        if isinstance(s, Mesh):
            v = np.asarray(s.vertices, dtype=float)
            pts.append(v @ np.asarray(s.pose, dtype=float)[:3, :3].T + np.asarray(s.pose, dtype=float)[:3, 3])
        elif not isinstance(s, Sphere):  # a box or a cylinder: its corners (spheres: their centres, above)
            half = 0.5 * np.asarray(s.size if isinstance(s, Box) else (s.radius, s.radius, s.length), dtype=float)
            corners = np.array([[x, y, z, 1.0] for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)]) * [*half, 1.0]
            pts.append((np.asarray(s.pose, dtype=float) @ corners.T).T[:, :3])
    p = np.concatenate(pts) if pts else np.zeros((1, 3))
    p = p[np.all(np.isfinite(p), axis=1)] if len(p) else p
    return p if len(p) else np.zeros((1, 3))


def _camera(scene: Scene) -> dict:
    """Where the page's camera starts: looking at the middle of everything drawn (or of the scene's ``focus``),
    from far enough to see it all, along the normal of the plane the scene lies in when it is flat (a planar
    mechanism is seen face on). The floor grid lies under everything drawn."""
    drawn = _drawn_points(scene)
    focus = np.asarray(scene.focus, dtype=float).reshape(-1, 3) if scene.focus is not None else drawn
    p = focus[np.all(np.isfinite(focus), axis=1)]
    p = p if len(p) else drawn
    lo, hi = p.min(axis=0), p.max(axis=0)
    center = 0.5 * (lo + hi)
    radius = max(0.5 * float(np.linalg.norm(hi - lo)), 0.15) * 1.1 + 0.05
    direction = np.array([1.0, -1.2, 1.0])
    if len(p) >= 3:
        d = p - center
        w, v = np.linalg.eigh(d.T @ d / (len(p) - 1) + 1e-12 * np.eye(3))  # the points' covariance
        if w[0] < 0.05 * w[2]:  # flat: look at its face, from the front (-y) and a little above
            normal = v[:, 0] * (1.0 if v[:, 0] @ np.array([0.1, -1.0, 0.3]) >= 0 else -1.0)
            up_cross_normal = np.array([-normal[1], normal[0], 0.0])  # (0, 0, 1) x normal
            direction = normal + 0.35 * np.array([0.0, 0.0, 1.0]) + 0.2 * up_cross_normal
    direction = direction / np.linalg.norm(direction)
    eye = center + direction * radius / np.sin(np.radians(37.0))
    reach = float(np.max(np.abs(drawn[:, :2] - center[:2]))) + 0.1 * radius
    half = max(1.2 * radius, reach, 0.3)
    step = next(s for s in (0.05, 0.1, 0.2, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0) if half / s <= 12)
    half = step * np.ceil(half / step)
    grid = {"center": [float(step * round(c / step)) for c in center[:2]], "half": float(half), "step": step,
            "z": float(min(0.0, drawn[:, 2].min()) - 0.01 * radius)}  # a floor under everything drawn
    return {"target": [float(x) for x in center], "position": [float(x) for x in eye], "grid": grid,
            "shift": PANEL_SHIFT}


def _is_utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def obj_text(vertices: np.ndarray, triangles: np.ndarray) -> bytes:
    """A triangle mesh as Wavefront OBJ text (vertices [m] as written, faces 1-based): the page's viewer reads it
    with its OBJ loader, which computes the face normals."""
    v = np.asarray(vertices, dtype=float)
    f = np.asarray(triangles, dtype=np.int64) + 1
    return ("".join(f"v {a:.6g} {b:.6g} {c:.6g}\n" for a, b, c in v)
            + "".join(f"f {a} {b} {c}\n" for a, b, c in f)).encode("ascii")


def _inline(fmt: str, data: bytes) -> tuple[str, str, bytes, int]:
    """(format, encoding, content, size) of mesh bytes held as they are: verbatim when they are UTF-8 text that
    holds nothing that could end their element, else base64."""
    verbatim = fmt in ("dae", "obj") and not _UNSAFE_IN_SCRIPT.search(data) and _is_utf8(data)
    return fmt, ("text" if verbatim else "base64"), (data if verbatim else base64.b64encode(data)), len(data)


def _baked_shape(shape: Mesh) -> PackedFile | None:
    """A scene's triangle mesh baked and packed; None when it cannot be (no triangles, not finite, too large): the
    OBJ text then shows the viewer what it holds."""
    try:
        return pack(baked_bytes(shape.vertices, shape.triangles))
    except BakeError:
        return None


def scene_payload(scene: Scene, bake: bool = True) -> tuple[dict, list[tuple[str, str, bytes | memoryview]]]:
    """(the JSON-ready scene, the mesh blocks (element id, encoding, ASCII or UTF-8 content: bytes, or a read-only
    view of a mapped cache entry, ``packed_files``)) of ``scene``: the
    robot's mesh files, then meshes made in memory (the scene's triangle meshes). Baked (``baked_meshes``, format
    'vtm') and packed ('deflate': base64 of zlib's format) unless ``bake`` is False; a file that cannot be baked,
    or any with ``bake`` False, packed as it is; a mesh given as bytes, and any scene mesh with ``bake`` False (as
    OBJ text), verbatim when it is UTF-8 and holds nothing that could end its element, else base64. The robot's
    mesh files together are at most its geometry's ``max_total_bytes``."""
    g = scene.geometry
    blocks, meshes, total = [], [], 0

    def add(fmt: str, encoding: str, content: bytes, size: int) -> None:
        element = f"vtm-mesh-{len(blocks)}"
        blocks.append((element, encoding, content))
        meshes.append({"format": fmt, "element": element, "encoding": encoding, "size": size})

    for m in g.meshes if g is not None else ():
        if m.file is None:
            add(*_inline(m.format, m.data or b""))
            continue
        packed, size, fmt = packed_mesh(m.file, m.format, bake)
        total += size
        if total > g.max_total_bytes:
            raise ViewError(f"view: the mesh files exceed max_total_bytes {g.max_total_bytes}")
        add(fmt, "deflate", packed.text, packed.size)
    for s in scene.shapes:
        if isinstance(s, Mesh):
            baked = _baked_shape(s) if bake else None
            if baked is not None:
                add("vtm", "deflate", baked.text, baked.size)
            else:
                add(*_inline("obj", obj_text(s.vertices, s.triangles)))
    next_mesh = len(g.meshes) if g is not None else 0
    links = []
    for link in g.links if g is not None else ():
        links.append({"name": link.name, "visuals": [
            {"kind": v.kind, "origin": _matrix(v.origin), "mesh": v.mesh, "scale": list(v.scale),
             "size": list(v.size), "radius": v.radius, "length": v.length} for v in link.visuals]})
    shapes = []
    for s in scene.shapes:
        item = {"name": s.name, "color": _hex(s.color), "opacity": float(s.opacity)}
        if isinstance(s, Box):
            item.update(kind="box", size=[float(x) for x in s.size], pose=_matrix(s.pose), wire=bool(s.wire))
        elif isinstance(s, Cylinder):
            item.update(kind="cylinder", radius=float(s.radius), length=float(s.length), pose=_matrix(s.pose),
                        top_radius=float(s.radius if s.top_radius is None else s.top_radius))
        elif isinstance(s, Mesh):
            item.update(kind="mesh", mesh=next_mesh, pose=_matrix(s.pose))
            next_mesh += 1
        else:
            item.update(kind="sphere", radius=float(s.radius), center=[float(x) for x in s.center],
                        on_top=bool(s.on_top))
        shapes.append(item)
    j = scene.joints
    payload = {
        "version": 1, "title": scene.title, "info": list(scene.info), "notes": list(scene.notes),
        "duration": float(scene.duration), "camera": _camera(scene),
        "legend": [{"color": _hex(e.color), "text": e.text, "toggles": list(e.toggles)} for e in scene.legend],
        "events": [{"t": float(e.time), "kind": e.kind, "text": e.text} for e in scene.events],
        "spans": [{"start": float(sp.start), "end": float(sp.end), "color": _hex(sp.color), "text": sp.text}
                  for sp in scene.spans],
        "meshes": meshes, "links": links, "shapes": shapes,
        "robots": [{"name": r.name, "label": r.label, "color": _hex(r.color), "opacity": float(r.opacity),
                    "frames": int(len(r.times)), "times": _b64(r.times, "f8"), "poses": _b64(r.poses, "f4"),
                    "appears": bool(r.appears)}
                   for r in scene.robots],
        "lines": [{"name": ln.name, "label": ln.label, "color": _hex(ln.color), "width": float(ln.width),
                   "n": int(len(ln.points)), "points": _b64(ln.points, "f4"), "tracer": bool(ln.tracer),
                   "times": None if ln.times is None else _b64(ln.times, "f8")} for ln in scene.lines],
        "clouds": [{"name": c.name, "label": c.label, "n": int(len(c.points)), "size": float(c.size),
                    "points": _b64(c.points, "f4"), "colors": _b64(c.colors, "f4")} for c in scene.clouds],
        "labels": [{"text": lb.text, "position": [float(x) for x in lb.position], "color": _hex(lb.color),
                    "follows": lb.follows} for lb in scene.labels],
        "joints": None if j is None else {
            "layer": j.layer, "names": list(j.names), "angles": _b64(j.angles, "f4"), "rates": _b64(j.rates, "f4"),
            "held": _b64(np.asarray(j.held, dtype=np.uint8), "u1")},
    }
    return payload, blocks


def _escape_html(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")


def page_parts(scene: Scene, bake: bool = True) -> list[bytes | memoryview]:
    """The page (module docstring) as pieces of its bytes, in order (:func:`write_parts` writes them); ``bake``:
    :func:`scene_payload`."""
    check_scene(scene)
    payload, blocks = scene_payload(scene, bake)
    viewer = packed_viewer()
    payload["viewer"] = {"element": "vtm-viewer", "size": viewer.size}
    # '<' occurs only inside JSON strings, where \u003c means the same: no '</script' or '<!--' can end the block
    data = json.dumps(payload, separators=(",", ":"), allow_nan=False).replace("<", "\\u003c")
    head = "".join([
        "<!DOCTYPE html>\n<html lang=\"en\" data-vtm-status=\"loading\"><head><meta charset=\"utf-8\">\n",
        f"<meta http-equiv=\"Content-Security-Policy\" content=\"{CSP}\">\n",
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n",
        f"<title>{_escape_html(scene.title)}</title>\n",
        "<script>", _asset("watch.js"), "</script>\n",
        "<style>", _asset("page.css"), "</style></head>\n<body>\n", _asset("page.html"),
        "<script type=\"application/json\" id=\"vtm-scene\">", data, "</script>\n"])
    parts = [head.encode("utf-8")]
    for element, encoding, content in blocks:
        parts += [f"<script type=\"text/plain\" id=\"{element}\" data-encoding=\"{encoding}\">".encode(), content,
                  b"</script>\n"]
    parts += [b"<script type=\"text/plain\" id=\"vtm-viewer\" data-encoding=\"deflate\">", viewer.text,
              b"</script>\n<script>", _asset("page.js").encode("utf-8"), b"</script>\n</body></html>\n"]
    return parts


def page_bytes(scene: Scene) -> bytes:
    """The whole page as UTF-8 bytes (for serving)."""
    return b"".join(page_parts(scene))


def page_html(scene: Scene) -> str:
    """The whole page as text."""
    return page_bytes(scene).decode("utf-8")


def write_parts(parts: list[bytes | memoryview], path: str) -> str:
    """Write the page ``parts`` to ``path`` (a trusted path from the command line) in one ``writev``, without
    joining them; returns ``path``. A writable regular file already at ``path`` (one link) is replaced by a new
    file, not truncated and rewritten: ext4 (its default ``auto_da_alloc``) flushes a file truncated and rewritten
    as it is closed, which took longer than the whole write of the UR5's page on our test machine. A symbolic link
    or a file with other links there is written through, as before."""
    try:
        info = os.lstat(path)
        if stat.S_ISREG(info.st_mode) and info.st_nlink == 1 and os.access(path, os.W_OK):
            os.unlink(path)
    except OSError:
        pass  # none there, or a folder we cannot change: open() below says what is wrong, if anything
    try:
        with open(path, "wb") as fh:
            _write_all(fh.fileno(), parts)
    except OSError as err:
        raise ViewError(f"view: cannot write {os.path.basename(path)!r}: {err.strerror or type(err).__name__}") \
            from None
    return path


def _write_all(fd: int, parts: list[bytes | memoryview]) -> None:
    """All of ``parts`` to ``fd``, in order: ``os.writev`` of up to 1024 (IOV_MAX) at a time, resumed after a
    partial write."""
    views = [memoryview(p) for p in parts if len(p)]
    first = 0
    while first < len(views):
        done = os.writev(fd, views[first:first + 1024])
        while done > 0:
            if done >= len(views[first]):
                done -= len(views[first])
                first += 1
            else:
                views[first] = views[first][done:]
                done = 0


def write_page(scene: Scene, path: str) -> str:
    """Write the page of ``scene`` to ``path`` (a trusted path from the command line); returns ``path``."""
    return write_parts(page_parts(scene), path)

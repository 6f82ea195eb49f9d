"""The written view is one self-contained HTML file (views/web_page.py): everything it needs inside it, nothing
that could load from elsewhere, its Content-Security-Policy forbidding any request, the viewer and each mesh file
embedded once (packed: they unpack to the files' exact bytes), and scene text that cannot break out of its
element."""

from __future__ import annotations

import base64
import dataclasses
import html.parser
import json
import re
import zlib

import numpy as np
import pytest

from test.views.views_testdata import ur5_geometry, ur5_stop
from vtm_dynamics.views.baked_meshes import unbaked
from vtm_dynamics.views.mesh_files import MeshData, mesh_bytes
from vtm_dynamics.views.robot_geometry import RobotGeometry
from vtm_dynamics.views.scene import Label
from vtm_dynamics.views.stop_view import stop_scene
from vtm_dynamics.views.web_page import meshcat_path, page_html, scene_payload

URL_ATTRIBUTES = {"src", "href", "srcset", "action", "data", "poster", "formaction", "background", "ping"}
FETCHING_TAGS = {"link", "img", "iframe", "object", "embed", "base", "video", "audio", "source", "frame", "form"}


class _Page(html.parser.HTMLParser):
    """Collects elements, URL-valued attributes and the text of every script element."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict]] = []
        self.scripts: list[tuple[dict, str]] = []
        self._in_script: dict | None = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        self.tags.append((tag, a))
        if tag == "script":
            self._in_script = a
            self.scripts.append((a, ""))

    def handle_data(self, data):
        if self._in_script is not None:
            attrs, text = self.scripts[-1]
            self.scripts[-1] = (attrs, text + data)

    def handle_endtag(self, tag):
        if tag == "script":
            self._in_script = None


@pytest.fixture(scope="module")
def scene():
    robot, p, env = ur5_stop()
    return stop_scene(robot, p, envelope=env, geometry=ur5_geometry())


@pytest.fixture(scope="module")
def page(scene):
    text = page_html(scene)
    parsed = _Page()
    parsed.feed(text)
    return text, parsed


def test_the_content_security_policy_comes_first_and_forbids_every_request(page):
    text, parsed = page
    meta = [a for t, a in parsed.tags if t == "meta" and a.get("http-equiv") == "Content-Security-Policy"]
    assert len(meta) == 1
    assert text.index("Content-Security-Policy") < text.index("<script")
    directives = dict(d.strip().split(" ", 1) for d in meta[0]["content"].split(";"))
    assert directives["default-src"] == "'none'"
    for name, sources in directives.items():  # nothing may name a host, a scheme of the network, or the page's own
        assert not any(s in sources for s in ("http", "https", "ws", "*", "'self'", "file:")), (name, sources)


def test_nothing_in_the_page_points_anywhere_else(page):
    _, parsed = page
    assert not [t for t, _ in parsed.tags if t in FETCHING_TAGS]
    assert not [(t, k) for t, a in parsed.tags for k in a if k in URL_ATTRIBUTES]
    assert parsed.scripts and all("src" not in a for a, _ in parsed.scripts)


def test_the_scene_data_round_trips_and_each_mesh_is_embedded_once(scene, page):
    _, parsed = page
    data = json.loads(next(text for a, text in parsed.scripts if a.get("id") == "vtm-scene"))
    assert [r["name"] for r in data["robots"]] == ["robot", "start", "rest", "worst"]
    robot = data["robots"][0]
    poses = np.frombuffer(base64.b64decode(robot["poses"]), dtype="<f4").reshape(robot["frames"], -1, 7)
    np.testing.assert_allclose(poses, scene.robots[0].poses, atol=2e-6)  # float32 on the page
    meshes = [(a, text) for a, text in parsed.scripts if a.get("id", "").startswith("vtm-mesh-")]
    assert len(meshes) == len(scene.geometry.meshes) == 7  # four robots, seven mesh files, seven blocks
    for (attrs, text), mesh, entry in zip(meshes, scene.geometry.meshes, data["meshes"]):
        assert attrs["data-encoding"] == "deflate" and entry["format"] == "vtm"  # baked
        baked = unbaked(_unpacked(text, entry["size"]))
        declared = sum(int(n) for n in re.findall(rb'<triangles[^>]*count="(\d+)"', mesh_bytes(mesh)))
        assert len(baked.triangles) == declared  # every triangle the COLLADA file declares, in one mesh
        assert len(np.unique(baked.triangles)) == len(baked.vertices)  # and every vertex used by one
    _, blocks = scene_payload(scene, bake=False)  # the files themselves, for the viewer's own loader
    for (element, encoding, text), mesh in zip(blocks, scene.geometry.meshes):
        assert encoding == "deflate" and _unpacked(bytes(text).decode(), len(mesh_bytes(mesh))) == mesh_bytes(mesh)
    viewer = next(text for a, text in parsed.scripts if a.get("id") == "vtm-viewer")
    with open(meshcat_path(), "rb") as fh:
        original = fh.read()
    # Drake's viewer, less the base64 of the decoders it embeds (views/viewer_script.py) and nothing else
    assert _unpacked(viewer, data["viewer"]["size"]) == re.sub(rb"[A-Za-z0-9+/]{1000,}={0,2}", b"", original)


def test_the_inlined_viewer_drops_only_the_glb_and_texture_decoders_no_page_uses():
    """meshcat.js embeds the Draco and Basis/KTX2 decoders (and KTX2's Zstandard one) as base64 strings: 1.1 MB of
    its 2.2 MB, which three.js fetches only for a Draco glTF or a KTX2 texture. The page never sends either, so
    they are emptied: the strings stay (a data URL keeps its head), the rest of the script is unchanged."""
    from vtm_dynamics.views.mesh_files import MESH_FORMATS
    from vtm_dynamics.views.viewer_script import embedded_decoders, lean_viewer

    with open(meshcat_path(), "rb") as fh:
        original = fh.read()
    lean = lean_viewer(original)
    assert embedded_decoders(original) >= 4 and embedded_decoders(lean) == 0
    assert len(lean) < 0.6 * len(original)
    for name in (b"basis_transcoder.js", b"basis_transcoder.wasm", b"draco_decoder.wasm", b"draco_wasm_wrapper.js"):
        assert lean.count(name) == original.count(name) >= 1  # the names are still mapped, to empty data
    assert lean.count(b"data:application/wasm;base64,") == original.count(b"data:application/wasm;base64,")
    assert set(MESH_FORMATS.values()) == {"dae", "obj", "stl"}  # no glTF a page could send
    hostile = b'x="data:application/wasm;base64,' + b"A" * 999 + b'";y="AGFzbQ' + b"B" * 2000 + b'"'
    assert lean_viewer(hostile) == b'x="data:application/wasm;base64,' + b"A" * 999 + b'";y=""'  # short ones stay


def _unpacked(text: str, size: int) -> bytes:
    """A packed block undone (base64, then zlib, to at most ``size`` + 1 bytes): what the page's script does."""
    inflater = zlib.decompressobj()
    out = inflater.decompress(base64.b64decode(text, validate=True), size + 1)
    assert inflater.eof and not inflater.unconsumed_tail and len(out) == size
    return out


def test_hostile_text_stays_inside_its_element(scene):
    evil = "</script><script>alert(1)</script><!--"
    hostile = dataclasses.replace(scene, title=evil, info=(evil,), labels=(Label(evil, (0.0, 0.0, 0.0)),))
    mesh = MeshData("obj", b"v 0 0 0\n# </script><script>alert(2)</script>\nf 1 1 1\n", "evil.obj")
    g = RobotGeometry(scene.geometry.links, (mesh,) + scene.geometry.meshes[1:], ())
    text = page_html(dataclasses.replace(hostile, geometry=g))
    parsed = _Page()
    parsed.feed(text)
    benign = _Page()
    benign.feed(page_html(scene))
    assert len(parsed.scripts) == len(benign.scripts)  # no element was added or cut short
    data = json.loads(next(t for a, t in parsed.scripts if a.get("id") == "vtm-scene"))
    assert data["title"] == evil and data["labels"][0]["text"] == evil
    attrs, block = next((a, t) for a, t in parsed.scripts if a.get("id") == "vtm-mesh-0")
    assert attrs["data-encoding"] == "base64" and base64.b64decode(block) == mesh.data
    assert "<title>&lt;/script&gt;" in text


def test_the_payload_names_every_layer_the_legend_toggles(scene):
    payload, _ = scene_payload(scene)
    names = {r["name"] for r in payload["robots"]} | {s["name"] for s in payload["shapes"]} | \
        {ln["name"] for ln in payload["lines"]}
    toggled = {n for entry in payload["legend"] for n in entry["toggles"]}
    assert toggled <= names and {"robot", "start", "rest", "worst", "tcp_path"} <= toggled


def test_a_process_reads_the_pages_own_script_and_style_once(scene, monkeypatch):
    """The page's assets (its script, style, markup and the error watcher) are read once per process: a cache that
    held two of the four read each of them again for every page written."""
    import builtins

    from vtm_dynamics.views import web_page

    web_page.page_parts(scene)
    opened = []

    def watched(path, *args, **kwargs):
        opened.append(str(path))
        return builtins.open(path, *args, **kwargs)

    monkeypatch.setattr(web_page, "open", watched, raising=False)
    for _ in range(3):
        web_page.page_parts(scene)
    assert [p for p in opened if p.startswith(web_page.ASSETS)] == []


def test_a_viewer_script_missing_or_over_its_cap_is_one_clear_error(scene, tmp_path, monkeypatch):
    from vtm_dynamics.views import packed_files, web_page

    monkeypatch.setenv("VTM_VIEW_CACHE", "off")
    packed_files.clear_memory()
    monkeypatch.setattr(web_page, "meshcat_path", lambda: str(tmp_path / "meshcat.js"))
    with pytest.raises(web_page.ViewError, match=r"^drake: cannot read meshcat.js \(No such file or directory\)$"):
        web_page.page_parts(scene)
    (tmp_path / "meshcat.js").write_bytes(b"var MeshCat = {};" * 10)
    monkeypatch.setattr(web_page, "MAX_VIEWER_BYTES", 100)
    with pytest.raises(web_page.ViewError, match=r"^drake: meshcat.js has 170 bytes, over 100$"):
        web_page.page_parts(scene)
    monkeypatch.setattr(web_page, "MAX_VIEWER_BYTES", 1000)
    assert b"var MeshCat = {};" * 10 in zlib.decompress(base64.b64decode(bytes(web_page.packed_viewer().text)))
    packed_files.clear_memory()

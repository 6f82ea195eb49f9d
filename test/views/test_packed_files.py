"""Packed view files (views/packed_files.py): the viewer script and a robot's mesh files are packed once and then
taken from the cache (in the process, or on disk for the next process) without reading or packing anything, into
a page identical to byte; a damaged cache entry is never served but packed again and replaced; a mesh file changed
on disk is packed again; the checks and caps of views/robot_geometry.py hold for what gets packed; the disk cache
keeps within its size and touches nothing but its own files."""

from __future__ import annotations

import base64
import os
import re
import time
import zlib

import numpy as np
import pytest

from vtm_dynamics.core.robot.model import RobotModel
from vtm_dynamics.views import packed_files, web_page
from vtm_dynamics.views.baked_meshes import FORMAT as BAKED
from vtm_dynamics.views.baked_meshes import baked_file, unbaked
from vtm_dynamics.views.robot_geometry import robot_geometry
from vtm_dynamics.views.scene import RobotLayer, Scene
from vtm_dynamics.views.web_page import ViewError, page_bytes

URDF = """<robot name="probe">
  <link name="base"/>
  <joint name="j" type="revolute"><parent link="base"/><child link="arm"/><axis xyz="0 0 1"/>
    <limit lower="-3" upper="3" effort="1" velocity="1"/></joint>
  <link name="arm">
    <inertial><mass value="1"/><inertia ixx="0.01" iyy="0.01" izz="0.01" ixy="0" ixz="0" iyz="0"/></inertial>
    <visual><geometry><mesh filename="arm.obj"/></geometry></visual>
  </link>
</robot>"""
SETTLED = 1_600_000_000_000_000_000  # [ns] a modification time long past (2020)


def _obj(scale: float, n: int = 40) -> bytes:
    """An OBJ fan of n triangles (a few kB), distinct for each scale."""
    angles = np.linspace(0.0, 2 * np.pi, n, endpoint=False)
    v = [f"v {scale * np.cos(a):.6f} {scale * np.sin(a):.6f} 0.1\n" for a in angles] + ["v 0 0 0\n"]
    f = [f"f {n + 1} {k + 1} {(k + 1) % n + 1}\n" for k in range(n)]
    return "".join(v + f).encode("ascii")


@pytest.fixture()
def cache(tmp_path, monkeypatch):
    """An empty cache of this test's own, on disk and in the process."""
    folder = tmp_path / "cache"
    monkeypatch.setenv("VTM_VIEW_CACHE", str(folder))
    packed_files.clear_memory()
    yield folder
    packed_files.clear_memory()


@pytest.fixture()
def robot(tmp_path):
    """(the URDF's directory, its model) of a one-link robot drawn from arm.obj beside its URDF."""
    folder = tmp_path / "robot"
    folder.mkdir()
    _put(folder / "arm.obj", _obj(0.2))
    return folder, RobotModel.from_urdf(URDF)


def _put(path, data: bytes, mtime_ns: int = SETTLED) -> None:
    path.write_bytes(data)
    os.utime(path, ns=(mtime_ns, mtime_ns))


def _scene(robot, **limits) -> Scene:
    folder, model = robot
    g = robot_geometry(model.model, URDF, urdf_dir=str(folder), package_roots=[], **limits)
    assert len(g.meshes) == 1 and g.notes == ()
    poses = np.zeros((1, len(g.links), 7))
    poses[..., 6] = 1.0
    return Scene("probe", g, robots=(RobotLayer("robot", "robot", (0.2, 0.4, 0.9), 1.0, np.zeros(1), poses),))


def _fan(scale: float, n: int = 40) -> np.ndarray:
    """The corners (n, 3, 3) [m] of :func:`_obj`'s triangles."""
    angles = np.linspace(0.0, 2 * np.pi, n, endpoint=False)
    rim = np.column_stack([scale * np.cos(angles), scale * np.sin(angles), np.full(n, 0.1)])
    return np.stack([np.zeros((n, 3)), rim, np.roll(rim, -1, axis=0)], axis=1)


def _baked(data: bytes) -> bytes:
    return baked_file(data, "obj")


def _mesh_in(page: bytes) -> bytes:
    """The mesh as the page's script unpacks it (to at most its declared size + 1 bytes): the file baked."""
    size = int(re.search(rb'"element":"vtm-mesh-0","encoding":"deflate","size":(\d+)', page).group(1))
    block = re.search(rb'<script type="text/plain" id="vtm-mesh-0" data-encoding="deflate">([^<]*)<', page).group(1)
    out = zlib.decompressobj().decompress(base64.b64decode(block, validate=True), size + 1)
    assert len(out) == size
    return out


def _mesh_entry(cache, robot) -> str:
    path = os.path.realpath(robot[0] / "arm.obj")
    return str(cache / packed_files.entry_name(packed_files.cache_key(path, os.stat(path), BAKED)))


class _Counter:
    def __init__(self, f=None) -> None:
        self.calls, self.f = 0, f

    def __call__(self, *args):
        self.calls += 1
        if self.f is None:
            raise AssertionError("called on a cache hit")
        return self.f(*args)


@pytest.mark.parametrize("mapped", [False, True], ids=["read", "mapped"])
def test_a_page_from_the_cache_is_the_cold_page_byte_for_byte_and_reads_no_mesh(cache, robot, monkeypatch, mapped):
    monkeypatch.setattr(packed_files, "MAP_MIN_BYTES", 1 if mapped else 1 << 40)
    cold = page_bytes(_scene(robot))
    drawn = unbaked(_mesh_in(cold))
    np.testing.assert_allclose(drawn.vertices[drawn.triangles], _fan(0.2), atol=0.4 / 65535)  # half a grid step
    assert _mesh_in(cold) == _baked((robot[0] / "arm.obj").read_bytes())
    assert len([n for n in os.listdir(cache) if n.endswith(".pack")]) == 2  # the viewer and the mesh
    packed_files.clear_memory()  # a new process: the disk cache only
    monkeypatch.setattr(packed_files, "pack", _Counter())  # nothing is packed ...
    monkeypatch.setattr(web_page, "read_mesh_file", _Counter())  # ... and no mesh file read
    assert page_bytes(_scene(robot)) == cold
    assert page_bytes(_scene(robot)) == cold  # from the process's own cache
    os.remove(_mesh_entry(cache, robot))
    assert page_bytes(_scene(robot)) == cold  # the process's cache alone


def _truncated(raw: bytes) -> bytes:
    return raw[: len(raw) // 2]


def _flipped(raw: bytes) -> bytes:
    k = len(raw) - 10
    return raw[:k] + bytes([raw[k] ^ 0x04]) + raw[k + 1:]


def _crafted(raw: bytes) -> bytes:
    """A '<' put into the payload with the header's checksum made to match: it could end the page element."""
    head, _, text = raw.partition(b"\n")
    line, _, text = text.partition(b"\n")
    digest, size, length, _ = line.split(b" ")
    text = text[:5] + b"<" + text[6:]
    return head + b"\n" + b" ".join([digest, size, length, f"{packed_files.checksum(text):x}".encode()]) + b"\n" + text


def _foreign(raw: bytes) -> bytes:
    """Another key's intact entry under this one's name."""
    return raw.replace(raw.split(b"\n")[1][:64], b"0" * 64, 1)


@pytest.mark.parametrize("mapped", [False, True], ids=["read", "mapped"])
@pytest.mark.parametrize("damage", [_truncated, _flipped, _crafted, _foreign, lambda raw: b""],
                         ids=["truncated", "one bit flipped", "crafted '<' with its checksum", "another key's", "empty"])
def test_a_damaged_cache_entry_is_never_served_but_packed_again(cache, robot, monkeypatch, damage, mapped):
    """Whether the entry is read into memory or mapped (a payload of MAP_MIN_BYTES or more: the viewer, most
    meshes)."""
    monkeypatch.setattr(packed_files, "MAP_MIN_BYTES", 1 if mapped else 1 << 40)
    cold = page_bytes(_scene(robot))
    entry = _mesh_entry(cache, robot)
    with open(entry, "rb") as fh:
        intact = fh.read()
    with open(entry, "wb") as fh:
        fh.write(damage(intact))
    packed_files.clear_memory()
    pack = _Counter(packed_files.pack)
    monkeypatch.setattr(packed_files, "pack", pack)
    assert page_bytes(_scene(robot)) == cold
    assert pack.calls == 1  # the mesh packed again (the viewer came from the cache)
    with open(entry, "rb") as fh:
        assert fh.read() == intact  # and its entry replaced


def test_a_mesh_file_changed_on_disk_is_packed_again(cache, robot):
    mesh = robot[0] / "arm.obj"
    assert _mesh_in(page_bytes(_scene(robot))) == _baked(_obj(0.2))
    same_size = _obj(0.3)
    assert len(same_size) == len(_obj(0.2))
    _put(mesh, same_size, SETTLED + 10**9)  # new content, same size, another modification time
    assert _mesh_in(page_bytes(_scene(robot))) == _baked(same_size)
    _put(mesh, _obj(0.3, n=41), SETTLED + 10**9)  # another size, the same modification time
    assert _mesh_in(page_bytes(_scene(robot))) == _baked(_obj(0.3, n=41))


def test_a_mesh_file_modified_just_now_is_packed_but_not_kept(cache, robot, monkeypatch):
    _put(robot[0] / "arm.obj", _obj(0.25), time.time_ns())  # its time stamp cannot yet tell a second change
    pack = _Counter(packed_files.pack)
    monkeypatch.setattr(packed_files, "pack", pack)
    first = page_bytes(_scene(robot))
    assert not os.path.exists(_mesh_entry(cache, robot))
    assert page_bytes(_scene(robot)) == first and pack.calls == 3  # the viewer once, the mesh twice


def test_the_checks_of_the_geometry_hold_for_what_is_packed(cache, robot):
    mesh = robot[0] / "arm.obj"
    scene = _scene(robot, max_mesh_bytes=len(_obj(0.2)) + 100)
    _put(mesh, _obj(0.2, n=80))  # grew over max_mesh_bytes after the geometry was made
    with pytest.raises(ViewError, match=r"^view: mesh 'arm.obj': \d+ bytes, over max_mesh_bytes \d+$"):
        page_bytes(scene)
    scene = _scene(robot)
    (robot[0] / "secret.obj").write_bytes(_obj(0.7))
    os.replace(mesh, robot[0] / "old.obj")
    os.symlink(robot[0] / "secret.obj", mesh)  # a symbolic link put in its place
    with pytest.raises(ViewError, match=r"^view: mesh 'arm.obj': cannot read \(.*symbolic links.*\)$"):
        page_bytes(scene)
    os.remove(mesh)
    os.replace(robot[0] / "old.obj", mesh)
    scene = _scene(robot, max_total_bytes=4 * len(_obj(0.2)))
    _put(mesh, _obj(0.2, n=200))  # all meshes together over max_total_bytes
    with pytest.raises(ViewError, match=r"^view: the mesh files exceed max_total_bytes \d+$"):
        page_bytes(scene)


def test_without_a_writable_cache_folder_the_page_is_the_same(tmp_path, robot, monkeypatch):
    monkeypatch.setenv("VTM_VIEW_CACHE", "off")
    packed_files.clear_memory()
    uncached = page_bytes(_scene(robot))
    (tmp_path / "file").write_text("")
    monkeypatch.setenv("VTM_VIEW_CACHE", str(tmp_path / "file" / "cache"))  # cannot be made
    packed_files.clear_memory()
    assert page_bytes(_scene(robot)) == uncached
    packed_files.clear_memory()


def test_the_disk_cache_keeps_within_its_size_and_touches_only_its_own_files(tmp_path):
    folder = tmp_path / "cache"
    folder.mkdir()
    names = [f"{k:064x}.pack" for k in range(4)]
    for k, name in enumerate(names):  # used in this order
        _put(folder / name, b"x" * 100, SETTLED + k * 10**9)
    (folder / "notes.txt").write_bytes(b"x" * 1000)
    (tmp_path / "elsewhere").write_bytes(b"x" * 1000)
    os.symlink(tmp_path / "elsewhere", folder / f"{9:064x}.pack")
    old_temp, new_temp = folder / f".{names[0][:64]}.{0:016x}.part", folder / f".{names[1][:64]}.{1:016x}.part"
    _put(old_temp, b"x", SETTLED)  # left by a writer that stopped
    new_temp.write_bytes(b"x")  # being written now
    packed_files.prune(str(folder), limit=250)
    assert sorted(os.listdir(folder)) == sorted([names[2], names[3], "notes.txt", f"{9:064x}.pack", new_temp.name])
    assert (tmp_path / "elsewhere").exists()


def test_the_process_cache_keeps_within_its_size(monkeypatch):
    memory = packed_files.ProcessCache()
    monkeypatch.setattr(packed_files, "MAX_MEMORY_BYTES", 250)
    for k in range(4):
        memory.put(("key", k), packed_files.PackedFile(b"A" * 100, 75))
    memory.get(("key", 2))  # used: kept over the older 3
    memory.put(("key", 4), packed_files.PackedFile(b"A" * 100, 75))
    assert list(memory.items) == [("key", 2), ("key", 4)] and memory.total == 200
    memory.put(("key", 5), packed_files.PackedFile(b"A" * 300, 225))  # larger than the whole cache: not kept
    assert ("key", 5) not in memory.items


def test_the_entry_checksum_is_the_sum_of_the_64_bit_words_and_sees_every_single_changed_byte():
    rng = np.random.default_rng(7)
    for n in (0, 1, 7, 8, 9, 1000, 4099):
        text = base64.b64encode(rng.bytes(n))
        words = [int.from_bytes(text[k:k + 8], "little") for k in range(0, len(text), 8)]  # the last one short
        assert packed_files.checksum(text) == sum(words) % 2**64
        for _ in range(20 if text else 0):
            k = int(rng.integers(len(text)))
            changed = text[:k] + bytes([(text[k] + int(rng.integers(1, 256))) % 256]) + text[k + 1:]
            assert packed_files.checksum(changed) != packed_files.checksum(text)
    assert packed_files.checksum(b"A" * 16) != packed_files.checksum(b"A" * 15)  # a truncation


def test_a_mesh_file_that_cannot_be_baked_is_packed_as_it_is_for_the_viewers_loader(cache, robot, monkeypatch):
    faceless = b"v 0 0 0\nv 1 0 0\nv 0 1 0\n"  # no triangle to bake
    _put(robot[0] / "arm.obj", faceless)
    web_page.forget_process_caches()
    payload, blocks = web_page.scene_payload(_scene(robot))
    assert payload["meshes"][0]["format"] == "obj"
    assert _mesh_in(page_bytes(_scene(robot))) == faceless
    bake = _Counter()
    monkeypatch.setattr(web_page, "baked_file", bake)  # this process knows it cannot be baked: not tried again
    assert _mesh_in(page_bytes(_scene(robot))) == faceless and bake.calls == 0

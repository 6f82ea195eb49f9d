"""The triangles of a mesh file (core/robot/mesh_triangles.py): every triangle a COLLADA file declares, numbered
against its own vertices also when a geometry is split by material (where coal's loader numbers the second
part's triangles against the first part's vertices); node transforms applied, <unit> and <up_axis> not; OBJ and
STL read the same body; no file the content names is opened; bad content is one line."""

from __future__ import annotations

import struct

import numpy as np
import pytest

from test.collada_testdata import CENTRE, EDGE, cube_dae
from vtm_dynamics.core.robot.mesh_triangles import MeshTrianglesError, mesh_file_triangles

CORNERS = np.array([[x, y, z] for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)]) * EDGE / 2 + CENTRE


def _area(V: np.ndarray, T: np.ndarray) -> float:
    X = V[T]
    return float(0.5 * np.linalg.norm(np.cross(X[:, 1] - X[:, 0], X[:, 2] - X[:, 0]), axis=1).sum())


def _closed(T: np.ndarray) -> bool:
    """Every edge is shared by exactly two triangles (a closed surface)."""
    edges = np.sort(np.concatenate([T[:, [0, 1]], T[:, [1, 2]], T[:, [2, 0]]]), axis=1)
    _, counts = np.unique(edges, axis=0, return_counts=True)
    return bool(np.all(counts == 2))


@pytest.mark.parametrize("materials", [1, 2, 3])
def test_a_collada_cube_split_by_material_is_the_whole_closed_cube(materials):
    V, T = mesh_file_triangles(cube_dae("1", materials=materials).encode(), "dae")
    assert T.shape == (12, 3)
    assert _area(V, T) == pytest.approx(6 * EDGE**2, rel=1e-6)  # coal's loader: 0.0641 for two materials
    np.testing.assert_allclose([V[T].reshape(-1, 3).min(axis=0), V[T].reshape(-1, 3).max(axis=0)],
                               [CORNERS.min(axis=0), CORNERS.max(axis=0)], atol=1e-7)
    welded = np.unique(np.round(V, 9), axis=0, return_inverse=True)[1].reshape(-1)[T]
    assert _closed(welded)


@pytest.mark.parametrize("meter, up_axis", [("0.001", "Z_UP"), ("1", "Y_UP")])
def test_the_file_numbers_are_read_as_written_without_unit_or_up_axis(meter, up_axis):
    V, T = mesh_file_triangles(cube_dae(meter, up_axis).encode(), "dae")
    np.testing.assert_allclose(V[T].reshape(-1, 3).min(axis=0), CORNERS.min(axis=0) / float(meter), rtol=1e-6)


def test_node_transforms_are_applied():
    moved = cube_dae("1").replace('<node id="cube-node" name="cube">',
                                  '<node id="outer"><translate>1 2 3</translate><node id="cube-node" name="cube">'
                                  '<rotate>0 0 1 90</rotate>').replace("</node>", "</node></node>")
    V, T = mesh_file_triangles(moved.encode(), "dae")
    R = np.array([[0.0, -1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 1.0]])  # 90 degrees about z, then moved
    expected = CORNERS @ R.T + [1.0, 2.0, 3.0]
    np.testing.assert_allclose(V[T].reshape(-1, 3).min(axis=0), expected.min(axis=0), atol=1e-7)
    np.testing.assert_allclose(V[T].reshape(-1, 3).max(axis=0), expected.max(axis=0), atol=1e-7)


def _cube_triangles() -> np.ndarray:
    V, T = mesh_file_triangles(cube_dae("1").encode(), "dae")
    return V[T]


def test_obj_and_stl_hold_the_same_cube():
    X = _cube_triangles()
    obj = "".join(f"v {a:.9g} {b:.9g} {c:.9g}\n" for a, b, c in X.reshape(-1, 3))
    obj += "".join(f"f {3 * k + 1} {3 * k + 2} {3 * k + 3}\n" for k in range(len(X)))
    stl = b"\0" * 80 + struct.pack("<I", len(X)) + b"".join(
        struct.pack("<12fH", 0, 0, 0, *tri.reshape(-1), 0) for tri in X)
    for data, fmt in ((obj.encode(), "obj"), (stl, "stl")):
        V, T = mesh_file_triangles(data, fmt)
        np.testing.assert_allclose(V[T], X, atol=1e-7)


def test_an_obj_names_no_file_that_is_opened(tmp_path, monkeypatch):
    materials = tmp_path / "cube.mtl"
    materials.write_text("newmtl red\nKd 1 0 0\n")
    plain = b"v 0 0 0\nv 1 0 0\nv 0 1 0\nf 1 2 3\n"
    named = f"mtllib {materials}\nusemtl red\n".encode() + plain
    opened = []
    real_open = open

    def spy(path, *args, **kwargs):
        opened.append(str(path))
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr("builtins.open", spy)
    V, T = mesh_file_triangles(named, "obj")
    assert not [p for p in opened if "cube.mtl" in p]
    np.testing.assert_array_equal(V[T], mesh_file_triangles(plain, "obj")[0][mesh_file_triangles(plain, "obj")[1]])


@pytest.mark.parametrize("data, fmt, why", [
    (b'<?xml version="1.0"?><!DOCTYPE c [<!ENTITY x SYSTEM "file:///etc/passwd">]><COLLADA/>', "dae",
     "document type"),
    (b"solid nothing\nendsolid nothing\n", "stl", "no triangles"),
    ('<?xml version="1.0" encoding="UTF-16"?><!DOCTYPE c [<!ENTITY x "x">]><COLLADA/>'.encode("utf-16"), "dae",
     "not in UTF-8"),
    (b"<\x00C\x00O\x00L\x00", "dae", "not in UTF-8"),
    (b"\xef\xbb\xbf<COLLADA><geometry></COLLADA>", "dae", "unreadable as dae"),
    (b"v 0 0 0\n", "obj", "no triangles"),
    (b"anything", "fbx", "not a mesh format"),
])
def test_what_is_not_a_mesh_is_one_line(data, fmt, why):
    with pytest.raises(MeshTrianglesError, match=why) as err:
        mesh_file_triangles(data, fmt)
    assert "\n" not in str(err.value)


def test_the_caps_hold():
    with pytest.raises(MeshTrianglesError, match="more than 100 / 11"):
        mesh_file_triangles(cube_dae("1").encode(), "dae", max_vertices=100, max_triangles=11)

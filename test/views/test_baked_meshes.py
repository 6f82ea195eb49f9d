"""Baked meshes (views/baked_meshes.py, format vtm-mesh/1): what the page draws is every triangle of the mesh, in
its order and with its corners in their order, each vertex within half a grid step of where it was; coincident
vertices are one; the index width follows the vertex count; a block that is not a whole mesh is refused; and a
mesh file that cannot be baked is still drawn (packed as the file, for the viewer's own loader)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from test.collada_testdata import cube_dae
from vtm_dynamics.views.baked_meshes import (
    COUNTS, HEADER_BYTES, BakeError, baked_bytes, baked_file, baked_size, unbaked,
)


def _half_step(V: np.ndarray) -> np.ndarray:
    return 0.5 * np.maximum(V.max(axis=0) - V.min(axis=0), 0.0) / COUNTS + 1e-12


@st.composite
def meshes(draw):
    n = draw(st.integers(3, 60))
    V = draw(arrays(np.float64, (n, 3), elements=st.floats(-50.0, 50.0, allow_nan=False, width=32)))
    T = draw(arrays(np.int64, (draw(st.integers(1, 80)), 3), elements=st.integers(0, n - 1)))
    return V, T


@settings(max_examples=150, deadline=None)
@given(meshes())
def test_every_triangle_comes_back_in_order_within_half_a_grid_step(mesh):
    V, T = mesh
    data = baked_bytes(V, T)
    used = np.unique(T)
    back = unbaked(data)
    assert back.triangles.shape == T.shape
    assert np.all(np.abs(back.vertices[back.triangles] - V[T]) <= _half_step(V[used]) * (1 + 1e-9))
    distinct = len(np.unique(V[used], axis=0))
    assert len(back.vertices) == distinct and len(data) == baked_size(distinct, len(T))


def test_coincident_vertices_are_one_and_unused_ones_are_dropped():
    corners = np.array([[x, y, z] for x in (0, 1) for y in (0, 1) for z in (0, 1)], dtype=float)
    faces = [(0, 1, 3), (0, 3, 2), (4, 6, 7), (4, 7, 5), (0, 4, 5), (0, 5, 1),
             (2, 3, 7), (2, 7, 6), (0, 2, 6), (0, 6, 4), (1, 5, 7), (1, 7, 3)]
    V = np.concatenate([corners[list(f)] for f in faces] + [np.full((5, 3), 9.0)])  # 36 + 5 unused
    T = np.arange(36).reshape(12, 3)
    back = unbaked(baked_bytes(V, T))
    assert len(back.vertices) == 8
    np.testing.assert_allclose(back.vertices[back.triangles], corners[np.array(faces)], atol=1e-12)


def test_more_than_65535_vertices_use_four_byte_indices():
    n = 70_000
    V = np.column_stack([np.arange(n, dtype=float), np.zeros(n), np.zeros(n)])
    T = np.column_stack([np.arange(n), (np.arange(n) + 1) % n, (np.arange(n) + 2) % n])
    data = baked_bytes(V, T)
    assert len(data) == HEADER_BYTES + 6 * n + 12 * n
    back = unbaked(data)
    np.testing.assert_allclose(back.vertices[back.triangles], V[T], atol=_half_step(V).max())


@pytest.mark.parametrize("V, T, why", [
    (np.zeros((3, 3)), np.zeros((0, 3), dtype=int), "no triangles"),
    (np.zeros((3, 3)), np.array([[0, 1, 3]]), "outside the vertices"),
    (np.array([[0, 0, 0], [1, 0, 0], [np.nan, 0, 0]]), np.array([[0, 1, 2]]), "not finite"),
    (np.zeros((3, 3)), np.array([[0.0, 1.0, 2.0]]), "outside the vertices"),  # not integers
    (np.array([[-1e308, 0, 0], [1e308, 0, 0], [0, 1, 0]]), np.array([[0, 1, 2]]), "too far"),
])
def test_what_cannot_be_baked_is_one_line(V, T, why):
    with pytest.raises(BakeError, match=why):
        baked_bytes(V, T)


def test_a_block_that_is_not_a_whole_mesh_is_refused():
    data = baked_bytes(np.eye(3), np.array([[0, 1, 2], [2, 1, 0]]))
    with pytest.raises(BakeError, match="header"):
        unbaked(data[:10])
    with pytest.raises(BakeError, match="not a vtm-mesh/1"):
        unbaked(b"XXXX" + data[4:])
    with pytest.raises(BakeError, match="counts"):
        unbaked(data[:-2])
    codes_at = len(data) - 12
    beyond = data[:codes_at] + (9).to_bytes(2, "little") + data[codes_at + 2:]  # the first corner names vertex -9
    with pytest.raises(BakeError, match="beyond the vertices"):
        unbaked(beyond)


def test_a_collada_file_bakes_to_its_whole_cube_and_one_with_a_document_type_does_not():
    back = unbaked(baked_file(cube_dae("1", materials=2).encode(), "dae"))
    assert len(back.vertices) == 8 and len(back.triangles) == 12
    with pytest.raises(BakeError, match="document type"):
        baked_file(b'<?xml version="1.0"?><!DOCTYPE COLLADA><COLLADA/>', "dae")


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_any_changed_byte_is_refused_or_still_a_mesh_within_its_vertices(data):
    """The page's decoder, mirrored by unbaked(), meets blocks nobody checked (a page can be edited): a block with
    any bytes changed or cut is refused with BakeError or decodes to triangles inside its own vertices."""
    V = np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1], [1, 1, 1]], dtype=float)
    block = bytearray(baked_bytes(V, np.array([[0, 1, 2], [0, 2, 3], [1, 2, 4], [0, 3, 4]])))
    for _ in range(data.draw(st.integers(1, 4))):
        block[data.draw(st.integers(0, len(block) - 1))] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(block)))
    try:
        mesh = unbaked(bytes(block[:cut]))
    except BakeError:
        return
    assert mesh.triangles.min() >= 0 and mesh.triangles.max() < len(mesh.vertices)
    assert np.all(np.isfinite(mesh.vertices))

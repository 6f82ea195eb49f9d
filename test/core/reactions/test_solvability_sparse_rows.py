"""The sparse constraint matrix has the dense matrix's rows in every configuration, point contacts included.

A point contact (point_on_line, point_on_plane) acts at the child's pair point, which slides over the parent's line
or plane: away from the reference configuration the two points differ, and rows evaluated at the parent's point
miss a moment arm. The dense matrix (``constraint_matrix``) is the reference.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pinocchio as pin

from vtm_dynamics.core.reactions.absolute_coordinates import assemble_loops, constraint_matrix, load_absolute_model
from vtm_dynamics.core.reactions.solvability import analyze_constraint_matrix
from vtm_dynamics.core.reactions.sparse_solvability import analyze_sparse_constraint_matrix, sparse_constraint_matrix
from vtm_dynamics.core.robot.urdf_extension import read_urdf_file

URDF = Path(__file__).resolve().parents[3] / "urdf"


def _moved_slider_crank(planar: bool):
    text = read_urdf_file(str(URDF / "slider_crank_point_on_plane.urdf"))
    if planar:  # the shipped model moves in the world x-z plane; planar mode needs it drawn in x-y (pin on y = 0)
        text = text.replace('rpy="1.5707963267948966 0 0"', 'rpy="0 0 0"').replace(
            '<axis xyz="0 0 1"/>\n  </loop_closure>', '<axis xyz="0 1 0"/>\n  </loop_closure>')
    model = load_absolute_model(text, planar=planar)
    q = pin.neutral(model.pin_model)
    q[0] = 0.7  # crank turned: the piston pin has slid away from the pair frame's origin on the parent
    return model, assemble_loops(model, q)


def test_point_contact_rows_of_the_sparse_matrix_equal_the_dense_rows_away_from_the_reference():
    for planar in (False, True):
        model, q = _moved_slider_crank(planar)
        dense = constraint_matrix(model, q).matrix
        sparse = sparse_constraint_matrix(model, q).matrix.toarray()
        assert np.allclose(sparse, dense, atol=1e-12, rtol=0.0), planar


def test_point_contact_verdicts_of_both_paths_agree_away_from_the_reference():
    model, q = _moved_slider_crank(False)
    dense = analyze_constraint_matrix(constraint_matrix(model, q))
    sparse = analyze_sparse_constraint_matrix(sparse_constraint_matrix(model, q))
    assert (sparse.rank, sparse.redundancy) == (dense.rank, dense.redundancy)
    assert [p.solvable for p in sparse.pairs] == [p.solvable for p in dense.pairs]


def test_stacked_pair_ranks_equal_numerical_rank_block_by_block():
    from vtm_dynamics.core.numerics import numerical_rank
    from vtm_dynamics.core.reactions.sparse_solvability import block_ranks

    rng = np.random.default_rng(5)
    blocks = []
    for _ in range(300):
        k, n, r = int(rng.integers(1, 7)), int(rng.integers(1, 13)), int(rng.integers(0, 7))
        b = rng.standard_normal((k, min(r, k, n))) @ rng.standard_normal((min(r, k, n), n))
        blocks.append(b if rng.random() > 0.1 else np.zeros((k, n)))
    blocks.append(np.zeros((2, 0)))
    assert block_ranks(blocks, 1e-9) == [numerical_rank(b, atol=1e-9) for b in blocks]


def test_the_repair_finds_all_near_dependent_columns_of_r_at_once():
    import scipy.sparse

    from vtm_dynamics.core.reactions.row_basis import rows_carrying_near_null_space, sigma_min_triangular

    rng = np.random.default_rng(11)
    n, tol = 60, 1e-9
    M = rng.standard_normal((n, n))
    for j, (a, b) in zip((10, 25, 40), ((1, 2), (3, 4), (5, 6))):  # three columns repeat combinations of others
        M[:, j] = M[:, a] - 2.0 * M[:, b] + 1e-13 * rng.standard_normal(n)
    R = scipy.sparse.csc_matrix(np.linalg.qr(M)[1])
    smin, vec = sigma_min_triangular(R)
    assert smin <= tol
    drop = rows_carrying_near_null_space(R, vec, tol)
    assert drop.size == 3
    keep = np.setdiff1d(np.arange(n), drop)
    assert np.linalg.svd(M[:, keep], compute_uv=False)[-1] > 1e3 * tol

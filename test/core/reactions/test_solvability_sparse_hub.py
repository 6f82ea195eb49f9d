"""Hub elimination: the row basis of a matrix with a few dense columns, without the fill of a QR of Cᵀ.

A comb of cranks pinned to one coupler has every loop row on the coupler's columns. Expected values come from the
dense path (full SVD, the paper's QR test), never from the sparse code itself.
"""

from __future__ import annotations

import numpy as np
import pinocchio as pin

from test.core.reactions.test_solvability_sparse import assert_same_verdicts
from vtm_dynamics.core.reactions.absolute_coordinates import constraint_matrix, load_absolute_model
from vtm_dynamics.core.reactions.hub_row_basis import hub_columns, hub_row_basis
from vtm_dynamics.core.reactions.mechanism_families import comb_urdf, random_mechanism_urdf
from vtm_dynamics.core.reactions.solvability import analyze_constraint_matrix
from vtm_dynamics.core.reactions.row_basis import largest_singular_value
from vtm_dynamics.core.reactions.sparse_solvability import analyze_sparse_constraint_matrix, sparse_constraint_matrix


def _matrices(text: str, planar: bool = True):
    model = load_absolute_model(text, planar=planar)
    q = pin.neutral(model.pin_model)  # both families are assembled at q = 0
    return constraint_matrix(model, q), sparse_constraint_matrix(model, q)


def test_the_coupler_of_a_comb_is_the_only_hub_and_its_split_gives_the_dense_rank_and_a_valid_release_set():
    dense_c, sparse_c = _matrices(comb_urdf(40))
    A = sparse_c.matrix
    tol = 1e-9 * largest_singular_value(A)
    assert list(hub_columns(A, 16)) == [0, 1, 2]  # the coupler (the first body): x, y, φ
    basis = hub_row_basis(A, tol, 16)
    assert basis is not None
    s = np.linalg.svd(dense_c.matrix, compute_uv=False)
    assert basis.rank == int(np.sum(s > 1e-9 * s[0]))
    assert tol < basis.sigma_min_estimate <= s[basis.rank - 1] * (1 + 1e-6)  # a lower bound, above the tolerance
    kept = dense_c.matrix[basis.independent]
    assert np.linalg.svd(kept, compute_uv=False)[-1] > tol  # independent
    # every other row lies in their span
    other = np.delete(dense_c.matrix, basis.independent, axis=0)
    coef = np.linalg.lstsq(kept.T, other.T, rcond=None)[0]
    assert np.abs(kept.T @ coef - other.T).max() < tol


def test_verdicts_by_the_hub_split_equal_the_dense_verdicts_on_combs():
    for k in (6, 25, 60):
        dense_c, sparse_c = _matrices(comb_urdf(k))
        dense = analyze_constraint_matrix(dense_c, cross_check=False)
        assert_same_verdicts(dense, analyze_sparse_constraint_matrix(sparse_c, hub_min_nonzeros=8))


def test_verdicts_by_the_hub_split_equal_the_dense_verdicts_on_random_mechanisms():
    # a low threshold makes the busiest bodies of random trees hubs: many shapes of S, G and K
    used = 0
    for seed in range(60):
        planar = seed % 2 == 0
        dense_c, sparse_c = _matrices(random_mechanism_urdf(4 + seed % 16, seed, planar=planar), planar)
        A = sparse_c.matrix
        used += hub_row_basis(A, 1e-9 * largest_singular_value(A), 5) is not None
        assert_same_verdicts(analyze_constraint_matrix(dense_c, cross_check=False),
                             analyze_sparse_constraint_matrix(sparse_c, hub_min_nonzeros=5))
    assert used >= 30  # the split was taken, not only its fallback

"""A matrix with a clear rank gap is decided by the sparse path, whatever rows the first QR happens to keep.

These random mechanisms have singular values of C at least 1,600 times above the tolerance and at most 3e-7 of
it below (a clear gap, measured by a dense SVD), yet the greedy row selection of the QR of Cᵀ kept rows whose
smallest singular value was near the tolerance, and the analysis ended "rank decision unclear".
"""

from __future__ import annotations

import numpy as np
import pinocchio as pin
import pytest

from test.core.reactions.test_solvability_sparse import assert_same_verdicts
from vtm_dynamics.core.reactions.absolute_coordinates import constraint_matrix
from vtm_dynamics.core.reactions.mechanism_families import random_mechanism_urdf
from vtm_dynamics.core.reactions.solvability import SolvabilityError, analyze_constraint_matrix, load_for_analysis
from vtm_dynamics.core.reactions.row_basis import largest_singular_value, row_basis
from vtm_dynamics.core.reactions.sparse_solvability import analyze_sparse_constraint_matrix, sparse_constraint_matrix


@pytest.mark.parametrize("bodies,seed", [(200, 5), (200, 13), (200, 31), (200, 46), (400, 8), (400, 14)])
def test_a_clear_gap_gives_the_dense_rank_and_a_well_conditioned_row_set(bodies, seed):
    model = load_for_analysis(random_mechanism_urdf(bodies, seed, planar=True), True, bodies + 1)
    A = sparse_constraint_matrix(model, pin.neutral(model.pin_model)).matrix.tocsr()
    tol = 1e-9 * largest_singular_value(A)
    s = np.linalg.svd(A.toarray(), compute_uv=False)
    rank = int(np.sum(s > tol))
    assert s[rank - 1] > 1e3 * tol and s[rank] < 1e-3 * tol  # the case: a clear gap
    basis = row_basis(A, tol)
    assert basis.rank == rank
    kept = np.linalg.svd(A[basis.independent].toarray(), compute_uv=False)
    assert kept[-1] > tol  # the kept rows are independent at the tolerance


def test_a_clear_gap_the_qr_selection_left_unclear_is_decided_with_the_dense_verdicts():
    # σ_r(C) = 2.2e5 tol, σ_(r+1)(C) = 4e-7 tol, yet the greedy QR selection of rows ends "rank decision unclear";
    # the square selection (matching, LU, swaps on its weak directions) finds a well-conditioned C_IJ
    model = load_for_analysis(random_mechanism_urdf(300, 15, planar=False), False, 301)
    q = pin.neutral(model.pin_model)
    C = sparse_constraint_matrix(model, q)
    A = C.matrix.tocsr()
    with pytest.raises(SolvabilityError, match="rank decision unclear"):
        row_basis(A, 1e-9 * largest_singular_value(A))  # the QR route alone
    dense = analyze_constraint_matrix(constraint_matrix(model, q), cross_check=False)
    assert dense.smallest_kept_singular_value > 1e3 * dense.rank_tolerance  # the case: a clear gap
    assert_same_verdicts(dense, analyze_sparse_constraint_matrix(C))

"""The square row basis: rows and as many columns of C whose square block is well conditioned, or no answer.

Expected ranks come from a dense SVD of C (numpy), never from the code under test; the certificate it returns
(σ_min(C_IJ), the leak of the other rows) is checked against dense figures of the same rows and columns.
"""

from __future__ import annotations

import numpy as np
import pinocchio as pin
import pytest
import scipy.sparse
from scipy.sparse.csgraph import structural_rank

from test.core.reactions.test_solvability_sparse_unclear import _near_tolerance_matrix
from vtm_dynamics.core.reactions.mechanism_families import random_mechanism_urdf
from vtm_dynamics.core.reactions.row_column_matching import extended_matching, matched_square
from vtm_dynamics.core.reactions.solvability import load_for_analysis
from vtm_dynamics.core.reactions.row_basis import largest_singular_value
from vtm_dynamics.core.reactions.sparse_solvability import sparse_constraint_matrix
from vtm_dynamics.core.reactions.square_row_basis import (
    SquareInverse,
    ritz_pairs,
    remove_weak_directions,
    square_row_basis,
)


def _random_matrix(bodies: int, seed: int, planar: bool = True) -> scipy.sparse.csr_matrix:
    model = load_for_analysis(random_mechanism_urdf(bodies, seed, planar=planar), planar, bodies + 1)
    return sparse_constraint_matrix(model, pin.neutral(model.pin_model)).matrix.tocsr()


def _dense_rank(A: scipy.sparse.spmatrix, tol: float) -> tuple[int, np.ndarray]:
    s = np.linalg.svd(A.toarray(), compute_uv=False)
    return int(np.sum(s > tol)), s


@pytest.mark.parametrize("bodies,seed,planar", [(200, 5, True), (200, 13, True), (400, 8, True), (400, 14, True),
                                                (300, 2, True), (150, 3, False), (150, 7, False)])
def test_a_clear_gap_gives_the_dense_rank_with_a_certificate_that_dense_figures_confirm(bodies, seed, planar):
    A = _random_matrix(bodies, seed, planar)
    tol = 1e-9 * largest_singular_value(A)
    rank, s = _dense_rank(A, tol)
    assert s[rank - 1] > 10 * tol and s[rank] < 1e-3 * tol  # the case: a clear gap
    basis = square_row_basis(A, tol)
    assert basis is not None and basis.rank == rank
    assert np.array_equal(np.sort(np.concatenate([basis.independent, basis.dependent])), np.arange(A.shape[0]))
    S = A[basis.independent][:, basis.columns].toarray()
    smin = np.linalg.svd(S, compute_uv=False)[-1]
    assert smin >= 2 * tol  # the margin of the gap rule, on the square block itself
    assert basis.sigma_min_estimate == pytest.approx(smin, rel=1e-2)  # converged from above
    assert basis.leak_estimate <= tol / 10


def test_the_solve_of_the_transposed_rows_is_exact_on_their_row_space():
    A = _random_matrix(120, 4)
    basis = square_row_basis(A, 1e-9 * largest_singular_value(A))
    rhs = np.asarray(A[basis.dependent].T @ np.random.default_rng(1).standard_normal((basis.dependent.size, 3)))
    mu = basis.solve_transposed(rhs)
    assert mu.shape == (basis.rank, 3)
    assert np.linalg.norm(A[basis.independent].T @ mu - rhs) <= 1e-8 * np.linalg.norm(rhs)


def test_the_matching_reaches_the_structural_rank():
    A = _random_matrix(300, 2)
    I, J = matched_square(A)
    assert I.size == J.size == structural_rank(A)
    assert np.unique(I).size == I.size and np.unique(J).size == J.size
    assert np.all(np.asarray(A[I, J]).ravel() != 0)  # every pair is an entry


def test_an_exactly_singular_block_is_factorized_shifted_and_its_weak_direction_found():
    # rows 0 and 1 are equal and every entry is a small integer, so the elimination is exact on any machine and
    # SuperLU meets the zero pivot whatever its order of operations: the path is forced by the matrix itself
    S = scipy.sparse.csc_matrix(np.array([[1.0, -1.0, 0.0, 0.0],
                                          [1.0, -1.0, 0.0, 0.0],
                                          [0.0, 2.0, 1.0, 0.0],
                                          [0.0, 0.0, -1.0, 1.0]]))
    delta = 1e-6
    inverse = SquareInverse(S, delta)
    assert inverse.shifted and not inverse.regularized
    # inverse iteration on the shifted factorization converges to S's own null direction (1, 1, -2, -2)/√10, up
    # to the shift
    x = np.ones((4, 1))
    for _ in range(3):
        x = inverse.right(x)
        x /= np.linalg.norm(x)
    null = np.array([1.0, 1.0, -2.0, -2.0]) / np.sqrt(10.0)
    assert abs(abs(float(null @ x[:, 0])) - 1.0) < 1e-9
    assert np.linalg.norm(S @ x) < 10 * delta


def test_a_matched_block_with_equal_rows_is_still_decided_with_the_dense_rank():
    # two equal rows [-1, 1] in the matched block: exactly singular in exact arithmetic; whether SuperLU meets the
    # zero pivot or a rounding-level one depends on the machine's kernels, the verdict must not
    A = _random_matrix(5, 74)
    tol = 1e-9 * largest_singular_value(A)
    basis = square_row_basis(A, tol)
    assert basis is not None and basis.rank == _dense_rank(A, tol)[0]


def test_a_start_from_a_basis_of_some_rows_is_kept_and_extended_to_the_structural_rank():
    A = _random_matrix(300, 6)
    tol = 1e-9 * largest_singular_value(A)
    part = np.arange(0, A.shape[0] - 60)
    sub = square_row_basis(A[part], tol)
    I0, J0 = part[sub.independent], sub.columns
    I, J = extended_matching(A, I0, J0)
    assert set(I0) <= set(I) and set(J0) <= set(J)  # bordered, not replaced
    assert I.size == structural_rank(A)
    assert np.all(np.asarray(A[I, J]).ravel() != 0)
    basis = square_row_basis(A, tol, start=(I0, J0))
    assert basis is not None and basis.rank == _dense_rank(A, tol)[0]


def test_without_a_clear_gap_it_gives_no_answer_rather_than_a_rank_other_than_the_dense_rank():
    answered = 0
    for seed in range(400):
        M = _near_tolerance_matrix(seed)
        A = scipy.sparse.csr_matrix(M)
        tol = 1e-9 * largest_singular_value(A)
        basis = square_row_basis(A, tol)
        if basis is not None:
            answered += 1
            assert basis.rank == _dense_rank(A, tol)[0], seed
    assert 0 < answered < 400  # both outcomes occur: the family does reach the rule


def test_an_empty_or_zero_matrix_has_rank_zero():
    basis = square_row_basis(scipy.sparse.csr_matrix((3, 4)), 1e-9)
    assert basis.rank == 0 and basis.dependent.tolist() == [0, 1, 2]
    assert basis.solve_transposed(np.zeros((4, 2))).shape == (0, 2)


def _matched_block(bodies: int, seed: int) -> tuple[scipy.sparse.csr_matrix, np.ndarray, np.ndarray, float]:
    A = _random_matrix(bodies, seed)
    A.eliminate_zeros()
    I, J = matched_square(A)
    return A, I, J, 1e-9 * largest_singular_value(A)


def test_the_tiny_pivots_of_a_shifted_lu_span_the_null_space_that_a_dense_svd_finds():
    A, I, J, tol = _matched_block(400, 8)
    S = A[I][:, J].tocsc()
    U_, s, Vt = np.linalg.svd(S.toarray())
    null = Vt[s < tol].T
    assert null.shape[1] >= 3  # the case: a matched block with several null directions
    inverse = SquareInverse(S, 1e-4 * tol, exact_first=False)
    X = inverse.pivot_directions(4 * tol)
    assert X is not None
    ritz, weak = ritz_pairs(S, np.linalg.qr(X)[0], 4 * tol)
    assert weak.shape[1] == null.shape[1]
    assert np.linalg.norm(weak - null @ (null.T @ weak)) <= 1e-6  # inside the dense null space


def test_removing_the_weak_directions_leaves_a_block_without_them():
    A, I, J, tol = _matched_block(400, 8)
    S = A[I][:, J].toarray()
    Uf, s, Vt = np.linalg.svd(S)
    weak = s < 4 * tol
    assert weak.sum() >= 3
    I2, J2, steps = remove_weak_directions(A, A.T.tocsr(), I, J, Uf[:, weak], Vt[weak].T, 4 * tol)
    assert steps == weak.sum() and I2.size == J2.size
    assert np.unique(I2).size == I2.size and np.unique(J2).size == J2.size
    s2 = np.linalg.svd(A[I2][:, J2].toarray(), compute_uv=False)
    assert s2[-1] > tol  # none of the weak directions is left below tol
    assert I2.size <= _dense_rank(A, tol)[0]  # a regular block: its rows are independent rows of A

"""Bounds on per-pair quantities of the left null space from a sketch, and their refinement.

The reference is an orthonormal basis of null(Cᵀ) from numpy's SVD (scipy.linalg.null_space), which the module
never forms. The matrix is built so that the parametrization λ_D = ξ is as anisotropic as the 10,000-body random
model's (|W| in the thousands), where the sketch estimate √(p/s)|C_Xᵀ Λ_X| had called an unsolvable pair solvable.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg
import scipy.sparse

from vtm_dynamics.core.reactions.left_null_bounds import Item, refine, sketch_bounds
from vtm_dynamics.core.reactions.sparse_solvability import left_null_sketch


class _IdentityBasis:
    """The row basis of C = [I_r; W]: rows 0..r-1 independent, C_I = I (so C_Iᵀ μ = b is μ = b)."""

    def __init__(self, r: int, p: int):
        self.independent, self.dependent = np.arange(r), np.arange(r, r + p)

    @property
    def rank(self) -> int:
        return int(self.independent.size)

    def solve_transposed(self, rhs: np.ndarray) -> np.ndarray:
        return np.asarray(rhs, dtype=float).reshape(rhs.shape[0], -1).copy()

    def solve(self, rhs: np.ndarray) -> np.ndarray:
        return np.asarray(rhs, dtype=float).reshape(rhs.shape[0], -1).copy()


@pytest.fixture(scope="module")
def anisotropic():
    rng = np.random.default_rng(7)
    r, p = 40, 60
    U = np.linalg.qr(rng.standard_normal((p, p)))[0]
    V = np.linalg.qr(rng.standard_normal((r, r)))[0]
    W = U[:, :r] @ np.diag(np.geomspace(3e3, 1e-2, r)) @ V.T
    W[:, :4] = 0.0  # four basis rows that no dependent row uses: their rows of N are zero
    C = scipy.sparse.csr_matrix(np.vstack([np.eye(r), W]))
    N = scipy.linalg.null_space(C.toarray().T)
    assert N.shape[1] == p
    basis = _IdentityBasis(r, p)
    return C, basis, left_null_sketch(C, basis), np.linalg.norm(N, axis=1)


def test_the_sketch_lower_bound_never_exceeds_the_exact_value(anisotropic):
    C, _, sketch, exact = anisotropic
    for i in range(C.shape[0]):
        b = sketch_bounds(sketch, Item((i,), np.ones((1, 1)), 1e-8))
        assert b.lower <= exact[i] * (1 + 1e-9) + 1e-11  # round-off: |W| eps = 7e-13


def test_rows_that_no_redundancy_reaches_are_decided_zero_by_the_upper_estimate(anisotropic):
    C, _, sketch, exact = anisotropic
    for i in range(4):
        assert exact[i] < 1e-12
        assert sketch_bounds(sketch, Item((i,), np.ones((1, 1)), 1e-8)).upper <= 1e-8


def test_refinement_brackets_the_exact_value_and_decides_what_the_scaled_estimate_got_wrong(anisotropic):
    C, basis, sketch, exact = anisotropic
    p, s = basis.dependent.size, sketch.columns
    rows = np.arange(4, C.shape[0])
    lower = np.array([sketch_bounds(sketch, Item((int(i),), np.ones((1, 1)), 1.0)).lower for i in rows])
    ratio = np.sqrt(p / s) * lower / exact[rows]
    worst = int(rows[np.argmin(ratio)])
    # the case: the estimate the sparse path reported as |B_X| was more than 10 times below the exact value
    assert ratio.min() < 0.1
    bar = exact[worst] / 3.0  # so the exact value is above the bar, the old estimate below it
    assert np.sqrt(p / s) * sketch_bounds(sketch, Item((worst,), np.ones((1, 1)), bar)).lower < bar
    items = [Item((int(i),), np.ones((1, 1)), exact[i] / 3.0) for i in rows]
    for i, b in zip(rows, refine(C, basis, sketch, items)):
        assert b.lower <= exact[i] * (1 + 1e-7) and exact[i] <= b.upper * (1 + 1e-7)
        assert b.lower > exact[i] / 3.0  # decided, on the side of the exact value


@pytest.mark.parametrize("bodies,seed,planar", [(1500, 2, True), (300, 13, False)])
def test_sparse_verdicts_and_releasable_rows_equal_those_of_an_orthonormal_left_null_basis(bodies, seed, planar):
    """Models with p far above the 16 sketch columns and |C_D C_I⁺| in the thousands (5,422 and 8,024): the
    reference N = G L⁻ᵀ (L Lᵀ = GᵀG) is orthonormal, formed densely here, which the package never does."""
    from vtm_dynamics.core.reactions.mechanism_families import random_mechanism_urdf
    from vtm_dynamics.core.reactions.model_limits import load_for_analysis
    from vtm_dynamics.core.reactions.sparse_solvability import (
        pair_block,
        analyze_sparse_constraint_matrix,
        independent_rows,
        sparse_constraint_matrix,
    )

    model = load_for_analysis(random_mechanism_urdf(bodies, seed, planar=planar), planar, bodies + 1)
    C = sparse_constraint_matrix(model, None)
    report = analyze_sparse_constraint_matrix(C)
    A = C.matrix.tocsr()
    A.sort_indices()
    basis = independent_rows(A, report.rank_tolerance)
    D, I = basis.dependent, basis.independent
    assert D.size > 100  # the case: far more null vectors than sketch columns
    G = np.zeros((A.shape[0], D.size))
    G[I] = -basis.solve_transposed(A[D].T.toarray())
    G[D] = np.eye(D.size)
    N = scipy.linalg.solve_triangular(np.linalg.cholesky(G.T @ G), G.T, lower=True).T
    assert np.linalg.norm(N.T @ N - np.eye(D.size)) < 1e-6 and np.linalg.norm(A.T @ N) < 1e-6 * report.sigma_max
    releasable = np.linalg.norm(N, axis=1) > 1e-8
    for pr, verdict in zip(C.pairs, report.pairs):
        exact = np.linalg.norm(pair_block(A, pr.rows).T @ N[list(pr.rows)]) / report.sigma_max
        assert verdict.solvable == (exact <= 10 * report.rank_rtol), pr.name
        assert verdict.releasable_rows == tuple(pr.labels[i - pr.rows[0]] for i in pr.rows if releasable[i]), pr.name

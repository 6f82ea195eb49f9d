"""Solves with a block changed in a few rows and columns, through the LU of the block before.

Expected solutions come from numpy's dense solve of the changed block, never from the code under test.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse

from vtm_dynamics.core.reactions.square_row_basis import SquareInverse
from vtm_dynamics.core.reactions.updated_lu import UpdatedLU


def _generic_rows(rng, shape: tuple[int, int]) -> scipy.sparse.csr_matrix:
    """Sparse rows with a nonzero diagonal and random entries: a square block of them, with rows or columns
    replaced by other such rows or columns, is nonsingular with probability one."""
    A = scipy.sparse.random(*shape, density=0.02, random_state=rng, format="lil")
    A.setdiag(1.0 + rng.random(min(shape)))
    return A.tocsr()


def test_an_updated_lu_solves_the_swapped_block_as_a_dense_solve_does_both_ways():
    rng = np.random.default_rng(3)
    A = _generic_rows(rng, (260, 250))
    I0, J0 = np.arange(200), np.arange(200)
    S0 = A[I0][:, J0].tocsc()
    inverse = SquareInverse(S0, 1e-12)
    assert not inverse.shifted
    I, J = I0.copy(), J0.copy()
    I[[5, 70, 150]] = [210, 230, 259]  # three rows and two columns from outside
    J[[70, 199]] = [220, 249]
    S = A[I][:, J].tocsc()
    dense = S.toarray()
    assert np.linalg.cond(dense) < 1e8  # the case: the swapped block is regular
    updated = UpdatedLU(inverse.lu, S0, S, np.flatnonzero(I != I0), np.flatnonzero(J != J0))
    assert updated.rank == 5
    b = rng.standard_normal((S.shape[0], 3))
    for trans, M in (("N", dense), ("T", dense.T)):
        x = updated.solve(b, trans=trans)
        reference = np.linalg.solve(M, b)
        assert np.linalg.norm(x - reference) <= 1e-10 * np.linalg.norm(reference)


def test_an_updated_lu_of_a_singular_block_is_refused_like_a_zero_pivot():
    rng = np.random.default_rng(4)
    A = _generic_rows(rng, (220, 200))
    S0 = A[:200][:, :200].tocsc()
    inverse = SquareInverse(S0, 1e-12)
    I = np.arange(200)
    I[1] = 0  # the same row twice: exactly singular
    with pytest.raises(RuntimeError, match="singular"):
        UpdatedLU(inverse.lu, S0, A[I][:, :200].tocsc(), np.array([1]), np.zeros(0, int))

"""A rank decision the tolerance cannot make is reported at once as "unclear", never guessed and never looped on.

Rows e1 and e1 + δ e2 with σ_min(C) < tol < δ: the second row lies farther than the tolerance from the first
(so the repair adds it back) while the two together have a singular value below it (so the repair drops one).
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse

from vtm_dynamics.core.reactions import row_basis as row_basis_module
from vtm_dynamics.core.reactions.solvability import SolvabilityError
from vtm_dynamics.core.reactions.row_basis import largest_singular_value, row_basis


def _ambiguous_pair(delta: float) -> scipy.sparse.csr_matrix:
    return scipy.sparse.csr_matrix(np.array([[1.0, 0.0, 0.0], [1.0, delta, 0.0], [0.0, 0.0, 1.0]]))


def test_a_repair_that_returns_to_a_candidate_set_stops_at_once_with_the_gap(monkeypatch):
    A = _ambiguous_pair(1.8e-9)
    tol = 1e-9 * largest_singular_value(A)
    s = np.linalg.svd(A.toarray(), compute_uv=False)
    assert s[-1] < tol < 1.8e-9  # the case: farther than tol from each other, yet a singular value below tol
    calls = []
    real = row_basis_module.sparse_qr
    monkeypatch.setattr(row_basis_module, "sparse_qr", lambda M: calls.append(M.shape) or real(M))
    with pytest.raises(SolvabilityError, match="rank decision unclear: the independent rows do not settle, 1 constraint rows added and 1 dropped in turn, 1 of them both ways") as e:
        row_basis(A, tol)
    assert len(calls) <= 4  # the first repeated candidate set ends it (it cycled through 40 QRs before)
    assert "tolerance" in str(e.value) and "smallest singular value" in str(e.value)
    assert "\n" not in str(e.value)


def test_a_clear_gap_on_either_side_is_still_decided():
    for delta, rank in ((1e-3, 3), (1e-14, 2)):
        A = _ambiguous_pair(delta)
        assert row_basis(A, 1e-9 * largest_singular_value(A)).rank == rank


def _near_tolerance_matrix(seed: int) -> np.ndarray:
    """Independent rows B and combinations of them moved by 0.5-3 times 1e-9 (about the tolerance) off their span."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(4, 9))
    r = int(rng.integers(2, n))
    extra = int(rng.integers(2, 6))
    B = rng.standard_normal((r, n))
    combos = rng.standard_normal((extra, r)) @ B
    D = combos + rng.choice([0.5, 1, 1.5, 2, 3], size=(extra, 1)) * 1e-9 * rng.standard_normal((extra, n))
    return np.vstack([B, D])[rng.permutation(r + extra)]


@pytest.mark.parametrize("seed", [264, 310])
def test_a_basis_without_a_clear_gap_is_unclear_rather_than_a_rank_other_than_the_dense_rank(seed):
    # these rows settled at a rank one below the dense count (σ_r within 0.03 % and 8 % of the tolerance)
    M = _near_tolerance_matrix(seed)
    A = scipy.sparse.csr_matrix(M)
    tol = 1e-9 * largest_singular_value(A)
    s = np.linalg.svd(M, compute_uv=False)
    dense_rank = int(np.sum(s > tol))
    try:
        rank = row_basis(A, tol).rank
    except SolvabilityError as err:
        assert str(err).startswith("rank decision unclear")
        return
    assert rank == dense_rank

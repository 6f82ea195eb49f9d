"""Independent rows of a constraint matrix with a few dense "hub" columns, without the fill a hub causes.

A body that many pairs touch (the coupler of a comb of parallelograms, a platform with many legs, a chassis)
gives C a few dense columns H. Every row touching the hub then meets every other in C Cᵀ, so a QR of Cᵀ (the row
selection of :func:`~vtm_dynamics.core.reactions.row_basis.row_basis`) fills in as rows²: 10,000 comb
bodies, 48 s and 2.4 GB. Here the columns are split, C = [S H] (rows of C unchanged), and the hub is eliminated:

1. the verified row basis of S alone (no hub, no fill): independent rows I_S (σ_min(S_IS) > tol), the others D_S
   within tol of span(S_IS);
2. Z = S_IS⁺ H_IS (h least-norm solves, h = hub columns) and the Schur complement G = H_D − S_D Z (p_S × h,
   dense, small): row d of C minus the combination of rows I_S that matches its S part is [e_d, g_d], e_d within
   tol. A pivoted QR of Gᵀ picks the rows K of D_S that add rank (the SVD of G must give the same count);
3. I = I_S ∪ K, D = the rest; rank(C) = |I_S| + rank(G).

Checks at the dense path's tolerance, replacing the QR of C_Iᵀ that would fill in:

* rows D within tol of span(C_I): random combinations v = C_Dᵀ ξ (4 columns, fixed seed) are solved, C_Iᵀ μ = v by
  the block elimination below, and the residual |v − C_Iᵀ μ| (a sparse product, an upper bound of the distance)
  must stay below tol;
* C_I independent: with T = [[1, 0], [−X_K, 1]] (X_K = S_K S_IS⁺), T C_I = [[S_IS, H_IS], [E_K, G_K]], and the
  right inverse of its block triangle gives the lower bound
  σ_min(C_I) ≥ (1 / (1/σ_S + (1 + |Z|)/σ_G) − |E_K|_F) / (1 + |X_K|_F),
  σ_S = σ_min(S_IS) (inverse iteration, as in the row basis), σ_G = σ_min(G_K); it must exceed tol.

If a check fails, the hub split is not used (the caller factorizes C whole). Solving C_Iᵀ μ = b (the left null
space, the checks): μ_S = S_ISᵀ⁺ b_S − X_Kᵀ μ_K, G_Kᵀ μ_K = b_H − H_ISᵀ S_ISᵀ⁺ b_S, each ⁺ a least-squares solve
with the QR of S_ISᵀ.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import scipy.linalg
import scipy.sparse

from vtm_dynamics.core.reactions.row_basis import RANK_GAP, SKETCH_SEED, RowBasis, row_basis
from vtm_dynamics.core.reactions.solvability_report import SolvabilityError

HUB_MIN_NONZEROS = 64  # a column with this many nonzeros is a hub (ordinary bodies: at most a few dozen)
MAX_HUB_COLUMNS = 60  # G is p_S × h dense: beyond this many hub columns the split does not pay


class _Least:
    """Least-squares solves with S_ISᵀ (n_S × r_S) through the QR of the row basis: x = argmin |S_ISᵀ x − b|."""

    def __init__(self, basis: RowBasis):
        self.basis = basis

    def solve(self, b: np.ndarray) -> np.ndarray:
        """b: n_S × k → x: r_S × k (rows in the order of ``basis.independent``)."""
        return self.basis.solve_transposed(b)

    def outside(self, b: np.ndarray) -> np.ndarray:
        """Norms of the parts of the columns of b outside span(S_ISᵀ)."""
        r = self.basis.rank
        return np.array([np.linalg.norm(self.basis.q_operator.rmatvec(b[:, j])[r:]) for j in range(b.shape[1])])

    def min_norm(self, h: np.ndarray) -> np.ndarray:
        """Z = S_IS⁺ h (n_S × k): the least-norm solution of S_IS z = h (S_IS has full row rank)."""
        return self.basis.solve(h)


@dataclass(frozen=True)
class HubRowBasis:
    """Independent rows I of C found with the hub columns eliminated (module docstring), and the solver it gives.

    ``sigma_min_estimate``: the lower bound of σ_min(C_I) above; ``smallest_pivot``: σ_min(G_K) (the hub part).
    """

    independent: np.ndarray
    dependent: np.ndarray
    sigma_min_estimate: float
    smallest_pivot: float
    hub_columns: np.ndarray
    _solver: object = field(repr=False)

    @property
    def rank(self) -> int:
        return int(self.independent.size)

    def solve_transposed(self, rhs: np.ndarray) -> np.ndarray:
        """μ (|I| × k, rows in the order of ``independent``) with C_Iᵀ μ = rhs (n × k), rhs in range(C_Iᵀ)."""
        return self._solver(np.asarray(rhs, dtype=float).reshape(rhs.shape[0], -1))


def hub_columns(A: scipy.sparse.spmatrix, min_nonzeros: int = HUB_MIN_NONZEROS) -> np.ndarray:
    """Columns of A with at least ``min_nonzeros`` nonzeros."""
    counts = np.bincount(scipy.sparse.csr_matrix(A).indices, minlength=A.shape[1])
    return np.flatnonzero(counts >= min_nonzeros)


def hub_row_basis(A: scipy.sparse.spmatrix, tol: float, min_nonzeros: int = HUB_MIN_NONZEROS
                  ) -> HubRowBasis | None:
    """The row basis of A by hub elimination, or None when A has no hub (or too many) or a check fails."""
    A = scipy.sparse.csr_matrix(A)
    m, n = A.shape
    hub = hub_columns(A, min_nonzeros)
    if hub.size == 0 or hub.size > MAX_HUB_COLUMNS or hub.size == n:
        return None
    rest = np.setdiff1d(np.arange(n), hub)
    Ac = A.tocsc()
    S = Ac[:, rest].tocsr()
    H = Ac[:, hub].toarray()
    try:
        bs = row_basis(S, tol)
    except SolvabilityError:
        return None  # S alone undecided: the whole matrix may still be decided by the full QR
    if bs.rank == 0:
        return None
    I_S, D_S = bs.independent, bs.dependent
    least = _Least(bs)
    Z = least.min_norm(H[I_S]) if I_S.size else np.zeros((rest.size, hub.size))
    G = H[D_S] - np.asarray(S[D_S] @ Z)
    if D_S.size:
        sG = np.linalg.svd(G, compute_uv=False)
        _, RG, piv = scipy.linalg.qr(G.T, mode="economic", pivoting=True)
        g = int(np.sum(np.abs(np.diag(RG)) > tol))
        if g != int(np.sum(sG > tol)):
            return None
    else:
        g, piv = 0, np.zeros(0, dtype=int)
    K = D_S[piv[:g]]
    GK = G[piv[:g]]
    SK = S[K].toarray().T  # n_S × g
    XK = least.solve(SK).T if g else np.zeros((0, I_S.size))  # g × r_S: S_K ≈ X_K S_IS
    sigma_G = float(np.linalg.svd(GK, compute_uv=False).min()) if g else float("inf")
    HIS = H[I_S]

    def solver(b: np.ndarray) -> np.ndarray:
        bS, bH = b[rest], b[hub]
        a = least.solve(bS)
        muK = np.zeros((g, b.shape[1]))
        if g:
            muK = np.linalg.lstsq(GK.T, bH - HIS.T @ a, rcond=None)[0]
        muS = a - XK.T @ muK
        mu = np.zeros((I_S.size + g, b.shape[1]))
        mu[pos_S], mu[pos_K] = muS, muK
        return mu

    I = np.sort(np.concatenate([I_S, K]))
    pos_S, pos_K = np.searchsorted(I, I_S), np.searchsorted(I, K)
    D = np.setdiff1d(D_S, K)
    # independence of C_I: the lower bound of the module docstring
    sigma_S = bs.sigma_min_estimate
    EK = float(np.linalg.norm(least.outside(SK))) if g else 0.0
    bound = 1.0 / (1.0 / sigma_S + (1.0 + np.linalg.norm(Z)) / sigma_G) if I.size else float("inf")
    bound = (bound - EK) / (1.0 + np.linalg.norm(XK))
    if bound <= tol:  # a lower bound: above tol it proves the rows independent
        return None
    # the other rows lie within tol of span(C_I): residuals of random combinations, an upper bound of the distance
    if D.size:
        xi = np.random.default_rng(SKETCH_SEED + 3).standard_normal((D.size, 4))
        V = np.asarray(A[D].T @ xi)
        mu = solver(V)
        residual = np.linalg.norm(V - np.asarray(A[I].T @ mu), axis=0).max()
        if residual > tol / RANK_GAP:  # the whole-matrix QR then decides, or says "unclear"
            return None
    return HubRowBasis(I, D, float(bound), sigma_G, hub, solver)

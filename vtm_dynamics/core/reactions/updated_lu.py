"""Solves with a square sparse matrix changed in a few rows and columns, through the LU of the matrix before.

The square row basis (:mod:`~vtm_dynamics.core.reactions.square_row_basis`) swaps a few rows or columns of
C_IJ per round once the worst directions are gone (Wojtyra & Frączek 2013, Sect. 3 need only the final block);
refactorizing for each costs about 1 s at 27,000 rows. The Sherman-Morrison-Woodbury identity gives the new
solves from the old factorization and one small dense LU.
"""

from __future__ import annotations

import numpy as np
import scipy.linalg
import scipy.sparse


class UpdatedLU:
    """Solves with S = S0 + Δ through the SuperLU factorization of S0 (Woodbury) and one step of iterative
    refinement against S itself, for Δ confined to a few rows R and columns K of S (a few swaps since S0).

    ``rows``, ``columns``: the positions whose row or column differs from S0's. Δ = E_R Δ_R + Δ'_K E_Kᵀ (Δ' is Δ
    without the rows R), so with P = [E_R, Δ'_K] and Q = [Δ_Rᵀ, E_K]:
    S⁻¹ = S0⁻¹ − Z (I + Qᵀ Z)⁻¹ Qᵀ S0⁻¹, Z = S0⁻¹ P, and Sᵀ the same with P and Q exchanged. One
    refactorization becomes |R| + |K| solves with S0 and a small dense LU.

    Woodbury is not backward stable: its error grows with eps · κ(S0). The refinement step (residuals formed
    with S itself) recovers a fresh LU's accuracy while eps · κ(S0) is well below one, so an S0 must be
    well conditioned (the square row basis updates only blocks with σ_min ≥ 1e-3 tol, and refactorizes when an
    iteration with the update does not converge). A capacitance matrix I + Qᵀ Z singular at the scale of
    |Q| |Z| means S is singular to working precision: ``RuntimeError``, as SuperLU raises.
    """

    def __init__(self, lu0, S0: scipy.sparse.csc_matrix, S: scipy.sparse.csc_matrix, rows: np.ndarray,
                 columns: np.ndarray):
        r = S.shape[0]
        R, K = np.asarray(rows, dtype=int), np.asarray(columns, dtype=int)
        delta = (S - S0).tocsc()
        outside = np.ones(r)
        outside[R] = 0.0
        P = np.zeros((r, R.size + K.size))
        P[R, np.arange(R.size)] = 1.0
        P[:, R.size:] = (scipy.sparse.diags(outside) @ delta[:, K]).toarray()  # Δ'_K: the rows R are in Δ_R
        Q = np.zeros((r, R.size + K.size))
        Q[:, : R.size] = delta.tocsr()[R].toarray().T
        Q[K, R.size + np.arange(K.size)] = 1.0
        self.lu0, self.S, self.P, self.Q = lu0, S, P, Q
        self.Z = lu0.solve(P) if P.shape[1] else P
        self.Zt = lu0.solve(Q, trans="T") if Q.shape[1] else Q
        cap = np.eye(P.shape[1]) + Q.T @ self.Z
        # I + Qᵀ Z is formed with cancellation up to |Q| |Z|: singular at that scale means S is
        scale = 1.0 + np.linalg.norm(Q) * np.linalg.norm(self.Z)
        if P.shape[1] and not np.linalg.svd(cap, compute_uv=False)[-1] > 1e3 * np.finfo(float).eps * scale:
            raise RuntimeError("the updated matrix is singular to working precision")
        self.cap = scipy.linalg.lu_factor(cap) if P.shape[1] else None

    @property
    def rank(self) -> int:
        """Rows plus columns changed since S0."""
        return int(self.P.shape[1])

    def _woodbury(self, b: np.ndarray, trans: str) -> np.ndarray:
        y = self.lu0.solve(b, trans=trans)
        if self.cap is None:
            return y
        if trans == "N":
            return y - self.Z @ scipy.linalg.lu_solve(self.cap, self.Q.T @ y)
        return y - self.Zt @ scipy.linalg.lu_solve(self.cap, self.P.T @ y, trans=1)

    def solve(self, b: np.ndarray, trans: str = "N", refine: bool = True) -> np.ndarray:
        """S⁻¹ b or S⁻ᵀ b (``trans`` "T"), like ``SuperLU.solve``. ``refine`` False skips the refinement step
        (half the cost) where a relative error of eps · κ(S0) does no harm: the steps of inverse iteration,
        whose Ritz values are formed with S itself."""
        b = np.asarray(b, dtype=float)
        x = self._woodbury(b, trans)
        if not refine:
            return x
        residual = b - (self.S @ x if trans == "N" else self.S.T @ x)
        return x + self._woodbury(np.asarray(residual), trans)

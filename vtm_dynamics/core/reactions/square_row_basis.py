"""Independent rows of a sparse constraint matrix through a well-conditioned square submatrix C_IJ (no QR of Cᵀ).

Wojtyra & Frączek 2013, Sect. 3, ask for rank(C) at a tolerance and for the left null space of Cᵀ (eqs. (24)-(27)).
Both follow from a set I of independent rows: the other rows D are combinations of C_I. The QR route
(:func:`~vtm_dynamics.core.reactions.sparse_solvability.row_basis`) picks I greedily and on the random family
picks ill-conditioned sets that never settle (10,000 bodies: "unclear"). Here the rows are chosen together with
as many columns J, so that C_IJ (r × r) is square and LU-factorizable, and its conditioning is repaired by swaps
guided by its exact weak directions:

1. :func:`~vtm_dynamics.core.reactions.row_column_matching.matched_square`: a maximum-weight matching of rows to columns, weights log|c_ij| plus an offset large
   enough that every maximum matching has the structural rank of C, picks a square C_IJ of that size (an upper
   bound of the numerical rank) with large entries matched.
2. SuperLU factorizes C_IJ (COLAMD order). :func:`weak_directions`: block inverse iteration on (C_IJᵀ C_IJ)⁻¹
   and a Rayleigh-Ritz SVD give V, the right singular directions below ``WEAK`` · tol, and σ_min(C_IJ) (Ritz
   values bound the singular values from above and converge to them). The left directions are U = C_IJ⁻ᵀ V,
   orthonormalized: S⁻ᵀ v_k = u_k / σ_k holds even at rounding level, where C_IJ v / σ would be noise.
3. :func:`remove_weak_directions`: one dimension of (U, V) per step, without refactorizing. Row d outside I
   enters at position i if some v in V has c_d,J · v ≠ 0 (row d covers it) and some u in U has u_i ≠ 0; then U
   becomes {u ∈ U: u_i = 0} and V becomes {v ∈ V: c_d,J · v = 0}, exactly the directions still weak. Column
   swaps are the transpose. If no row or column outside covers the directions above tol, row i and column j
   leave (a dependency at this tolerance; r − 1).
4. Repeat from 2 until no Ritz value is below ``WEAK`` · tol. The certificate is the gap rule of the QR route:
   σ_r(C) ≥ σ_min(C_IJ) (a submatrix's singular values interlace) must reach ``_SIGMA_MARGIN`` · tol, and
   σ_(r+1)(C) ≤ |E|, E = C_D − C_DJ C_IJ⁻¹ C_I (C minus a rank-r matrix, Weyl), estimated on random combinations
   of the rows D, must stay below tol / ``RANK_GAP``.

Anything short of that certificate (rounds exhausted, a factorization that fails, a leak above the bar) returns
None and the caller takes the QR route, which decides or reports "rank decision unclear": this path never
guesses a rank. Solving C_Iᵀ μ = b for b in range(C_Iᵀ) (the left null space) is C_IJᵀ μ = b_J through the LU.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse
import scipy.sparse.linalg

from vtm_dynamics.core.reactions.row_column_matching import extended_matching, matched_square
from vtm_dynamics.core.reactions.sparse_solvability import _SIGMA_MARGIN, RANK_GAP, SKETCH_SEED

_LOG = logging.getLogger(__name__)
WEAK = 4.0  # directions of C_IJ with singular values below WEAK · tol are swapped out (above the 2 tol margin)
MAX_ROUNDS = 8  # factorizations of C_IJ before handing over to the QR route
FIRST_BLOCK = 16  # columns of the inverse iteration at first; more when the LU shows more tiny pivots
MAX_BLOCK = 1024
MAX_ITERATIONS = 30
REGULARIZATION = 1e-4  # δ of the shifted or regularized inverse of a singular C_IJ, in units of tol


@dataclass(frozen=True)
class SquareRowBasis:
    """Independent rows I of C (m × n) with columns J such that C_IJ is square and well conditioned.

    ``independent``: sorted row indices I, |I| = rank(C); ``dependent``: the other rows; ``columns``: J, the
    column matched to each row of ``independent``. ``sigma_min_estimate``: σ_min(C_IJ) by inverse iteration
    (converged to 0.1 %, a lower bound of σ_r(C)); ``leak_estimate``: the estimate of |E| (module docstring)
    [units of C]. ``rounds``: factorizations used; ``swaps``: rows and columns exchanged or removed.
    """

    independent: np.ndarray
    dependent: np.ndarray
    columns: np.ndarray
    sigma_min_estimate: float
    leak_estimate: float
    rounds: int
    swaps: int
    _lu: object = field(repr=False)
    _order: np.ndarray = field(repr=False)

    @property
    def rank(self) -> int:
        return int(self.independent.size)

    def solve_transposed(self, rhs: np.ndarray) -> np.ndarray:
        """μ (|I| × k, rows in the order of ``independent``) with C_Iᵀ μ = rhs (n × k), rhs in range(C_Iᵀ).

        C_IJᵀ μ = rhs_J by the LU; exact on range(C_Iᵀ), for other rhs only the J components match.
        """
        rhs = np.asarray(rhs, dtype=float).reshape(rhs.shape[0], -1)
        if self.rank == 0:
            return np.zeros((0, rhs.shape[1]))
        mu = self._lu.solve(np.ascontiguousarray(rhs[self._columns_in_lu_order()]), trans="T")
        return mu.reshape(self.rank, -1)[self._order]

    def _columns_in_lu_order(self) -> np.ndarray:
        out = np.empty_like(self.columns)
        out[self._order] = self.columns
        return out


class SquareInverse:
    """Inverse iteration operators of a square C_IJ = S through one SuperLU factorization.

    ``right(X)`` ≈ (SᵀS)⁻¹ X, ``left(Y)`` ≈ (SSᵀ)⁻¹ Y, ``left_of(V)`` ≈ S⁻ᵀ V (module docstring, step 2), by the
    first factorization that SuperLU completes:

    1. S itself;
    2. if S is exactly singular (a zero pivot), S + diag(δ (1 + ρ_k)), ρ_k uniform in [0, 1): random, since
       cancellations of equal entries (±1 in planar models) survive a uniform shift. It need not lift every null
       direction (not one whose left and right vectors share no matched entry), but the solves stay finite or
       fail, and the Ritz values come from S itself;
       A first round starts here (``exact_first`` False): a matched block is usually exactly singular, and
       SuperLU finds the zero pivot late (10,000 random bodies: 1.2 s per failed attempt);
    3. if that fails too, the quasi-definite K = [[δ I, S], [Sᵀ, −δ I]], nonsingular for δ > 0:
       K⁻¹ [0; X] = [S (SᵀS + δ²I)⁻¹ X; −δ (SᵀS + δ²I)⁻¹ X], K⁻¹ [Y; 0] = [δ (SSᵀ + δ²I)⁻¹ Y; ...], Tikhonov
       regularized inverse iteration on either side (S⁻ᵀ V is not defined: the left side iterates on its own).
       Its LU costs far more than S's (10,000 random bodies: 70 s against 2 s), hence last.
    """

    def __init__(self, S: scipy.sparse.csc_matrix, delta: float, exact_first: bool = True):
        self.r = S.shape[0]
        self.shifted = self.regularized = False
        if exact_first:
            try:
                self.lu = scipy.sparse.linalg.splu(S, permc_spec="COLAMD")
                return
            except RuntimeError:
                pass
        self.shifted = True
        try:
            jitter = 1.0 + np.random.default_rng(SKETCH_SEED + 3).random(self.r)
            self.lu = scipy.sparse.linalg.splu((S + scipy.sparse.diags(delta * jitter, format="csc")).tocsc(),
                                               permc_spec="COLAMD")
            return
        except RuntimeError:
            self.regularized = True
        eye = scipy.sparse.identity(self.r, format="csc") * delta
        K = scipy.sparse.bmat([[eye, S], [S.T, -eye]], format="csc")
        self.lu = scipy.sparse.linalg.splu(K, permc_spec="COLAMD")  # RuntimeError: the caller gives up

    def right(self, X: np.ndarray) -> np.ndarray:
        if not self.regularized:
            return self.lu.solve(self.lu.solve(X, trans="T"))
        return self.lu.solve(np.vstack([np.zeros_like(X), X]))[self.r:]

    def left(self, Y: np.ndarray) -> np.ndarray:
        if not self.regularized:
            return self.lu.solve(self.lu.solve(Y), trans="T")
        return self.lu.solve(np.vstack([Y, np.zeros_like(Y)]))[: self.r]

    def left_of(self, V: np.ndarray) -> np.ndarray | None:
        """S⁻ᵀ V (columns spanning the left directions paired with V), or None if S is singular."""
        return None if self.regularized else self.lu.solve(np.ascontiguousarray(V), trans="T")

    def tiny_pivots(self, below: float) -> int:
        """Diagonal entries of SuperLU's U below ``below``: a hint of how many weak directions there are."""
        return int(np.sum(np.abs(self.lu.U.diagonal()) < below))


@dataclass(frozen=True)
class WeakDirections:
    """Orthonormal bases U (left) and V (right) of C_IJ's singular directions below the bar, σ_min(C_IJ)."""

    left: np.ndarray
    right: np.ndarray
    sigma_min: float
    converged: bool
    iterations: int


def _ritz(S: scipy.sparse.spmatrix, X: np.ndarray, below: float) -> tuple[np.ndarray, np.ndarray]:
    """Ritz values of S on span(X) (upper bounds of its smallest singular values) and the vectors below ``below``."""
    _, s, Wt = np.linalg.svd(np.asarray(S @ X), full_matrices=False)
    return s, (X @ Wt.T)[:, s < below]


def _iterate(S, step, b: int, below: float, certify: float, seed: int) -> tuple[np.ndarray, float, bool, int]:
    """Block inverse iteration X ← orth(step(X)) until the count below ``below`` repeats and, if the smallest Ritz
    value is at least ``certify`` (it may end the search), that value changed by less than 0.1 %.
    Returns the vectors below, σ_min, converged, iterations."""
    r = S.shape[0]
    X, _ = np.linalg.qr(np.random.default_rng(seed).standard_normal((r, b)))
    count, smin, converged, it = -1, np.inf, False, 0
    for it in range(1, MAX_ITERATIONS + 1):
        Y = step(X)
        if not np.all(np.isfinite(Y)):
            if it == 1:  # no step taken: the Ritz values of the random start
                s, weak = _ritz(S, X, below)
            break
        X, _ = np.linalg.qr(Y)
        s, weak = _ritz(S, X, below)
        new_count, new_min = weak.shape[1], float(s[-1])
        settled = new_count == count and (new_min < certify or abs(new_min - smin) <= 1e-3 * new_min)
        count, smin = new_count, new_min
        if settled or b == r:  # b == r: X spans everything, the Ritz values are the singular values
            converged = True
            break
    return weak, float(s[-1]), converged, it


def weak_directions(S: scipy.sparse.csc_matrix, inverse: SquareInverse, block: int, below: float, certify: float,
                    seed: int) -> WeakDirections:
    """Bases of the left and right singular directions of S below ``below`` [units of S], and σ_min(S), converged
    to 0.1 % if it is at least ``certify``.

    Right: block inverse iteration (``block`` columns) and Ritz vectors of S. Left: U = orth(S⁻ᵀ V), or, for a
    singular S, its own regularized iteration on Sᵀ, cut to as many vectors as V has.
    """
    r = S.shape[0]
    b = min(block, r)
    V, smin, converged, its = _iterate(S, inverse.right, b, below, certify, seed)
    if V.shape[1] == 0:
        return WeakDirections(np.zeros((r, 0)), V, smin, converged, its)
    paired = inverse.left_of(V)
    if paired is not None:
        U = np.linalg.qr(paired)[0]
    else:
        ST = S.T.tocsc()
        U, _, _, more = _iterate(ST, inverse.left, b, below, certify, seed + 1)
        its += more
        if U.shape[1] != V.shape[1]:  # the two sides disagree: keep the common number of weakest directions
            k = min(U.shape[1], V.shape[1])
            U, V = U[:, -k:] if k else U[:, :0], V[:, -k:] if k else V[:, :0]
    return WeakDirections(U, V, smin, converged, its)


def _restricted(basis: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Orthonormal basis of {x ∈ span(basis): w · x = 0}, one dimension fewer (basis orthonormal)."""
    k = basis.shape[1]
    if k <= 1:
        return basis[:, :0]
    c = w @ basis
    norm = np.linalg.norm(c)
    if norm == 0.0:
        return basis[:, 1:]
    Q, _ = np.linalg.qr(np.column_stack([c / norm, np.eye(k)]))
    return basis @ Q[:, 1:k]


def _unit(n: int, i: int) -> np.ndarray:
    e = np.zeros(n)
    e[i] = 1.0
    return e


def remove_weak_directions(A: scipy.sparse.csr_matrix, AT: scipy.sparse.csr_matrix, I: np.ndarray, J: np.ndarray,
                           U: np.ndarray, V: np.ndarray, tol: float) -> tuple[np.ndarray, np.ndarray, int]:
    """Row and column swaps (or removals) that take the weak spaces U, V out of A_IJ (module docstring, step 3).

    ``AT``: Aᵀ as CSR (the columns of A as rows). Returns the new I, J and the number of steps taken.
    """
    m, n = A.shape
    I, J = I.copy(), J.copy()
    in_I = np.zeros(m, bool)
    in_I[I] = True
    in_J = np.zeros(n, bool)
    in_J[J] = True
    steps = 0
    while U.shape[1] and V.shape[1]:
        r = I.size
        full_V = np.zeros((n, V.shape[1]))
        full_V[J] = V
        row_cover = np.abs(A @ full_V).max(axis=1)
        row_cover[in_I] = 0.0
        full_U = np.zeros((m, U.shape[1]))
        full_U[I] = U
        col_cover = np.abs(AT @ full_U).max(axis=1)
        col_cover[in_J] = 0.0
        d, k = int(np.argmax(row_cover)), int(np.argmax(col_cover))
        i = int(np.argmax(np.abs(U).max(axis=1)))
        j = int(np.argmax(np.abs(V).max(axis=1)))
        steps += 1
        if max(row_cover[d], col_cover[k]) <= tol:  # nothing outside covers them: a dependency at this tolerance
            keep_i, keep_j = np.ones(r, bool), np.ones(r, bool)
            keep_i[i], keep_j[j] = False, False
            in_I[I[i]], in_J[J[j]] = False, False
            U = _restricted(U, _unit(r, i))[keep_i]
            V = _restricted(V, _unit(r, j))[keep_j]
            U = np.linalg.qr(U)[0] if U.shape[1] else U
            V = np.linalg.qr(V)[0] if V.shape[1] else V
            I, J = I[keep_i], J[keep_j]
            continue
        kind = "row" if row_cover[d] * np.abs(U[i]).max() >= col_cover[k] * np.abs(V[j]).max() else "column"
        if kind == "row":
            V = _restricted(V, A[d].toarray().ravel()[J])
            U = _restricted(U, _unit(r, i))
            in_I[I[i]], in_I[d] = False, True
            I[i] = d
        else:
            U = _restricted(U, AT[k].toarray().ravel()[I])
            V = _restricted(V, _unit(r, j))
            in_J[J[j]], in_J[k] = False, True
            J[j] = k
    return I, J, steps


def outside_leak(A: scipy.sparse.csr_matrix, I: np.ndarray, J: np.ndarray, lu) -> float:
    """Largest |Eᵀ ξ| over 4 standard normal combinations ξ of the rows outside I (an estimate of |E|)."""
    m = A.shape[0]
    in_I = np.zeros(m, bool)
    in_I[I] = True
    D = np.flatnonzero(~in_I)
    if D.size == 0:
        return 0.0
    xi = np.random.default_rng(SKETCH_SEED + 1).standard_normal((D.size, 4))
    c = np.asarray(A[D].T @ xi)
    if I.size == 0:
        return float(np.linalg.norm(c, axis=0).max())
    mu = lu.solve(np.ascontiguousarray(c[J]), trans="T")
    return float(np.linalg.norm(c - np.asarray(A[I].T @ mu), axis=0).max())


def _basis(m: int, I: np.ndarray, J: np.ndarray, lu, smin: float, leak: float, rounds: int, swaps: int
           ) -> SquareRowBasis:
    order = np.argsort(I, kind="stable")  # LU rows (the order of I) to sorted rows: mu_sorted = mu_lu[order]
    in_I = np.zeros(m, bool)
    in_I[I] = True
    return SquareRowBasis(I[order], np.flatnonzero(~in_I), J[order], smin, leak, rounds, swaps, lu, order)


def square_row_basis(A: scipy.sparse.spmatrix, tol: float, max_rounds: int = MAX_ROUNDS,
                     start: tuple[np.ndarray, np.ndarray] | None = None) -> SquareRowBasis | None:
    """The certified square row basis of A at absolute tolerance ``tol`` [units of A], or None (module docstring).

    ``start``: rows and their columns to begin with instead of the matching (step 1), e.g. a basis of the
    holonomic rows when all rows are asked next; extended by :func:`extended_matching`.
    """
    A = scipy.sparse.csr_matrix(A, dtype=float)
    A.eliminate_zeros()
    m, n = A.shape
    if A.nnz == 0:
        return _basis(m, np.zeros(0, int), np.zeros(0, int), None, float("inf"), 0.0, 0, 0)
    t0 = time.perf_counter()
    AT = A.T.tocsr()
    I, J = matched_square(A) if start is None else extended_matching(A, *start)
    _LOG.debug("square row basis: structural rank %d of %d x %d, %.1f s", I.size, m, n, time.perf_counter() - t0)
    bar, certify, delta, block, swaps = WEAK * tol, _SIGMA_MARGIN * tol, REGULARIZATION * tol, FIRST_BLOCK, 0
    for rnd in range(1, max_rounds + 1):
        if I.size == 0:
            leak = outside_leak(A, I, J, None)
            return _basis(m, I, J, None, float("inf"), leak, rnd, swaps) if leak <= tol / RANK_GAP else None
        S = A[I][:, J].tocsc()
        try:
            inverse = SquareInverse(S, delta, exact_first=rnd > 1)
        except RuntimeError:
            return None
        tiny = inverse.tiny_pivots(bar)
        block = min(MAX_BLOCK, max(block, tiny + tiny // 4 + 8))  # this round's block
        weak = weak_directions(S, inverse, block, bar, certify, seed=SKETCH_SEED + rnd)
        how = " (regularized LU)" if inverse.regularized else " (shifted LU)" if inverse.shifted else ""
        _LOG.debug("square row basis: round %d, r %d, sigma_min %.3g tol, %d weak%s, %d iterations of %d, %.1f s",
                   rnd, I.size, weak.sigma_min / tol, weak.right.shape[1], how, weak.iterations, block,
                   time.perf_counter() - t0)
        if weak.sigma_min >= certify:  # directions between the margin and the bar need no swap: the gap is there
            if rnd == 1 and inverse.shifted:  # S may be regular after all: the certificate needs its own LU
                try:
                    inverse = SquareInverse(S, delta)
                except RuntimeError:
                    return None
            if inverse.shifted or not weak.converged:
                return None
            leak = outside_leak(A, I, J, inverse.lu)
            _LOG.debug("square row basis: leak %.3g tol", leak / tol)
            return _basis(m, I, J, inverse.lu, weak.sigma_min, leak, rnd, swaps) if leak <= tol / RANK_GAP else None
        # the next round starts small again (a final round needs only σ_min) unless this block was full
        block = min(MAX_BLOCK, 2 * block) if weak.right.shape[1] >= min(block, I.size) else FIRST_BLOCK
        I, J, steps = remove_weak_directions(A, AT, I, J, weak.left, weak.right, bar)
        swaps += steps
    return None

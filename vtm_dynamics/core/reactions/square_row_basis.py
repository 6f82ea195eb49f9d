"""Independent rows of a sparse constraint matrix through a well-conditioned square submatrix C_IJ (no QR of Cᵀ).

Wojtyra & Frączek 2013, Sect. 3, ask for rank(C) at a tolerance and for the left null space of Cᵀ (eqs. (24)-(27)).
Both follow from a set I of independent rows: the other rows D are combinations of C_I. The QR route
(:func:`~vtm_dynamics.core.reactions.row_basis.row_basis`) picks I greedily and on the random family
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
   A matched block is usually exactly singular; its first round factorizes it shifted, reads the weak
   directions off the tiny pivots in one solve (:meth:`SquareInverse.pivot_directions`) and only proposes
   swaps, which the next round checks with an exact LU.
3. :func:`remove_weak_directions`: one dimension of (U, V) per step, without refactorizing. Row d outside I
   enters at position i if some v in V has c_d,J · v ≠ 0 (row d covers it) and some u in U has u_i ≠ 0; then U
   becomes {u ∈ U: u_i = 0} and V becomes {v ∈ V: c_d,J · v = 0}, exactly the directions still weak. Column
   swaps are the transpose. If no row or column outside covers the directions above tol, row i and column j
   leave (a dependency at this tolerance; r − 1). Each step is a Householder reflection inside U and V,
   applied only to the rows where they or their covers are nonzero (weak directions are local).
4. Repeat from 2 until no Ritz value is below ``WEAK`` · tol; a round after a few swaps updates the last exact
   LU (:class:`~vtm_dynamics.core.reactions.updated_lu.UpdatedLU`) instead of refactorizing. The certificate
   is the gap rule of the QR route:
   σ_r(C) ≥ σ_min(C_IJ) (a submatrix's singular values interlace) must reach ``SIGMA_MARGIN`` · tol, and
   σ_(r+1)(C) ≤ |E|, E = C_D − C_DJ C_IJ⁻¹ C_I (C minus a rank-r matrix, Weyl), estimated on random combinations
   of the rows D, must stay below tol / ``RANK_GAP``.

Anything short of that certificate (rounds exhausted, a factorization that fails, a leak above the bar) returns
None and the caller takes the QR route, which decides or reports "rank decision unclear": this path never
guesses a rank. Solving C_Iᵀ μ = b for b in range(C_Iᵀ) (the left null space) is C_IJᵀ μ = b_J through the LU.

Size: about 465 lines: the factorizations of one block (exact, shifted, regularized), its weak directions,
their removal and the rounds that certify the result share the block's positions and the tolerance; the
matching and the low-rank update, which need neither, live in their own modules.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse
import scipy.sparse.linalg

from vtm_dynamics.core.reactions.row_basis import RANK_GAP, SIGMA_MARGIN, SKETCH_SEED
from vtm_dynamics.core.reactions.row_column_matching import extended_matching, matched_square
from vtm_dynamics.core.reactions.updated_lu import UpdatedLU

_LOG = logging.getLogger(__name__)
WEAK = 4.0  # directions of C_IJ with singular values below WEAK · tol are swapped out (above the 2 tol margin)
MAX_ROUNDS = 8  # factorizations of C_IJ before handing over to the QR route
FIRST_BLOCK = 16  # columns of the inverse iteration at first; more when the LU shows more tiny pivots
MAX_BLOCK = 1024
MAX_ITERATIONS = 30
REGULARIZATION = 1e-4  # δ of the shifted or regularized inverse of a singular C_IJ, in units of tol
MAX_UPDATE = 48  # rows plus columns changed since the last exact LU that a low-rank update may absorb
UPDATE_BASE = 1e-3  # ... if that LU's block has σ_min at least this many tol (its conditioning bounds the update's)


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
    n_columns: int
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

    def solve(self, rhs: np.ndarray) -> np.ndarray:
        """x (n × k) with C_I x = rhs (|I| × k, rows in the order of ``independent``): C_IJ x_J = rhs by the LU,
        x zero off the columns J."""
        rhs = np.asarray(rhs, dtype=float).reshape(rhs.shape[0], -1)
        x = np.zeros((self.n_columns, rhs.shape[1]))
        if self.rank == 0:
            return x
        b = np.empty_like(rhs)
        b[self._order] = rhs
        xl = self._lu.solve(np.ascontiguousarray(b)).reshape(self.rank, -1)
        x[self.columns] = xl[self._order]
        return x

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

    ``update_of`` (SuperLU of an earlier S0 of the same size, S0, the positions whose rows and columns changed)
    tries an :class:`UpdatedLU` before all of these.
    """

    def __init__(self, S: scipy.sparse.csc_matrix, delta: float, exact_first: bool = True, update_of=None):
        self.r = S.shape[0]
        self.shifted = self.regularized = False
        if update_of is not None:  # (SuperLU of S0, S0, changed positions): no refactorization (UpdatedLU)
            try:
                self.lu = UpdatedLU(update_of[0], update_of[1], S, *update_of[2:])
                return
            except RuntimeError:
                pass
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

    def _step(self, X: np.ndarray, trans: str) -> np.ndarray:
        """One solve of an iteration step: an update need not refine it (:meth:`UpdatedLU.solve`)."""
        if isinstance(self.lu, UpdatedLU):
            return self.lu.solve(X, trans=trans, refine=False)
        return self.lu.solve(X, trans=trans)

    def right(self, X: np.ndarray) -> np.ndarray:
        if not self.regularized:
            return self._step(self._step(X, "T"), "N")
        return self.lu.solve(np.vstack([np.zeros_like(X), X]))[self.r:]

    def left(self, Y: np.ndarray) -> np.ndarray:
        if not self.regularized:
            return self._step(self._step(Y, "N"), "T")
        return self.lu.solve(np.vstack([Y, np.zeros_like(Y)]))[: self.r]

    def left_of(self, V: np.ndarray) -> np.ndarray | None:
        """S⁻ᵀ V (columns spanning the left directions paired with V), or None if S is singular."""
        return None if self.regularized else self.lu.solve(np.ascontiguousarray(V), trans="T")

    def pivot_directions(self, below: float) -> np.ndarray | None:
        """Near-null vectors of S read off the tiny pivots of a shifted LU (none for other factorizations).

        With Pr S Pc = L U and a pivot |u_kk| below ``below``, x_k = S⁻¹ Prᵀ L e_k = Pc U⁻¹ e_k has entry 1 at k
        and S x_k = u_kk Prᵀ L e_k (up to the shift), so |S x_k| ≤ |u_kk| |L e_k|: one solve gives every weak
        direction the pivots show (10,000 random bodies: 74, all below 0.002 tol, in 0.7 s, where inverse
        iteration from a random block took two steps of 100 columns, 2 s)."""
        if not self.shifted or self.regularized:
            return None
        k = np.flatnonzero(np.abs(self.lu.U.diagonal()) < below)
        if k.size == 0:
            return None
        return self.lu.solve(self.lu.L.tocsc()[:, k].toarray()[self.lu.perm_r])

    def tiny_pivots(self, below: float) -> int:
        """Diagonal entries of SuperLU's U below ``below``: a hint of how many weak directions there are (none
        for an update, whose base passed the previous round)."""
        return 0 if isinstance(self.lu, UpdatedLU) else int(np.sum(np.abs(self.lu.U.diagonal()) < below))


@dataclass(frozen=True)
class WeakDirections:
    """Orthonormal bases U (left) and V (right) of C_IJ's singular directions below the bar, σ_min(C_IJ)."""

    left: np.ndarray
    right: np.ndarray
    sigma_min: float
    converged: bool
    iterations: int


def ritz_pairs(S: scipy.sparse.spmatrix, X: np.ndarray, below: float) -> tuple[np.ndarray, np.ndarray]:
    """Ritz values of S on span(X) (upper bounds of its smallest singular values) and the vectors below ``below``."""
    _, s, Wt = np.linalg.svd(np.asarray(S @ X), full_matrices=False)
    return s, (X @ Wt.T)[:, s < below]


def _iterate(S, step, b: int, below: float, certify: float, seed: int, provisional: bool = False
             ) -> tuple[np.ndarray, float, bool, int]:
    """Block inverse iteration X ← orth(step(X)) until the count below ``below`` repeats and, if the smallest Ritz
    value is at least ``certify`` (it may end the search), that value changed by less than 0.1 %.
    ``provisional``: the result only guides swaps that a later round checks with an exact LU, so the second
    iteration that finds weak directions below ``certify`` ends it (the first, from a random start, sees only
    the directions at rounding level: 31 of 74 at 10,000 random bodies). Returns the vectors below, σ_min,
    converged, iterations."""
    r = S.shape[0]
    X, _ = np.linalg.qr(np.random.default_rng(seed).standard_normal((r, b)))
    count, smin, converged, it = -1, np.inf, False, 0
    for it in range(1, MAX_ITERATIONS + 1):
        Y = step(X)
        if not np.all(np.isfinite(Y)):
            if it == 1:  # no step taken: the Ritz values of the random start
                s, weak = ritz_pairs(S, X, below)
            break
        X, _ = np.linalg.qr(Y)
        s, weak = ritz_pairs(S, X, below)
        new_count, new_min = weak.shape[1], float(s[-1])
        settled = new_count == count and (new_min < certify or abs(new_min - smin) <= 1e-3 * new_min)
        settled |= provisional and it >= 2 and new_count > 0 and new_min < certify
        count, smin = new_count, new_min
        if settled or b == r:  # b == r: X spans everything, the Ritz values are the singular values
            converged = True
            break
    return weak, float(s[-1]), converged, it


def weak_directions(S: scipy.sparse.csc_matrix, inverse: SquareInverse, block: int, below: float, certify: float,
                    seed: int) -> WeakDirections:
    """Bases of the left and right singular directions of S below ``below`` [units of S], and σ_min(S), converged
    to 0.1 % if it is at least ``certify``.

    Right: block inverse iteration (``block`` columns) and Ritz vectors of S; after a shifted LU, whose round
    only proposes swaps that the next round checks, the Ritz vectors of its tiny pivots' directions
    (:meth:`SquareInverse.pivot_directions`) if they show any. Left: U = orth(S⁻ᵀ V), or, for a singular S, its
    own regularized iteration on Sᵀ, cut to as many vectors as V has.
    """
    r = S.shape[0]
    b = min(block, r)
    V, smin, converged, its = np.zeros((r, 0)), np.inf, False, 0
    pivots = inverse.pivot_directions(below)  # a shifted LU: its round is provisional (_iterate)
    if pivots is not None and np.all(np.isfinite(pivots)):
        s, V = ritz_pairs(S, np.linalg.qr(pivots)[0], below)
        smin, converged = float(s[-1]), True
    if V.shape[1] == 0 or smin >= certify:  # no pivot shows them: inverse iteration
        V, smin, converged, its = _iterate(S, inverse.right, b, below, certify, seed, provisional=inverse.shifted)
    if V.shape[1] == 0:
        return WeakDirections(np.zeros((r, 0)), V, smin, converged, its)
    paired = inverse.left_of(V)
    if paired is not None:
        U = np.linalg.qr(paired)[0]
    else:
        ST = S.T.tocsc()
        U, _, _, more = _iterate(ST, inverse.left, b, below, certify, seed + 1, provisional=inverse.shifted)
        its += more
        if U.shape[1] != V.shape[1]:  # the two sides disagree: keep the common number of weakest directions
            k = min(U.shape[1], V.shape[1])
            U, V = U[:, -k:] if k else U[:, :0], V[:, -k:] if k else V[:, :0]
    return WeakDirections(U, V, smin, converged, its)


def _reflected(c: np.ndarray, *spaces: np.ndarray) -> tuple[np.ndarray, ...]:
    """Each of ``spaces`` (matrices whose columns are coordinates in one orthonormal basis of dimension k) in the
    basis of the complement of c (c ≠ 0, k − 1 columns).

    A Householder reflection H maps c / |c| to a multiple of e_1; its other columns span the complement of c, so
    X H[:, 1:] = X[:, 1:] − 2 (X h) h[1:]ᵀ: O(rows · k) per matrix instead of the O(rows · k²) of a QR."""
    if c.size <= 1:
        return tuple(x[:, :0] for x in spaces)
    h = c / np.linalg.norm(c)
    h[0] += 1.0 if h[0] >= 0.0 else -1.0  # h = ĉ + sign(ĉ_1) e_1: no cancellation
    h /= np.linalg.norm(h)
    return tuple(x[:, 1:] - 2.0 * np.outer(x @ h, h[1:]) for x in spaces)


def _support(X: np.ndarray, above: float) -> np.ndarray:
    """Rows of X whose norm exceeds ``above``: the only rows that a change of basis inside X can make large."""
    return np.flatnonzero(np.linalg.norm(X, axis=1) > above)


def _delete_position(support: np.ndarray, rows: np.ndarray, i: int) -> tuple[np.ndarray, np.ndarray]:
    """Position i leaves I (or J): drop it from the support (if there) and renumber the positions after it."""
    keep = support != i
    support, rows = support[keep], rows[keep]
    return np.where(support > i, support - 1, support), rows


def remove_weak_directions(A: scipy.sparse.csr_matrix, AT: scipy.sparse.csr_matrix, I: np.ndarray, J: np.ndarray,
                           U: np.ndarray, V: np.ndarray, tol: float) -> tuple[np.ndarray, np.ndarray, int]:
    """Row and column swaps (or removals) that take the weak spaces U, V out of A_IJ (module docstring, step 3).

    ``AT``: Aᵀ as CSR (the columns of A as rows). Returns the new I, J and the number of steps taken.
    Weak directions are local (10,000 random bodies: 74 of them touch 281 of 26,787 positions and 533 rows), so
    only the rows of U, V and of the covers A V, Aᵀ U that can matter are kept: positions where U or V is
    nonzero, rows and columns whose cover can reach tol / 1000 (a change of basis inside U or V keeps a zero
    row zero and a row's norm bounds its entries).
    """
    m, n = A.shape
    I, J = I.copy(), J.copy()
    in_I = np.zeros(m, bool)
    in_I[I] = True
    in_J = np.zeros(n, bool)
    in_J[J] = True
    full = np.zeros((n, V.shape[1]))
    full[J] = V
    AV = np.asarray(A @ full)
    rows = _support(AV, tol / 1e3)  # rows of A that may cover V
    AV = AV[rows]
    full = np.zeros((m, U.shape[1]))
    full[I] = U
    ATU = np.asarray(AT @ full)
    cols = _support(ATU, tol / 1e3)  # columns of A that may cover U
    ATU = ATU[cols]
    pu, pv = _support(U, 0.0), _support(V, 0.0)  # positions in I and J where U and V are nonzero
    U, V = U[pu], V[pv]
    steps = 0
    while U.shape[1] and V.shape[1] and pu.size and pv.size:
        row_cover = np.where(in_I[rows], 0.0, np.abs(AV).max(axis=1, initial=0.0))
        col_cover = np.where(in_J[cols], 0.0, np.abs(ATU).max(axis=1, initial=0.0))
        a, b = int(np.argmax(row_cover)) if rows.size else -1, int(np.argmax(col_cover)) if cols.size else -1
        best_row, best_col = (row_cover[a] if a >= 0 else 0.0), (col_cover[b] if b >= 0 else 0.0)
        u_size, v_size = np.abs(U).max(axis=1), np.abs(V).max(axis=1)
        iu, jv = int(np.argmax(u_size)), int(np.argmax(v_size))
        i, j = int(pu[iu]), int(pv[jv])
        steps += 1
        if max(best_row, best_col) <= tol:  # nothing outside covers them: a dependency at this tolerance
            U, ATU = _reflected(U[iu].copy(), U, ATU)
            V, AV = _reflected(V[jv].copy(), V, AV)
            in_I[I[i]], in_J[J[j]] = False, False
            I, J = np.delete(I, i), np.delete(J, j)
            pu, U = _delete_position(pu, U, i)
            pv, V = _delete_position(pv, V, j)
            continue
        if best_row * u_size[iu] >= best_col * v_size[jv]:  # row d enters at position i
            d = int(rows[a])
            V, AV = _reflected(AV[a].copy(), V, AV)
            U, ATU = _reflected(U[iu].copy(), U, ATU)
            in_I[I[i]], in_I[d] = False, True
            I[i] = d
        else:  # column k enters at position j
            k = int(cols[b])
            U, ATU = _reflected(ATU[b].copy(), U, ATU)
            V, AV = _reflected(V[jv].copy(), V, AV)
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


def _basis(shape: tuple[int, int], I: np.ndarray, J: np.ndarray, lu, smin: float, leak: float, rounds: int,
           swaps: int) -> SquareRowBasis:
    m = shape[0]
    order = np.argsort(I, kind="stable")  # LU rows (the order of I) to sorted rows: mu_sorted = mu_lu[order]
    in_I = np.zeros(m, bool)
    in_I[I] = True
    return SquareRowBasis(I[order], np.flatnonzero(~in_I), J[order], smin, leak, rounds, swaps, shape[1], lu, order)


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
        return _basis((m, n), np.zeros(0, int), np.zeros(0, int), None, float("inf"), 0.0, 0, 0)
    t0 = time.perf_counter()
    AT = A.T.tocsr()
    I, J = matched_square(A) if start is None else extended_matching(A, *start)
    _LOG.debug("square row basis: structural rank %d of %d x %d, %.1f s", I.size, m, n, time.perf_counter() - t0)
    bar, certify, delta, block, swaps = WEAK * tol, SIGMA_MARGIN * tol, REGULARIZATION * tol, FIRST_BLOCK, 0
    base = None  # the last exact factorization: (SuperLU, its block, its I, its J)
    for rnd in range(1, max_rounds + 1):
        if I.size == 0:
            leak = outside_leak(A, I, J, None)
            return _basis((m, n), I, J, None, float("inf"), leak, rnd, swaps) if leak <= tol / RANK_GAP else None
        S = A[I][:, J].tocsc()
        update = None
        if base is not None and base[2].size == I.size:
            rows, cols = np.flatnonzero(I != base[2]), np.flatnonzero(J != base[3])
            update = (base[0], base[1], rows, cols) if rows.size + cols.size <= MAX_UPDATE else None
        try:
            inverse = SquareInverse(S, delta, exact_first=rnd > 1, update_of=update)
        except RuntimeError:
            return None
        tiny = inverse.tiny_pivots(bar)
        block = min(MAX_BLOCK, max(block, tiny + tiny // 4 + 8))  # this round's block
        weak = weak_directions(S, inverse, block, bar, certify, seed=SKETCH_SEED + rnd)
        if isinstance(inverse.lu, UpdatedLU) and not weak.converged:  # the update did not serve: refactorize
            try:
                inverse = SquareInverse(S, delta)
            except RuntimeError:
                return None
            weak = weak_directions(S, inverse, block, bar, certify, seed=SKETCH_SEED + rnd)
        if not inverse.shifted and not isinstance(inverse.lu, UpdatedLU) and weak.sigma_min >= UPDATE_BASE * tol:
            base = (inverse.lu, S, I.copy(), J.copy())  # later swaps update this factorization
        how = (" (regularized LU)" if inverse.regularized else " (shifted LU)" if inverse.shifted else
               f" (LU updated by {inverse.lu.rank})" if isinstance(inverse.lu, UpdatedLU) else "")
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
            return _basis((m, n), I, J, inverse.lu, weak.sigma_min, leak, rnd, swaps) if leak <= tol / RANK_GAP else None
        # the next round starts small again (a final round needs only σ_min) unless this block was full
        block = min(MAX_BLOCK, 2 * block) if weak.right.shape[1] >= min(block, I.size) else FIRST_BLOCK
        I, J, steps = remove_weak_directions(A, AT, I, J, weak.left, weak.right, bar)
        swaps += steps
    return None

"""Reaction solvability of large models: the constraint matrix kept sparse, rank and left null space without SVD.

Same question as :mod:`vtm_dynamics.core.reactions.solvability` (Wojtyra & Frączek 2013, Sect. 3): which pairs X
satisfy Z = X ⊕ Y. Every pair touches at most two bodies, so C (eq. (5)) has at most 12 nonzeros per row; the dense
SVD of C costs O(m n²) time and O(m n) memory (1,000 bodies: 0.9 GB, 150 s), this path the nonzeros of the factor.

1. Independent rows (:func:`independent_rows`): hub elimination where C has hub columns, else a square
   well-conditioned block C_IJ (:mod:`~vtm_dynamics.core.reactions.square_row_basis`), each certified by the gap
   rule below; if neither is, the QR route (:func:`row_basis`). SuiteSparseQR (multifrontal QR, fill-reducing column order, Heath's rank
   detection) of C^T gives a candidate set I of independent rows of C. Heath's method is not rank-revealing in
   general (on the paper's robot a QR of C reports rank 21 instead of 20), so the set is checked and repaired until
   (a) σ_min(R) of C_I^T, by inverse iteration, exceeds ``tol = rank_rtol · σ_max(C)`` (I independent), and (b)
   every other row lies within ``tol`` of span(C_I) (tested on random combinations, row by row only if that
   fails). Then rank(C) = |I| at the dense path's tolerance, and the other p rows D form a release set. The
   settled basis must also show a clear gap (:func:`_require_gap`: σ_min ≥ 2 tol, other rows within tol / 10).
   The greedy set can be ill-conditioned where C is not (σ_min(C_I) near tol, σ_r(C) 10³-10⁵ tol): a settled
   set below the 2 tol margin first has the rows carrying its small directions swapped out (at most
   ``_MAX_SWAPS`` times; the outside test adds others back) before it is called unclear.
2. Left null space, sketched (:func:`left_null_sketch`). Every λ with C^T λ = 0 is λ_D = ξ, λ_I = −μ with
   C_I^T μ = C_D^T ξ. s = min(16, p) random ξ (fixed seed) give Λ0 and its orthonormal basis Λ; ‖C^T Λ‖ is
   checked against the tolerance. A pair has at most 6 rows, so range(Λ_X) = range(N_X) with probability one:

   * B_X = C_X^T N_X (eq. (27)) vanishes iff C_X^T Λ_X does. Its size is not estimated by scaling |C_X^T Λ_X|:
     λ_D = ξ is far from an isotropic sample of the null space (|C_D C_I^+| = 3,234 at 10,000 random bodies),
     and that estimate once called a pair with |B_X| = 537 rtol solvable. Instead |C_X^T Λ_X| is a lower bound
     and √20 |C_X^T Λ0_X| / √s an upper estimate (:mod:`~vtm_dynamics.core.reactions.left_null_bounds`); the
     verdict is the side of the bar 10 rtol both are on, and pairs between are refined by a Galerkin projection
     with two-sided bounds, or "unclear". ``qr_residual`` is √(p/s) |C_X^T Λ_X| / σ_max kept within them (the
     dense path's ‖B_X‖_F / σ_max exactly when p ≤ 16);
   * the indeterminate directions range(N_X) and the determined directions null(N_X^T) are those of Λ_X;
   * a row is releasable iff its row of N is nonzero, decided by the same bounds on |N_i|.

Anything that fails a check is a :class:`SolvabilityError` ("rank decision unclear"), never a guess; so is a repair
that cycles or makes no progress (rows farther than tol from the others' span, yet σ_min below tol with them),
detected at once rather than after many factorizations. Matrices with dense hub columns (a body that every loop
touches) take the hub elimination of :mod:`~vtm_dynamics.core.reactions.hub_row_basis` first. The dense path
(:func:`~vtm_dynamics.core.reactions.solvability.analyze_constraint_matrix`) stays the reference; both give the
same verdicts on the shipped models and on random mechanisms (tests). SuiteSparseQR comes from the ``pyspqr``
wheel (its libraries inside the wheel, no system SuiteSparse), an optional dependency because it is GPL-licensed
(the extra ``sparse-qr``); without it the QR route raises :class:`SparseQRUnavailable`. Cost: the QR of C^T fills in where many loops
share a body (the comb's coupler couples every loop row: nonzeros of R grow as bodies², 4.5 million at 3,000).

Size: about 710 lines: the row basis, its checks and repairs (group testing of rows outside, removal of a
near-null space), the sketch of the left null space and the per-pair verdicts are one algorithm whose steps
share the factorization and the tolerance; split, each part would need the others' internals.
"""

from __future__ import annotations

import functools
import logging
import os
import sys
import threading
import time
from dataclasses import dataclass, field

import numpy as np
import scipy.linalg
import scipy.sparse
import scipy.sparse.linalg

from vtm_dynamics.core.reactions.absolute_coordinates import (
    GROUND,
    AbsoluteModel,
    PairRows,
    _pair_point,
    _skew,
    body_poses,
    closure_residuals,
)
from vtm_dynamics.core.reactions.left_null_bounds import (
    SKETCH_COLUMNS,
    UPPER_FACTOR,
    Bounds,
    Item,
    NullSketch,
    refine,
    sketch_bounds,
)
from vtm_dynamics.core.reactions.solvability import (
    DEFAULT_RANK_RTOL,
    PairSolvability,
    SolvabilityError,
    SolvabilityReport,
    _split_directions,
    _vec,
)

_LOG = logging.getLogger(__name__)  # progress of long factorizations (DEBUG)
SKETCH_SEED = 20130153  # fixed: the same model always gives the same report
_MAX_REPAIRS = 40
RANK_GAP = 10.0  # the other rows of a settled basis must lie within tol / RANK_GAP of span(C_I)
_SIGMA_MARGIN = 2.0  # and σ_min(C_I) (an estimate converging from above) must reach _SIGMA_MARGIN · tol
_MAX_STALLS = 1  # re-additions to a set size that σ_min already cut back, before "unclear" (module docstring)
_MAX_SWAPS = 3  # drops of rows from a settled set whose σ_min is below _SIGMA_MARGIN · tol (row_basis)
_FRESH_START = _SIGMA_MARGIN  # ... counted only while the set they are added to has σ_min below this many tol
_DIRECTION_TOL = 1e-8  # on singular values of Λ_X / √s (entries O(1), as in the dense path)


@dataclass(frozen=True)
class SparseConstraintMatrix:
    """C(q) (eq. (5)) as a scipy CSR matrix, with the same row bookkeeping as ``AbsoluteConstraintMatrix``."""

    matrix: scipy.sparse.csr_matrix = field(repr=False)
    bodies: tuple[str, ...]
    pairs: tuple[PairRows, ...]
    free_pairs: tuple[str, ...]
    planar: bool
    q: np.ndarray | None = field(repr=False)  # None: the neutral configuration
    closure_residual: float

    @property
    def shape(self) -> tuple[int, int]:
        return self.matrix.shape


def sparse_constraint_matrix(model: AbsoluteModel, q) -> SparseConstraintMatrix:
    """Assemble C(q) in absolute coordinates as a sparse matrix; rows identical to ``constraint_matrix``.

    Memory and time linear in the number of pairs (≤ 6 × 12 nonzeros per pair).
    """
    q = None if q is None else np.asarray(q, dtype=float)
    poses = body_poses(model, q)  # q=None: the neutral configuration, without Pinocchio's model
    k = model.coordinates_per_body
    col = {b: i * k for i, b in enumerate(model.bodies)}
    sel = [0, 1, 5] if model.planar else list(range(6))
    rows_i: list[np.ndarray] = []
    cols_i: list[np.ndarray] = []
    vals: list[np.ndarray] = []
    pairs, free = [], []
    pattern: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    row = 0
    for pair in model.pairs:
        W = pair.wrench_basis
        nr = W.shape[1]
        if nr == 0:
            free.append(pair.name)
            continue
        R, p = _pair_point(pair, poses)  # point contacts act at the child's point, as in constraint_matrix
        Ww = np.vstack([R @ W[:3], R @ W[3:]])
        for link, sign in ((pair.child, 1.0), (pair.parent, -1.0)):
            if link == GROUND:
                continue
            _, o = poses[link]
            J = np.eye(6)
            J[:3, 3:] = -_skew(p - o)
            block = (sign * (Ww.T @ J))[:, sel]
            if nr not in pattern:  # row and column offsets of an nr x k block, row-major like ravel()
                pattern[nr] = (np.repeat(np.arange(nr), k), np.tile(np.arange(k), nr))
            rows_i.append(row + pattern[nr][0])
            cols_i.append(col[link] + pattern[nr][1])
            vals.append(block.ravel())
        pairs.append(PairRows(pair.name, pair.kind, pair.type, pair.parent, pair.child,
                              tuple(range(row, row + nr)), pair.labels, W, pair.holonomic))
        row += nr
    n = model.n_coordinates
    if vals:
        A = scipy.sparse.coo_matrix((np.concatenate(vals), (np.concatenate(rows_i), np.concatenate(cols_i))),
                                    shape=(row, n)).tocsr()  # duplicates (a pair whose two ends are one body) add
        A.eliminate_zeros()
    else:
        A = scipy.sparse.csr_matrix((0, n))
    res = closure_residuals(model, q, poses)
    return SparseConstraintMatrix(A, model.bodies, tuple(pairs), tuple(free), model.planar, q,
                                  float(np.max(np.abs(res), initial=0.0)))


@dataclass(frozen=True)
class RowBasis:
    """A maximal set of independent rows of C (m × n) and the factorization that proves it.

    ``independent``: sorted row indices I, |I| = rank(C); ``dependent``: the other p rows (each in span of C_I).
    C_I^T E = Q R with R square upper triangular (``r_factor``), ``q_operator`` Householder Q (n × n),
    ``column_order`` E as indices into I. ``sigma_min_estimate``: σ_min(R) by inverse iteration.
    """

    independent: np.ndarray
    dependent: np.ndarray
    q_operator: object = field(repr=False)
    r_factor: scipy.sparse.csc_matrix = field(repr=False)
    column_order: np.ndarray = field(repr=False)
    sigma_min_estimate: float
    smallest_pivot: float

    @property
    def rank(self) -> int:
        return int(self.independent.size)

    @functools.cached_property
    def _r_solver(self):
        """Triangular solves with R (and Rᵀ) through SuperLU in its natural order (no fill, no pivoting)."""
        return scipy.sparse.linalg.splu(self.r_factor, permc_spec="NATURAL", diag_pivot_thresh=0.0,
                                        options={"SymmetricMode": True})

    def solve_transposed(self, rhs: np.ndarray) -> np.ndarray:
        """μ (|I| × k, rows in the order of ``independent``) with C_Iᵀ μ = rhs (n × k) in the least-squares sense."""
        rhs = np.asarray(rhs, dtype=float).reshape(rhs.shape[0], -1)
        r = self.rank
        mu = np.zeros((r, rhs.shape[1]))
        if r == 0:
            return mu
        lu = self._r_solver
        for j in range(rhs.shape[1]):
            mu[self.column_order, j] = lu.solve(self.q_operator.rmatvec(rhs[:, j])[:r])
        return mu

    def solve(self, rhs: np.ndarray) -> np.ndarray:
        """x (n × k) with C_I x = rhs (|I| × k, rows in the order of ``independent``): the least-norm solution,
        C_I = (Q R E^T)^T restricted to its first r columns of Q."""
        rhs = np.asarray(rhs, dtype=float).reshape(rhs.shape[0], -1)
        r, n = self.rank, self.q_operator.shape[0]
        x = np.zeros((n, rhs.shape[1]))
        if r == 0:
            return x
        lu = self._r_solver
        for j in range(rhs.shape[1]):
            u = np.zeros(n)
            u[:r] = lu.solve(rhs[self.column_order, j], trans="T")
            x[:, j] = self.q_operator.matvec(u)
        return x


def largest_singular_value(A: scipy.sparse.spmatrix) -> float:
    """σ_max(A) by Lanczos iteration (dense SVD for tiny matrices)."""
    m, n = A.shape
    if m == 0 or n == 0 or A.nnz == 0:
        return 0.0
    if min(m, n) <= 8:
        return float(np.linalg.norm(A.toarray(), 2))
    s = scipy.sparse.linalg.svds(A, k=1, return_singular_vectors=False, tol=1e-6, random_state=0)
    return float(s[0])


_QUIET = threading.Lock()


class SparseQRUnavailable(SolvabilityError):
    """The QR route was needed and the optional SuiteSparseQR wheel (``pyspqr``, GPL) is not installed."""


SPARSE_QR_HINT = "pip install 'vtm_dynamics[sparse-qr]' (pyspqr, GPL-licensed)"


def _spqr(A: scipy.sparse.csc_matrix):
    """pyspqr.qr with CHOLMOD's diagnostic printout (written to file descriptor 1 by the C library) discarded.

    ``pyspqr`` is optional (GPL; this package is Apache-2.0): without it, :class:`SparseQRUnavailable`."""
    try:
        import pyspqr  # a wheel with SuiteSparse inside; imported here so the other routes never need it
    except ImportError:
        raise SparseQRUnavailable(
            "rank decision unclear: the hub and square selections gave no certified row basis, and the QR route "
            f"needs the optional SuiteSparseQR: {SPARSE_QR_HINT}") from None

    with _QUIET:
        sys.stdout.flush()
        saved = os.dup(1)
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, 1)
            return pyspqr.qr(A)
        finally:
            os.dup2(saved, 1)
            os.close(saved)
            os.close(devnull)


def _leading_columns(R: scipy.sparse.spmatrix, tol: float) -> tuple[np.ndarray, np.ndarray]:
    """Columns that lead a row of R (first entry above ``tol``) and the size of that entry.

    In R of a (squeezed, Heath) QR of A E, a column that leads no row lies, up to ``tol``, in the span of the
    columns before it; the leading columns are the candidates for an independent set.
    """
    R = scipy.sparse.csr_matrix(R)
    R.sort_indices()
    big = np.abs(R.data) > tol
    if not np.any(big):
        return np.zeros(0, dtype=int), np.zeros(0)
    row_of = np.repeat(np.arange(R.shape[0]), np.diff(R.indptr))[big]
    cols, vals = R.indices[big], np.abs(R.data[big])
    first = np.flatnonzero(np.r_[True, row_of[1:] != row_of[:-1]])  # indices sorted within rows
    lead_cols, lead_vals = cols[first], vals[first]
    order = np.lexsort((-lead_vals, lead_cols))
    lead_cols, lead_vals = lead_cols[order], lead_vals[order]
    keep = np.r_[True, lead_cols[1:] != lead_cols[:-1]]
    return lead_cols[keep], lead_vals[keep]


def _sigma_min_triangular(R: scipy.sparse.csc_matrix, iterations: int = 30) -> tuple[float, np.ndarray]:
    """σ_min of a square nonsingular upper triangular R by inverse iteration on (R^T R)^{-1} (an upper bound
    that converges from above; tiny pivots give a tiny bound at once) and its right singular vector."""
    r = R.shape[0]
    if r == 0:
        return float("inf"), np.zeros(0)
    lu = scipy.sparse.linalg.splu(R.tocsc(), permc_spec="NATURAL", diag_pivot_thresh=0.0,
                                  options={"SymmetricMode": True})
    x = np.random.default_rng(SKETCH_SEED).standard_normal(r)
    x /= np.linalg.norm(x)
    est = float("inf")
    for _ in range(iterations):
        y = lu.solve(lu.solve(x, trans="T"))
        ny = float(np.linalg.norm(y))
        if not np.isfinite(ny) or ny == 0.0:
            return 0.0, x
        new = 1.0 / np.sqrt(ny)
        x = y / ny
        if abs(new - est) <= 1e-3 * new:
            return new, x
        est = new
    return est, x


_NEAR_NULL_BLOCK = 8  # near-null directions sought at once; a Heath QR typically keeps a few dependent rows


def _rows_carrying_near_null_space(R: scipy.sparse.csc_matrix, vec: np.ndarray, tol: float,
                                   iterations: int = 12) -> np.ndarray:
    """Columns of R (d ≥ 1) whose deletion removes the right singular directions of R below ``tol``.

    Block inverse iteration on (R^T R)^{-1} from ``vec`` (σ_min's vector) and random vectors, Rayleigh-Ritz by an
    SVD of R X; the d Ritz vectors below ``tol`` (at least σ_min's) pick d columns by a pivoted QR of their
    transposes (a well-conditioned d × d block, so deleting those columns removes the d directions). One QR per
    repair instead of one per dependent row (10,000 random bodies kept about ten dependent rows: ten QRs of 15 s).
    """
    r = R.shape[0]
    b = min(_NEAR_NULL_BLOCK, r)
    lu = scipy.sparse.linalg.splu(R.tocsc(), permc_spec="NATURAL", diag_pivot_thresh=0.0,
                                  options={"SymmetricMode": True})
    X = np.random.default_rng(SKETCH_SEED + 2).standard_normal((r, b))
    X[:, 0] = vec
    X, _ = np.linalg.qr(X)
    for _ in range(iterations):
        Y = lu.solve(lu.solve(X, trans="T"))
        if not np.all(np.isfinite(Y)):
            break
        X, _ = np.linalg.qr(Y)
    _, sv, Vt = np.linalg.svd(R @ X, full_matrices=False)
    near = X @ Vt.T[:, sv <= tol] if np.any(sv <= tol) else X @ Vt.T[:, [-1]]
    _, _, piv = scipy.linalg.qr(near.T, mode="economic", pivoting=True)
    return piv[: near.shape[1]]


def row_basis(A: scipy.sparse.spmatrix, tol: float) -> RowBasis:
    """Independent rows of A at absolute tolerance ``tol`` by SuiteSparseQR of A^T (Heath's rank detection).

    A row of A (column of A^T) that leads no row of R above ``tol`` lies within ``tol`` in the span of the rows
    pivoted before it and is dropped; the remaining rows are factorized again until every one leads a row of R. Heath's method is not
    rank-revealing in general, so the result is accepted only if σ_min(R) (inverse iteration) exceeds ``tol``
    and every other row lies within ``tol`` of span(C_I); otherwise rows are dropped or added (module docstring).
    When rows farther than ``tol`` from the others' span give, added, a σ_min below ``tol``, the two tests disagree
    and the repair cannot settle: a candidate set seen before (a certain cycle: each step is a function of the
    set), or an addition that reaches no larger set than an earlier one which σ_min cut back (no progress),
    ends it at once with :class:`SolvabilityError` ("rank decision unclear: ..." naming the rows and the gap).
    """
    A = scipy.sparse.csr_matrix(A)
    m, n = A.shape
    cand = np.arange(m)
    seen: dict[bytes, int] = {}  # candidate set -> its place in ``history``
    history: list[tuple[str, np.ndarray, float, float]] = []  # (added | dropped, rows, figure range)
    peak, peak_at, stalls = -1, 0, 0  # largest set an addition reached, where in ``history``, re-additions to it
    swaps = 0  # drops of a settled but ill-conditioned set
    t0 = time.perf_counter()
    for attempt in range(_MAX_REPAIRS):
        if attempt > 0:  # from here on the next set is a function of this one: a repeat is a cycle, for ever
            key = cand.tobytes()
            if key in seen:
                raise SolvabilityError(_cycle_message(history[seen[key]:], tol))
            seen[key] = len(history)
        _LOG.debug("row basis: attempt %d, %d of %d rows, %.1f s", attempt, cand.size, m, time.perf_counter() - t0)
        if cand.size == 0 or A[cand].nnz == 0:
            cand = np.zeros(0, dtype=int)
            Q, Rsq, perm, smin, piv = None, scipy.sparse.csc_matrix((0, 0)), np.zeros(0, dtype=int), float("inf"), 0.0
        else:
            Q, R, E = _spqr(scipy.sparse.csc_matrix(A[cand].T))
            R = scipy.sparse.csc_matrix(R)
            perm = np.asarray(getattr(E, "permutation", np.arange(cand.size)))
            live, pivots = _leading_columns(R, tol)
            if live.size != cand.size or R.shape[0] < cand.size:
                if attempt == 0 or live.size == 0:
                    cand = np.sort(cand[perm[live]])  # drop the rows that lead no row of R
                else:  # repairing: one row at a time
                    first = int(np.setdiff1d(np.arange(cand.size), live).min())
                    history.append(("dropped", cand[[perm[first]]], float("nan"), float("nan")))
                    cand = np.delete(cand, perm[first])
                continue
            Rsq = R[: cand.size][:, np.arange(cand.size)]
            (smin, vec), piv = _sigma_min_triangular(Rsq), float(pivots.min())
            _LOG.debug("row basis: %d rows, sigma_min %.3g (tol %.3g)", cand.size, smin, tol)
            if smin <= tol:  # the kept rows are dependent: drop rows that carry the near-null space of R
                drop = perm[_rows_carrying_near_null_space(Rsq, vec, tol)]
                history.append(("dropped", cand[drop], smin, smin))
                _LOG.debug("row basis: dropping %d rows, sigma_min %.3g <= tol %.3g", drop.size, smin, tol)
                cand = np.delete(cand, drop)
                continue
        # every other row must lie in span(C_I): first for random combinations of them (one least-squares residual
        # per column; nonzero with probability one if any row is outside), row by row only if that fails
        rest = np.setdiff1d(np.arange(m), cand)
        leak = _combined_outside(A, rest, Q, cand.size) if rest.size else 0.0
        if leak <= tol / RANK_GAP and smin < _SIGMA_MARGIN * tol and cand.size and swaps < _MAX_SWAPS:
            # the rank is settled but the greedy set is ill-conditioned (C itself may have a clear gap): drop the
            # rows carrying its directions below the margin; the outside test then adds others back
            swaps += 1
            drop = perm[_rows_carrying_near_null_space(Rsq, vec, _SIGMA_MARGIN * tol)]
            history.append(("dropped", cand[drop], smin, smin))
            _LOG.debug("row basis: swap, dropping %d rows, sigma_min %.3g < %g tol", drop.size, smin, _SIGMA_MARGIN)
            cand = np.delete(cand, drop)
            continue
        if leak <= tol:
            _require_gap(smin, leak, tol)
            return RowBasis(cand, rest, Q, Rsq, perm, smin, piv)
        outside, parts = _outside_rows(A, rest, Q, cand.size, tol)
        if outside.size == 0:
            _require_gap(smin, leak, tol)
            return RowBasis(cand, rest, Q, Rsq, perm, smin, piv)
        add = _independent_columns(parts, tol)
        dist = np.linalg.norm(parts[:, add], axis=0)
        history.append(("added", outside[add], float(dist.min()), float(dist.max())))
        _LOG.debug("row basis: %d rows outside, adding %d (distances %.3g..%.3g, tol %.3g)", outside.size,
                   add.size, dist.min(), dist.max(), tol)
        # no progress: an addition reaching no larger set than an earlier one, which σ_min then cut back
        if cand.size + add.size > peak:
            peak, peak_at, stalls = cand.size + add.size, len(history) - 1, 0
        elif (len(history) > 1 and np.isfinite(history[-2][2]) and history[-2][0] == "dropped"
              and smin < _FRESH_START * tol):  # a well-conditioned set after the drop: a new start, not a stall
            stalls += 1
            if stalls >= _MAX_STALLS:
                raise SolvabilityError(_cycle_message(history[peak_at:], tol))
        cand = np.sort(np.concatenate([cand, outside[add]]))
    raise SolvabilityError(f"rank decision unclear: sparse QR did not settle the independent rows (tolerance {tol:.3g})")


def _require_gap(smin: float, leak: float, tol: float) -> None:
    """Accept a settled row basis only with a clear gap around ``tol``; else "rank decision unclear".

    The dense rank counts σ_i(C) > tol. The basis gives σ_r(C) ≥ σ_min(C_I) (an inverse-iteration estimate) and
    σ_{r+1}(C) ≤ |E|_F, E the parts of the other rows outside span(C_I), which random combinations estimate
    (``leak``). Both are estimates, so near the tolerance they can miss the dense count (synthetic matrices with
    singular values within 3x of tol did, all on the side of the leak: one below the dense rank). The leak must
    stay below tol / ``RANK_GAP``; σ_min, converged to 0.1 %, only above ``_SIGMA_MARGIN`` · tol (the random
    family at 1,000 bodies keeps σ_min at 6x tol with a leak at 1e-3 tol: a clear gap on the dropped side).
    Exactly redundant models leak at rounding level: unaffected.
    """
    if smin < _SIGMA_MARGIN * tol or leak > tol / RANK_GAP:
        raise SolvabilityError(
            f"rank decision unclear: no clear gap at the tolerance {tol:.2g} (smallest kept singular value about "
            f"{smin:.2g}, other rows up to about {leak:.2g} outside the span of the kept ones; required: above "
            f"{_SIGMA_MARGIN:g}x and below 1/{RANK_GAP:g} of it)")


def _cycle_message(cycle: list[tuple[str, np.ndarray, float, float]], tol: float) -> str:
    """One line for a repair that cycles or makes no progress: the rows it adds and drops in turn, the gap.

    Each of those rows lies farther than ``tol`` from the span of the others (so it is added), yet with them the
    smallest singular value is below ``tol`` (so some are dropped): the rank at this tolerance is not decided.
    """
    added = np.unique(np.concatenate([r for a, r, _, _ in cycle if a == "added"] + [np.zeros(0, dtype=int)]))
    dropped = np.unique(np.concatenate([r for a, r, _, _ in cycle if a == "dropped"] + [np.zeros(0, dtype=int)]))
    both = np.intersect1d(added, dropped).size
    dist = [v for a, _, lo, hi in cycle if a == "added" for v in (lo, hi)]
    smin = [v for a, _, v, _ in cycle if a == "dropped" and np.isfinite(v)]
    gap = (f"distances from the span of the others {min(dist):.2g}..{max(dist):.2g}" if dist else "no row added")
    gap += f", smallest singular value with them {min(smin):.2g}..{max(smin):.2g}" if smin else ""
    return (f"rank decision unclear: the independent rows do not settle, {added.size} constraint rows added and "
            f"{dropped.size} dropped in turn, {both} of them both ways ({gap}; tolerance {tol:.2g}); a different "
            "rank_rtol, or an exactly assembled configuration, may decide it")


def _combined_outside(A: scipy.sparse.csr_matrix, rest: np.ndarray, Q, r: int) -> float:
    """Largest part outside span(C_I) of standard normal random combinations of the rows ``rest``."""
    xi = np.random.default_rng(SKETCH_SEED + 1).standard_normal((rest.size, 4))  # inside parts cancel exactly
    Y = np.asarray(A[rest].T @ xi)
    if Q is None:
        return float(np.linalg.norm(Y, axis=0).max())
    return float(max(np.linalg.norm(Q.rmatvec(Y[:, j])[r:]) for j in range(Y.shape[1])))


def _outside_part(A: scipy.sparse.csr_matrix, d: int, Q, r: int) -> np.ndarray:
    """The part of row d of A outside the span of the r rows factorized in Q, in Q's coordinates [units of A]."""
    c = A[d].toarray().ravel()
    return c if Q is None else Q.rmatvec(c)[r:]


def _outside_rows(A: scipy.sparse.csr_matrix, rest: np.ndarray, Q, r: int, tol: float
                  ) -> tuple[np.ndarray, np.ndarray]:
    """The rows of ``rest`` farther than ``tol`` from span(C_I), and their outside parts (columns).

    Group testing: a random combination of a group of rows has an outside part above ``tol`` (with probability
    one) iff some row of the group has; groups that pass are halved until single rows remain, each measured
    exactly. k rows outside among |rest| cost about 8 k log2|rest| products with Q instead of |rest|; once the
    halving has spent |rest| products (many rows outside) the remaining groups are measured row by row.
    """
    found, parts = [], []
    groups = [rest]
    budget = rest.size  # products by Q; many rows outside make halving dearer than measuring each row
    while groups:
        group = groups.pop()
        if budget <= 0 or group.size == 1:
            for d in group:
                part = _outside_part(A, int(d), Q, r)
                if np.linalg.norm(part) > tol:
                    found.append(int(d))
                    parts.append(part)
            budget -= group.size
        elif _combined_outside(A, group, Q, r) > tol:
            budget -= 4
            half = group.size // 2
            groups.extend((group[half:], group[:half]))
        else:
            budget -= 4
    if not found:  # a random combination can cancel by chance: measure every row
        all_parts = [_outside_part(A, int(d), Q, r) for d in rest]
        keep = [i for i, v in enumerate(all_parts) if np.linalg.norm(v) > tol]
        found, parts = [int(rest[i]) for i in keep], [all_parts[i] for i in keep]
    if not found:
        return np.zeros(0, dtype=int), np.zeros((0, 0))
    return np.asarray(found), np.column_stack(parts)


def _independent_columns(parts: np.ndarray, tol: float) -> np.ndarray:
    """Indices of columns of ``parts`` independent at ``tol`` (pivoted QR; the first pivot always).

    The columns are the parts of rows outside span(C_I); adding the rows of an independent subset keeps the
    candidate set independent, so the repair neither adds two rows that repeat one another nor cycles.
    """
    _, Rp, piv = scipy.linalg.qr(parts, mode="economic", pivoting=True)
    d = np.abs(np.diag(Rp))
    k = max(1, int(np.sum(d > tol)))
    return np.sort(piv[:k])


def independent_rows(A: scipy.sparse.spmatrix, tol: float, hub_min_nonzeros: int | None = None,
                     start: tuple[np.ndarray, np.ndarray] | None = None):
    """The row basis of A, the first of these that is certified at ``tol``: hub elimination when A has dense hub
    columns (:mod:`~vtm_dynamics.core.reactions.hub_row_basis`), a square submatrix repaired by swaps
    (:mod:`~vtm_dynamics.core.reactions.square_row_basis`), the QR of Aᵀ (:func:`row_basis`, which decides or
    raises "rank decision unclear"). Without the optional SuiteSparseQR the hub route, which factorizes its
    hub-free part by the QR, gives no basis (its "unclear" is caught there) and the square selection decides.
    ``start``: rows and columns the square selection begins with (:func:`_start_from`)."""
    from vtm_dynamics.core.reactions.hub_row_basis import HUB_MIN_NONZEROS, hub_row_basis  # they build on this module
    from vtm_dynamics.core.reactions.square_row_basis import square_row_basis

    basis = hub_row_basis(A, tol, HUB_MIN_NONZEROS if hub_min_nonzeros is None else hub_min_nonzeros)
    if basis is None:
        basis = square_row_basis(A, tol, start=start)
    return basis if basis is not None else row_basis(A, tol)


def _start_from(basis, rows: list[int]) -> tuple[np.ndarray, np.ndarray] | None:
    """A square basis of C[rows] as a start for the basis of C: its rows renumbered as rows of C, its columns.
    None for the other kinds of basis."""
    columns = getattr(basis, "columns", None)
    return None if columns is None else (np.asarray(rows)[basis.independent], columns)


def left_null_sketch(A: scipy.sparse.csr_matrix, basis: RowBasis, columns: int = SKETCH_COLUMNS,
                     seed: int = SKETCH_SEED) -> NullSketch:
    """Λ0 (m × min(columns, p)): random vectors of the left null space of C (C^T λ = 0), and an orthonormal basis
    of their span (:mod:`~vtm_dynamics.core.reactions.left_null_bounds`).

    λ_D = ξ on the dependent rows D (standard normal), λ_I = −μ with C_I^T μ = C_D^T ξ solved by the row basis.
    Every left null vector has this form, so the columns span a random subspace of it.
    """
    m = A.shape[0]
    D, I = basis.dependent, basis.independent
    if D.size == 0:
        return NullSketch(np.zeros((m, 0)), np.zeros((m, 0)), np.zeros((0, 0)))
    columns = min(columns, D.size)  # p ≤ columns: the sketch is a basis of the whole left null space
    xi = np.random.default_rng(seed).standard_normal((D.size, columns))
    L = np.zeros((m, columns))
    L[D] = xi
    if I.size:
        L[I] = -basis.solve_transposed(np.asarray(A[D].T @ xi))  # n × columns right-hand sides
    Qs, _ = np.linalg.qr(L)
    return NullSketch(L, Qs, xi)


def _certified_bounds(A: scipy.sparse.csr_matrix, basis, sketch: NullSketch, pairs, blocks: list[np.ndarray],
                      smax: float, rank_rtol: float) -> tuple[list[Bounds], np.ndarray]:
    """Per pair, bounds of |B_X|_F / σ_max on one side of the bar 10 rtol; per row, whether N_i is nonzero
    (|N_i| > ``_DIRECTION_TOL``): the sketch's bounds, those near the bar refined, the rest "unclear"
    (:mod:`~vtm_dynamics.core.reactions.left_null_bounds`)."""
    m = A.shape[0]
    if sketch.columns == 0 or smax <= 0:
        return [Bounds(0.0, 0.0, False) for _ in pairs], np.zeros(m, dtype=bool)
    bar = 10.0 * rank_rtol
    items = [Item(pr.rows, CXd / smax, bar) for pr, CXd in zip(pairs, blocks)]
    bounds = [sketch_bounds(sketch, it) for it in items]
    row_lower = np.linalg.norm(sketch.basis, axis=1)
    row_upper = row_lower if sketch.complete else np.maximum(
        row_lower, UPPER_FACTOR * np.linalg.norm(sketch.samples, axis=1) / np.sqrt(sketch.columns))
    releasable = row_lower > _DIRECTION_TOL
    open_pairs = [k for k, (b, it) in enumerate(zip(bounds, items)) if not b.decided(it.bar)]
    open_rows = np.flatnonzero(~releasable & (row_upper > _DIRECTION_TOL))
    if open_pairs or open_rows.size:
        _LOG.debug("solvability: %d pair(s) and %d row(s) near the bar, refined", len(open_pairs), open_rows.size)
        todo = [items[k] for k in open_pairs] + [Item((int(i),), np.ones((1, 1)), _DIRECTION_TOL) for i in open_rows]
        refined = refine(A, basis, sketch, todo)
        for k, b in zip(open_pairs, refined):
            bounds[k] = b
        for i, b in zip(open_rows, refined[len(open_pairs):]):
            if not b.decided(_DIRECTION_TOL):
                raise SolvabilityError(f"rank decision unclear: whether row {int(i)} is releasable (|N_i| in "
                                       f"[{b.lower:.3g}, {b.upper:.3g}] around {_DIRECTION_TOL:g})")
            releasable[i] = b.lower > _DIRECTION_TOL
    for pr, b in zip(pairs, bounds):
        if not b.decided(bar):
            raise SolvabilityError(f"rank decision unclear: the verdict of pair {pr.name[:40]!r} (|B_X| / sigma_max "
                                   f"in [{b.lower:.3g}, {b.upper:.3g}] around {bar:.3g})")
    return bounds, releasable


def _direction_splits(L: np.ndarray, pairs) -> list[tuple[np.ndarray, np.ndarray]]:
    """``_split_directions(L_X, _DIRECTION_TOL)`` of every pair: the singular values by one stacked SVD per row
    count; only pairs with some but not all rows' directions indeterminate need their own bases."""
    out: list[tuple[np.ndarray, np.ndarray] | None] = [None] * len(pairs)
    by_rows: dict[int, list[int]] = {}
    for k, pr in enumerate(pairs):
        by_rows.setdefault(len(pr.rows), []).append(k)
    for size, idx in by_rows.items():
        stacked = np.stack([L[list(pairs[k].rows)] for k in idx])
        dims = np.sum(np.linalg.svd(stacked, compute_uv=False) > _DIRECTION_TOL, axis=1)
        for k, d in zip(idx, dims):
            if d == 0:
                out[k] = (np.zeros((size, 0)), np.eye(size))
            elif d == size:
                out[k] = (np.eye(size), np.zeros((size, 0)))
            else:
                out[k] = _split_directions(L[list(pairs[k].rows)], tol=_DIRECTION_TOL)
    return out  # type: ignore[return-value]


def _pair_block(A: scipy.sparse.csr_matrix, rows: tuple[int, ...]) -> np.ndarray:
    """C_X as a dense matrix over the columns it touches (a pair's rows are consecutive; indices sorted)."""
    lo, hi = A.indptr[rows[0]], A.indptr[rows[-1] + 1]
    support, inverse = np.unique(A.indices[lo:hi], return_inverse=True)
    block = np.zeros((len(rows), support.size))
    row_of = np.repeat(np.arange(len(rows)), np.diff(A.indptr[rows[0]:rows[-1] + 2]))
    np.add.at(block, (row_of, inverse), A.data[lo:hi])
    return block


def _block_ranks(blocks: list[np.ndarray], tol: float) -> list[int]:
    """numerical_rank(block, atol=tol) of every block, by one stacked SVD per block shape."""
    ranks = [0] * len(blocks)
    by_shape: dict[tuple[int, int], list[int]] = {}
    for i, b in enumerate(blocks):
        if b.size:
            by_shape.setdefault(b.shape, []).append(i)
    for idx in by_shape.values():
        s = np.linalg.svd(np.stack([blocks[i] for i in idx]), compute_uv=False)
        counts = np.where(s[:, 0] == 0.0, 0, np.sum(s > tol, axis=1))
        for i, c in zip(idx, counts):
            ranks[i] = int(c)
    return ranks


def analyze_sparse_constraint_matrix(
    C: SparseConstraintMatrix, rank_rtol: float = DEFAULT_RANK_RTOL, model_name: str = "",
    hub_min_nonzeros: int | None = None,
) -> SolvabilityReport:
    """Rank, redundancy, per-pair verdicts, directions and a release set of a sparse C (module docstring).

    The report has the fields of the dense analysis; ``cross_checked`` is False and ``rank_criterion_dimension``
    None (the per-pair rank criterion is the dense path's cross-check), ``qr_residual`` is the sketch estimate,
    and the kept/dropped singular values are the norms of the kept/dropped rows of R (the same rank gap, estimated).
    """
    if not 0.0 < rank_rtol < 1.0:
        raise SolvabilityError(f"rank_rtol: must be in (0, 1), got {rank_rtol}")
    A = C.matrix.tocsr()
    m, n = A.shape
    smax = largest_singular_value(A)
    tol = rank_rtol * smax
    hol = [i for pr in C.pairs if pr.holonomic for i in pr.rows]
    non = [i for pr in C.pairs if not pr.holonomic for i in pr.rows]
    # with nonholonomic rows the ranks of both kinds are reported too; the basis of the holonomic rows (the
    # larger part) then starts the basis of all rows, which costs little more
    hol_basis = independent_rows(A[hol], tol, hub_min_nonzeros) if non else None
    basis = independent_rows(A, tol, hub_min_nonzeros, _start_from(hol_basis, hol) if non else None)
    r = basis.rank
    p = m - r
    sketch = left_null_sketch(A, basis)
    L = sketch.basis
    if p and smax > 0:
        leak = float(np.linalg.norm(A.T @ L) / np.sqrt(L.shape[1]))
        if leak > 1e3 * max(tol, np.finfo(float).eps * smax):
            raise SolvabilityError(f"rank decision unclear: |C^T N| = {leak:.3g} above tolerance {tol:.3g}")
    # p > columns: L spans a random subspace of the left null space; E|B L|_F^2 = (columns / p) |B N|_F^2
    scale = np.sqrt(p / L.shape[1]) if p else 1.0
    A.sort_indices()
    blocks = [_pair_block(A, pr.rows) for pr in C.pairs]
    ranks = _block_ranks(blocks, tol)
    bounds, releasable = _certified_bounds(A, basis, sketch, C.pairs, blocks, smax, rank_rtol)
    L = L * scale
    pairs = []
    splits = _direction_splits(L, C.pairs) if p else [(np.zeros((len(pr.rows), 0)), np.eye(len(pr.rows)))
                                                      for pr in C.pairs]
    for pr, CXd, rank_x, b, (indet, det) in zip(C.pairs, blocks, ranks, bounds, splits):
        rows = list(pr.rows)
        qr_ok = b.upper <= rank_rtol * 10.0  # decided: either this or b.lower above the bar
        qr_res = min(max(scale * b.lower, b.lower), b.upper)  # the sketch estimate, within the bounds
        if not qr_ok and indet.shape[1] == 0:
            raise SolvabilityError(f"rank decision unclear: pair {pr.name[:40]!r} is unsolvable (|B_X| >= "
                                   f"{b.lower:.3g} sigma_max) but the sketch shows no indeterminate direction")
        W = pr.wrench_basis
        det_labels = tuple(pr.labels[int(np.argmax(np.abs(e)))] for e in det.T if np.sum(np.abs(e) > 1e-9) == 1)
        pairs.append(PairSolvability(
            name=pr.name, kind=pr.kind, type=pr.type, parent=pr.parent, child=pr.child, rows=pr.rows,
            labels=pr.labels, holonomic=pr.holonomic, solvable=bool(qr_ok), qr_residual=qr_res,
            qr_solvable=bool(qr_ok), indeterminate_dimension=int(indet.shape[1]), rank_criterion_dimension=None,
            criteria_agree=True, pair_rank=rank_x,
            determined_directions=tuple(_vec(W @ e) for e in det.T),
            indeterminate_directions=tuple(_vec(W @ e) for e in indet.T),
            determined_labels=det_labels,
            releasable_rows=tuple(pr.labels[i - pr.rows[0]] for i in rows if releasable[i]),
        ))
    release: list[tuple[str, str]] = []
    if p:
        owner = {i: (pr.name, pr.labels[i - pr.rows[0]]) for pr in C.pairs for i in pr.rows}
        release = [owner[int(i)] for i in basis.dependent]
    return SolvabilityReport(
        model=model_name, planar=C.planar, n_bodies=len(C.bodies), n_coordinates=n,
        m_holonomic=len(hol), h_nonholonomic=len(non),
        rank_holonomic=hol_basis.rank if non else r,
        rank_nonholonomic=independent_rows(A[non], tol, hub_min_nonzeros).rank if non else 0,
        rank=r, redundancy=p, rank_rtol=rank_rtol, rank_tolerance=tol, sigma_max=smax,
        smallest_kept_singular_value=basis.sigma_min_estimate if r else 0.0,
        largest_dropped_singular_value=float(np.linalg.norm(A.T @ L, 2) / max(scale, 1.0)) if p else 0.0,
        closure_residual=C.closure_residual, cross_checked=False, pairs=tuple(pairs),
        free_pairs=C.free_pairs, release_set=tuple(release), q=None if C.q is None else tuple(float(x) for x in C.q),
    )

"""A certified set of independent rows of a sparse constraint matrix: the QR route of the sparse solvability path.

Wojtyra & Frączek 2013 decide rank(C) (eq. (7)) and the left null space of C (eq. (21)) with a dense SVD/QR. For a
sparse C (m × n, at most 12 nonzeros per row) this module finds independent rows I of C at the dense path's
absolute tolerance ``tol = rank_rtol · σ_max(C)`` (:func:`largest_singular_value`) without forming anything dense:

SuiteSparseQR (multifrontal QR, fill-reducing column order, Heath's rank detection) of C^T gives a candidate set
I (:func:`row_basis`). Heath's method is not rank-revealing in general (on the paper's robot a QR of C reports rank
21 instead of 20), so the set is checked and repaired until (a) σ_min(R) of C_I^T, by inverse iteration
(:func:`sigma_min_triangular`), exceeds ``tol`` (I independent), and (b) every other row lies within ``tol`` of
span(C_I) (tested on random combinations, row by row only if that fails). Then rank(C) = |I| at the dense path's
tolerance, and the other p rows D form a release set. The settled basis must also show a clear gap
(``_require_gap``: σ_min ≥ ``SIGMA_MARGIN`` tol, other rows within tol / ``RANK_GAP``). The greedy set can be
ill-conditioned where C is not (σ_min(C_I) near tol, σ_r(C) 10³-10⁵ tol): a settled set below the margin first has
the rows carrying its small directions swapped out (:func:`rows_carrying_near_null_space`, at most ``_MAX_SWAPS``
times; the outside test adds others back) before it is called unclear. A repair that cycles or makes no progress
(rows farther than tol from the others' span, yet σ_min below tol with them) is a :class:`SolvabilityError`
("rank decision unclear") at once, never a guess.

The hub elimination (:mod:`~vtm_dynamics.core.reactions.hub_row_basis`) and the square selection
(:mod:`~vtm_dynamics.core.reactions.square_row_basis`) build on the same constants and, for the hub-free part, on
:func:`row_basis`; :mod:`~vtm_dynamics.core.reactions.sparse_solvability` picks among the three. SuiteSparseQR
comes from the optional ``pyspqr`` wheel (GPL; the extra ``sparse-qr``); without it :func:`row_basis` raises
:class:`SparseQRUnavailable`.
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

from vtm_dynamics.core.reactions.solvability_report import SolvabilityError

_LOG = logging.getLogger(__name__)  # progress of long factorizations (DEBUG)
SKETCH_SEED = 20130153  # fixed: the same model always gives the same report
_MAX_REPAIRS = 40
RANK_GAP = 10.0  # the other rows of a settled basis must lie within tol / RANK_GAP of span(C_I)
SIGMA_MARGIN = 2.0  # and σ_min(C_I) (an estimate converging from above) must reach SIGMA_MARGIN · tol
_MAX_STALLS = 1  # re-additions to a set size that σ_min already cut back, before "unclear" (module docstring)
_MAX_SWAPS = 3  # drops of rows from a settled set whose σ_min is below SIGMA_MARGIN · tol (row_basis)
_FRESH_START = SIGMA_MARGIN  # ... counted only while the set they are added to has σ_min below this many tol


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


def sparse_qr(A: scipy.sparse.csc_matrix):
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


def sigma_min_triangular(R: scipy.sparse.csc_matrix, iterations: int = 30) -> tuple[float, np.ndarray]:
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


def rows_carrying_near_null_space(R: scipy.sparse.csc_matrix, vec: np.ndarray, tol: float,
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
            Q, R, E = sparse_qr(scipy.sparse.csc_matrix(A[cand].T))
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
            (smin, vec), piv = sigma_min_triangular(Rsq), float(pivots.min())
            _LOG.debug("row basis: %d rows, sigma_min %.3g (tol %.3g)", cand.size, smin, tol)
            if smin <= tol:  # the kept rows are dependent: drop rows that carry the near-null space of R
                drop = perm[rows_carrying_near_null_space(Rsq, vec, tol)]
                history.append(("dropped", cand[drop], smin, smin))
                _LOG.debug("row basis: dropping %d rows, sigma_min %.3g <= tol %.3g", drop.size, smin, tol)
                cand = np.delete(cand, drop)
                continue
        # every other row must lie in span(C_I): first for random combinations of them (one least-squares residual
        # per column; nonzero with probability one if any row is outside), row by row only if that fails
        rest = np.setdiff1d(np.arange(m), cand)
        leak = _combined_outside(A, rest, Q, cand.size) if rest.size else 0.0
        if leak <= tol / RANK_GAP and smin < SIGMA_MARGIN * tol and cand.size and swaps < _MAX_SWAPS:
            # the rank is settled but the greedy set is ill-conditioned (C itself may have a clear gap): drop the
            # rows carrying its directions below the margin; the outside test then adds others back
            swaps += 1
            drop = perm[rows_carrying_near_null_space(Rsq, vec, SIGMA_MARGIN * tol)]
            history.append(("dropped", cand[drop], smin, smin))
            _LOG.debug("row basis: swap, dropping %d rows, sigma_min %.3g < %g tol", drop.size, smin, SIGMA_MARGIN)
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
    stay below tol / ``RANK_GAP``; σ_min, converged to 0.1 %, only above ``SIGMA_MARGIN`` · tol (the random
    family at 1,000 bodies keeps σ_min at 6x tol with a leak at 1e-3 tol: a clear gap on the dropped side).
    Exactly redundant models leak at rounding level: unaffected.
    """
    if smin < SIGMA_MARGIN * tol or leak > tol / RANK_GAP:
        raise SolvabilityError(
            f"rank decision unclear: no clear gap at the tolerance {tol:.2g} (smallest kept singular value about "
            f"{smin:.2g}, other rows up to about {leak:.2g} outside the span of the kept ones; required: above "
            f"{SIGMA_MARGIN:g}x and below 1/{RANK_GAP:g} of it)")


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

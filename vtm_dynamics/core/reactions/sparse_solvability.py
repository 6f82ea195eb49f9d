"""Reaction solvability of large models: the constraint matrix kept sparse, rank and left null space without SVD.

Same question as :mod:`vtm_dynamics.core.reactions.solvability` (Wojtyra & Frączek 2013, Sect. 3): which pairs X
satisfy Z = X ⊕ Y. Every pair touches at most two bodies, so C (eq. (5)) has at most 12 nonzeros per row; the dense
SVD of C costs O(m n²) time and O(m n) memory (1,000 bodies: 0.9 GB, 150 s), this path the nonzeros of the factor.

1. Independent rows (:func:`independent_rows`): hub elimination where C has hub columns
   (:mod:`~vtm_dynamics.core.reactions.hub_row_basis`), else a square well-conditioned block C_IJ
   (:mod:`~vtm_dynamics.core.reactions.square_row_basis`), each certified by the gap rule of
   :mod:`~vtm_dynamics.core.reactions.row_basis`; if neither is, the QR route there (:func:`~.row_basis.row_basis`:
   SuiteSparseQR of C^T, checked and repaired until σ_min(C_I) > tol and every other row lies within tol of
   span(C_I)). Then rank(C) = |I| at the dense path's tolerance ``tol = rank_rtol · σ_max(C)``, and the other p
   rows D form a release set.
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
(the extra ``sparse-qr``); without it the QR route raises :class:`~.row_basis.SparseQRUnavailable`. Cost: the QR
of C^T fills in where many loops share a body (the comb's coupler couples every loop row: nonzeros of R grow as
bodies², 4.5 million at 3,000).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

import numpy as np
import pinocchio as pin
import scipy.sparse

from vtm_dynamics.core.reactions.absolute_coordinates import (
    GROUND,
    AbsoluteModel,
    PairRows,
    body_poses,
    closure_residuals,
    pair_point,
)
from vtm_dynamics.core.reactions.hub_row_basis import HUB_MIN_NONZEROS, hub_row_basis
from vtm_dynamics.core.reactions.left_null_bounds import (
    SKETCH_COLUMNS,
    UPPER_FACTOR,
    Bounds,
    Item,
    NullSketch,
    refine,
    sketch_bounds,
)
from vtm_dynamics.core.reactions.row_basis import SKETCH_SEED, RowBasis, largest_singular_value, row_basis
from vtm_dynamics.core.reactions.solvability_report import (
    DEFAULT_RANK_RTOL,
    PairSolvability,
    SolvabilityError,
    SolvabilityReport,
    rounded_components,
    split_directions,
)
from vtm_dynamics.core.reactions.square_row_basis import square_row_basis

_LOG = logging.getLogger(__name__)
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
        R, p = pair_point(pair, poses)  # point contacts act at the child's point, as in constraint_matrix
        Ww = np.vstack([R @ W[:3], R @ W[3:]])
        for link, sign in ((pair.child, 1.0), (pair.parent, -1.0)):
            if link == GROUND:
                continue
            _, o = poses[link]
            J = np.eye(6)
            J[:3, 3:] = -pin.skew(p - o)
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


def independent_rows(A: scipy.sparse.spmatrix, tol: float, hub_min_nonzeros: int | None = None,
                     start: tuple[np.ndarray, np.ndarray] | None = None):
    """The row basis of A, the first of these that is certified at ``tol``: hub elimination when A has dense hub
    columns (:mod:`~vtm_dynamics.core.reactions.hub_row_basis`), a square submatrix repaired by swaps
    (:mod:`~vtm_dynamics.core.reactions.square_row_basis`), the QR of Aᵀ (:func:`row_basis`, which decides or
    raises "rank decision unclear"). Without the optional SuiteSparseQR the hub route, which factorizes its
    hub-free part by the QR, gives no basis (its "unclear" is caught there) and the square selection decides.
    ``start``: rows and columns the square selection begins with (:func:`_start_from`)."""
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
    """``split_directions(L_X, _DIRECTION_TOL)`` of every pair: the singular values by one stacked SVD per row
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
                out[k] = split_directions(L[list(pairs[k].rows)], tol=_DIRECTION_TOL)
    return out  # type: ignore[return-value]


def pair_block(A: scipy.sparse.csr_matrix, rows: tuple[int, ...]) -> np.ndarray:
    """C_X as a dense matrix over the columns it touches (a pair's rows are consecutive; indices sorted)."""
    lo, hi = A.indptr[rows[0]], A.indptr[rows[-1] + 1]
    support, inverse = np.unique(A.indices[lo:hi], return_inverse=True)
    block = np.zeros((len(rows), support.size))
    row_of = np.repeat(np.arange(len(rows)), np.diff(A.indptr[rows[0]:rows[-1] + 2]))
    np.add.at(block, (row_of, inverse), A.data[lo:hi])
    return block


def block_ranks(blocks: list[np.ndarray], tol: float) -> list[int]:
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
    blocks = [pair_block(A, pr.rows) for pr in C.pairs]
    ranks = block_ranks(blocks, tol)
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
            determined_directions=tuple(rounded_components(W @ e) for e in det.T),
            indeterminate_directions=tuple(rounded_components(W @ e) for e in indet.T),
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

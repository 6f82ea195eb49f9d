"""Certified per-pair verdicts from a sketch of the left null space: a lower bound, an upper estimate, refinement.

Wojtyra & Frączek 2013, eq. (27): the reaction of pair X is solvable iff B_X = C_X^T N_X = 0, N an orthonormal
basis of null(C^T); the dense path decides |B_X|_F / σ_max ≤ 10 rtol. A row i of C is releasable iff the row
N_i is nonzero (|N_i| > 1e-8, N's entries are O(1)).

Parametrization. With a row basis I (rank r) and the other rows D (p of them), every left null vector is
λ = G η (η ∈ R^p) with λ_D = η and λ_I = −W^T η, where W = C_D C_I^+ (p × r): W^T η = μ solves C_I^T μ = C_D^T η,
and W y = C_D x for any x with C_I x = y (because C_D = W C_I). Then G^T G = M = I + W W^T ⪰ I and N = G L^{-T}
(L L^T = M), so N N^T = G M^{-1} G^T and, with G_X the rows X of G,

    |B_X|_F² = tr(C_X^T G_X M^{-1} G_X^T C_X),      |N_i|² = g_i^T M^{-1} g_i (g_i = G_i^T).

M is not formed: it is as ill-conditioned as the basis makes W (|W| = 705 at 1,000 random bodies, 3,234 at
10,000, measured), which is why the plain sketch estimate √(p/s) |C_X^T Λ_X| was off by factors up to 10^5
(it called a pair with |B_X| = 537 rtol solvable at 10,000 bodies, 5.6 rtol; found with the exact N).

Bounds from the sketch Λ0 = G Ξ (Ξ: p × s standard normal, fixed seed) and Q, the orthonormal basis of its range:

* lower, deterministic: Q Q^T = G Ξ (Ξ^T M Ξ)^{-1} Ξ^T G^T ⪯ G M^{-1} G^T (a Galerkin projection), so
  |C_X^T Q_X|_F ≤ |B_X|_F and |Q_i| ≤ |N_i|;
* upper, estimated: M ⪰ I gives |B_X|_F ≤ |C_X^T G_X|_F, and E |C_X^T Λ0_X|_F² = s |C_X^T G_X|_F². With s = 16
  columns, |C_X^T Λ0_X|_F² / s falls below 1/20 of its mean with probability at most P(χ²_16 < 0.8) ≈ 1e-8
  (a rank-one C_X^T G_X is the worst case), so √20 |C_X^T Λ0_X|_F / √s bounds |B_X|_F but for that chance.

A pair whose lower bound is above the bar is unsolvable; one whose upper estimate is at or below it is solvable
(a wrong "solvable" needs the estimate 20 times below its mean, and then a value near the bar). The others are
refined (:func:`refine`) by a Galerkin projection on V = span(Ξ, G_S^T, M G_S^T, ...) (S: the undecided pairs and
rows): with H = V^T M V, Y = V H^{-1} V^T G_S^T and R = G_S^T − M Y (V^T R = 0),

    G_S M^{-1} G_S^T = G_S Y + R^T M^{-1} R,   0 ⪯ R^T M^{-1} R ⪯ R^T R   (M ⪰ I),

two-sided bounds that meet as V grows. What no step decides is "rank decision unclear", never a guess.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import scipy.sparse

from vtm_dynamics.core.reactions.solvability_report import SolvabilityError

SKETCH_COLUMNS = 16  # the upper estimate's failure chance is P(χ²_s < s/20): 1e-8 at 16 (module docstring)
UPPER_FACTOR = np.sqrt(20.0)  # |B_X| ≤ UPPER_FACTOR · |C_X^T Λ0_X| / √s but for that chance
REFINE_STEPS = 4  # Krylov blocks added to V before an undecided item is "unclear"


@dataclass(frozen=True)
class NullSketch:
    """The sketch of the left null space: ``samples`` Λ0 = G Ξ (m × s), ``basis`` Q (m × s, orthonormal,
    range Λ0), ``xi`` Ξ (p × s), in the row order of C (module docstring)."""

    samples: np.ndarray = field(repr=False)
    basis: np.ndarray = field(repr=False)
    xi: np.ndarray = field(repr=False)

    @property
    def columns(self) -> int:
        return int(self.samples.shape[1])

    @property
    def complete(self) -> bool:
        """Whether s = p: Q is then an orthonormal basis of the whole left null space, and its bounds exact."""
        return self.columns == self.xi.shape[0]


@dataclass(frozen=True)
class Item:
    """One quantity |C_X^T N_X|_F to place against ``bar``: the rows X of C and the k × q matrix C_X (a pair's
    block over the columns it touches, divided by σ_max; [[1]] for one row of N)."""

    rows: tuple[int, ...]
    coefficients: np.ndarray = field(repr=False)
    bar: float


@dataclass(frozen=True)
class Bounds:
    """lower ≤ |C_X^T N_X|_F ≤ upper (``upper`` an estimate where ``refined`` is False: module docstring)."""

    lower: float
    upper: float
    refined: bool

    def decided(self, bar: float) -> bool:
        return self.lower > bar or self.upper <= bar


def sketch_bounds(sketch: NullSketch, item: Item) -> Bounds:
    """The lower bound and the upper estimate of one item from the sketch (module docstring); both the exact value
    when the sketch is complete (p ≤ s)."""
    rows = list(item.rows)
    lower = float(np.linalg.norm(item.coefficients.T @ sketch.basis[rows]))
    if sketch.complete:
        return Bounds(lower, lower, True)
    upper = float(UPPER_FACTOR * np.linalg.norm(item.coefficients.T @ sketch.samples[rows]) / np.sqrt(sketch.columns))
    return Bounds(lower, max(lower, upper), False)


class _NullOperators:
    """G's rows and M = I + W W^T applied through the row basis (its ``solve_transposed`` and ``solve``)."""

    def __init__(self, A: scipy.sparse.csr_matrix, basis):
        self.A_D = A[basis.dependent]
        self.A_DT = self.A_D.T.tocsr()
        self.basis = basis
        self.position_D = {int(d): k for k, d in enumerate(basis.dependent)}
        self.position_I = {int(i): k for k, i in enumerate(basis.independent)}

    def W(self, y: np.ndarray) -> np.ndarray:
        return np.asarray(self.A_D @ self.basis.solve(y))

    def Wt(self, v: np.ndarray) -> np.ndarray:
        return self.basis.solve_transposed(np.asarray(self.A_DT @ v))

    def M(self, v: np.ndarray) -> np.ndarray:
        return v + self.W(self.Wt(v))

    def G_rows_transposed(self, rows: list[int]) -> np.ndarray:
        """G_S^T (p × |S|): a unit vector for a dependent row, −W e_i for an independent row i."""
        p = len(self.position_D)
        out = np.zeros((p, len(rows)))
        unit_of: list[tuple[int, int]] = []
        for j, i in enumerate(rows):
            if i in self.position_D:
                out[self.position_D[i], j] = 1.0
            else:
                unit_of.append((j, self.position_I[i]))
        if unit_of:
            E = np.zeros((self.basis.rank, len(unit_of)))
            for c, (_, k) in enumerate(unit_of):
                E[k, c] = 1.0
            out[:, [j for j, _ in unit_of]] = -self.W(E)
        return out


def refine(A: scipy.sparse.csr_matrix, basis, sketch: NullSketch, items: list[Item],
           steps: int = REFINE_STEPS) -> list[Bounds]:
    """Two-sided bounds of every item by the Galerkin projection of the module docstring, adding Krylov blocks of
    M until each item is on one side of its bar or ``steps`` blocks were added (the caller decides what an
    undecided item means). Needs a basis with ``solve`` (C_I x = y); raises :class:`SolvabilityError` otherwise."""
    if not items:
        return []
    if not hasattr(basis, "solve"):
        raise SolvabilityError(f"rank decision unclear: {len(items)} pair or row verdict(s) near the bar, and this "
                               f"row basis ({type(basis).__name__}) cannot refine them")
    ops = _NullOperators(A, basis)
    rows = sorted({i for it in items for i in it.rows})
    col = {i: j for j, i in enumerate(rows)}
    GS = ops.G_rows_transposed(rows)  # p × |S|
    V, _ = np.linalg.qr(np.hstack([sketch.xi, GS]))
    MV = ops.M(V)
    block = GS
    out: list[Bounds] = []
    for step in range(steps + 1):
        H = V.T @ MV
        H = 0.5 * (H + H.T)
        Z = np.linalg.solve(H, V.T @ GS)
        P_lo = GS.T @ (V @ Z)
        R = GS - MV @ Z
        out = []
        for it in items:
            c = [col[i] for i in it.rows]
            K = it.coefficients
            lo = float(np.trace(K.T @ P_lo[np.ix_(c, c)] @ K))
            extra = float(np.linalg.norm(R[:, c] @ K) ** 2)
            out.append(Bounds(np.sqrt(max(lo, 0.0)), np.sqrt(max(lo, 0.0) + extra), True))
        if step == steps or all(b.decided(it.bar) for b, it in zip(out, items)):
            break
        block = ops.M(block)  # the next Krylov block, orthogonalized against V (twice, for round-off)
        for _ in range(2):
            block = block - V @ (V.T @ block)
        Qb, Rb = np.linalg.qr(block)
        keep = np.abs(np.diag(Rb)) > 1e-12 * max(1.0, float(np.abs(np.diag(Rb)).max(initial=0.0)))
        if not np.any(keep):
            break
        Qb = Qb[:, keep]
        V = np.hstack([V, Qb])
        MV = np.hstack([MV, ops.M(Qb)])
    return out

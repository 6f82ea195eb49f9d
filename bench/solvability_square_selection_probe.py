"""Probe: independent rows of C through a square submatrix C_IJ, SuperLU and swaps on its exact weak spaces.

An experiment for the random family (docs/solvability.md, "Where it stands"), not a path of the package yet.
It prints, per round, the size r of C_IJ, the estimate of σ_min(C_IJ) in units of tol = rank_rtol · σ_max(C),
and the swaps made; at the end the rank, σ_min(C_IJ) and the leak of the other rows. With ``--compare`` the
package's current row basis runs on the same C in the same process, for the time ratio.

Method (Wojtyra & Frączek 2013, Sect. 3 ask for rank(C) and the left null space of Cᵀ at a tolerance):

1. A maximum-weight bipartite matching of rows to columns (weights log|c_ij|, scipy) gives r = structural
   rank and a square C_IJ.
2. SuperLU factorizes C_IJ (a tiny diagonal shift only if it is exactly singular). Block inverse iteration
   gives bases U (left) and V (right) of the directions with singular values below ``target`` · tol, each from
   its own iteration: U from (C_IJ C_IJᵀ)⁻¹, V from (C_IJᵀ C_IJ)⁻¹. A left vector computed as C_IJ v / σ is
   meaningless when σ is at rounding level.
3. The weak spaces are removed one dimension per swap, without refactorizing. Row d (outside I) enters at
   position i if some v in V has c_d·v ≠ 0 and some u in U has u_i ≠ 0. Then U becomes {u ∈ U: u_i = 0}
   and V becomes {v ∈ V: c_d·v = 0}. Column swaps are the transpose. If neither exists, the direction is a
   true dependency and row i and column j leave (r − 1).
4. Repeat until σ_min(C_IJ) ≥ target · tol. Then σ_r(C) ≥ σ_min(C_IJ) (interlacing), and σ_(r+1)(C) ≤ |E|,
   E = C_D − C_DJ C_IJ⁻¹ C_I (rows outside I), estimated on random combinations as ``leak``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import pinocchio as pin
import scipy.linalg
import scipy.sparse
import scipy.sparse.linalg
from scipy.sparse.csgraph import min_weight_full_bipartite_matching

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from vtm_dynamics.core.reactions.absolute_coordinates import load_absolute_model  # noqa: E402
from vtm_dynamics.core.reactions.mechanism_families import random_mechanism_urdf  # noqa: E402
from vtm_dynamics.core.reactions.solvability import DEFAULT_RANK_RTOL, SolvabilityError  # noqa: E402
from vtm_dynamics.core.reactions.sparse_solvability import (  # noqa: E402
    independent_rows,
    largest_singular_value,
    sparse_constraint_matrix,
)


def matched_square(C: scipy.sparse.csr_matrix, smax: float) -> tuple[np.ndarray, np.ndarray]:
    """Rows I and columns J of a maximum-weight matching (weights log|c_ij|; a slack column per row)."""
    m, n = C.shape
    A = C.tocoo()
    weight = np.log(np.abs(A.data) / smax) + 100.0  # positive; maximises the product of the matched entries
    slack = scipy.sparse.identity(m, format="csr") * 1e-3  # a row matched to its slack is left out
    B = scipy.sparse.hstack([scipy.sparse.csr_matrix((weight, (A.row, A.col)), shape=(m, n)), slack]).tocsr()
    rows, cols = min_weight_full_bipartite_matching(B, maximize=True)
    real = cols < n
    return rows[real], cols[real]


def factorize(S: scipy.sparse.csc_matrix, smax: float):
    """SuperLU of S, or of S + 1e-13 σ_max I if S is exactly singular (the shift is far below tol)."""
    try:
        return scipy.sparse.linalg.splu(S, permc_spec="COLAMD"), False
    except RuntimeError:
        shifted = (S + scipy.sparse.identity(S.shape[0]) * 1e-13 * smax).tocsc()
        return scipy.sparse.linalg.splu(shifted, permc_spec="COLAMD"), True


def weak_spaces(S, lu, block: int, tol: float, seed: int, iterations: int = 8):
    """Orthonormal bases (U, V) of the left and right singular directions of S below ``tol``, and σ_min."""
    r = S.shape[0]
    b = min(block, r)
    rng = np.random.default_rng(seed)
    X, _ = np.linalg.qr(rng.standard_normal((r, b)))
    Y, _ = np.linalg.qr(rng.standard_normal((r, b)))
    for _ in range(iterations):
        X, _ = np.linalg.qr(lu.solve(lu.solve(X, trans="T")))
        Y, _ = np.linalg.qr(lu.solve(lu.solve(Y), trans="T"))
    _, s_right, Vt = np.linalg.svd(S @ X, full_matrices=False)
    _, s_left, Ut = np.linalg.svd(S.T @ Y, full_matrices=False)
    V = (X @ Vt.T)[:, s_right < tol]
    U = (Y @ Ut.T)[:, s_left < tol]
    return U, V, float(s_right.min())


def _unit(n: int, i: int) -> np.ndarray:
    e = np.zeros(n)
    e[i] = 1.0
    return e


def _restrict(basis: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Orthonormal basis of {x ∈ span(basis): w·x = 0} (one dimension fewer)."""
    c = w @ basis
    if basis.shape[1] <= 1:
        return basis[:, :0]
    Q, _ = np.linalg.qr(np.column_stack([c / np.linalg.norm(c), np.eye(basis.shape[1])]))
    return basis @ Q[:, 1:basis.shape[1]]


def remove_weak_space(C, CT, Cc, I, J, U, V, tol):
    """Swaps (or, for true dependencies, removals) that take the weak spaces U, V out of C_IJ (module docstring)."""
    m, n = C.shape
    I, J = I.copy(), J.copy()
    in_I = np.zeros(m, bool)
    in_I[I] = True
    in_J = np.zeros(n, bool)
    in_J[J] = True
    counts = {"rows": 0, "columns": 0, "removed": 0}
    while U.shape[1] and V.shape[1]:
        Vn = np.zeros((n, V.shape[1]))
        Vn[J] = V
        row_cover = np.abs(C @ Vn).max(axis=1)
        row_cover[in_I] = 0.0
        Um = np.zeros((m, U.shape[1]))
        Um[I] = U
        col_cover = np.abs(CT @ Um).max(axis=1)
        col_cover[in_J] = 0.0
        d, k = int(np.argmax(row_cover)), int(np.argmax(col_cover))
        i = int(np.argmax(np.abs(U).max(axis=1)))
        j = int(np.argmax(np.abs(V).max(axis=1)))
        r = I.size
        if max(row_cover[d], col_cover[k]) <= tol:  # nothing outside covers it: a dependency at this tolerance
            keep_i, keep_j = np.ones(r, bool), np.ones(r, bool)
            keep_i[i], keep_j[j] = False, False
            in_I[I[i]], in_J[J[j]] = False, False
            U = _restrict(U, _unit(r, i))[keep_i]
            V = _restrict(V, _unit(r, j))[keep_j]
            U = np.linalg.qr(U)[0] if U.shape[1] else U
            V = np.linalg.qr(V)[0] if V.shape[1] else V
            I, J = I[keep_i], J[keep_j]
            counts["removed"] += 1
        elif row_cover[d] * np.abs(U[i]).max() >= col_cover[k] * np.abs(V[j]).max():
            V = _restrict(V, C[d].toarray().ravel()[J])
            U = _restrict(U, _unit(r, i))
            in_I[I[i]], in_I[d] = False, True
            I[i] = d
            counts["rows"] += 1
        else:
            U = _restrict(U, Cc[:, k].toarray().ravel()[I])
            V = _restrict(V, _unit(r, j))
            in_J[J[j]], in_J[k] = False, True
            J[j] = k
            counts["columns"] += 1
    return I, J, counts


def leak(C, I, J, lu) -> float:
    """Largest norm of E ξ over 4 random combinations ξ of the rows outside I (an estimate of |E|)."""
    m = C.shape[0]
    in_I = np.zeros(m, bool)
    in_I[I] = True
    D = np.flatnonzero(~in_I)
    if D.size == 0:
        return 0.0
    xi = np.random.default_rng(5).standard_normal((D.size, 4))
    c = np.asarray(C[D].T @ xi)
    y = lu.solve(c[J], trans="T")
    return float(np.linalg.norm(c - np.asarray(C[I].T @ y), axis=0).max())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bodies", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--block", type=int, default=16, help="initial block size of the inverse iteration")
    ap.add_argument("--target", type=float, default=4.0, help="σ_min(C_IJ) sought, in units of tol")
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--compare", action="store_true", help="also time the package's current row basis")
    ap.add_argument("--dense-check", action="store_true", help="dense SVD of C (up to 1,000 bodies)")
    args = ap.parse_args()
    t0 = time.perf_counter()
    model = load_absolute_model(random_mechanism_urdf(args.bodies, args.seed, planar=True), planar=True,
                                max_bodies=60_000, max_dof=120_000, max_bytes=10**9)
    C = sparse_constraint_matrix(model, pin.neutral(model.pin_model)).matrix.tocsr()
    C.eliminate_zeros()
    print(f"random, {args.bodies} bodies, seed {args.seed}: C {C.shape[0]} x {C.shape[1]}, {C.nnz} nonzeros, "
          f"load and build {time.perf_counter() - t0:.2f} s", flush=True)
    t0 = time.perf_counter()
    CT, Cc = C.T.tocsr(), C.tocsc()
    smax = largest_singular_value(C)
    tol = DEFAULT_RANK_RTOL * smax
    I, J = matched_square(C, smax)
    print(f"matching: structural rank {I.size}, {time.perf_counter() - t0:.2f} s", flush=True)
    block, decided = args.block, False
    for rnd in range(args.rounds):
        S = C[I][:, J].tocsc()
        lu, shifted = factorize(S, smax)
        U, V, smin = weak_spaces(S, lu, block, args.target * tol, seed=rnd)
        print(f"round {rnd}: r {I.size}, sigma_min(C_IJ) {smin / tol:.3g} tol, weak directions {V.shape[1]}"
              f"{' (exactly singular, shifted)' if shifted else ''}, {time.perf_counter() - t0:.2f} s", flush=True)
        if V.shape[1] == 0 and U.shape[1] == 0 and not shifted:
            e = leak(C, I, J, lu)
            decided = e <= tol / 10
            print(f"result: rank {I.size}, sigma_min(C_IJ) {smin / tol:.3g} tol, leak {e / tol:.3g} tol, "
                  f"{'decided (clear gap)' if decided else 'unclear'}, {time.perf_counter() - t0:.2f} s")
            break
        if max(U.shape[1], V.shape[1]) >= block:  # the block may not hold the whole weak space
            block *= 2
        I, J, counts = remove_weak_space(C, CT, Cc, I, J, U, V, args.target * tol)
        print(f"  swaps: {counts['rows']} rows, {counts['columns']} columns, {counts['removed']} removed", flush=True)
    else:
        print(f"result: not settled in {args.rounds} rounds, {time.perf_counter() - t0:.2f} s")
    probe_time = time.perf_counter() - t0
    if args.compare:
        t1 = time.perf_counter()
        try:
            basis = independent_rows(C, tol)
            outcome = f"rank {basis.rank}"
        except SolvabilityError as err:
            outcome = str(err)[:80]
        current = time.perf_counter() - t1
        print(f"current row basis: {outcome}, {current:.2f} s; this probe / current = {probe_time / current:.2f}")
    if args.dense_check:
        s = np.linalg.svd(C.toarray(), compute_uv=False)
        r = int(np.sum(s > tol))
        print(f"dense: rank {r}, sigma_r {s[r - 1] / tol:.4g} tol, sigma_r+1 "
              f"{(s[r] / tol if r < s.size else 0.0):.3g} tol; sigma_min(C_IJ) dense "
              f"{np.linalg.svd(C[I][:, J].toarray(), compute_uv=False)[-1] / tol:.4g} tol")


if __name__ == "__main__":
    main()

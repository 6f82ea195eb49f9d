"""Singular values of a large sparse constraint matrix C near the rank tolerance, without a dense SVD.

Shift-invert Lanczos on the symmetric K = [[0, C], [Cᵀ, 0]], whose eigenvalues are ±σ_i(C) and zeros: at a shift
s the k eigenvalues nearest s are found from a sparse LU of K − s I (SuperLU). If only zeros (|λ| at rounding
level) come back, C has no singular value in (0, 2 s); a nonzero one is a singular value of C near s. Forming
C Cᵀ instead would lose everything below √eps · σ_max (about 2e-7 here, above the tolerance). Used to check whether
"rank decision unclear" comes from C (no gap) or from the row selection (docs/solvability.md, "Cost").

Run: python bench/solvability_gap_probe.py [--family random] [--bodies 1000] [--seed 1] [--shifts 2 20 200]
(shifts in units of the tolerance rank_rtol · σ_max; 10,000 random bodies: 140-190 s and a few GB per shift).
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import scipy.sparse
import scipy.sparse.linalg


def main() -> None:
    import pinocchio as pin

    from vtm_dynamics.core.reactions.mechanism_families import comb_urdf, random_mechanism_urdf
    from vtm_dynamics.core.reactions.solvability import DEFAULT_RANK_RTOL, load_for_analysis
    from vtm_dynamics.core.reactions.row_basis import largest_singular_value
    from vtm_dynamics.core.reactions.sparse_solvability import sparse_constraint_matrix

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--family", choices=["comb", "random"], default="random")
    ap.add_argument("--bodies", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--shifts", type=float, nargs="+", default=[2.0, 20.0, 200.0], help="in units of the tolerance")
    ap.add_argument("--k", type=int, default=8, help="eigenvalues per shift")
    ap.add_argument("--dense", action="store_true", help="also the dense SVD (small models only)")
    args = ap.parse_args()
    text = (comb_urdf(args.bodies - 1) if args.family == "comb"
            else random_mechanism_urdf(args.bodies, args.seed, planar=True))
    model = load_for_analysis(text, True, args.bodies + 1)
    C = sparse_constraint_matrix(model, pin.neutral(model.pin_model)).matrix.tocsc()
    tol = DEFAULT_RANK_RTOL * largest_singular_value(C)
    print(f"{args.family} {args.bodies} bodies (seed {args.seed}): C {C.shape[0]} x {C.shape[1]}, tolerance {tol:.3g}")
    K = scipy.sparse.bmat([[None, C], [C.T, None]]).tocsc()
    for f in args.shifts:
        t = time.perf_counter()
        w = scipy.sparse.linalg.eigsh(K, k=args.k, sigma=f * tol, which="LM", return_eigenvectors=False, tol=1e-10)
        w = np.sort(np.abs(w)) / tol
        print(f"  shift {f:g} tol: nearest |eigenvalues| / tol: {' '.join(f'{x:.3g}' for x in w)} "
              f"({time.perf_counter() - t:.1f} s)", flush=True)
    if args.dense:
        s = np.linalg.svd(C.toarray(), compute_uv=False)
        r = int(np.sum(s > tol))
        nxt = s[r] / tol if r < s.size else 0.0
        print(f"  dense SVD: rank {r}, sigma_r / tol {s[r - 1] / tol:.3g}, sigma_r+1 / tol {nxt:.3g}")


if __name__ == "__main__":
    main()

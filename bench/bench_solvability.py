"""Solvability analysis time against mechanism size, with the rank of the same matrix by NumPy as the peer.

Mechanism: a planar "comb" of k equal cranks pivoted on the ground at equal spacing and all pinned to one coupler
(a chain of k − 1 parallelogram loops sharing the coupler): k + 1 bodies, 4k rows in planar mode, 3k + 3
coordinates, mobility 1, degree of redundancy p = k − 2 (every loop beyond the first repeats the same constraint).
With --spatial the same comb is analysed with 6 coordinates per body (p is printed, not assumed).

Printed per size: bodies, matrix size, p, time to build C (URDF parse + Pinocchio + rows), time of the analysis
without the rank cross-check (SVD rank, pivoted QR and B_X per pair, directions, release set), the peers on the
same matrix: numpy.linalg.matrix_rank (one SVD) and scipy.linalg.qr with pivoting (the paper's decomposition
alone) with the ratios analysis / peer, and the analysis with the per-pair rank cross-check (one SVD per pair,
up to 100 bodies). The growth exponent is the slope of log(time) against log(bodies) over the sizes run.

Run: python bench/bench_solvability.py [--max-bodies 1000] [--spatial]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import scipy.linalg

from vtm_dynamics.core.reactions.absolute_coordinates import constraint_matrix, load_absolute_model
from vtm_dynamics.core.reactions.solvability import analyze_constraint_matrix


def comb_urdf(k: int, spacing: float = 0.1, crank: float = 0.2) -> str:
    """URDF of k cranks (revolute on the ground, along +y) pinned to one coupler along x (loop closures)."""
    parts = ['<robot name="comb"><link name="world"/>',
             '<link name="coupler"><inertial><mass value="1"/>'
             '<inertia ixx="0.01" ixy="0" ixz="0" iyy="0.01" iyz="0" izz="0.01"/></inertial></link>']
    for i in range(k):
        parts.append(f'<link name="crank_{i}"><inertial><origin xyz="0 {crank / 2} 0"/><mass value="0.2"/>'
                     '<inertia ixx="0.001" ixy="0" ixz="0" iyy="0.001" iyz="0" izz="0.001"/></inertial></link>')
        parts.append(f'<joint name="O{i}" type="revolute"><parent link="world"/><child link="crank_{i}"/>'
                     f'<origin xyz="{i * spacing} 0 0"/><axis xyz="0 0 1"/>'
                     '<limit lower="-3" upper="3" effort="1" velocity="1"/></joint>')
    parts.append('<joint name="A0" type="revolute"><parent link="crank_0"/><child link="coupler"/>'
                 f'<origin xyz="0 {crank} 0"/><axis xyz="0 0 1"/><limit lower="-3" upper="3" effort="1" '
                 'velocity="1"/></joint>')
    for i in range(1, k):
        parts.append(f'<loop_closure name="A{i}" type="revolute"><parent link="coupler"/><child link="crank_{i}"/>'
                     f'<origin xyz="{i * spacing} 0 0"/><child_origin xyz="0 {crank} 0"/><axis xyz="0 0 1"/>'
                     '</loop_closure>')
    parts.append("</robot>")
    return "".join(parts)


def _timed(fn, repeat: int):
    best, out = float("inf"), None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-bodies", type=int, default=1000)
    parser.add_argument("--spatial", action="store_true", help="spatial mode (6 coordinates per body)")
    args = parser.parse_args()
    planar = not args.spatial
    sizes = [b for b in (10, 30, 100, 300, 1000) if b <= args.max_bodies]
    print(f"mode: {'planar' if planar else 'spatial'}; comb of k cranks, bodies = k + 1; best of repeats")
    header = (f"{'bodies':>6} {'m x n':>11} {'p':>5} {'build C [s]':>11} {'QR test [s]':>11} "
              f"{'matrix_rank [s]':>15} {'ratio':>6} {'qr(piv) [s]':>11} {'ratio':>6} {'rank xcheck [s]':>15}")
    print(header)
    print("-" * len(header))
    rows = []
    for bodies in sizes:
        urdf = comb_urdf(bodies - 1)
        repeat = 3 if bodies <= 100 else 1
        t_build, C = _timed(lambda: constraint_matrix(load_absolute_model(urdf, planar=planar, max_bodies=bodies, max_dof=bodies)), repeat)
        t_an, report = _timed(lambda: analyze_constraint_matrix(C, cross_check=False), repeat)
        t_rank, rank = _timed(lambda: np.linalg.matrix_rank(C.matrix), repeat)
        t_qr, _ = _timed(lambda: scipy.linalg.qr(C.matrix, pivoting=True), repeat)
        assert rank == report.rank, "the peer's rank disagrees"
        if bodies <= 100:
            t_x, checked = _timed(lambda: analyze_constraint_matrix(C, cross_check=True), 1)
            assert all(p.criteria_agree for p in checked.pairs)
            xcheck = f"{t_x:.4f}"
        else:
            t_x, xcheck = float("nan"), "skipped"
        m, n = C.matrix.shape
        print(f"{bodies:>6} {f'{m}x{n}':>11} {report.redundancy:>5} {t_build:>11.4f} {t_an:>11.4f} {t_rank:>15.4f} "
              f"{t_an / t_rank:>6.1f} {t_qr:>11.4f} {t_an / t_qr:>6.1f} {xcheck:>15}", flush=True)
        rows.append((bodies, t_build, t_an, t_rank, t_x))
    if len(rows) >= 2:
        b = np.log([r[0] for r in rows])
        for label, col in (("build C", 1), ("QR test (analysis without cross-check)", 2), ("numpy matrix_rank", 3)):
            slope = np.polyfit(b, np.log([r[col] for r in rows]), 1)[0]
            print(f"growth exponent of {label}: time ~ bodies^{slope:.2f}")
        xs = [r for r in rows if np.isfinite(r[4])]
        if len(xs) >= 2:
            slope = np.polyfit(np.log([r[0] for r in xs]), np.log([r[4] for r in xs]), 1)[0]
            print(f"growth exponent of the analysis with the per-pair rank cross-check: bodies^{slope:.2f}")


if __name__ == "__main__":
    main()

"""Solvability analysis time and peak memory against mechanism size: dense (SVD) vs sparse path.

Families (vtm_dynamics.core.reactions.mechanism_families, the same generators the tests use):

* comb: a planar comb of k cranks under one coupler, k + 1 bodies, p = k − 2 (every loop repeats the same
  constraint); all loops share the coupler, so no decomposition into independent loop clusters exists (the
  sparse path eliminates the coupler's dense columns first: core/reactions/hub_row_basis.py);
* random: a random planar tree with loop closures between nearby links and knife edges (seed 1).

Each (family, size, method) runs in its own child process, so its peak resident memory (getrusage ru_maxrss) is
its own; printed: nonzeros of C, model load (URDF parse, and the loop closure check at the neutral configuration;
Pinocchio builds its model only where a configuration needs it), building C, the analysis, peak memory above
the child's memory after imports, and the ratio dense / sparse. A sparse analysis that ends "rank decision
unclear" is printed as UNCLEAR with its time (an answer, not a verdict); --progress logs the repair steps. Where both ran, the verdicts (rank, p, every pair's verdict
and number of determined directions) are compared. The dense path is run up to --dense-max bodies; beyond, its C
alone would need m·n·8 bytes (printed) and its SVD O(m n²) time, so it is not run.

Run: python bench/bench_solvability.py [--sizes 10 100 1000 10000] [--families comb random] [--dense-max 1000]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import subprocess
import sys
import time

# One BLAS thread per child: on a shared machine, threaded BLAS on the many small per-pair SVDs was measured 10x
# slower (comb, 100 bodies, dense: 11.3 s threaded, 1.2 s single-threaded), which would flatter the sparse path.
SINGLE_THREAD = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def child(family: str, size: int, method: str) -> dict:
    from vtm_dynamics.core.reactions.absolute_coordinates import assemble_loops, constraint_matrix, loops_closed
    from vtm_dynamics.core.reactions.mechanism_families import comb_urdf, random_mechanism_urdf
    from vtm_dynamics.core.reactions.solvability import SolvabilityError, analyze_constraint_matrix, load_for_analysis
    from vtm_dynamics.core.reactions.sparse_solvability import (
        analyze_sparse_constraint_matrix,
        sparse_constraint_matrix,
    )

    text = comb_urdf(size - 1) if family == "comb" else random_mechanism_urdf(size, 1, planar=True)
    base_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0 = time.perf_counter()
    model = load_for_analysis(text, True, size + 1)
    # as vtm-solvability prepares a model: the neutral configuration (q None) if its loops are closed there, as
    # both families' are; Pinocchio's model is then never built
    q = None if loops_closed(model) else assemble_loops(model)
    t1 = time.perf_counter()
    C = constraint_matrix(model, q) if method == "dense" else sparse_constraint_matrix(model, q)
    t2 = time.perf_counter()
    try:
        if method == "dense":
            r = analyze_constraint_matrix(C, cross_check=False, model_name=model.name)
        else:
            r = analyze_sparse_constraint_matrix(C, model_name=model.name)
    except SolvabilityError as err:  # "rank decision unclear": an answer too, timed like a verdict
        t3 = time.perf_counter()
        return {"load": t1 - t0, "build": t2 - t1, "analysis": t3 - t2, "rows": C.matrix.shape[0],
                "cols": C.matrix.shape[1], "nnz": _nnz(C.matrix), "unclear": str(err),
                "peak_mb": (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base_kb) / 1024.0}
    t3 = time.perf_counter()
    verdicts = [(p.name, p.solvable, len(p.determined_directions)) for p in r.pairs]
    return {"load": t1 - t0, "build": t2 - t1, "analysis": t3 - t2, "rows": C.matrix.shape[0],
            "cols": C.matrix.shape[1], "nnz": _nnz(C.matrix), "rank": r.rank, "p": r.redundancy, "unsolvable": len(r.unsolvable),
            "verdicts": hashlib.sha256(json.dumps([r.rank, r.redundancy, verdicts]).encode()).hexdigest()[:12],
            "peak_mb": (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base_kb) / 1024.0}


def _nnz(M) -> int:
    return int(M.nnz) if hasattr(M, "nnz") else int((M != 0).sum())


def run(family: str, size: int, method: str, timeout: float) -> dict | None:
    progress = bool(os.environ.get("VTM_BENCH_PROGRESS"))  # the child's log goes straight to the terminal
    try:
        proc = subprocess.run([sys.executable, __file__, "--child", family, str(size), method],
                              stdout=subprocess.PIPE, stderr=None if progress else subprocess.PIPE, text=True,
                              timeout=timeout, env={**os.environ, **SINGLE_THREAD})
    except subprocess.TimeoutExpired:
        return {"error": f"over {timeout:.0f} s"}
    if proc.returncode != 0:
        return {"error": ((proc.stderr or "").strip().splitlines() or ["failed"])[-1][:100]}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[10, 100, 1000, 10000], help="bodies")
    ap.add_argument("--families", nargs="+", default=["comb", "random"], choices=["comb", "random"])
    ap.add_argument("--dense-max", type=int, default=1000, help="largest size run by the dense path")
    ap.add_argument("--timeout", type=float, default=900.0, help="per child [s]")
    ap.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    ap.add_argument("--progress", action="store_true", help="children log the repair steps of the sparse path")
    args = ap.parse_args()
    if args.progress or os.environ.get("VTM_BENCH_PROGRESS"):
        import logging

        os.environ["VTM_BENCH_PROGRESS"] = "1"  # inherited by the children
        logging.basicConfig(level=logging.DEBUG, stream=sys.stderr, format="    %(message)s")
        logging.getLogger("vtm_dynamics").setLevel(logging.DEBUG)
    if args.child:
        family, size, method = args.child
        print(json.dumps(child(family, int(size), method)))
        return
    print("planar models; times in s, peak memory in MB above the process after imports; "
          "analysis = rank, left null space, per-pair verdicts and directions, release set; one BLAS thread")
    head = (f"{'family':<7} {'bodies':>6} {'C (m x n)':>15} {'nnz':>8} {'p':>6} | {'sparse: load':>12} {'build':>6} "
            f"{'analysis':>8} {'peak':>6} | {'dense: analysis':>15} {'peak':>6} | {'time ratio':>10} "
            f"{'mem ratio':>9}  verdicts")
    print(head)
    print("-" * len(head))
    for family in args.families:
        previous = 0.0
        for size in args.sizes:
            print(f"  running {family} {size} sparse ...", file=sys.stderr, flush=True)
            s = run(family, size, "sparse", args.timeout)
            if "error" in s:
                print(f"{family:<7} {size:>6}  sparse path failed: {s['error']}")
                continue
            d = None
            if size <= args.dense_max:
                print(f"  running {family} {size} dense ...", file=sys.stderr, flush=True)
                d = run(family, size, "dense", args.timeout)
            shape = f"{s['rows']} x {s['cols']}"
            line = (f"{family:<7} {size:>6} {shape:>15} {s['nnz']:>8} {s.get('p', '-'):>6} | {s['load']:>12.2f} "
                    f"{s['build']:>6.2f} {s['analysis']:>8.2f} {s['peak_mb']:>6.0f} | ")
            if "unclear" in s:  # no verdict: the time is the time to the answer "unclear"
                line += f"UNCLEAR after {s['analysis']:.1f} s: {s['unclear'][:150]}"
            elif d is None:
                gb = s["rows"] * s["cols"] * 8 / 1e9
                line += f"not run: C alone {gb:.1f} GB, SVD ~ m n^2"
            elif "error" in d:
                line += f"failed: {d['error']}"
            else:
                same = "identical" if d["verdicts"] == s["verdicts"] else "DIFFER"
                line += (f"{d['analysis']:>15.2f} {d['peak_mb']:>6.0f} | {d['analysis'] / s['analysis']:>10.1f} "
                         f"{max(d['peak_mb'], 1) / max(s['peak_mb'], 1):>9.1f}  {same}")
            total = s["load"] + s["build"] + s["analysis"]
            if total < previous:
                line += "  (not monotonic)"
            previous = total
            print(line, flush=True)


if __name__ == "__main__":
    main()

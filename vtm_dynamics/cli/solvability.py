"""``vtm-solvability MODEL.urdf [--planar] [--json] [--q ...]``: which joint reactions of a model are unique.

Prints the rank summary and one line per kinematic pair (Wojtyra & Frączek 2013, Sect. 3.3 verdicts, plus the
solvable directions of pairs that are not solvable as a whole). Exit codes: 0 success, 2 bad input.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys

from vtm_dynamics.core.reactions.solvability import (
    DEFAULT_MAX_SOLVABILITY_BODIES,
    DEFAULT_RANK_RTOL,
    SolvabilityReport,
    analyze_solvability,
)
from vtm_dynamics.core.robot.urdf_extension import read_urdf_file


def report_to_dict(report: SolvabilityReport) -> dict:
    """The report as plain JSON-serialisable data (tuples become lists)."""
    return dataclasses.asdict(report)


def format_report(report: SolvabilityReport) -> str:
    """Human-readable table of a :class:`SolvabilityReport`."""
    mode = "planar (x, y, phi per body)" if report.planar else "spatial (6 per body)"
    lines = [
        f"model {report.model!r}: {report.n_bodies} bodies, {mode}, n = {report.n_coordinates} coordinates",
        f"rows: m = {report.m_holonomic} holonomic (rank {report.rank_holonomic}), "
        f"h = {report.h_nonholonomic} nonholonomic (rank {report.rank_nonholonomic})",
        f"rank(C) = {report.rank}, degree of redundancy p = {report.redundancy}",
        f"tolerance: singular values > {report.rank_rtol:.0e} x sigma_max = {report.rank_tolerance:.3g} "
        f"(kept >= {report.smallest_kept_singular_value:.3g}, dropped <= {report.largest_dropped_singular_value:.3g}); "
        f"loop-closure residual {report.closure_residual:.2g}",
        "",
    ]
    header = f"{'pair':<16} {'type':<12} {'rows':>4}  {'verdict':<11} {'|B_X|/s1':>9}  {'dim(X^Y)':>8}  unique components"
    lines += [header, "-" * len(header)]
    for p in report.pairs:
        verdict = "solvable" if p.solvable else "UNSOLVABLE"
        dim = "-" if p.rank_criterion_dimension is None else str(p.rank_criterion_dimension)
        if p.solvable:
            unique = "all"
        elif p.determined_labels:
            unique = ", ".join(p.determined_labels)
        elif p.determined_directions:
            unique = f"{len(p.determined_directions)} combined direction(s)"
        else:
            unique = "none"
        flag = "" if p.criteria_agree else "  (criteria disagree)"
        lines.append(f"{p.name:<16} {p.type:<12} {len(p.rows):>4}  {verdict:<11} {p.qr_residual:>9.2e}  {dim:>8}  "
                     f"{unique}{flag}")
    if report.free_pairs:
        lines.append(f"pairs without constraint rows: {', '.join(report.free_pairs)}")
    if report.redundancy:
        rel = ", ".join(f"{name}.{label}" for name, label in report.release_set)
        lines.append(f"releasing {rel} would make the model non-redundant (and set those reactions to zero)")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Console entry point; returns the exit code."""
    parser = argparse.ArgumentParser(
        prog="vtm-solvability", description="Reaction solvability analysis of an overconstrained URDF model.")
    parser.add_argument("model", help="URDF file (with loop_closure / knife_edge / driving_constraint elements)")
    parser.add_argument("--planar", action="store_true", help="analyse in-plane motion only (x, y, phi per body)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument("--q", nargs="+", type=float, default=None, metavar="Q",
                        help="configuration in Pinocchio order (default: neutral); loops are then assembled")
    parser.add_argument("--rtol", type=float, default=DEFAULT_RANK_RTOL,
                        help="relative rank tolerance (times the largest singular value)")
    parser.add_argument("--no-assemble", action="store_true", help="use q as given, without closing the loops")
    parser.add_argument("--max-bodies", type=int, default=DEFAULT_MAX_SOLVABILITY_BODIES,
                        help="refuse models with more moving links (the analysis costs ~bodies^3)")
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_:
        return int(exit_.code or 0)
    if not (0.0 < args.rtol < 1.0):
        print(f"vtm-solvability: error: --rtol must be in (0, 1), got {args.rtol}", file=sys.stderr)
        return 2
    try:
        report = analyze_solvability(read_urdf_file(args.model), planar=args.planar, q=args.q, rank_rtol=args.rtol,
                                     assemble=not args.no_assemble, max_bodies=args.max_bodies)
    except ValueError as err:
        print(f"vtm-solvability: error: {err}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(report_to_dict(report), indent=2))
    else:
        print(format_report(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())

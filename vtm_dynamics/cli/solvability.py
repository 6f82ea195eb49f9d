"""``vtm-solvability MODEL.urdf [--planar] [--json] [--q ...]``: which joint reactions of a model are unique.

Prints the rank summary and one line per kinematic pair (Wojtyra & Frączek 2013, Sect. 3.3 verdicts, plus the
solvable directions of pairs that are not solvable as a whole). Exit codes: 0 success, 2 bad input.

Along a motion (Sect. 4.3-4.4): ``--along CSV`` (a recorded series: columns t, the nq coordinates and optionally
the nv velocities in Pinocchio order) or ``--drive JOINT:AMPLITUDE`` (the joint's driving constraint follows the
paper's steering profile d(t), the mechanism moved kinematically from ``--speed`` along the base's first
velocity coordinate): the verdicts and unique reaction components at every sample, where they change, and with
``--plot PNG`` their time series. Progress goes to stderr.

``--view FILE.html`` / ``--serve``: the mechanism in 3-D with each pair marked by its verdict (green unique, orange
partly, red not unique; arrows along the directions that are unique), at the analysed configuration.
"""

from __future__ import annotations

import csv
import dataclasses
import json
import sys

from typing import TYPE_CHECKING

import numpy as np

from vtm_dynamics.cli.arguments import Parser, quiet_when_output_closed
from vtm_dynamics.core.reactions.analysis_settings import (
    DEFAULT_MAX_REACTION_BODIES,
    DEFAULT_MAX_SAMPLES,
    DEFAULT_MAX_SOLVABILITY_BODIES,
    DEFAULT_RANK_RTOL,
    METHODS,
)

if TYPE_CHECKING:  # the analysis (Pinocchio, scipy) is imported when it runs, not for --help
    from vtm_dynamics.core.reactions.solvability import SolvabilityReport
    from vtm_dynamics.core.reactions.solvability_along_motion import MotionReport


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
    header = f"{'pair':<16} {'type':<18} {'rows':>4}  {'verdict':<11} {'|B_X|/s1':>9}  {'dim(X^Y)':>8}  unique components"
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
        lines.append(f"{p.name:<16} {p.type:<18} {len(p.rows):>4}  {verdict:<11} {p.qr_residual:>9.2e}  {dim:>8}  "
                     f"{unique}{flag}")
    if report.free_pairs:
        lines.append(f"pairs without constraint rows: {', '.join(report.free_pairs)}")
    if report.redundancy:
        rel = ", ".join(f"{name}.{label}" for name, label in report.release_set)
        lines.append(f"releasing {rel} would make the model non-redundant (and set those reactions to zero)")
    return "\n".join(lines)


def _progress(what: str):
    step = [0]

    def report(i: int, n: int) -> None:
        if i == n or i * 10 // n != step[0]:
            step[0] = i * 10 // n
            print(f"{what}: {i}/{n}", file=sys.stderr, flush=True)

    return report


MAX_FIELD_CHARS = 40  # a number of a recorded motion, with its separator: "-1.2345678901234567e-300," is 25


def read_series_csv(path: str, nq: int, nv: int, max_samples: int) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """A recorded motion: header row, then rows of t [s], nq coordinates and optionally nv velocities."""
    import io

    from vtm_dynamics.core.stopsafe.trajectory_files import read_text_file

    rows: list[list[float]] = []
    # a regular file (a FIFO blocked the command) of at most MAX_FIELD_CHARS per number, checked before reading
    text = read_text_file(path, "--along", (max_samples + 1) * (1 + nq + nv) * MAX_FIELD_CHARS, ValueError)
    with io.StringIO(text, newline="") as fh:
        reader = csv.reader(fh)
        try:  # a field over csv's limit (128 kB) is one line, not a traceback
            next(reader, None)
            for line_no, row in enumerate(reader, start=2):
                if len(rows) >= max_samples:
                    raise ValueError(f"--along: more than {max_samples} samples (--max-samples)")
                if len(row) not in (1 + nq, 1 + nq + nv):
                    raise ValueError(f"--along: line {line_no} has {len(row)} columns, expected {1 + nq} (t, q) or "
                                     f"{1 + nq + nv} (t, q, v)")
                try:
                    rows.append([float(x) for x in row])
                except ValueError:
                    raise ValueError(f"--along: line {line_no} has a field that is not a number") from None
        except csv.Error as err:
            raise ValueError(f"--along: not CSV ({str(err)[:80]})") from None
    if not rows:
        raise ValueError("--along: no samples")
    if len({len(r) for r in rows}) != 1:
        raise ValueError("--along: rows must all have the same number of columns")
    data = np.array(rows)
    if not np.all(np.isfinite(data)):
        raise ValueError("--along: numbers must be finite")
    return data[:, 0], data[:, 1:1 + nq], data[:, 1 + nq:] if data.shape[1] > 1 + nq else None


def format_motion(report: MotionReport, pairs: list[str]) -> str:
    """Summary of a motion: p over time, the verdict changes, and the chosen pairs' components at some samples."""
    s = report.samples
    lines = [f"model {report.model!r} along a motion: {len(s)} samples, t = {s[0].t:g} .. {s[-1].t:g} s",
             f"degree of redundancy p: {sorted({x.redundancy for x in s})}"]
    if not report.changes:
        lines.append(f"verdicts constant along the motion; unsolvable: {', '.join(s[0].unsolvable) or 'none'}")
    for c in report.changes:
        lines.append(f"verdicts change between t = {c.t_before:g} s and {c.t_after:g} s: p {c.redundancy_before} -> "
                     f"{c.redundancy_after}; unsolvable now: {', '.join(c.became_unsolvable) or '-'}; "
                     f"solvable now: {', '.join(c.became_solvable) or '-'}")
    header = f"{'t [s]':>8}  " + "  ".join(f"{p:>24}" for p in pairs)
    lines += ["", "unique reaction components [N, N m], pair frame (- = not unique)", header]
    for x in s[:: max(1, len(s) // 10)]:
        cells = []
        for p in pairs:
            try:
                name, labels, values = next(c for c in x.components if c[0] == p)
            except StopIteration:
                cells.append(f"{'(no such pair)':>24}")
                continue
            cells.append(f"{' '.join(f'{lab}={v:.3g}' if v is not None else f'{lab}=-' for lab, v in zip(labels, values)):>24}")
        lines.append(f"{x.t:>8.3f}  " + "  ".join(cells))
    return "\n".join(lines)


def _component_unit(label: str) -> str:
    return "N m" if label.lstrip("-").startswith("M") else ("N" if label.lstrip("-").startswith("F") else "N or N m")


def plot_motion(report: MotionReport, pairs: list[str], path: str, source: str | None = None) -> str:
    """PNG of the chosen pairs' unique reaction components over time, one panel per pair; gaps where a component
    is not unique at a sample; pairs with no unique component at any sample get no panel (a note names them)."""
    from vtm_dynamics.cli.plots import legend_outside, new_figure, pyplot, save_figure_at

    plt = pyplot()
    shown, empty, notes = [], [], []
    for pair in pairs:
        labels = next((c[1] for c in report.samples[0].components if c[0] == pair), None)
        if labels is None:
            notes.append(f"{pair}: no such pair in the model")
            continue
        series = [(lab, *report.series(pair, lab)) for lab in labels]
        if any(np.isfinite(v).any() for _, _, v in series):
            shown.append((pair, series))
        else:
            empty.append(f"{pair} ({', '.join(labels)})")
    if empty:
        notes.append(f"not plotted, no component unique at any sample: {'; '.join(empty)}")
    if not shown:
        notes.append("none of the chosen pairs has a unique component along this motion")
    fig, axes = new_figure(plt, 9.0, 2.3 * max(1, len(shown)) + 1.0, max(1, len(shown)), 1, sharex=True,
                           squeeze=False)
    for ax, (pair, series) in zip(axes[:, 0], shown):
        units = set()
        for lab, t, v in series:
            unique = np.isfinite(v)
            if unique.any():
                ax.plot(t, v, label=lab + ("" if unique.all() else " (gaps: not unique)"))
                units.add(_component_unit(lab))
            else:
                ax.plot([], [], " ", label=f"{lab}: not unique")
        for c in report.changes:
            ax.axvline(0.5 * (c.t_before + c.t_after), color="r", ls=":")
        ax.set_ylabel(f"{pair} [{', '.join(sorted(units))}]")
        ax.ticklabel_format(useOffset=False)
        ax.grid(alpha=0.3)
        legend_outside(ax)
    if not shown:
        axes[0, 0].set_axis_off()
    axes[-1, 0].set_xlabel("t [s]")
    title = f"{report.model}: unique reaction components along the motion, pair frame"
    if report.changes:
        title += " (red dotted: the verdicts change)"
    fig.suptitle(title, fontsize=10)
    return save_figure_at(plt, fig, path, source, notes)


def _motion(args, parser_error) -> int:
    from vtm_dynamics.cli import provenance
    from vtm_dynamics.core.reactions.solvability import load_for_analysis
    from vtm_dynamics.core.reactions.solvability_along_motion import (
        analyze_along, drive_kinematically, paper_steering_drive,
    )
    from vtm_dynamics.core.robot.urdf_extension import read_urdf_file

    text = read_urdf_file(args.model)
    model = load_for_analysis(text, args.planar, args.max_bodies)
    pm = model.pin_model
    drives = None
    if args.along:
        times, qs, vs = read_series_csv(args.along, pm.nq, pm.nv, args.max_samples)
    else:
        joint, _, amp = args.drive.partition(":")
        try:
            amplitude = float(amp)
        except ValueError:
            return parser_error(f"--drive: expected JOINT:AMPLITUDE, got {args.drive[:40]!r}")
        drives = {joint: paper_steering_drive(amplitude, args.duration)}
        import pinocchio as pin

        q0 = pin.neutral(pm) if args.q is None else np.asarray(args.q, dtype=float)
        v0 = np.zeros(pm.nv)
        v0[0] = args.speed
        times, qs, vs = drive_kinematically(model, q0, v0, drives, args.duration, args.dt,
                                            max_samples=args.max_samples, progress=_progress("moving"))
    report = analyze_along(model, times, qs, vs, rank_rtol=args.rtol, assemble=not args.no_assemble,
                           max_samples=args.max_samples, drives=drives, progress=_progress("analysing"))
    pairs = args.pairs.split(",") if args.pairs else [p[0] for p in report.samples[0].components][:4]
    if args.json:
        print(json.dumps(dataclasses.asdict(report), indent=2))
    else:
        print(format_motion(report, pairs))
    if args.plot:
        source = (f"{report.model} (URDF sha256 {provenance.text_sha256(text)[:12]}), "
                  f"{'planar' if args.planar else 'spatial'}; {provenance.software_line()}")
        print(f"plot: {plot_motion(report, pairs, args.plot, source)}", file=sys.stderr)
    return 0


def build_parser() -> Parser:
    parser = Parser(prog="vtm-solvability",
                    description="Reaction solvability analysis of an overconstrained URDF model.")
    parser.add_argument("model", help="URDF file (with loop_closure / knife_edge / driving_constraint elements)")
    parser.add_argument("--planar", action="store_true", help="analyse in-plane motion only (x, y, phi per body; "
                        "the model must move in the world xy-plane)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument("--q", nargs="+", type=float, default=None, metavar="Q",
                        help="configuration in Pinocchio order (default: neutral); loops are then assembled")
    parser.add_argument("--rtol", type=float, default=DEFAULT_RANK_RTOL,
                        help="relative rank tolerance (times the largest singular value)")
    parser.add_argument("--no-assemble", action="store_true", help="use q as given, without closing the loops")
    parser.add_argument("--max-bodies", type=int, default=DEFAULT_MAX_SOLVABILITY_BODIES,
                        help="refuse models with more moving links (checked while the URDF is read; the byte "
                             "and degree-of-freedom caps follow)")
    parser.add_argument("--method", choices=METHODS, default="auto",
                        help="dense (SVD, with the rank cross-check), sparse (memory ~ nonzeros) or auto (by size)")
    motion = parser.add_mutually_exclusive_group()
    motion.add_argument("--along", metavar="CSV", help="analyse a recorded motion: columns t, q (nq) [, v (nv)]")
    motion.add_argument("--drive", metavar="JOINT:AMPLITUDE",
                        help="move the mechanism with the paper's steering profile d(t) on JOINT's drive [m or rad]")
    parser.add_argument("--duration", type=float, default=20.0, help="--drive: duration [s]")
    parser.add_argument("--dt", type=float, default=0.25, help="--drive: sample step [s]")
    parser.add_argument("--speed", type=float, default=0.1,
                        help="--drive: initial velocity of the base's first coordinate [m/s] (the paper's)")
    parser.add_argument("--pairs", default="", help="along a motion: pairs to tabulate and plot (comma-separated; "
                        "default: the first four)")
    parser.add_argument("--plot", metavar="PNG", help="along a motion: plot the unique components to this file")
    parser.add_argument("--max-samples", type=int, default=DEFAULT_MAX_SAMPLES, help="along a motion: sample cap")
    from vtm_dynamics.cli import view_output

    view_output.add_view_arguments(parser, "the mechanism with its pairs marked by verdict")
    return parser


@quiet_when_output_closed
def main(argv: list[str] | None = None) -> int:
    """Console entry point; returns the exit code."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_:
        return int(exit_.code or 0)
    if not (0.0 < args.rtol < 1.0):
        print(f"vtm-solvability: error: --rtol must be in (0, 1), got {args.rtol}", file=sys.stderr)
        return 2
    if (args.along or args.drive) and args.max_bodies > DEFAULT_MAX_REACTION_BODIES:
        print(f"vtm-solvability: error: --max-bodies: at most {DEFAULT_MAX_REACTION_BODIES} along a motion "
              "(the reactions use the dense equations of motion)", file=sys.stderr)
        return 2

    def parser_error(text: str) -> int:
        print(f"vtm-solvability: error: {text}", file=sys.stderr)
        return 2

    try:
        if args.along or args.drive:
            return _motion(args, parser_error)
        from vtm_dynamics.core.reactions.solvability import analyze_solvability
        from vtm_dynamics.core.robot.urdf_extension import read_urdf_file

        report = analyze_solvability(read_urdf_file(args.model), planar=args.planar, q=args.q, rank_rtol=args.rtol,
                                     assemble=not args.no_assemble, max_bodies=args.max_bodies, method=args.method)
    except (ValueError, OSError) as err:
        print(f"vtm-solvability: error: {err}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(report_to_dict(report), indent=2))
    else:
        print(format_report(report))
    from vtm_dynamics.cli import view_output

    if view_output.wants_view(args):
        try:
            view_output.show_solvability(args, read_urdf_file(args.model), report, args.planar, args.max_bodies,
                                         say=lambda text: print(text, file=sys.stderr))
        except (ValueError, OSError, RuntimeError) as err:
            print(f"vtm-solvability: error: {str(err).strip().splitlines()[0]}", file=sys.stderr)
            return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())

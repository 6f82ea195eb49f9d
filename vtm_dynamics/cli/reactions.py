"""``vtm-reactions MODEL.urdf``: joint reactions of a mechanism along a simulated motion, formulations side by side.

Formulations (``--formulation``, repeatable): ``taylor`` (Huang et al., literal), ``taylor-projected`` (the same with
the velocity projection), ``taylor-heun`` (Heun's velocity update and the projection), ``kkt`` (joint-coordinate
motion, KKT reactions in absolute coordinates) and ``aghili`` (the same motion, loop-closure forces by Aghili's
eq. (32)). Without ``--formulation`` the run is ``taylor-heun`` with the reactions of the sampled state, the choice
docs/reactions.md recommends for sizing (second order in motion and reactions, drives allowed). Prints a per-joint
table of peak reaction force [N] and moment [N m]; writes the time series (``--csv``, ``--json``) and plots
(``--plots DIR``: reaction magnitude per joint, change of energy, constraint gap). Reactions are on the child link,
at the pair point; components that are not uniquely determined (redundant constraints) are left empty, never
picked, and the magnitudes are taken over the unique components. Exit codes: 0 success, 2 bad input.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import sys
from typing import Callable, Mapping

from typing import TYPE_CHECKING

import numpy as np

from vtm_dynamics.cli.arguments import Parser, quiet_when_output_closed

if TYPE_CHECKING:  # the core (Pinocchio, scipy) is imported when a run starts, not for --help
    from vtm_dynamics.core.reactions.taylor_reactions import ReactionRun

FORMULATIONS = ("taylor", "taylor-projected", "taylor-heun", "kkt", "aghili")
DEFAULT_FORMULATION = "taylor-heun"  # with the reactions of the sampled state: docs/reactions.md, "for sizing"
MAX_SCRIPT_ROWS = 100_000
MAX_SCRIPT_BYTES = 64 * 1024 * 1024  # a torque script of MAX_SCRIPT_ROWS rows of a dozen efforts is ~20 MB


class InputError(ValueError):
    """Bad command-line input (one line, names the option)."""


def _efforts(pairs: list[str]) -> dict[str, float]:
    out: dict[str, float] = {}
    for item in pairs:
        name, sep, value = item.partition("=")
        try:
            x = float(value)
        except ValueError:
            x = math.nan
        if not sep or not name or not math.isfinite(x):
            raise InputError(f"--torque: expected JOINT=VALUE with a finite value [N m or N], got {item[:60]!r}")
        out[name] = x
    return out


def read_torque_script(path: str, max_rows: int = MAX_SCRIPT_ROWS) -> Callable[[float], Mapping[str, float]]:
    """CSV with a header ``time,JOINT,...``: efforts held from each row's time (s) to the next (zero-order hold)."""
    import io

    from vtm_dynamics.core.stopsafe.trajectory_files import read_text_file

    rows: list[list[str]] = []
    # a regular file (a FIFO blocked the command) within MAX_SCRIPT_BYTES, checked before reading; rows counted
    text = read_text_file(path, "--torque-script", MAX_SCRIPT_BYTES, InputError)
    try:  # a field over csv's limit is a line, no traceback
        with io.StringIO(text, newline="") as fh:
            for row in csv.reader(fh):
                rows.append(row)
                if len(rows) > max_rows:
                    raise InputError(f"--torque-script: more than {max_rows} rows")
    except csv.Error as err:
        raise InputError(f"--torque-script: not CSV ({str(err)[:80]})") from None
    if len(rows) < 2 or not rows[0] or rows[0][0].strip() != "time":
        raise InputError("--torque-script: expected a header 'time,JOINT,...' and at least one row")
    names = [c.strip() for c in rows[0][1:]]
    table = []
    for i, row in enumerate(rows[1:], start=2):
        try:
            vals = [float(x) for x in row]
        except ValueError:
            vals = []
        if len(vals) != len(names) + 1 or not all(math.isfinite(x) for x in vals):
            raise InputError(f"--torque-script: row {i} needs {len(names) + 1} finite numbers")
        table.append(vals)
    times = np.array([r[0] for r in table])
    if np.any(np.diff(times) <= 0):
        raise InputError("--torque-script: times must increase")
    values = np.array([r[1:] for r in table])

    def efforts(t: float) -> Mapping[str, float]:
        k = int(np.searchsorted(times, t, side="right")) - 1
        if k < 0:
            return {n: 0.0 for n in names}
        return {n: float(v) for n, v in zip(names, values[k])}

    return efforts


def _unique_columns(run: ReactionRun, name: str) -> np.ndarray:
    """The components of pair ``name`` unique at every sample of the run (a component is NaN where it is not
    unique, and which are depends on the configuration)."""
    a, b = run.columns[name]
    block = run.reactions[:, a:b]
    return ~np.any(np.isnan(block), axis=0) if block.size else np.zeros(b - a, dtype=bool)


def magnitudes(run: ReactionRun, W: Mapping[str, np.ndarray]) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Per pair: |force| [N] and |moment| [N m] over time, taken over the pair's unique components only (NaN where
    it has none of that kind). The wrench basis is orthonormal, so these are the norms of the unique part of the
    reaction; a pair with components left empty has larger true magnitudes, which no formulation can tell."""
    out = {}
    for name, (a, b) in run.columns.items():
        lam = np.nan_to_num(run.reactions[:, a:b], nan=0.0)
        w = lam @ W[name].T  # (K, 6) pair frame
        keep = _unique_columns(run, name)
        has_f = bool(np.any(np.abs(W[name][:3][:, keep]) > 0))
        has_m = bool(np.any(np.abs(W[name][3:][:, keep]) > 0))
        nan = np.full(len(run.times), np.nan)
        out[name] = (np.linalg.norm(w[:, :3], axis=1) if has_f else nan, np.linalg.norm(w[:, 3:], axis=1) if has_m else nan)
    return out


def uniqueness(run: ReactionRun, name: str) -> str:
    """'yes', 'NO: only Fx, Fy' (the unique components) or 'NO: none'."""
    if run.unique.get(name, True):
        return "yes"
    keep = _unique_columns(run, name)
    shown = [lab for lab, k in zip(run.labels[name], keep) if k]
    return f"NO: only {', '.join(shown)} unique" if shown else "NO: none unique"


def peak_table(runs: list[ReactionRun], W: Mapping[str, np.ndarray]) -> str:
    header = f"{'formulation':<17} {'pair':<14} {'peak |F| [N]':>13} {'at [s]':>7} {'peak |M| [N m]':>15} {'at [s]':>7}  unique"
    lines = [header, "-" * len(header)]
    partial = False
    for run in runs:
        for name, (f, m) in magnitudes(run, W).items():
            def peak(x: np.ndarray) -> tuple[str, str]:
                if x.size == 0 or np.all(np.isnan(x)):
                    return "-", "-"
                k = int(np.nanargmax(x))
                return f"{x[k]:.4g}", f"{run.times[k]:.3f}"
            pf, tf = peak(f)
            pm, tm = peak(m) if np.any(W[name][3:]) else ("-", "-")
            verdict = uniqueness(run, name)
            partial |= verdict != "yes"
            lines.append(f"{run.formulation:<17} {name:<14} {pf:>13} {tf:>7} {pm:>15} {tm:>7}  {verdict}")
    if partial:
        lines.append("pairs marked NO: |F| and |M| are over their unique components only; the others are left empty "
                     "(redundant constraints: see vtm-solvability)")
    for run in runs:
        if run.diverged_at is not None:
            lines.append(f"{run.formulation}: DIVERGED at t = {run.diverged_at:.4g} s (series end there); "
                         "try taylor-heun or a smaller --dt")
        lines.append(f"{run.formulation}: energy change {run.energy[-1] - run.energy[0]:+.4g} J, max constraint gap "
                     f"{np.nanmax(run.gap_position):.3g} m, {run.rank_deficient_steps} singular steps, "
                     f"{run.cpu_seconds:.3g} s CPU")
    return "\n".join(lines)


def _columns(run: ReactionRun) -> list[str]:
    return [f"{name}.{label}" for name in run.columns for label in run.labels[name]]


def write_csv(path: str, runs: list[ReactionRun]) -> None:
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["formulation", "time", "energy", "gap_position", "gap_angle"] + _columns(runs[0]))
        for run in runs:
            for k, t in enumerate(run.times):
                w.writerow([run.formulation, f"{t:.9g}", f"{run.energy[k]:.9g}", f"{run.gap_position[k]:.3e}",
                            f"{run.gap_angle[k]:.3e}"] + ["" if np.isnan(x) else f"{x:.9g}" for x in run.reactions[k]])


def write_json(path: str, runs: list[ReactionRun]) -> None:
    data = []
    for run in runs:
        data.append({
            "formulation": run.formulation, "dt": run.dt, "time": run.times.tolist(), "energy": run.energy.tolist(),
            "gap_position": run.gap_position.tolist(), "gap_angle": run.gap_angle.tolist(),
            "unique": run.unique, "rank_deficient_steps": run.rank_deficient_steps, "cpu_seconds": run.cpu_seconds,
            "reactions": {name: {"labels": list(run.labels[name]),
                                 "values": [[None if np.isnan(x) else float(x) for x in row]
                                            for row in run.reactions[:, a:b]]}
                          for name, (a, b) in run.columns.items()},
        })
    with open(path, "w") as fh:
        json.dump({"runs": data}, fh)


def write_plots(out_dir: str, runs: list[ReactionRun], W: Mapping[str, np.ndarray], model_name: str = "",
                source: str | None = None) -> list[str]:
    """reactions.png (|F| [N] and |M| [N m] per pair over time, one panel column each), energy.png (change of
    mechanical energy since the start) and constraint_gap.png; returns the files written."""
    from vtm_dynamics.cli.plots import pyplot, save_figure, legend_outside, new_figure, overlap_note

    plt = pyplot()
    os.makedirs(out_dir, exist_ok=True)
    files = []
    names = list(runs[0].columns)
    mags = {run.formulation: magnitudes(run, W) for run in runs}
    with_moments = any(np.isfinite(m[n][1]).any() for m in mags.values() for n in names)  # a unique moment
    ncols = 2 if with_moments else 1
    fig, axes = new_figure(plt, 11.0 if with_moments else 9.0, 1.9 * len(names) + 1.2, len(names), ncols,
                           sharex=True, squeeze=False)
    notes, partial = [], []
    for row, name in enumerate(names):
        for col, (kind, unit) in enumerate((("|F|", "N"), ("|M|", "N m"))[:ncols]):
            ax = axes[row, col]
            curves = []
            for run in runs:
                y = mags[run.formulation][name][col]
                ax.plot(run.times, y, label=run.formulation)
                curves.append((run.formulation, run.times, y))
            ax.ticklabel_format(useOffset=False)
            ax.grid(alpha=0.3)
            if not any(np.isfinite(c[2]).any() for c in curves):
                has = bool(np.any(W[name][3:] if col else W[name][:3]))
                ax.text(0.5, 0.5, f"{name}: no {'moment' if col else 'force'} component "
                        + ("unique" if has else "(the pair transmits none)"),
                        transform=ax.transAxes, ha="center", va="center", fontsize=8, color="0.35")
                ax.set_yticks([])
            ax.set_ylabel(f"{name} {kind} [{unit}]")
            notes += [f"{name} {kind}: {n}" for n in overlap_note(ax, curves)]
        if any(not run.unique.get(name, True) for run in runs):
            partial.append(name)
    for col, what in enumerate(("reaction force on the child link", "reaction moment on the child link")[:ncols]):
        axes[0, col].set_title(what, fontsize=9)
        axes[-1, col].set_xlabel("time [s]")
    legend_outside(axes[0, -1], title="formulation")
    fig.suptitle(f"{model_name}: joint reaction magnitudes along the motion", fontsize=10)
    if partial:
        notes.append(f"{', '.join(partial)}: not unique (redundant constraints); magnitudes over the unique "
                     "components only, the others are left empty (vtm-solvability says which)"
                     + ("" if with_moments else "; no moment component is unique, so no moment panels") + ".")
    files.append(save_figure(plt, fig, out_dir, "reactions.png", source=source, notes=notes))
    for key, label, fname in (("energy", "change of mechanical energy since t = 0 [J]", "energy.png"),
                              ("gap_position", "largest constraint gap [m]", "constraint_gap.png")):
        fig, ax = new_figure(plt, 9.0, 4.0)
        curves = []
        for run in runs:
            y = getattr(run, key)
            y = y - y[0] if key == "energy" else np.maximum(y, 1e-16)
            ax.plot(run.times, y, label=run.formulation)
            curves.append((run.formulation, run.times, y))
        if key != "energy":
            ax.set_yscale("log")
        ax.set_xlabel("time [s]")
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
        ax.set_title(f"{model_name}: " + ("energy drift (no input: should stay 0)" if key == "energy" else
                                           "constraint gap, largest over every pair"), fontsize=10)
        legend_outside(ax, title="formulation")
        extra = overlap_note(ax, curves) if key == "energy" else []
        if key != "energy":
            extra.append("kkt and aghili runs: the largest loop-closure residual [m or rad]; gaps below 1e-16 are "
                         "drawn at 1e-16.")
        files.append(save_figure(plt, fig, out_dir, fname, source=source, notes=extra))
    return files


def build_parser() -> Parser:
    p = Parser(prog="vtm-reactions", description="Joint reactions of a mechanism along a simulated motion, "
               "formulations side by side (docs/reactions.md).")
    p.add_argument("model", help="URDF file (loop_closure / driving_constraint elements allowed)")
    p.add_argument("--formulation", action="append", choices=FORMULATIONS,
                   help=f"formulation (repeat for side by side; default: {DEFAULT_FORMULATION} with the reactions "
                        "of the sampled state, the choice for sizing)")
    p.add_argument("--dt", type=float, default=1e-3, help="step [s]")
    p.add_argument("--duration", type=float, default=1.0, help="simulated time [s]")
    p.add_argument("--torque", action="append", default=[], metavar="JOINT=VALUE",
                   help="constant motor effort on a tree joint [N m or N] (repeatable)")
    p.add_argument("--torque-script", metavar="CSV", help="efforts over time: header time,JOINT,... (held)")
    p.add_argument("--q", nargs="+", type=float, help="start configuration, Pinocchio order (loops then closed; "
                   "default: the neutral configuration)")
    p.add_argument("--v", nargs="+", type=float, help="start joint velocities (must satisfy the loop closures; "
                   "default: at rest)")
    p.add_argument("--gravity", nargs=3, type=float, default=(0.0, 0.0, -9.81), metavar=("GX", "GY", "GZ"),
                   help="gravity [m/s^2], world axes")
    p.add_argument("--planar", action="store_true", help="in-plane reactions only (xy-plane, rotation about z)")
    p.add_argument("--ignore-drives", action="store_true", help="drop <driving_constraint> elements")
    p.add_argument("--reactions-at", choices=("step", "state"),
                   help="Taylor runs: 'step' = the lambda of eq. (36), held over the step (the paper); 'state' = "
                        "the reactions of the sampled state (acceleration-level limit of the same system); "
                        "default: 'state' for the default run, 'step' when --formulation is given")
    p.add_argument("--samples", type=int, default=500, help="samples kept per run")
    p.add_argument("--max-steps", type=int, default=200_000, help="refuse runs with more steps (the core's own cap is the upper limit)")
    p.add_argument("--csv", help="write the time series as CSV")
    p.add_argument("--json", help="write the time series as JSON")
    p.add_argument("--plots", metavar="DIR", help="write PNG plots into DIR")
    p.add_argument("--quiet", action="store_true", help="no progress lines")
    return p


@quiet_when_output_closed
def main(argv: list[str] | None = None) -> int:
    """Console entry point; returns the exit code."""
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exit_:
        return int(exit_.code or 0)
    try:
        return _run(args)
    except OSError as err:
        where = f" {os.path.abspath(err.filename)}" if getattr(err, "filename", None) else ""
        print(f"vtm-reactions: error: cannot write the output{where} ({err.strerror})", file=sys.stderr)
        return 2
    except (InputError, ValueError) as err:
        print(f"vtm-reactions: error: {str(err).splitlines()[0] if str(err) else type(err).__name__}", file=sys.stderr)
        return 2


def _run(args: argparse.Namespace) -> int:
    import pinocchio as pin

    from vtm_dynamics.core.reactions.absolute_coordinates import assemble_loops, load_absolute_model
    from vtm_dynamics.core.reactions.kkt_reactions import simulate_kkt, without_drives
    from vtm_dynamics.core.reactions.taylor_reactions import DEFAULT_MAX_STEPS, prepare_mechanism, simulate_taylor
    from vtm_dynamics.core.robot.urdf_extension import read_urdf_file

    formulations = args.formulation or [DEFAULT_FORMULATION]
    reactions_at = args.reactions_at or ("step" if args.formulation else "state")
    if not (1 <= args.samples <= 100_000):
        raise InputError("--samples: must be between 1 and 100000")
    if not (1 <= args.max_steps <= DEFAULT_MAX_STEPS):
        raise InputError(f"--max-steps: must be between 1 and {DEFAULT_MAX_STEPS}")
    if not all(math.isfinite(g) for g in args.gravity):
        raise InputError("--gravity: expected three finite numbers [m/s²]")
    text = read_urdf_file(args.model)
    model = load_absolute_model(text, planar=args.planar)
    if args.ignore_drives:
        model = without_drives(model)
    pm = model.pin_model
    if args.q is not None and len(args.q) != pm.nq:
        raise InputError(f"--q: expected {pm.nq} numbers (Pinocchio order), got {len(args.q)}")
    if args.v is not None and len(args.v) != pm.nv:
        raise InputError(f"--v: expected {pm.nv} numbers, got {len(args.v)}")
    q0 = assemble_loops(model, pin.neutral(pm) if args.q is None else np.array(args.q))
    v0 = np.zeros(pm.nv) if args.v is None else np.array(args.v)
    efforts: Mapping[str, float] | Callable[[float], Mapping[str, float]] = _efforts(args.torque)
    if args.torque_script:
        if args.torque:
            raise InputError("--torque-script: use either --torque or --torque-script")
        efforts = read_torque_script(args.torque_script)
    n_steps = int(round(args.duration / args.dt)) if args.dt > 0 and math.isfinite(args.duration) else 0
    every = max(1, n_steps // args.samples)
    W = {pr.name: pr.wrench_basis for pr in model.pairs}
    if not args.formulation:
        print(f"formulation {DEFAULT_FORMULATION}, reactions of the sampled state (the default: second order in "
              "motion and reactions; --formulation to choose)")

    def progress_for(name: str) -> Callable[[float], None] | None:
        if args.quiet or n_steps < 2000:
            return None
        state = {"next": 1}

        def report(t: float) -> None:
            if t >= args.duration * state["next"] / 10 - 1e-12:
                print(f"{name}: {t:.3f} / {args.duration:.3f} s", file=sys.stderr, flush=True)
                state["next"] += 1
        return report

    runs: list[ReactionRun] = []
    mech = None
    for f in formulations:
        if f.startswith("taylor"):
            mech = mech or prepare_mechanism(model, q0, args.gravity)
            runs.append(simulate_taylor(mech, q0, v0, args.dt, args.duration, efforts,
                                        correction={"taylor": "none", "taylor-projected": "project", "taylor-heun": "heun"}[f], every=every,
                                        progress=progress_for(f), max_steps=args.max_steps,
                                        reactions_at=reactions_at))
        elif not any(r.formulation == f for r in runs):
            if any(pr.kind == "driving_constraint" for pr in model.pairs):
                raise InputError(f"--formulation {f}: the model has driving constraints; add --ignore-drives")
            kkt, aghili = simulate_kkt(model, q0, v0, args.dt, args.duration, efforts, gravity=args.gravity,
                                       every=every, progress=progress_for(f), max_steps=args.max_steps)
            runs.append(kkt if f == "kkt" else aghili)
    print(peak_table(runs, W))
    if args.csv:
        write_csv(args.csv, runs)
    if args.json:
        write_json(args.json, runs)
    if args.plots:
        from vtm_dynamics.cli import provenance

        source = (f"{model.name} (URDF sha256 {provenance.text_sha256(text)[:12]}), dt {args.dt:g} s; "
                  f"{provenance.software_line()}")
        for path in write_plots(args.plots, runs, W, model.name, source):
            print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
